"""An index of a tree where nothing is selected says it is empty, and why, everywhere (issue 37, item 4).

``index`` of a directory holding only notes and data files reported success; ``query`` and ``stats`` then said
there was no index (nothing had created its file). Now the run leaves an empty index, and ``index``, ``query``,
``stats`` and the MCP ``index_status`` (and ``search_code``) say it is empty: nothing under the path matched the
file patterns, which paths were skipped, and the ``--include`` that would add them. The command line runs in this
process on directories the tests write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tantivy")
pytest.importorskip("pathspec")

from llmc_splitters.cli import main  # noqa: E402
from llmc_splitters.ingest.walk import WalkOptions  # noqa: E402
from llmc_splitters.mcp import CodeService  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever  # noqa: E402

NOTES = "Release checklist\n\n1. bump the version\n2. tag it\n3. write the changelog entry\n"
DATA = "city,population\nLyon,522250\nNantes,320732\n"


@pytest.fixture
def notes(tmp_path) -> Path:
    """A directory of notes and data, no source file."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "release.txt").write_text(NOTES)
    (root / "todo.txt").write_text("- reply to the review\n")
    (root / "cities.csv").write_text(DATA)
    return root


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_index_query_and_stats_say_the_index_is_empty_and_what_to_include(notes, capsys):
    db = str(notes / ".llmc")
    code, out, _ = _cli(capsys, "index", str(notes), "--embedding", "none")
    assert code == 0
    said = next(ln for ln in out.splitlines() if ln.strip().startswith("empty"))
    assert f"nothing under {notes} matches the file patterns (*.py" in said
    assert "3 paths were skipped (3 not an indexed file type)" in said
    assert "add --include '*.txt' --include '*.csv'" in said

    code, out, err = _cli(capsys, "index", str(notes), "--embedding", "none", "--json")
    assert code == 0 and "--include '*.txt'" in json.loads(out)["empty"]
    assert err.startswith("note: the index is empty: nothing under")

    code, out, err = _cli(capsys, "query", "release checklist", "--db", db)
    assert code == 3 and not out
    assert f"error: the index in {db} is empty: nothing under {notes}" in err and "--include '*.txt'" in err

    code, out, _ = _cli(capsys, "stats", "--db", db)
    assert code == 0
    assert "files      0" in out and "empty      the index holds no file: nothing under" in out
    code, out, _ = _cli(capsys, "stats", "--db", db, "--json")
    assert code == 0 and json.loads(out)["files"] == 0 and "--include '*.txt'" in json.loads(out)["empty"]

    # What the note says works: the notes are indexed, found, and nothing says "empty" any more.
    code, out, _ = _cli(capsys, "index", str(notes), "--embedding", "none", "--include", "*.txt")
    assert code == 0 and "2 added" in out and "empty" not in out
    code, out, _ = _cli(capsys, "query", "release checklist", "--db", db)
    assert code == 0 and "release.txt" in out
    code, out, _ = _cli(capsys, "stats", "--db", db, "--json")
    assert json.loads(out)["empty"] is None and json.loads(out)["files"] == 2


def test_a_directory_with_no_file_at_all(tmp_path, capsys):
    root = tmp_path / "new-project"
    root.mkdir()
    code, out, _ = _cli(capsys, "index", str(root), "--embedding", "none")
    assert code == 0 and f"empty      the index holds no file: {root} holds no file" in out
    code, _, err = _cli(capsys, "query", "main", "--db", str(root / ".llmc"))
    assert code == 3 and "holds no file" in err and "index the directory that holds the code" in err


def test_the_api_leaves_an_empty_index_that_can_be_opened(tmp_path, notes):
    report = CodeIndex(tmp_path / "idx").index_directory(notes)
    assert report.added == [] and report.failed == {}
    opened = CodeIndex(tmp_path / "idx", create=False)  # no IndexNotFoundError: the run created it
    assert opened.paths == [] and opened.status()["updated_at"] is not None


def test_mcp_index_status_and_search_say_the_index_is_empty(notes):
    r = CodeRetriever()
    service = CodeService(lambda: r, root=notes, freshness="refresh", walk_options=WalkOptions())
    service.refresher.refresh()
    status = service.index_status()
    assert status.text.splitlines()[0].startswith("0 files indexed")
    line = next(ln for ln in status.text.splitlines() if ln.startswith("the index is empty: "))
    assert "nothing under notes matches the file patterns" in line and "--include '*.txt'" in line
    assert str(notes) not in status.text  # the server's paths stay hidden
    assert status.data["empty"] == line.removeprefix("the index is empty: ")
    reply = service.search_code("release checklist")
    assert reply.data["hits"] == [] and any(n.startswith("the index is empty: nothing under notes")
                                            for n in reply.data["notes"])
    # With the notes included, the same server has them, and says nothing of emptiness.
    wide = CodeService(lambda: r, root=notes, freshness="refresh", walk_options=WalkOptions(include=("*.txt",)))
    wide.refresher.refresh()
    assert wide.index_status().data["empty"] is None
    assert wide.search_code("release checklist").data["hits"][0]["path"] == "release.txt"


def test_mcp_without_a_tree_says_how_to_build_the_index(tmp_path):
    index = CodeIndex(tmp_path / "idx")
    index.index_texts({})
    service = CodeService(lambda: CodeRetriever(index=index), freshness="off")
    status = service.index_status()
    assert status.data["empty"].startswith("no file was indexed into it")
    assert "`llmc-splitters index PATH`" in status.text
