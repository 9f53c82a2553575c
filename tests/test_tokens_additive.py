"""What the context expansion's sums of piece counts rest on: cl100k counts a rendered piece (ending in a newline)
and the next piece (starting with its ``# path:start-end`` marker) apart, so a context's count is the sum of its
pieces' counts (see ``llmc_splitters.retrieval.context.expand._PartSums``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmc_splitters.chunking.tokens import resolve_tokenizer

TOK = resolve_tokenizer()
code = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80)
paths = st.from_regex(r"[a-zA-Z0-9_./-]{1,30}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(code, code, paths, st.integers(1, 99_999), st.integers(0, 9))
def test_marker_after_a_newline_starts_a_token(head: str, body: str, path: str, start: int, extra: int) -> None:
    piece = head + "\n"
    nxt = f"# {path}:{start}-{start + extra}\n{body}\n"
    assert TOK.count(piece + nxt) == TOK.count(piece) + TOK.count(nxt)
