"""The whole index on Milvus: :class:`MilvusStore`, passed as ``store=`` to the index, the retrievers and the CLI.

Spans, file markers, import bindings, settings, the vector cache, the BM25 postings (a server-side ``BM25``
function over the rows' code terms) and the dense vectors all live in Milvus (see :mod:`.client` for the
collections); nothing is written to the local disk, so every machine that reaches the server queries the same index.
``pymilvus`` is imported only when the store is opened.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from ....errors import ConfigurationError
from ..filters import SearchFilter
from ..span_store import IndexNotFoundError
from .client import Collections, connect, is_lite, release
from .engines import MilvusLexical, MilvusVectors, hybrid_search
from .spans import MilvusSpans

__all__ = ["MilvusStore"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")
# Open stores per Milvus Lite file in this process: they share its in-process server, released with the last one.
_LITE_OPEN: dict[str, int] = {}
_LITE_LOCK = threading.Lock()


class MilvusStore:
    """An index in Milvus: a Milvus Lite file (one process: tests, a laptop) or a Milvus server or cluster.

    Args:
        uri: ``./idx.db`` (Milvus Lite, in process) or ``http://host:19530`` (a server: standalone or distributed).
        collection: The index's collection name (letters, digits and ``_``); its companions are
            ``NAME_files``, ``NAME_meta`` and ``NAME_vectors``.
        token: The server's credentials (``user:password`` or an API key), if it asks for them.
        fusion: ``"server"``: a hybrid search is one ``hybrid_search`` call, fused by Milvus's RRF (the result
            has no per-list ranks, and its confidence is 0); ``"client"``: the BM25 and the dense lists are two
            calls fused here, as for the local engines (per-list ranks and the calibrated confidence).

    Raises:
        ConfigurationError: A setting is invalid.

    Example:
        >>> from llmc_splitters.retrieval import CodeIndex, MilvusStore
        >>> idx = CodeIndex(store=MilvusStore("./idx.db", collection="code"))     # doctest: +SKIP
        >>> idx = CodeIndex(store=MilvusStore("http://milvus:19530"))              # doctest: +SKIP
    """

    holds_index = True
    """It holds the whole index (spans, BM25 and vectors), not only vectors."""

    def __init__(self, uri: str, collection: str = "llmc", *, token: str | None = None,
                 fusion: str = "server") -> None:
        if not isinstance(uri, str) or not uri.strip():
            msg = f"uri must be a Milvus Lite file (./idx.db) or a server address (http://host:19530), got {uri!r}"
            raise ConfigurationError(msg)
        if is_lite(uri.strip()) and not uri.strip().endswith(".db"):
            msg = (f"a Milvus Lite file must end in .db (./idx.db), got {uri!r}; a server address starts with "
                   "http:// (http://host:19530)")
            raise ConfigurationError(msg)
        if not isinstance(collection, str) or not _NAME.fullmatch(collection):
            msg = (f"collection must be a Milvus collection name (a letter or _, then letters, digits or _), "
                   f"got {collection!r}")
            raise ConfigurationError(msg)
        if fusion not in ("server", "client"):
            msg = f"fusion must be 'server' (one hybrid_search call) or 'client', got {fusion!r}"
            raise ConfigurationError(msg)
        self.uri = uri.strip()
        self.collection = collection
        self.token = token
        self.fusion = fusion
        self._cols: Collections | None = None  # open for a model
        self._link: Collections | None = None  # connected
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MilvusStore({self.uri!r}, collection={self.collection!r})"

    @property
    def lite(self) -> bool:
        """Whether the address is a Milvus Lite file (one process writes it)."""
        return is_lite(self.uri)

    @property
    def cols(self) -> Collections:
        """The collections (after :meth:`open`)."""
        if self._cols is None:
            msg = f"{self!r} is not open: pass it as store= to CodeIndex, which opens it"
            raise ConfigurationError(msg)
        return self._cols

    def open(self, embedding_name: str, dimension: int | None, *, create: bool = True, reset: bool = False) -> None:
        """Connect, and open (or create) the collections for ``embedding_name`` vectors of ``dimension``
        (``None``: lexical only).

        Raises:
            MilvusStoreError: Milvus cannot be reached, or the collection holds another model or schema.
            IndexNotFoundError: ``create=False`` and there is no such collection.
        """
        with self._lock:
            cols = self._connected()
            if reset:
                cols.drop()
            if cols.exists():
                cols.check(embedding_name, dimension)
            elif not create:
                msg = (f"no index in Milvus at {self.uri} (collection {self.collection!r}): index files first "
                       f"(llmc-splitters index PATH --milvus {self.uri} --collection {self.collection})")
                raise IndexNotFoundError(msg)
            else:
                cols.create(embedding_name, dimension)
            cols.load()
            self._cols = cols
            self._spans = MilvusSpans(cols)
            self._lexical = {r: MilvusLexical(cols, r) for r in ("leaf", "summary")}
            self._vectors = MilvusVectors(cols)

    def _connected(self) -> Collections:
        if self._link is None:
            self._link = Collections(connect(self.uri, self.token), self.collection, self.uri)
            if self.lite:
                with _LITE_LOCK:
                    key = os.path.abspath(self.uri)
                    _LITE_OPEN[key] = _LITE_OPEN.get(key, 0) + 1
        return self._link

    def recorded(self) -> dict[str, Any]:
        """What the collection records (``embedding`` and its vectors' ``dimension``, the ``settings`` of a file,
        the CLI's ``manifest``), read before it is opened for a model, as :meth:`CodeIndex.recorded
        <llmc_splitters.retrieval.CodeIndex.recorded>` reads an index directory.

        Raises:
            IndexNotFoundError: There is no such collection.
            MilvusStoreError: Milvus cannot be reached, or the collection is not an llmc index.
        """
        import json

        with self._lock:
            cols = self._connected()
        if not cols.exists():
            msg = (f"no index in Milvus at {self.uri} (collection {self.collection!r}): index files first "
                   f"(llmc-splitters index PATH --milvus {self.uri} --collection {self.collection})")
            raise IndexNotFoundError(msg)
        cols.check("none", None)
        cols.load()
        spans = MilvusSpans(cols)
        files = cols.query(cols.files, "", ["settings"], limit=1)
        manifest = spans.get_meta("manifest")
        return {"embedding": spans.get_meta("embedding") or "none", "dimension": cols.dimension,
                "vectors": self.describe(),
                "settings": files[0]["settings"] if files else None,
                "manifest": json.loads(manifest) if manifest else {}}

    @property
    def spans(self) -> MilvusSpans:
        """The span store (after :meth:`open`)."""
        self.cols  # noqa: B018 - raises when not open
        return self._spans

    def lexical(self, role: str) -> MilvusLexical:
        """BM25 over the ``leaf`` or ``summary`` rows (after :meth:`open`)."""
        self.cols  # noqa: B018
        return self._lexical[role]

    @property
    def vectors(self) -> MilvusVectors:
        """The dense vectors (after :meth:`open`)."""
        self.cols  # noqa: B018
        return self._vectors

    @property
    def hybrid(self) -> Any:
        """``hybrid(query, vector, n, filt, files, rrf_k, *, weights, lexical_weight) -> [(id, score)]``: one
        server-side fused search (:func:`~llmc_splitters.retrieval.storage.milvus.engines.hybrid_search`), or ``None`` with
        ``fusion="client"`` or a lexical-only collection."""
        if self.fusion != "server" or not self.cols.dimension:
            return None
        cols = self.cols

        def run(query: str, vector: list[float], n: int, filt: SearchFilter | None, files: Any, rrf_k: int, *,
                weights: Any = None, lexical_weight: float = 0.5) -> list[tuple[str, float]]:
            return hybrid_search(cols, query, vector, n, filt, files, rrf_k, weights=weights,
                                 lexical_weight=lexical_weight)

        return run

    def describe(self) -> dict[str, Any]:
        """Where the index lives (what a CLI record keeps)."""
        return {"kind": "milvus", "uri": self.uri, "collection": self.collection}

    def close(self) -> None:
        """Close the connection (the next :meth:`open` connects again); a Milvus Lite file is released for another
        process once no other open store of this process uses it."""
        with self._lock:
            if self._link is not None:
                self._link.flush()
                self._link.call("close", self._link.client.close)
                if self.lite:
                    with _LITE_LOCK:
                        key = os.path.abspath(self.uri)
                        _LITE_OPEN[key] = _LITE_OPEN.get(key, 1) - 1
                        if _LITE_OPEN[key] <= 0:
                            del _LITE_OPEN[key]
                            release(self.uri)
            self._cols = self._link = None
