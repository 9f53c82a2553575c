"""Shared fixtures: token counters and the checked-in corpus of small real files."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

DATA = pathlib.Path(__file__).parent / "data"


def words(text: str) -> int:
    """A whitespace word counter: a tokenizer with very different boundaries from BPE."""
    return len(text.split())


@pytest.fixture(scope="session")
def cl100k():
    from llmc_splitters.tokens import resolve_tokenizer

    return resolve_tokenizer()


@pytest.fixture(params=["cl100k", "len", "words"])
def counter(request, cl100k):
    """(tokenizer spec for ASTChunker, exact str->int counter)."""
    if request.param == "cl100k":
        return None, cl100k.count
    if request.param == "len":
        return len, len
    return words, words


def corpus_files() -> list[pathlib.Path]:
    return sorted(p for p in DATA.rglob("*") if p.is_file())
