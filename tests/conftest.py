"""Shared fixtures: token counters and the checked-in corpus of small real files."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from helpers import DATA, corpus_files, words  # noqa: E402,F401 - re-exported for fixtures below


@pytest.fixture(scope="session")
def cl100k():
    from llmc_splitters.chunking.tokens import resolve_tokenizer

    return resolve_tokenizer()


@pytest.fixture(params=["cl100k", "len", "words"])
def counter(request, cl100k):
    """(tokenizer spec for ASTChunker, exact str->int counter)."""
    if request.param == "cl100k":
        return None, cl100k.count
    if request.param == "len":
        return len, len
    return words, words
