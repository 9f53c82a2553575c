"""A question none of whose words occurs in the index gets no hits, said first, unless dense hits are asked for
(issue 37, item 5).

Hybrid search answered nonsense words with the dense neighbours of nothing (36 hits, 5,015 tokens over MCP, at
confidence 0.18). Now :attr:`SearchResult.words_in_index` says whether any term of the question is in the lexical
index; when none is, a hybrid search returns no hits (and never embeds the question) unless ``dense_fallback=True``
asks for matches by meaning alone. One word in the index is enough for the normal hybrid search: the dense list
is what finds code worded unlike the question (shown with the MiniLM in
``integration_tests/test_no_word_in_index_minilm.py``).

Runs on copies of real standard-library modules, lexical and hybrid (the hashing embedding), through the Python
API, the command line (in this process) and the MCP service.
"""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("tantivy")
pytest.importorskip("chromadb")

from llmc_splitters.chunking.tokens import resolve_tokenizer  # noqa: E402
from llmc_splitters.cli import main  # noqa: E402
from llmc_splitters.mcp import CodeService  # noqa: E402
from llmc_splitters.mcp.replies import compact_json  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ("json/__init__.py", "json/decoder.py", "json/encoder.py", "textwrap.py", "heapq.py", "shlex.py")
NONSENSE = "zxqv flurbo glimwart"


class CountingHashing(HashingEmbedding):
    """The hashing embedding, counting the queries it embeds."""

    def __init__(self) -> None:
        super().__init__(64)
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return super().embed_query(text)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stdlib")
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, root / rel)
    return root


@pytest.fixture(scope="module")
def hybrid(tree, tmp_path_factory) -> CodeIndex:
    idx = CodeIndex(tmp_path_factory.mktemp("hybrid") / "index", embedding=CountingHashing())
    idx.index_directory(tree)
    return idx


@pytest.fixture(scope="module")
def lexical(tree) -> CodeIndex:
    idx = CodeIndex()
    idx.index_directory(tree)
    return idx


def test_no_word_in_the_index_gives_no_hits_and_embeds_nothing(hybrid, lexical):
    before = len(hybrid.embedding.queries)
    for idx in (hybrid, lexical):
        found = idx.search(NONSENSE, k=10)
        assert found.hits == () and found.files == () and not found.words_in_index and found.confidence == 0.0
    assert len(hybrid.embedding.queries) == before  # no dense search of nothing
    # Stop words only: no term to look for, so no word occurs either.
    assert not hybrid.search("what is it for", k=5).words_in_index


def test_dense_fallback_returns_matches_by_meaning_alone(hybrid, lexical):
    found = hybrid.search(NONSENSE, k=5, dense_fallback=True)
    assert not found.words_in_index and len(found.hits) == 5
    assert all(set(h.ranks) == {"dense"} for h in found.hits)  # nothing lexical about them
    assert lexical.search(NONSENSE, k=5, dense_fallback=True).hits == ()  # a lexical index has no meaning to go by


def test_one_word_in_the_index_is_a_normal_hybrid_search(hybrid):
    found = hybrid.search(f"{NONSENSE} dedent", k=10)
    assert found.words_in_index and "dedent" in [h.span.name for h in found.hits[:3]]
    assert any("dense" in h.ranks and "lexical" not in h.ranks for h in found.hits)  # dense hits still come


def test_the_retriever_says_it_too(hybrid):
    r = CodeRetriever(index=hybrid, max_context_tokens=500)
    none = r.retrieve(NONSENSE)
    assert none.hits == () and none.context == "" and not none.words_in_index
    some = r.retrieve(NONSENSE, dense_fallback=True)
    assert some.hits and some.context and not some.words_in_index
    assert r.retrieve("dedent common leading whitespace").words_in_index


def test_the_command_line_says_so_first(tree, tmp_path, capsys):
    db = str(tmp_path / "index")
    assert main(["index", str(tree), "--db", db, "--embedding", "hashing", "-q"]) == 0
    capsys.readouterr()
    assert main(["query", NONSENSE, "--db", db]) == 0
    out = capsys.readouterr().out
    assert out == ("no hits: no word of the question occurs in the index (--dense-fallback shows the nearest spans "
                   "by meaning alone)\n")
    assert main(["query", NONSENSE, "--db", db, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["words_in_index"] is False and got["hits"] == [] and got["message"].startswith("no hits: no word")
    assert main(["query", NONSENSE, "--db", db, "--dense-fallback", "--k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "note: no word of the question occurs in the index: these hits are the nearest spans by " \
                       "meaning alone"
    assert lines[1].startswith("query: ") and sum(ln.endswith(")  dense #" + ln.rsplit("#", 1)[-1]) for ln in lines) == 3
    assert main(["query", "heappush", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["words_in_index"] is True

    lex = str(tmp_path / "lexical")
    assert main(["index", str(tree), "--db", lex, "--embedding", "none", "-q"]) == 0
    capsys.readouterr()
    assert main(["query", NONSENSE, "--db", lex]) == 0
    assert capsys.readouterr().out == ("no hits: no word of the question occurs in the index (the index is lexical: "
                                       "it matches words only)\n")


def test_the_mcp_service_says_so_first_in_a_short_reply(hybrid, lexical):
    tok = resolve_tokenizer()
    service = CodeService(lambda: CodeRetriever(index=hybrid), freshness="off")
    reply = service.search_code(NONSENSE)
    assert reply.text.splitlines()[0] == ("no hits: no word of the query occurs in the index (dense_fallback=true "
                                          "returns the nearest code by meaning alone)")
    assert reply.data["hits"] == [] and reply.data["words_in_index"] is False
    assert tok.count(reply.text) + tok.count(compact_json(reply.data)) < 150  # not 5,000 tokens of neighbours
    asked = service.search_code(NONSENSE, max_tokens=1500, dense_fallback=True)
    assert asked.text.splitlines()[0] == "no word of the query occurs in the index: these hits match by meaning alone"
    assert asked.data["hits"] and asked.data["words_in_index"] is False
    assert service.search_code("heappush").data["words_in_index"] is True
    plain = CodeService(lambda: CodeRetriever(index=lexical), freshness="off").search_code(NONSENSE)
    assert plain.text.startswith("no hits: no word of the query occurs in the index (the index is lexical")
