"""The ranking rules' pieces on their own: the words of a file's name, and a page spread over files."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmc_splitters.chunking.span import Span
from llmc_splitters.retrieval.search.rules import name_words, path_share, saturate


def test_a_file_is_named_by_its_stem_and_its_folder():
    assert name_words("lua/lazy/manage/lock.lua") == {"lock", "manage"}
    assert name_words("core/statements/UpdateStatement.kt") == {"updatestatement", "update", "statement"}
    assert name_words("axum/src/middleware/mod.rs") == {"middleware"}  # a folder's module file: its folder's name
    assert name_words("pkg/__init__.py") == {"pkg"}
    assert name_words("nb.ipynb#cell3") == set()  # no folder; "nb" is too short to name anything


def test_a_question_word_meets_a_name_word_when_one_starts_the_other():
    assert path_share(["lockfile", "pin", "plugin", "commit"], "lua/lazy/manage/lock.lua") == 0.25
    assert path_share(["floating", "window"], "lua/lazy/view/float.lua") == 0.5
    assert path_share(["update", "delete", "statement", "builder"], "statements/DeleteStatement.kt") == 0.5
    assert path_share(["is", "an"], "is.py") == 0.0  # too short to count
    assert path_share([], "lock.lua") == 0.0


def _spans(files: list[int]) -> dict[str, Span]:
    return {str(i): Span(id=str(i), path=f"f{f}.py", language="python", kind="function", name=None, text="x\n",
                         start_byte=0, end_byte=2, start_char=0, end_char=2, start_line=1, end_line=1, parent_id=None,
                         token_count=1, metadata={}) for i, f in enumerate(files)}


@given(st.lists(st.tuples(st.integers(0, 4), st.floats(0.01, 100.0)), min_size=1, max_size=30),
       st.floats(0.0, 1.0))
def test_saturation_reorders_without_losing_or_adding_and_keeps_the_best_first(items, decay):
    spans = _spans([f for f, _ in items])
    score = {str(i): s for i, (_, s) in enumerate(items)}
    order = sorted(score, key=lambda r: -score[r])
    taken = saturate(order, score, spans, decay)
    out = [rid for rid, _ in taken]
    worth = [w for _, w in taken]
    assert worth == sorted(worth, reverse=True)  # taken at non-increasing worth
    assert all(w <= score[rid] for rid, w in taken)
    assert sorted(out) == sorted(order)
    assert out[0] == order[0]
    by_file: dict[str, list[str]] = {}
    for rid in order:
        by_file.setdefault(spans[rid].path, []).append(rid)
    for ids in by_file.values():  # a file's spans keep their order
        assert [r for r in out if r in ids] == ids
    if decay == 1.0:
        assert [score[r] for r in out] == [score[r] for r in order]


def test_the_second_span_of_a_file_waits_for_the_other_files_best_unless_it_outscores_them():
    spans = _spans([0, 0, 1, 2])
    score = {"0": 10.0, "1": 9.0, "2": 5.0, "3": 1.0}
    taken = saturate(["0", "1", "2", "3"], score, spans, 0.3)
    assert [rid for rid, _ in taken] == ["0", "2", "1", "3"]  # 9 * 0.3 = 2.7: below 5, above 1
    assert [w for _, w in taken] == [10.0, 5.0, 9.0 * 0.3, 1.0]
    assert [rid for rid, _ in saturate(["0", "1", "2", "3"], {**score, "2": 2.0}, spans, 0.3)][:2] == ["0", "1"]
