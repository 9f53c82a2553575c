"""With the MiniLM: a question none of whose words is in the index gets no hits unless asked, while a question
worded unlike the code it asks for, whose words do occur elsewhere in the index, still finds that code by meaning
(issue 37, item 5; the hashing-embedding and command-line tests are in ``tests/test_no_word_in_index.py``).

"No word occurs" means none of the question's terms is in the lexical index at all: one word anywhere is enough for
the normal hybrid search, whose dense list is what finds code that shares no word with the question.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("tantivy")
pytest.importorskip("chromadb")

from llmc_splitters.mcp import CodeService  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever  # noqa: E402

FILES = {
    # The answer: code only, none of the question's words in it.
    "geo/sphere.py": textwrap.dedent('''
        import math


        def haversine(lat1, lon1, lat2, lon2):
            p1, p2 = math.radians(lat1), math.radians(lat2)
            dp, dl = p2 - p1, math.radians(lon2 - lon1)
            a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
            return 6371.0 * 2 * math.asin(math.sqrt(a))
        '''),
    # Files that hold the question's words, about something else.
    "shapes/plane.py": textwrap.dedent('''
        """Plane geometry: points, circles and the distance between two points."""

        from dataclasses import dataclass


        @dataclass(frozen=True)
        class Point:
            x: float
            y: float


        def distance(a: Point, b: Point) -> float:
            """Euclidean distance between two points of the plane."""
            return ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5


        @dataclass(frozen=True)
        class Circle:
            centre: Point
            radius: float

            def contains(self, p: Point) -> bool:
                """Whether the point lies inside the circle (or on it)."""
                return distance(self.centre, p) <= self.radius
        '''),
    "notes/planets.md": "# Planets\n\nThe earth turns around the sun; a great many notes on orbits follow.\n",
}

QUESTION = "great circle distance between two points on earth"
NONSENSE = "zxqv flurbo glimwart"


@pytest.fixture(scope="module")
def index(minilm, tmp_path_factory) -> CodeIndex:
    idx = CodeIndex(tmp_path_factory.mktemp("minilm") / "index", embedding=minilm)
    idx.index_texts(FILES)
    return idx


def test_code_worded_unlike_the_question_is_found_by_meaning(index):
    found = index.search(QUESTION, k=5)
    assert found.words_in_index
    hit = next(h for h in found.hits if h.span.name == "haversine")
    assert "dense" in hit.ranks and "lexical" not in hit.ranks  # found by meaning alone, without dense_fallback


def test_no_word_in_the_index_gives_no_hits_unless_asked(index):
    assert index.search(NONSENSE, k=5).hits == ()
    asked = index.search(NONSENSE, k=5, dense_fallback=True)
    assert not asked.words_in_index and asked.hits and all(set(h.ranks) == {"dense"} for h in asked.hits)


def test_the_mcp_service_with_the_minilm(index):
    service = CodeService(lambda: CodeRetriever(index=index), freshness="off")
    assert service.search_code(NONSENSE).data["hits"] == []
    reply = service.search_code(QUESTION, k=5)
    assert reply.data["words_in_index"] and "haversine" in [h["symbol"] for h in reply.data["hits"]]
