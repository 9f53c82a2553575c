"""``--milvus URI`` on the command line and the MCP service reading from Milvus, on Milvus Lite (the real engine)."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("tantivy")
pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from llmc_splitters.cli import main  # noqa: E402
from llmc_splitters.errors import RequestError  # noqa: E402
from llmc_splitters.mcp import CodeService, ServiceSettings  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever, MilvusStore  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ("json/__init__.py", "json/decoder.py", "json/encoder.py", "textwrap.py", "heapq.py", "shlex.py")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tree of standard-library modules indexed into a Milvus Lite file by `llmc-splitters index --milvus`."""
    base = tmp_path_factory.mktemp("cli")
    tree = base / "tree"
    for rel in FILES:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, tree / rel)
    db = str(base / "idx.db")
    assert main(["index", str(tree), "--milvus", db, "--collection", "std", "--embedding", "none", "--quiet",
                 "--json"]) == 0
    return tree, db


def test_index_query_stats_read_milvus_alone(built, capsys):
    tree, db = built
    capsys.readouterr()
    assert not (tree / ".llmc").exists()  # no --db directory was made
    assert main(["query", "decode a JSON document", "--milvus", db, "--collection", "std", "--json", "--k", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hits"][0]["path"].startswith("json/")
    assert main(["query", "heap push pop", "--milvus", db, "--collection", "std", "--path", "heapq.py", "--json"]) == 0
    assert {h["path"] for h in json.loads(capsys.readouterr().out)["hits"]} == {"heapq.py"}
    assert main(["stats", "--milvus", db, "--collection", "std", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["files"] == len(FILES) and stats["root"] == str(tree) and stats["embedding"] == "none"
    # A second run reads nothing (stat first) and an edit is re-indexed.
    assert main(["index", str(tree), "--milvus", db, "--collection", "std", "--quiet", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["unchanged"] == len(FILES) and again["bytes_read"] == 0


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["query", "x", "--milvus", "http://127.0.0.1:9"], 1,
     "error: could not open Milvus at http://127.0.0.1:9: .*check the address and that the server runs"),
    (["query", "x", "--milvus", "{db}", "--collection", "other"], 3,
     r"error: no index in Milvus at .* \(collection 'other'\): run `llmc-splitters index PATH --milvus"),
    (["query", "x", "--milvus", "{db}", "--db", "somewhere"], 2, "error: --milvus holds the whole index"),
    (["stats", "--milvus", "{db}", "--collection", "bad-name"], 2, "collection must be a Milvus collection name"),
])
def test_errors_are_one_line_with_the_remedy(built, capsys, argv, code, message):
    _tree, db = built
    capsys.readouterr()
    assert main([a.replace("{db}", db) for a in argv]) == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    import re

    assert re.search(message, lines[0]), lines[0]


def test_the_mcp_service_reads_from_milvus(built):
    _tree, db = built
    index = CodeIndex(store=MilvusStore(db, collection="std"), create=False)
    service = CodeService(lambda: CodeRetriever(index=index), freshness="off",
                          settings=ServiceSettings(max_tokens=2000, hard_cap=4000))
    reply = service.search_code("decode encode", path="json/", k=5)
    assert reply.data["hits"] and all(h["path"].startswith("json/") for h in reply.data["hits"])
    symbol = service.get_symbol("JSONDecoder.raw_decode")
    assert "def raw_decode(self, s, idx=0):" in symbol.text
    lines = service.get_lines("heapq.py", 1, 3)
    assert lines.text.count("\n") >= 2
    with pytest.raises(RequestError, match=r"no indexed path starts with 'src/json/'"):
        service.search_code("decode", path="src/json")
