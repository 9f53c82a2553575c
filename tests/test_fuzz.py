"""Fuzzing (Hypothesis): random bytes and mutated real files.

``test_chunker_properties.py`` covers grammar-shaped sources built from fragments and arbitrary ``str``; this suite
covers what a directory walk actually meets: random and text-like **bytes** (invalid UTF-8, BOMs, NULs, control
bytes) through the decoding policy, and **real files damaged** the way files in the wild are (an editor's half-done
change, a truncated download, a bad merge, a wrong encoding): standard-library modules and the ``tests/data`` corpus
with byte ranges deleted, duplicated or swapped, brackets, quotes, comment and string openers, NULs and invalid
UTF-8 sequences inserted (alone or repeated hundreds of times, for deep nesting), and truncation; chunked as bytes
and as ``str``, as the language their name says or as another one.

Every example must end with either

* our own error, and only when it is justified: :class:`UnsupportedInputError` for binary data (NUL bytes, mostly
  control bytes, a binary signature; as ``str``: NUL characters, mostly replacement or control characters), :class:`UndecodableInputError` for non-UTF-8 under ``errors="strict"``; never anything else; or
* leaves that tile the decoded text exactly, each within the budget (or a flagged single oversize character) with
  an exact token count, and a consistent span tree;

and must take less than ``WALL_LIMIT`` seconds (a generous sanity bound against hangs, not a performance assert;
pytest-timeout is the hard stop). ``max_examples`` keep the whole suite near a minute.
"""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import pytest
from helpers import assert_valid_spans, assert_valid_tree, corpus_files
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from llmc_splitters import ASTChunker, LlmcError, UndecodableInputError, UnsupportedInputError
from llmc_splitters.chunking.inputs import binary_reason, decode, text_binary_reason

pytestmark = pytest.mark.timeout(240)

WALL_LIMIT = 20.0  # seconds per example: a sanity bound against a hang, far above any expected time

STDLIB = Path(sysconfig.get_paths()["stdlib"])
_STDLIB_SEEDS = ("textwrap.py", "shlex.py", "heapq.py", "json/decoder.py", "base64.py", "tomllib/_re.py", "bisect.py")
_MAX_SEED = 24_000  # bytes; longer seeds are cut (at a line end) so that one example stays fast


def _seeds() -> list[tuple[str, bytes]]:
    out = []
    files = [(f"stdlib/{rel}", STDLIB / rel) for rel in _STDLIB_SEEDS]
    files += [(p.relative_to(p.parents[1]).as_posix(), p) for p in corpus_files() if p.suffix != ".ipynb"]
    for name, path in files:
        data = path.read_bytes()
        if len(data) > _MAX_SEED:
            data = data[: data.rfind(b"\n", 0, _MAX_SEED) + 1]
        out.append((name, data))
    return out


SEEDS = _seeds()

# Byte sequences that break parsers and decoders: openers and closers, string/comment starts, NUL and control
# bytes, invalid or truncated UTF-8 (a lone continuation byte, a truncated 2/3/4-byte sequence, an encoded
# surrogate, an overlong form), a BOM in the middle, line-ending variants, and keywords that open blocks.
TOKENS = [
    b"(", b")", b"[", b"]", b"{", b"}", b"<", b">", b"'", b'"', b'"""', b"'''", b"`", b"${", b"\\",
    b"#", b"//", b"/*", b"*/", b"<!--", b"-->", b"```", b"~~~", b"<<EOF\n", b"<script>", b"</script>",
    b"\x00", b"\x01", b"\x1b", b"\x0c", b"\x7f", b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",
    b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b"\xfe", b"\xef\xbb\xbf", b"\r", b"\r\n", b"\n", b"\t", b"    ",
    b"def ", b"class ", b"function ", b"if (", b"=> {", b"@", b"\\\n", b"\xe2\x80\xa8", b"\xc2\xa0", b"\xf0\x9f\x98\x80",
]
LANGUAGES = [None, None, "python", "javascript", "typescript", "tsx", "bash", "markdown", "html", "text", "json", "go"]
BUDGETS = [1, 4, 16, 64, 256, 2048]


@st.composite
def mutated_file(draw) -> tuple[str, bytes]:
    """A real file with 1-6 random mutations."""
    name, data = draw(st.sampled_from(SEEDS))
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        n = len(buf)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 3000)))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "token", "tokens", "repeat", "random", "truncate"]))
        if op == "delete":
            del buf[i:j]
        elif op == "duplicate":
            buf[j:j] = buf[i:j]
        elif op == "swap" and j < n:
            k = draw(st.integers(j, min(n, j + 3000)))
            buf[i:k] = buf[j:k] + buf[i:j]
        elif op == "token":
            buf[i:i] = draw(st.sampled_from(TOKENS))
        elif op == "tokens":
            buf[i:i] = b"".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=30)))
        elif op == "repeat":  # deep nesting, long runs of quotes or NULs
            buf[i:i] = draw(st.sampled_from(TOKENS)) * draw(st.integers(2, 600))
        elif op == "random":
            buf[i:i] = draw(st.binary(min_size=1, max_size=64))
        elif op == "truncate":
            del buf[i:]
    return name, bytes(buf)


textish_bytes = st.lists(
    st.one_of(st.sampled_from(TOKENS), st.sampled_from([b"x = 1", b"foo", b" ", b"caf\xc3\xa9", b"na\xefve", b"\xe9"])),
    max_size=120,
).map(b"".join)


def _check_bytes(data: bytes, budget: int, language: str | None, path: str | None, errors: str = "fallback") -> None:
    chunker = ASTChunker(max_tokens=budget, errors=errors)
    start = time.monotonic()
    try:
        tree = chunker.chunk_tree(data, language=language, path=path)
    except UndecodableInputError:
        assert errors == "strict" and not binary_reason(data)
        body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")
        return
    except UnsupportedInputError as exc:
        assert binary_reason(data), f"rejected text that is not binary: {exc}"
        return
    finally:
        elapsed = time.monotonic() - start
        assert elapsed < WALL_LIMIT, f"{elapsed:.1f}s for {len(data)} bytes ({language or path}, budget {budget})"
    assert not binary_reason(data), "binary data was chunked instead of rejected"
    text = decode(data, errors).text
    assert_valid_spans(text, tree.leaves, budget, chunker.tokenizer.count)
    if text:
        assert_valid_tree(text, tree)


def _check_text(text: str, budget: int, language: str | None, path: str | None) -> None:
    """A ``str`` is chunked unless it looks like binary data handed over as text (NUL characters, a binary
    signature, mostly replacement or control characters): then, and only then, it is refused with our error."""
    chunker = ASTChunker(max_tokens=budget, analyze=True)
    start = time.monotonic()
    try:
        tree = chunker.chunk_tree(text, language=language, path=path)
    except UnsupportedInputError as exc:
        assert text_binary_reason(text), f"rejected text that is not binary-looking: {exc}"
        return
    elapsed = time.monotonic() - start
    assert not text_binary_reason(text), "binary-looking text was chunked instead of rejected"
    assert elapsed < WALL_LIMIT, f"{elapsed:.1f}s for {len(text)} chars ({language or path}, budget {budget})"
    assert_valid_spans(text, tree.leaves, budget, chunker.tokenizer.count)
    if text:
        assert_valid_tree(text, tree)


_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


def _settings(n: int, shrink: bool = True) -> settings:
    # Shrinking a damaged 20 KB file can take minutes: those tests report the failing example as drawn (and its
    # seed), which is enough to reproduce it; the small random-bytes examples are shrunk.
    phases = list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate]
    return settings(max_examples=n, deadline=None, suppress_health_check=_HEALTH, phases=phases, print_blob=True)


@_settings(250)
@given(
    data=st.one_of(st.binary(max_size=4000), textish_bytes),
    budget=st.sampled_from(BUDGETS),
    language=st.sampled_from(LANGUAGES),
    errors=st.sampled_from(["fallback", "strict"]),
)
@example(data=b"\xef\xbb\xbf", budget=1, language="python", errors="strict")
@example(data=b"\xef\xbb\xbf\xef\xbb\xbfx = 1\r\n", budget=1, language="python", errors="fallback")
@example(data=b"x = '\xed\xa0\x80'\n", budget=2, language="python", errors="fallback")
@example(data=b"\x80" * 3000, budget=4, language="javascript", errors="fallback")
@example(data=b"\x1b[31mred\x1b[0m\n" * 50, budget=8, language="bash", errors="fallback")
def test_random_bytes(data, budget, language, errors):
    _check_bytes(data, budget, language or "text", None, errors)


@_settings(300, shrink=False)
@given(src=mutated_file(), budget=st.sampled_from(BUDGETS), language=st.sampled_from(LANGUAGES))
def test_mutated_real_files_as_bytes(src, budget, language):
    name, data = src
    if budget < 16:
        data = data[:3000]  # tiny budgets make thousands of leaves: keep those examples small
    _check_bytes(data, budget, language, name)


@_settings(150, shrink=False)
@given(src=mutated_file(), budget=st.sampled_from(BUDGETS), language=st.sampled_from(LANGUAGES))
def test_mutated_real_files_as_text(src, budget, language):
    """The damaged file as ``str`` (lone surrogates for invalid bytes; NULs and control characters kept): always
    chunked."""
    name, data = src
    if budget < 16:
        data = data[:3000]
    # "surrogateescape" keeps each invalid byte as a lone surrogate: the hardest kind of str input.
    _check_text(data.decode("utf-8", "surrogateescape"), budget, language, name)


def test_lone_surrogates_in_str_input():
    """Found by the fuzzer (a damaged file decoded with ``surrogateescape``): a str holding lone surrogates, cut
    below line level by a small budget. Every case must tile its text with exact counts within the budget."""
    cases = [("s = '\udce9'\nt = 1\n", 1), ("\udce2\udc82", 1), ("x = '\udce2\udc82'\n", 2)]
    failures = []
    for text, budget in cases:
        chunker = ASTChunker(max_tokens=budget)
        try:
            assert_valid_spans(text, chunker.chunk(text, language="python"), budget, chunker.count_tokens)
        except AssertionError as exc:
            failures.append(f"{text!r} at max_tokens={budget}: {str(exc).splitlines()[0]}")
    assert not failures, "\n".join(failures)


def test_our_errors_are_the_only_errors_on_a_seed_sweep():
    """Every seed, cut at 32 points (so each kind of construct is left unterminated somewhere), as its own
    language: deterministic coverage that does not depend on what Hypothesis happens to draw."""
    for name, data in SEEDS:
        step = max(1, len(data) // 32)
        for cut in range(0, len(data) + 1, step):
            try:
                _check_bytes(data[:cut], 128, None, name)
            except LlmcError as exc:  # pragma: no cover - _check_bytes handles the justified ones
                pytest.fail(f"{name}[:{cut}]: {type(exc).__name__}: {exc}")
