"""Budgeted expansion of hits: pure, checked with a word counter and exact expected renders."""

from __future__ import annotations

import pytest

from llmc_splitters.errors import ConfigurationError
from llmc_splitters.retrieval.context.expand import HitContext, Scope, Snippet, expand

SRC = (
    "import os\n"            # 1
    "import sys\n"           # 2
    "LIMIT = 3\n"            # 3
    "\n"                     # 4
    "class Client(Base):\n"  # 5
    "    k = 1\n"            # 6
    "    def send(self):\n"  # 7
    "        return os.sep\n"  # 8
    "    def recv(self):\n"  # 9
    "        return LIMIT + sum(range(10)) * 2 if os.sep else None  # a long line that makes the class big\n"  # 10
)


def words(text: str) -> int:
    return len(text.split())


def snip(start_line: int, end_line: int, path: str = "m.py", src: str = SRC, span_id: str | None = None) -> Snippet:
    lines = src.splitlines(keepends=True)
    start = sum(len(x.encode()) for x in lines[: start_line - 1])
    text = "".join(lines[start_line - 1 : end_line])
    return Snippet(path, start, start + len(text.encode()), start_line, end_line, text, span_id)


SKELETON = "class Client(Base):\n    k = 1\n    def send(self): ...\n    def recv(self): ...\n"
CLIENT = Scope(snip(5, 10), "class", header=snip(5, 5), skeleton=SKELETON)


def send_hit(**kw) -> HitContext:
    return HitContext(snip(7, 8, span_id="send"), 1.0, (CLIENT,), (snip(1, 1),), **kw)


def test_whole_scope_when_it_fits() -> None:
    exp = expand([send_hit()], 100, words)
    assert exp.context == "# m.py:1-1\nimport os\n# m.py:5-10\n" + "".join(SRC.splitlines(keepends=True)[4:10])
    assert [(p.kind, p.start_line, p.end_line) for p in exp.pieces] == [("import", 1, 1), ("hit", 5, 10)]
    assert exp.token_count == words(exp.context) <= 100


def test_skeleton_when_scope_does_not_fit() -> None:
    # Whole: import 4 + scope 33 words. Skeleton: import 4 + skeleton 14 + hit 7.
    exp = expand([send_hit()], 30, words)
    kinds = [(p.kind, p.start_line, p.end_line) for p in exp.pieces]
    assert kinds == [("import", 1, 1), ("skeleton", 5, 10), ("hit", 7, 8)]
    assert "# m.py:5-10 (skeleton)\nclass Client(Base):" in exp.context
    assert exp.token_count <= 30


def test_header_when_skeleton_does_not_fit() -> None:
    exp = expand([send_hit()], 16, words)
    assert [(p.kind, p.start_line) for p in exp.pieces] == [("import", 1), ("header", 5), ("hit", 7)]
    assert exp.token_count <= 16


def test_budget_too_small_for_context_keeps_the_hit() -> None:
    exp = expand([send_hit()], 8, words)
    assert [(p.kind, p.start_line, p.end_line) for p in exp.pieces] == [("hit", 7, 8)]
    assert exp.context == "# m.py:7-8\n    def send(self):\n        return os.sep\n"


def test_budget_too_small_for_the_hit_truncates_it() -> None:
    exp = expand([send_hit()], 5, words)
    (piece,) = exp.pieces
    assert piece.truncated and piece.kind == "hit"
    assert exp.context == "# m.py:7-7 (truncated)\n    def send(self):\n"
    assert exp.token_count <= 5
    assert expand([send_hit()], 1, words).pieces == ()


def test_never_over_budget_for_any_budget() -> None:
    hits = [send_hit(), HitContext(snip(9, 10), 0.5, (CLIENT,), (snip(3, 3),))]
    for budget in range(1, 80):
        exp = expand(hits, budget, words)
        assert words(exp.context) == exp.token_count <= budget
        if budget >= 8:  # the best hit always survives once it fits alone
            assert any(p.start_line <= 7 and p.end_line >= 8 for p in exp.pieces)


def test_adjacent_pieces_join_and_nested_ones_dedupe() -> None:
    a = HitContext(snip(7, 8, span_id="send"), 1.0, (), (snip(1, 1), snip(2, 2), snip(1, 1)))
    b = HitContext(snip(9, 10, span_id="recv"), 0.9, (), (snip(3, 3),))
    nested = HitContext(snip(8, 8), 0.8)
    exp = expand([a, b, nested], 100, words)
    assert [(p.start_line, p.end_line) for p in exp.pieces] == [(1, 3), (7, 10)]
    assert exp.pieces[1].kind == "hit" and exp.pieces[1].span_ids == ("send", "recv")
    assert exp.context.count("import os") == 1


def test_files_ordered_by_best_hit_and_lines_within() -> None:
    other = "def f():\n    pass\n"
    hits = [
        HitContext(snip(9, 10), 1.0, (), (snip(3, 3),)),
        HitContext(snip(1, 2, path="b.py", src=other), 0.5),
        HitContext(snip(7, 8), 0.4),
    ]
    exp = expand(hits, 200, words)
    assert [(p.path, p.start_line) for p in exp.pieces] == [("m.py", 3), ("m.py", 7), ("b.py", 1)]


def test_least_relevant_hit_dropped_first() -> None:
    big = HitContext(snip(5, 10), 0.3)
    exp = expand([send_hit(), big], 12, words)
    assert [(p.kind, p.start_line) for p in exp.pieces] == [("header", 5), ("hit", 7)]
    assert (1, "hit") in exp.dropped


def test_no_expansion_flags() -> None:
    exp = expand([send_hit()], 100, words, include_scopes=False, include_imports=False)
    assert [p.kind for p in exp.pieces] == ["hit"]


def test_bad_budget() -> None:
    with pytest.raises(ConfigurationError, match="max_context_tokens"):
        expand([send_hit()], 0, words)


def test_a_skeleton_leaves_no_gap_where_lines_shown_verbatim_were() -> None:
    """The hit is the class's head (header and docstring): the skeleton under it lists the methods, without the
    docstring lines the hit shows and without the blank lines that stood around them."""
    src = ('class Decoder:\n    """Decode things.\n\n    Many kinds of things.\n    """\n\n'
           "    def decode(self, s):\n        return s\n\n    def raw(self, s):\n"
           "        return s if s else None  # a long line that makes the class too big for the budget of this test\n")
    skeleton = ('class Decoder:\n    """Decode things.\n\n    Many kinds of things.\n    """\n\n'
                "    def decode(self, s): ...\n\n    def raw(self, s): ...\n")
    scope = Scope(snip(1, 11, src=src), "class", header=snip(1, 1, src=src), skeleton=skeleton)
    hit = HitContext(snip(1, 5, src=src, span_id="head"), 1.0, (scope,), ())
    exp = expand([hit], 30, words)
    shown = next(p for p in exp.pieces if p.kind == "skeleton").text
    assert shown == "class Decoder:\n    def decode(self, s): ...\n\n    def raw(self, s): ...\n"


def test_essentials_only_stops_before_skeletons_and_scopes() -> None:
    exp = expand([send_hit()], 100, words, fill=True, essentials_only=True)
    assert [(p.kind, p.start_line, p.end_line) for p in exp.pieces] == [
        ("import", 1, 1), ("header", 5, 5), ("hit", 7, 8)]
    assert expand([send_hit()], 100, words, fill=True).pieces[-1].end_line == 10  # without it: the class whole


# A notebook: a markdown cell that explains the code cell after it.
MARKDOWN = "## Group and unstack\n\nSum the totals per region and month.\n"
CODE = "monthly = orders.groupby(['region', 'month'])['total'].sum().unstack('month')\n"


def cell(i: int, src: str) -> Snippet:
    return snip(1, src.count("\n"), path=f"sales.ipynb#cell{i}", src=src)


def test_a_neighbouring_cell_comes_in_notebook_order_and_gives_way_first() -> None:
    code_hit = HitContext(cell(3, CODE), 1.0, neighbours=(cell(2, MARKDOWN),))
    exp = expand([code_hit], 100, words, fill=True)
    assert [(p.path, p.kind) for p in exp.pieces] == [("sales.ipynb#cell2", "cell"), ("sales.ipynb#cell3", "hit")]
    assert exp.context.index("## Group") < exp.context.index("monthly =")
    # Too small for both: the hit alone (fill), or the hit and then what fits (a fixed k).
    alone = words(f"# sales.ipynb#cell3:1-1\n{CODE}")
    filled = expand([code_hit], alone + 3, words, fill=True)
    assert [p.path for p in filled.pieces] == ["sales.ipynb#cell3"]
    fixed = expand([code_hit], alone + 3, words)
    assert [p.path for p in fixed.pieces] == ["sales.ipynb#cell3"] and fixed.dropped == ((0, "cell"),)
    assert [p.kind for p in expand([code_hit], 100, words, include_scopes=False).pieces] == ["hit"]


def test_a_counter_that_joins_pieces_is_decided_whole() -> None:
    # Counted apart, each piece misses the token its marker makes with the newline before it: deciding by sums
    # would overshoot, so expand decides again by whole counts, and what it gives equals that decision.
    from llmc_splitters.retrieval.context.expand import _expand, _Whole

    def joins(text: str) -> int:
        return words(text) + 3 * text.count("\n#")

    hits = [send_hit(), HitContext(snip(1, 3, path="n.py"), 0.5), HitContext(snip(5, 6, path="o.py"), 0.4)]
    for budget in range(8, 80, 3):
        exp = expand(hits, budget, joins)
        assert exp.token_count == joins(exp.context) <= budget
        whole = _expand(hits, budget, joins, None, "# {path}:{start}-{end}", True, True, False, False,
                        measure=_Whole(joins, "# {path}:{start}-{end}"))
        assert exp == whole


def test_sums_of_pieces_decide_as_whole_counts_on_real_code() -> None:
    # cl100k on the default marker: the sums are the whole counts, so every budget gives the expansion that
    # counting each candidate context whole gives (what expand did before it summed pieces).
    from pathlib import Path

    from llmc_splitters.retrieval import CodeRetriever
    from llmc_splitters.retrieval.context.expand import DEFAULT_MARKER, _expand, _Whole

    data = Path(__file__).parent / "data"
    files = {str(p.relative_to(data)): p.read_text(encoding="utf-8") for sub in ("python", "typescript")
             for p in sorted((data / sub).iterdir()) if p.suffix in {".py", ".ts", ".tsx"}}
    r = CodeRetriever(max_tokens=300, k=6)
    r.index_texts(files)
    count = r.tokenizer.count
    for query in ("decode a JSON string", "wrap text to a width", "route a request to its handler"):
        found = r.search(query, 6)
        contexts = [r.index.hit_context(h.span, h.score, query) for h in found.hits]
        assert len(contexts) >= 3
        for budget in (60, 150, 400, 1200, 4000):
            for fill in (False, True):
                exp = expand(contexts, budget, count, cut=r.tokenizer.cut, fill=fill)
                whole = _expand(contexts, budget, count, r.tokenizer.cut, DEFAULT_MARKER, True, True, fill, False,
                                measure=_Whole(count, DEFAULT_MARKER))
                assert exp == whole
                assert exp.token_count == count(exp.context) <= budget
