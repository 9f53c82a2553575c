"""``CodeParentRetriever``: the core :class:`~llmc_splitters.retrieval.CodeRetriever` as a LangChain retriever.

Importing this module imports ``langchain_core`` (the opt-in). ``tantivy`` (the lexical index) loads when a
retriever is built; ``chromadb`` and an embedding model only if you pass one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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
from ..errors import checked_arguments, missing_dependency

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, Field
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by tests/test_langchain_splitter.py
    raise missing_dependency(exc.name or "langchain-core", "langchain") from exc

from ..ingest.walk import DEFAULT_INCLUDE
from ..retrieval import CodeRetriever
from ..retrieval.context.expand import Expansion
from ..retrieval.retriever import RETRIEVER_K
from ..retrieval.index import Hit
from .splitter import path_of

__all__ = ["CodeParentRetriever"]


class CodeParentRetriever(BaseRetriever):
    """Search code by BM25 (and embeddings, if given) and return each hit with its parent context.

    Each hit (a leaf span) becomes one ``Document``, best first: the ``k`` best hits, or without ``k`` (the default)
    as many as fit ``max_context_tokens``, as the core :class:`~llmc_splitters.retrieval.CodeRetriever` fills it
    (README, "What a reply holds"). A document's ``page_content`` is the hit, verbatim, plus the context that makes it
    readable alone, as far as the budget allows: the header lines of the class/function it
    sits in, the imports and module-level names it uses, and its enclosing scope whole (or the class skeleton when
    the scope is too big). Each slice is preceded by a ``# path:start-end`` marker line. The ``page_content`` of all
    returned documents add up to at most ``max_context_tokens`` tokens: hits come first (a later hit is always
    reserved room for its own text before an earlier one gets context), context shown in an earlier document is not
    repeated, and a hit too big for its share is cut at a line boundary and marked ``(truncated)``. With ``k`` you
    get fewer than ``k`` documents only when the index has fewer matching spans or the budget cannot hold ``k`` hits.

    ``metadata``: ``source``, ``start_line``/``end_line`` (the hit span), ``language``, ``kind``, ``symbol``,
    ``span_id``, ``parent_id``, ``breadcrumb``, ``score`` (the ranking score), ``rank``, ``confidence`` (of the query,
    see ``CodeIndex.search``), ``context_tokens`` (tokens of ``page_content``), ``truncated`` and ``context_lines``
    (``["path:start-end", ...]`` of every slice shown), and ``ranked_files``: the search's ranked distinct files,
    best first, beyond what the budget holds (``{"path", "score", "start_line", "end_line", "symbol"}`` each; the
    same list on every document of a reply).

    The plain constructor indexes what it is given (``documents``, ``texts`` or ``directory``) into Chroma: an
    embedded store at ``path``, a server at ``host``/``port``, a ready ``client``, or (with none of these) a fresh
    in-memory collection. ``embedding=None`` is lexical-only (BM25, no model); any LangChain ``Embeddings`` makes
    search hybrid. ``k`` and ``max_context_tokens`` can also be given to ``invoke`` (``invoke(q, k=None)`` fills the
    budget whatever the retriever's ``k``); LangChain's ``search_kwargs={"k": ...}`` is honoured too. An argument this retriever does not take raises
    :class:`~llmc_splitters.ConfigurationError` naming the nearest one (``embeddings`` -> ``embedding``), rather
    than being ignored.

    Paths are stored and cited relative to ``root``: by default, the common directory of the documents when their
    paths are absolute (``DirectoryLoader`` gives absolute paths; the context markers then read
    ``# httpx/_client.py:494-516``, not the machine's directory layout), and ``directory`` itself for
    ``directory=``.

    Args:
        documents: Whole-file ``Document``s (as LangChain loaders return them); the path is ``metadata["source"]``
            (or ``"file_path"``), else ``document-<i>``.
        texts: ``{path: text}`` to index.
        directory: A directory to index, selected as ``llmc-splitters index`` selects
            (:func:`llmc_splitters.ingest.walk.walk`: ``include`` minus ``exclude``, ``.gitignore`` honoured,
            notebooks and extensionless ``#!`` scripts included, binary and generated files skipped).
        include: Gitignore-style patterns for ``directory``.
        exclude: Gitignore-style patterns to skip in ``directory``.
        root: Store paths relative to this directory; ``None`` (default): the documents' common directory when
            their paths are absolute, ``directory`` for ``directory=``; ``False``: paths as given.
        embedding: A LangChain ``Embeddings`` (hybrid search) or ``None`` (BM25 only).
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
        k: Number of documents to return; ``None`` (default): as many as fit ``max_context_tokens``.
        search_kwargs: LangChain's spelling of ``{"k": ...}`` (only ``k`` is supported).
        max_context_tokens: Token budget of all returned ``page_content`` together.
        expand_context: Add parent context (``False``: the hits only).
        multi_stage: Search file/class summaries first, then the leaves inside the best ones.
        name: LangChain's retriever name.
        tags: LangChain tags for callbacks.
        metadata: LangChain metadata for callbacks.

    Raises:
        ConfigurationError: An invalid setting, an unknown argument, a document outside ``root``, or two different
            documents with the same path.

    Example:
        >>> from langchain_core.documents import Document
        >>> retriever = CodeParentRetriever.from_documents(
        ...     [Document(page_content="import os\\n\\ndef home():\\n    return os.environ['HOME']\\n",
        ...               metadata={"source": "m.py"})],
        ...     embedding=None, k=1, max_context_tokens=200)
        >>> print(retriever.invoke("home directory")[0].page_content)
        # m.py:1-1
        import os
        # m.py:3-4
        def home():
            return os.environ['HOME']
        <BLANKLINE>
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    k: int | None = Field(
        default=None, description="Number of documents to return (None: as many as fit max_context_tokens)."
    )
    max_context_tokens: int = Field(default=2048, description="Token budget of all returned page_content together.")
    expand_context: bool = Field(default=True, description="Add parent context around each hit.")
    multi_stage: bool = Field(default=False, description="Search summaries first, then leaves inside them.")
    code_retriever: Any = Field(default=None, exclude=True, description="The core CodeRetriever.")

    @checked_arguments
    def __init__(
        self,
        *,
        documents: Iterable[Document] | None = None,
        texts: Mapping[str, str] | None = None,
        directory: str | os.PathLike[str] | None = None,
        include: Sequence[str] = DEFAULT_INCLUDE,
        exclude: Sequence[str] = (),
        root: str | os.PathLike[str] | bool | None = None,
        embedding: Any = None,
        path: str | os.PathLike[str] | None = None,
        host: str | None = None,
        port: int | None = None,
        client: Any = None,
        collection_name: str | None = None,
        code_retriever: CodeRetriever | None = None,
        store: Any = None,
        max_tokens: int = 512,
        tokenizer: Any = None,
        k: int | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        max_context_tokens: int = 2048,
        expand_context: bool = True,
        multi_stage: bool = False,
        name: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Build (or wrap) the index and index what is given; see the class docstring."""
        k = resolve_top_k(k, None, search_kwargs)
        code_retriever = core_retriever(
            code_retriever, embedding=embedding, embedding_name="embedding", path=path, host=host, port=port,
            client=client, collection_name=collection_name, max_tokens=max_tokens, tokenizer=tokenizer, k=k,
            max_context_tokens=max_context_tokens, store=store,
        )
        super().__init__(
            k=k,
            max_context_tokens=max_context_tokens,
            expand_context=expand_context,
            multi_stage=multi_stage,
            code_retriever=code_retriever,
            name=name,
            tags=tags,
            metadata=metadata,
        )
        files = dict(texts or {})
        if documents is not None:
            docs = list(documents)
            paths = relative_paths([path_of(d.metadata or {}) for d in docs], root)
            found, _ = whole_files(zip(paths, (d.page_content for d in docs)), files, "document loaders")
            files.update(found)
        if files:
            code_retriever.index_texts(files)
        if directory is not None:
            index_directory(code_retriever, directory, include=include, exclude=exclude, root=root)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        embedding: Any = None,
        k: int | None = None,
        max_context_tokens: int = 2048,
        **kwargs: Any,
    ) -> CodeParentRetriever:
        """Index whole-file ``documents`` (loader output) and return a retriever over them; any constructor
        argument (``root=``, ``path=``, ``search_kwargs=``, ...) can be given too."""
        return cls(documents=documents, embedding=embedding, k=k, max_context_tokens=max_context_tokens, **kwargs)

    @classmethod
    def from_directory(
        cls,
        directory: str | os.PathLike[str],
        embedding: Any = None,
        k: int | None = None,
        max_context_tokens: int = 2048,
        **kwargs: Any,
    ) -> CodeParentRetriever:
        """Index the source files under ``directory`` (see ``include``/``exclude``/``root``) and return a
        retriever."""
        return cls(directory=directory, embedding=embedding, k=k, max_context_tokens=max_context_tokens, **kwargs)

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: Any,
        docstore: Any = None,
        *,
        path: str | os.PathLike[str] | None = None,
        namespace: str = "llmc",
        max_tokens: int = 512,
        tokenizer: Any = None,
        k: int | None = None,
        max_context_tokens: int = 2048,
        **kwargs: Any,
    ) -> CodeParentRetriever:
        """A retriever whose vectors live in any LangChain ``VectorStore`` (dense search uses the store's own
        model); spans and the lexical index live in the index directory ``path`` (temporary without it). See
        :mod:`llmc_splitters.retrieval.vectorstore`; ``docstore`` is not used since 0.2 (a warning says so).
        ``texts=``/``documents=``/``directory=`` in ``kwargs`` are indexed."""
        from ..retrieval.vectorstore import code_index

        index = code_index(vectorstore, docstore, path=path, namespace=namespace, max_tokens=max_tokens,
                           tokenizer=tokenizer)
        core = CodeRetriever(index=index, tokenizer=tokenizer, k=k, max_context_tokens=max_context_tokens)
        return cls(code_retriever=core, k=k, max_context_tokens=max_context_tokens, **kwargs)

    # ------------------------------------------------------------------ retrieval
    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = RETRIEVER_K,
        max_context_tokens: int | None = None,
    ) -> list[Document]:
        k = self.k if k is RETRIEVER_K else k  # None (given, or the retriever's): fill the budget
        budget = self.max_context_tokens if max_context_tokens is None else max_context_tokens
        if k is not None:
            check_positive("k", k)
        check_positive("max_context_tokens", budget)
        found, packed = self.code_retriever.retrieve_per_hit(
            query, k, budget, expand_context=self.expand_context, multi_stage=self.multi_stage
        )
        files = ranked_files(found)
        return [_document(hit, exp, found.confidence, files) for hit, exp in packed]


def _document(hit: Hit, exp: Expansion, confidence: float, files: list[dict[str, Any]]) -> Document:
    span = hit.span
    meta = {k: v for k, v in span.to_metadata().items() if k not in ("start_byte", "end_byte", "token_count")}
    meta.setdefault("symbol", "")
    meta.setdefault("breadcrumb", "")
    meta.update(
        score=hit.score,
        rank=hit.rank,
        confidence=confidence,
        context_tokens=exp.token_count,
        truncated=any(p.truncated for p in exp.pieces),
        context_lines=[f"{p.path}:{p.start_line}-{p.end_line}" for p in exp.pieces],
        ranked_files=files,
    )
    cite_core(meta, hit, exp)
    return Document(id=span.id, page_content=exp.context, metadata=meta)
