"""CodeRetriever against a real ``chroma run`` server on localhost, started and stopped by this module."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import chroma_server as running_chroma

pytest.importorskip("chromadb")
pytest.importorskip("tantivy")

from fakes import CountingEmbedding, stored_rows  # noqa: E402

from llmc_splitters.retrieval import CodeRetriever  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory):
    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as address:
        yield address


SERVICE = '''"""Order service."""
import json
from decimal import Decimal

TAX = Decimal("0.2")


class Orders:
    """Keeps orders."""

    def __init__(self, store):
        self.store = store

    def total(self, order_id):
        """Sum an order's lines with tax."""
        lines = json.loads(self.store.get(order_id))
        return sum(Decimal(x["price"]) for x in lines) * (1 + TAX)

    def cancel(self, order_id):
        """Cancel an order."""
        self.store.delete(order_id)
'''

UTIL = "def slugify(text):\n    return '-'.join(text.lower().split())\n"


def test_index_query_modify_reindex_on_server(chroma_server, tmp_path: Path) -> None:
    host, port = chroma_server
    root = tmp_path / "repo"
    root.mkdir()
    (root / "service.py").write_text(SERVICE)
    (root / "util.py").write_text(UTIL)
    emb = CountingEmbedding()
    db = tmp_path / "db"  # spans and the lexical index; the vectors live in the server
    r = CodeRetriever(path=db, host=host, port=port, collection="server_test", embedding=emb, max_tokens=48, k=1)
    first = r.index_directory(root)
    assert sorted(first.added) == ["service.py", "util.py"] and first.embedded == len(emb.calls) > 0

    res = r.retrieve("sum order lines with tax", max_context_tokens=400)
    assert res.hits[0].span.name == "Orders.total"
    assert "import json\nfrom decimal import Decimal\n" in res.context and 'TAX = Decimal("0.2")' in res.context
    assert res.token_count <= 400

    assert not (db / "chroma").exists(), "no embedded Chroma when the vectors go to a server"
    # A second client of the same index sees the same data.
    other = CodeRetriever(path=db, host=host, port=port, collection="server_test", embedding=CountingEmbedding(),
                          max_tokens=48)
    assert other.index.paths == ["service.py", "util.py"]
    assert other.search("slugify text").hits[0].span.path == "util.py"

    emb.calls.clear()
    (root / "util.py").write_text(UTIL.replace("'-'", "'_'"))
    second = r.index_directory(root)
    assert second.updated == ["util.py"] and second.unchanged == ["service.py"]
    assert emb.calls and all("util.py" in t or "'_'" in t for t in emb.calls)
    assr = r.retrieve("slugify", max_context_tokens=100)
    assert "'_'.join" in assr.context

    (root / "util.py").unlink()
    third = r.index_directory(root)
    assert third.removed == ["util.py"]
    fresh = CodeRetriever(path=db, host=host, port=port, collection="server_test", embedding=CountingEmbedding(),
                          max_tokens=48)
    assert fresh.index.paths == ["service.py"]
    # The server holds exactly the vectors of the searched rows left: the removed file's are gone.
    searched = {row_id for row_id, role, _, _ in stored_rows(fresh.index) if role != "parent"}
    assert fresh.index.vectors.count() == len(searched)
