"""``CodeParentRetriever``: the core :class:`~llmc_splitters.retrieval.CodeRetriever` as a LlamaIndex retriever.

Importing this module imports ``llama_index.core`` (the opt-in). ``tantivy`` (the lexical index) loads when a
retriever is built; ``chromadb`` and an embedding model only if you pass one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, List, Optional

from .._faces import (
    check_positive,
    cite_core,
    core_retriever,
    index_directory,
    ranked_files,
    relative_paths,
    resolve_top_k,
    whole_files,
)
from ..errors import ConfigurationError, checked_arguments, missing_dependency

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import BaseNode, NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by tests/test_llama_index_node_parser.py
    raise missing_dependency(exc.name or "llama-index-core", "llama-index") from exc

from ..ingest.walk import DEFAULT_INCLUDE
from ..retrieval import CodeRetriever
from ..retrieval.context.expand import Expansion
from ..retrieval.index import Hit
from .node_parser import path_of

__all__ = ["CodeParentRetriever", "LlamaIndexEmbedding"]


class LlamaIndexEmbedding:
    """A LlamaIndex embed model (``BaseEmbedding``) seen through the core's ``embed_documents``/``embed_query``."""

    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model
        model_name = getattr(embed_model, "model_name", None)
        cls = embed_model.class_name() if hasattr(embed_model, "class_name") else type(embed_model).__name__
        self.name = f"llama_index:{cls}:{model_name}" if model_name else f"llama_index:{cls}"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self.embed_model.get_text_embedding_batch(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return list(map(float, self.embed_model.get_query_embedding(text)))


def _as_core_embedding(embed_model: Any) -> Any:
    from .embedding import LocalEmbedding

    if isinstance(embed_model, LocalEmbedding):
        return embed_model.model  # the model itself: its index records the name the CLI records for it
    if embed_model is None or (hasattr(embed_model, "embed_documents") and hasattr(embed_model, "embed_query")):
        return embed_model
    if hasattr(embed_model, "get_text_embedding_batch") and hasattr(embed_model, "get_query_embedding"):
        return LlamaIndexEmbedding(embed_model)
    msg = (
        f"embed_model must be a LlamaIndex BaseEmbedding (or have embed_documents/embed_query), got "
        f"{type(embed_model).__name__}; pass None for lexical-only (BM25) search"
    )
    raise ConfigurationError(msg)


class CodeParentRetriever(BaseRetriever):
    """Search code by BM25 (and embeddings, if given) and return each hit with its parent context.

    ``retrieve(query)`` returns one ``NodeWithScore`` per hit, best first: the ``k`` best hits, or without ``k`` (the
    default) as many as fit ``max_context_tokens``, as the core :class:`~llmc_splitters.retrieval.CodeRetriever`
    fills it (README, "What a reply holds"); ``score`` is the ranking score. Each node's text is the hit,
    verbatim, plus the context that makes it readable alone, as far as the budget allows: the header lines of the class/function it sits in, the imports and module-level names it
    uses, and its enclosing scope whole (or the class skeleton when the scope is too big), each slice preceded by a
    ``# path:start-end`` marker line. The texts of all returned nodes add up to at most ``max_context_tokens``
    tokens: a later hit is always reserved room for its own text before an earlier one gets context, context already
    shown is not repeated, and a hit too big for its share is cut at a line boundary and marked ``(truncated)``.

    Node ids are the hit spans' ids. ``metadata``: ``file_path`` and ``source`` (the path), ``start_line``/
    ``end_line`` (the hit span), ``language``, ``kind``, ``symbol``, ``span_id``, ``parent_id``, ``breadcrumb``,
    ``rank``, ``confidence``, ``context_tokens``, ``truncated``, ``context_lines`` and ``ranked_files`` (the
    search's ranked distinct files beyond what the budget holds: path, score, lines and symbol); all are excluded from the
    LLM and embedding views (the markers in the text already cite the lines). A node retrieved from a ``Document``
    given to this retriever has a ``SOURCE`` relationship to it.

    The plain constructor indexes what it is given (``documents``, ``texts`` or ``directory``) into Chroma: an
    embedded store at ``path``, a server at ``host``/``port``, a ready ``client``, or (with none of these) a fresh
    in-memory collection. ``embed_model=None`` is lexical-only (BM25, no model); any LlamaIndex embed model makes
    search hybrid. ``k`` (alias ``similarity_top_k``, LlamaIndex's name) and ``max_context_tokens`` are plain
    attributes. An argument this retriever does not take raises :class:`~llmc_splitters.ConfigurationError` naming
    the nearest one (``top_k`` -> ``k``), not a bare ``TypeError``. Given a
    :class:`~llmc_splitters.llama_index.LocalEmbedding`, it embeds with the model underneath, so the index records
    the model's own name (``minilm-onnx-int8-128:model`` for ``"minilm"``, ``code-static256:<digest>`` for the
    default), as ``llmc-splitters index`` does.

    Paths are stored and cited relative to ``root``: by default, the common directory of the documents when their
    paths are absolute (``SimpleDirectoryReader`` gives absolute paths), and ``directory`` itself for
    ``directory=``.

    Args:
        documents: Whole-file ``Document``s (as ``SimpleDirectoryReader`` returns them); the path is
            ``metadata["file_path"]`` (or ``file_name``/``source``), else ``document-<i>``.
        texts: ``{path: text}`` to index.
        directory: A directory to index, selected as ``llmc-splitters index`` selects
            (:func:`llmc_splitters.ingest.walk.walk`: ``include`` minus ``exclude``, ``.gitignore`` honoured,
            notebooks and extensionless ``#!`` scripts included, binary and generated files skipped).
        include: Gitignore-style patterns for ``directory``.
        exclude: Gitignore-style patterns to skip in ``directory``.
        root: Store paths relative to this directory; ``None`` (default): the documents' common directory when
            their paths are absolute, ``directory`` for ``directory=``; ``False``: paths as given.
        embed_model: A LlamaIndex embed model (hybrid search; ``LocalEmbedding()`` for the package's own) or
            ``None`` (BM25 only); ``embedding=`` is an alias.
        path: Directory of an embedded (persistent) Chroma store.
        host: Chroma server host.
        port: Chroma server port.
        client: A ready Chroma client.
        collection_name: Chroma collection (default: ``llmc_spans`` in a persistent store or server, a fresh name
            in memory).
        code_retriever: A ready :class:`~llmc_splitters.retrieval.CodeRetriever` (then no store/embedding args).
        store: A :class:`~llmc_splitters.retrieval.MilvusStore`: the whole index (spans, BM25, vectors) in Milvus.
        max_tokens: Leaf span size used when indexing.
        tokenizer: Token counter for leaves and for ``max_context_tokens`` (default cl100k).
        k: Number of nodes to return (``similarity_top_k`` is an alias); ``None`` (default): as many as fit
            ``max_context_tokens``.
        max_context_tokens: Token budget of all returned node texts together.
        expand_context: Add parent context (``False``: the hits only).
        multi_stage: Search file/class summaries first, then the leaves inside the best ones.
        callback_manager: LlamaIndex callback manager.
        verbose: LlamaIndex verbosity flag.

    Raises:
        ConfigurationError: An invalid setting, an unknown argument, a document outside ``root``, or two different
            documents with the same path.

    Example:
        >>> from llama_index.core import Document
        >>> retriever = CodeParentRetriever.from_documents(
        ...     [Document(text="import os\\n\\ndef home():\\n    return os.environ['HOME']\\n",
        ...               metadata={"file_path": "m.py"})],
        ...     k=1, max_context_tokens=200)
        >>> hit = retriever.retrieve("home directory")[0]
        >>> hit.node.metadata["symbol"], hit.node.metadata["start_line"]
        ('home', 3)
    """

    @checked_arguments
    def __init__(
        self,
        *,
        documents: Optional[Iterable[BaseNode]] = None,
        texts: Optional[Mapping[str, str]] = None,
        directory: Optional[str | os.PathLike[str]] = None,
        include: Sequence[str] = DEFAULT_INCLUDE,
        exclude: Sequence[str] = (),
        root: Optional[str | os.PathLike[str] | bool] = None,
        embed_model: Any = None,
        embedding: Any = None,
        path: Optional[str | os.PathLike[str]] = None,
        host: Optional[str] = None,
        port: Optional[int] = None,
        client: Any = None,
        collection_name: Optional[str] = None,
        code_retriever: Optional[CodeRetriever] = None,
        store: Any = None,
        max_tokens: int = 512,
        tokenizer: Any = None,
        k: Optional[int] = None,
        similarity_top_k: Optional[int] = None,
        max_context_tokens: int = 2048,
        expand_context: bool = True,
        multi_stage: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        """Build (or wrap) the index and index what is given; see the class docstring."""
        if embed_model is not None and embedding is not None and embed_model is not embedding:
            msg = "embed_model and embedding are the same setting; give one"
            raise ConfigurationError(msg)
        top_k = resolve_top_k(k, similarity_top_k, None)
        model = embed_model if embed_model is not None else embedding
        code_retriever = core_retriever(
            code_retriever, embedding=None if model is None else _as_core_embedding(model),
            embedding_name="embed_model", path=path, host=host, port=port, client=client,
            collection_name=collection_name, max_tokens=max_tokens, tokenizer=tokenizer, k=top_k,
            max_context_tokens=max_context_tokens, store=store,
        )
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.code_retriever = code_retriever
        self.k = top_k
        self.max_context_tokens = max_context_tokens
        self.expand_context = expand_context
        self.multi_stage = multi_stage
        self._sources: dict[str, RelatedNodeInfo] = {}
        files = dict(texts or {})
        if documents is not None:
            files.update(self._files_of(documents, taken=files, root=root))
        if files:
            code_retriever.index_texts(files)
        if directory is not None:
            index_directory(code_retriever, directory, include=include, exclude=exclude, root=root)

    @property
    def similarity_top_k(self) -> Optional[int]:
        """LlamaIndex's name for :attr:`k` (``None``: fill the budget)."""
        return self.k

    @similarity_top_k.setter
    def similarity_top_k(self, value: Optional[int]) -> None:
        if value is not None:
            check_positive("similarity_top_k", value)
        self.k = value

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[BaseNode],
        embed_model: Any = None,
        k: Optional[int] = None,
        max_context_tokens: int = 2048,
        **kwargs: Any,
    ) -> CodeParentRetriever:
        """Index whole-file ``documents`` (reader output) and return a retriever over them; any constructor
        argument (``root=``, ``path=``, ``similarity_top_k=``, ...) can be given too."""
        return cls(documents=documents, embed_model=embed_model, k=k, max_context_tokens=max_context_tokens, **kwargs)

    @classmethod
    def from_directory(
        cls,
        directory: str | os.PathLike[str],
        embed_model: Any = None,
        k: Optional[int] = None,
        max_context_tokens: int = 2048,
        **kwargs: Any,
    ) -> CodeParentRetriever:
        """Index the source files under ``directory`` (see ``include``/``exclude``/``root``) and return a
        retriever."""
        return cls(directory=directory, embed_model=embed_model, k=k, max_context_tokens=max_context_tokens, **kwargs)

    # ------------------------------------------------------------------ retrieval
    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        if self.k is not None:  # None: fill the budget
            check_positive("k", self.k)
        check_positive("max_context_tokens", self.max_context_tokens)
        found, packed = self.code_retriever.retrieve_per_hit(
            query_bundle.query_str, self.k, self.max_context_tokens, expand_context=self.expand_context,
            multi_stage=self.multi_stage,
        )
        files = ranked_files(found)
        return [NodeWithScore(node=self._node(hit, exp, found.confidence, files), score=hit.score)
                for hit, exp in packed]

    def _node(self, hit: Hit, exp: Expansion, confidence: float, files: list[dict[str, Any]]) -> TextNode:
        span = hit.span
        meta: dict[str, Any] = {
            k: v for k, v in span.to_metadata().items() if k not in ("start_byte", "end_byte", "token_count")
        }
        meta.setdefault("symbol", "")
        meta.setdefault("breadcrumb", "")
        if span.path is not None:
            meta["file_path"] = span.path
        meta.update(
            rank=hit.rank,
            confidence=confidence,
            context_tokens=exp.token_count,
            truncated=any(p.truncated for p in exp.pieces),
            context_lines=[f"{p.path}:{p.start_line}-{p.end_line}" for p in exp.pieces],
            ranked_files=files,
        )
        cite_core(meta, hit, exp)
        relationships = {}
        source = self._sources.get(span.path or "")
        if source is not None:
            relationships[NodeRelationship.SOURCE] = source
        keys = list(meta)
        return TextNode(
            id_=span.id,
            text=exp.context,
            metadata=meta,
            excluded_embed_metadata_keys=keys,
            excluded_llm_metadata_keys=keys,
            relationships=relationships,
        )

    def _files_of(self, documents: Iterable[BaseNode], taken: Mapping[str, str], root: Any) -> dict[str, str]:
        docs = list(documents)
        paths = relative_paths([path_of(d.metadata or {}) for d in docs], root)
        files, keys = whole_files(zip(paths, (d.get_content() for d in docs)), taken,
                                  "SimpleDirectoryReader and other readers")
        for key, doc in zip(keys, docs):
            self._sources[key] = RelatedNodeInfo(node_id=doc.node_id, metadata=dict(doc.metadata or {}))
        return files


