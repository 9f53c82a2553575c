"""Retrieval systems that build their own context (not chunk + shared retriever): plug-ins.

Today: llmc's parent-context retriever (``llmc_splitters.retrieval.CodeRetriever``): it indexes the package with
``ASTChunker`` leaves, searches (BM25; with an embedding, BM25 fused with dense by RRF) and expands the hits with
their enclosing scope headers, the imports they use and the smallest enclosing scope that fits, all within
``max_context_tokens``. If the module is missing, no plug-in row is produced (and the report says so).

A plug-in has ``name``, ``retrievers`` (row labels, e.g. ``("bm25", "dense")``) and ``contexts(package, retriever)``
returning ``contexts(query, budget) -> list[Piece]``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .chunkers import count_tokens
from .corpus import Package, Query, SourceFile
from .metrics import Piece

_counter = itertools.count()


def _available() -> bool:
    try:
        from llmc_splitters.retrieval import CodeRetriever  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def describe_plugins(settings: Any) -> list[dict]:
    if not _available():
        return [{"name": "llmc parent-context retriever", "kind": "ours", "note": "llmc_splitters.retrieval not "
                 "importable in this run: no rows", "languages": []}]
    return [{"name": ParentContextRetriever.name, "kind": "ours", "languages": ["python", "javascript", "typescript",
                                                                                 "bash"],
             "note": f"CodeRetriever(max_tokens={settings.chunk_tokens}, k=budget/{settings.chunk_tokens}*2): hits "
                     "expanded with scope headers, used imports and enclosing scope, within the budget; row 'bm25' "
                     "= embedding=None (lexical), row 'dense' = MiniLM embedding (its hybrid BM25+dense search)"}]


def plugin_systems(settings: Any, dense: Any, log: Callable[[str], None]) -> list:
    if not _available():
        return []
    return [ParentContextRetriever(settings, dense)]


def _embedding_adapter(dense: Any) -> Any:
    """An ``Embedding`` for llmc's index that shares the benchmark's cached MiniLM (same model, same vectors)."""
    from llmc_splitters.retrieval import MiniLMEmbedding

    class _Cached(MiniLMEmbedding):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in dense.embed(list(texts))]

        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in dense.embed([text])[0]]

    if hasattr(dense, "model"):
        return _Cached()
    # Test stand-in: no model; duck-typed embedding.

    class _Fake:
        name = "fake"

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in dense.embed(list(texts))]

        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in dense.embed([text])[0]]

    return _Fake()


def result_pieces(result: Any, files: dict[str, SourceFile]) -> list[Piece]:
    """Map a retriever Result's pieces (path + 1-based inclusive lines) to char-range pieces.

    Verbatim pieces cover their whole lines. A ``skeleton``, ``excerpt`` or truncated piece covers only the lines of
    its range whose text appears in it. The context's full token count (markers included) is charged to the pieces.
    """
    out: list[Piece] = []
    for p in result.pieces:
        f = files.get(p.path)
        if f is None:
            continue
        last = min(p.end_line, len(f.line_starts))
        if p.kind in ("skeleton", "excerpt") or getattr(p, "truncated", False):
            present = {ln.strip() for ln in p.text.splitlines() if ln.strip()}
            for line in range(p.start_line, last + 1):
                s, e = f.line_range(line)
                if f.text[s:e].strip() in present:
                    out.append(Piece(f.path, s, e, 0))
        else:
            s = f.line_range(p.start_line)[0]
            e = f.line_range(last)[1]
            out.append(Piece(f.path, s, e, 0))
    total = int(getattr(result, "token_count", 0) or count_tokens(getattr(result, "context", "")))
    if out:
        out[0] = Piece(out[0].path, out[0].start, out[0].end, total)
    elif total:
        out.append(Piece("", -1, -1, total))
    return out


class ParentContextRetriever:
    name = "llmc parent-context retriever"

    def __init__(self, settings: Any, dense: Any) -> None:
        self.settings = settings
        self.dense = dense
        self.retrievers = ("bm25", "dense") if dense is not None else ("bm25",)

    def contexts(self, package: Package, retriever: str) -> Callable[[Query, int], list[Piece]]:
        from llmc_splitters.retrieval import ChromaStore, CodeRetriever

        embedding = _embedding_adapter(self.dense) if retriever == "dense" else None
        store = ChromaStore(collection=f"bench_{next(_counter)}")
        r = CodeRetriever(store=store, embedding=embedding, max_tokens=self.settings.chunk_tokens,
                          k=4, max_context_tokens=max(self.settings.budgets))
        files = {f.path: f for f in package.files}
        r.index_texts({f.path: f.text for f in package.files})
        chunk = self.settings.chunk_tokens

        def contexts(q: Query, budget: int) -> list[Piece]:
            res = r.retrieve(q.text, k=max(2, budget // chunk * 2), max_context_tokens=budget)
            return result_pieces(res, files)

        return contexts
