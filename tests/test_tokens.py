"""Tokenizers: resolution, exact cuts, and the cl100k line-start additivity the chunker relies on."""

from __future__ import annotations

import bisect
import pathlib
import random

import pytest
from helpers import DATA

from llmc_splitters import ConfigurationError
from llmc_splitters.chunking.tokens import CallableTokenizer, resolve_tokenizer


def clean_line_starts(data: bytes) -> list[int]:
    out = [0]
    for i in range(1, len(data)):
        if data[i - 1] == 10 and data[i] not in (10, 13):
            out.append(i)
    out.append(len(data))
    return out


def real_files() -> list[pathlib.Path]:
    import asyncio
    import email

    files = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix != ".ipynb")
    files += sorted(pathlib.Path(email.__file__).parent.glob("*.py"))[:15]
    files += sorted(pathlib.Path(asyncio.__file__).parent.glob("*.py"))[:15]
    return files


def test_slices_between_clean_line_starts_add_up_exactly(cl100k):
    # The chunker reads such slices' counts off one encoding of the whole file; here every one is re-encoded.
    assert cl100k.line_additive
    rng = random.Random(5)
    checked = 0
    for path in real_files():
        text = path.read_bytes().decode("utf-8")
        data = text.encode("utf-8")
        ends = cl100k.token_ends(text)
        starts = clean_line_starts(data)
        for _ in range(40):
            a, b = sorted(rng.sample(starts, 2)) if len(starts) > 1 else (0, len(data))
            i = bisect.bisect_right(ends, a)
            j = bisect.bisect_right(ends, b)
            assert a == 0 or ends[i - 1] == a, (path.name, a)
            assert j - i == cl100k.count(data[a:b].decode("utf-8")), (path.name, a, b)
            checked += 1
    assert checked > 1000


def test_slices_inside_lines_are_counted_exactly_off_the_whole_encoding(cl100k):
    # Slices that start or end mid-line (a block after `) {`, a def after `export `): the engine encodes only the
    # partial lines and reads the rest off the whole file's encoding; every count is re-checked by encoding.
    from llmc_splitters.chunking._engine import Engine

    rng = random.Random(11)
    read_off = checked = 0
    for path in real_files():
        text = path.read_bytes().decode("utf-8")
        data = text.encode("utf-8")
        eng = Engine(data, 256, cl100k)
        starts = [i for i in range(len(data) + 1) if i == len(data) or (data[i] & 0xC0) != 0x80]
        if len(starts) < 2:
            continue
        for _ in range(40):
            a, b = sorted(rng.sample(starts, 2))
            n = eng._from_whole(a, b)
            if n is not None:
                read_off += 1
                assert n == cl100k.count(data[a:b].decode("utf-8")), (path.name, a, b)
            checked += 1
    assert checked > 1000
    assert read_off > 0.9 * checked


def test_cut_and_split_are_exact(cl100k):
    text = (DATA / "python" / "textwrap.py").read_text(encoding="utf-8")
    for budget in (1, 7, 100):
        i = cl100k.cut(text, budget)
        assert cl100k.count(text[:i]) <= budget < cl100k.count(text[: i + 50])
        ends = cl100k.split(text[:3000], budget)
        pieces = [text[a:b] for a, b in zip([0, *ends], ends)]
        assert "".join(pieces) == text[:3000]
        assert all(cl100k.count(p) <= budget or len(p) == 1 for p in pieces)


def test_resolution():
    assert resolve_tokenizer("cl100k_base").name == "tiktoken:cl100k_base"
    assert isinstance(resolve_tokenizer(len), CallableTokenizer)
    assert resolve_tokenizer(len).cut("abcdef", 4) == 4
    with pytest.raises(ConfigurationError, match="could not load the tiktoken encoding"):
        resolve_tokenizer("no_such_encoding")
