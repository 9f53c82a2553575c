"""The parent-context retriever: search the hierarchical index, then expand hits into a budgeted context.

:class:`CodeRetriever` is the framework-free entry point; the LangChain and LlamaIndex retrievers wrap it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ConfigurationError, checked_arguments
from ..chunking.tokens import resolve_tokenizer
from .embeddings import Embedding
from .context.expand import DEFAULT_MARKER, ZOOM_RANKS, Expansion, HitContext, Piece, Snippet, expand, render_marker
from .storage.filters import SearchFilter
from .index import DEFAULT_INCLUDE, CodeIndex, FileSummaryInput, Hit, IndexReport, SearchResult
from .search.ranking import FileRank, Ranking
from .storage.chroma_vectors import ChromaStore

__all__ = ["CodeRetriever", "Result"]

# Without k, the budget is filled from this many ranked hits; a search without k returns this many.
_FILL_CANDIDATES = 50
_SEARCH_K = 10


class _RetrieverK:
    def __repr__(self) -> str:
        return "RETRIEVER_K"


RETRIEVER_K: Any = _RetrieverK()
"""The default ``k`` of :meth:`CodeRetriever.retrieve` and :meth:`CodeRetriever.retrieve_per_hit`: the retriever's
own ``k``. An explicit ``k=None`` fills the budget whatever the retriever's ``k``."""


@dataclass(frozen=True, slots=True)
class Result:
    """The answer to one :meth:`CodeRetriever.retrieve` call.

    Attributes:
        query: The query.
        pieces: Context pieces in render order (files by best hit, file order within a file); each has a path, a
            1-based inclusive line range, its text and its kind (``hit``, ``scope``, ``header``, ``import``,
            ``skeleton``).
        context: The rendered context: each piece preceded by a ``# path:start-end`` marker.
        token_count: Tokens in ``context``; never more than ``max_context_tokens``.
        max_context_tokens: The budget it was built for.
        hits: The search hits (best first) the context was built from.
        confidence: The query's confidence in [0, 1]: the probability that the first hit is in a file that
            answers it (:attr:`~llmc_splitters.retrieval.search.hits.SearchResult.confidence` says what it is worth).
        dropped: Candidates left out for lack of budget, as ``(hit rank, kind)``.
        files: The ranked distinct files of the search (see :attr:`SearchResult.files`), beyond what the budget
            holds.
        words_in_index: Whether any word of the query occurs in the index (see
            :attr:`SearchResult.words_in_index`): ``False`` says why there are no hits, or, with
            ``dense_fallback=True``, that the hits match by meaning alone.
    """

    query: str
    pieces: tuple[Piece, ...]
    context: str
    token_count: int
    max_context_tokens: int
    hits: tuple[Hit, ...]
    confidence: float
    dropped: tuple[tuple[int, str], ...] = ()
    files: tuple[FileRank, ...] = ()
    words_in_index: bool = True


class CodeRetriever:
    """Index source code and retrieve hits expanded with their class skeleton and the imports they use.

    The index lives in the directory ``path`` (spans and BM25 postings; with an embedding, vectors in embedded
    Chroma under ``path/chroma``, or on a server at ``host``/``port``, a ready ``client`` or :class:`ChromaStore`);
    with no ``path`` it is private and temporary. ``embedding=None`` gives a lexical-only (BM25) retriever that needs
    no model and no Chroma; with an :class:`~llmc_splitters.retrieval.embeddings.Embedding` (for example
    :class:`~llmc_splitters.retrieval.embeddings.MiniLMEmbedding`) search is hybrid.

    Args:
        path: The index directory (``None``: temporary).
        host: Chroma server host for the vectors (needs ``path`` and an ``embedding``; with ``client``/``store``
            and no ``path``, the spans are temporary).
        port: Chroma server port.
        client: A ready Chroma client for the vectors.
        store: A ready :class:`ChromaStore` (or another vector store) for the vectors, or a
            :class:`~llmc_splitters.retrieval.MilvusStore` for the whole index (spans, BM25, vectors; no ``path``).
        index: A ready :class:`CodeIndex` to retrieve from.
        collection: Chroma collection name.
        embedding: Embedding model, or ``None`` for lexical only.
        chunker: Custom chunker (``chunk_tree``); default ``ASTChunker(max_tokens, tokenizer)``.
        max_tokens: Leaf size of the default chunker.
        tokenizer: Token counter spec, used for the chunker and for ``max_context_tokens``.
        k: Default number of hits to expand (``None``: as many as fit the budget, each with its context).
        max_context_tokens: Default budget of the rendered context.
        multi_stage: Default search mode (summaries first, then leaves).
        summarizer: Optional ``summarizer(FileSummaryInput) -> str`` added to file summaries.
        marker: Marker line template (``{path}``, ``{start}``, ``{end}``).
        ranking: The ranking rules (:class:`~llmc_splitters.retrieval.search.ranking.Ranking`; default: the fitted rules).

    Raises:
        ConfigurationError: A setting is invalid.

    Example:
        >>> r = CodeRetriever(path=".llmc/index", k=4, max_context_tokens=2048)      # doctest: +SKIP
        >>> r.index_directory("src")                                                  # doctest: +SKIP
        >>> result = r.retrieve("how are retries configured")                         # doctest: +SKIP
        >>> print(result.context)                                                     # doctest: +SKIP
        # client.py:1-3
        import time
        ...
    """

    @checked_arguments
    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        host: str | None = None,
        port: int | None = None,
        client: Any = None,
        store: Any = None,
        index: CodeIndex | None = None,
        collection: str = "llmc_spans",
        embedding: Embedding | None = None,
        chunker: Any = None,
        max_tokens: int = 512,
        tokenizer: Any = None,
        k: int | None = None,
        max_context_tokens: int = 2048,
        multi_stage: bool = False,
        summarizer: Callable[[FileSummaryInput], str] | None = None,
        marker: str = DEFAULT_MARKER,
        ranking: Ranking | None = None,
    ) -> None:
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
            msg = f"k must be a positive integer or None (fill the budget), got {k!r}"
            raise ConfigurationError(msg)
        if max_context_tokens <= 0:
            msg = f"max_context_tokens must be > 0, got {max_context_tokens}"
            raise ConfigurationError(msg)
        if index is not None and any(x is not None for x in (path, host, client, store, embedding, chunker)):
            msg = "index= already holds its store, embedding and chunker; do not also pass path/host/client/store/embedding/chunker"
            raise ConfigurationError(msg)
        if index is None and getattr(store, "holds_index", False):
            if any(x is not None for x in (path, host, client)):
                msg = f"store={store!r} holds the whole index: do not also pass path/host/client"
                raise ConfigurationError(msg)
            index = CodeIndex(store=store, embedding=embedding, chunker=chunker, max_tokens=max_tokens,
                              tokenizer=tokenizer, summarizer=summarizer, ranking=ranking)
        if index is None:
            remote = host is not None or client is not None or store is not None
            if remote and embedding is None and not getattr(store, "embeds_itself", False):
                msg = ("host/client/store= say where vectors go, but embedding=None keeps no vectors (a lexical index "
                       "lives in path= alone); pass an embedding, or drop host/client/store")
                raise ConfigurationError(msg)
            if host is not None and path is None:
                msg = ("a Chroma server keeps the vectors after this process ends, but the spans and the lexical index "
                       "live in a local directory: pass path=DIR too")
                raise ConfigurationError(msg)
            if store is None and (host is not None or client is not None):
                store = ChromaStore(host=host, port=port, client=client, collection=collection)
            index = CodeIndex(
                path, vectors=store, embedding=embedding, chunker=chunker, max_tokens=max_tokens, tokenizer=tokenizer,
                summarizer=summarizer, ranking=ranking,
            )
        elif ranking is not None:
            index.ranking = ranking
        self.index = index
        self.tokenizer = resolve_tokenizer(tokenizer)
        self.k = k
        self.max_context_tokens = max_context_tokens
        self.multi_stage = multi_stage
        self.marker = marker

    def __repr__(self) -> str:
        return f"CodeRetriever({self.index!r}, k={self.k}, max_context_tokens={self.max_context_tokens})"

    # ------------------------------------------------------------------------------------------------- indexing

    def index_files(
        self, paths: Iterable[str | os.PathLike[str]], *, root: str | os.PathLike[str] | None = None, workers: int = 1,
    ) -> IndexReport:
        """Index files from disk (chunking in ``workers`` processes); see :meth:`CodeIndex.index_files`."""
        return self.index.index_files(paths, root=root, workers=workers)

    def index_directory(
        self, root: str | os.PathLike[str], *, include: Sequence[str] = DEFAULT_INCLUDE, exclude: Sequence[str] = (),
        prune: bool = True, workers: int = 1,
    ) -> IndexReport:
        """Index a directory tree incrementally (chunking in ``workers`` processes); see
        :meth:`CodeIndex.index_directory`."""
        return self.index.index_directory(root, include=include, exclude=exclude, prune=prune, workers=workers)

    def index_texts(self, files: Mapping[str, str], *, prune: bool = False) -> IndexReport:
        """Index in-memory ``{path: text}``; see :meth:`CodeIndex.index_texts`."""
        return self.index.index_texts(files, prune=prune)

    def remove(self, path: str) -> None:
        """Remove one file from the index."""
        self.index.remove(path)

    # ------------------------------------------------------------------------------------------------- querying

    def search(self, query: str, k: int | None = None, *, multi_stage: bool | None = None,
               path: str | None = None, language: str | None = None, kind: str | None = None,
               filters: SearchFilter | Mapping[str, Any] | None = None, ranking: Ranking | None = None,
               dense_fallback: bool = False) -> SearchResult:
        """Ranked leaf hits with scores, a confidence and the ranked files; see :meth:`CodeIndex.search` (filters,
        ``ranking`` and ``dense_fallback`` included)."""
        k = k or self.k or _SEARCH_K
        return self.index.search(query, k, multi_stage=self.multi_stage if multi_stage is None else multi_stage,
                                 path=path, language=language, kind=kind, filters=filters, ranking=ranking,
                                 dense_fallback=dense_fallback)

    def get_symbol(self, name: str, path: str | None = None) -> list[Snippet]:
        """Exact slices of a qualified symbol, no search; see :meth:`CodeIndex.get_symbol`."""
        return self.index.get_symbol(name, path)

    def get_lines(self, path: str, start_line: int, end_line: int | None = None) -> Snippet:
        """Exact lines of an indexed file; see :meth:`CodeIndex.get_lines`."""
        return self.index.get_lines(path, start_line, end_line)

    def retrieve(
        self,
        query: str,
        k: int | None | _RetrieverK = RETRIEVER_K,
        max_context_tokens: int | None = None,
        *,
        multi_stage: bool | None = None,
        expand_context: bool = True,
        path: str | None = None,
        language: str | None = None,
        kind: str | None = None,
        filters: SearchFilter | Mapping[str, Any] | None = None,
        dense_fallback: bool = False,
    ) -> Result:
        """Search, then expand the best hits into a context of at most ``max_context_tokens`` tokens.

        With ``k``, the ``k`` best hits: each one's core first (the hit, or when it does not fit, its part that
        best matches the query), then, hit by hit in rank order, its header chain and the binding lines it uses,
        then the skeleton of its class, then its enclosing scopes whole while they fit. Without ``k`` (``k=None``,
        the default unless the retriever was given one), hits are taken in rank order, each with its header chain
        and bindings, while they fit: the budget is filled. See :mod:`llmc_splitters.retrieval.context.expand`.

        Args:
            query: The question, identifiers or code.
            k: Number of hits (default: the retriever's ``k``; ``None``: fill the budget, whatever the retriever's).
            max_context_tokens: Budget (default: the retriever's), counted with its tokenizer on the rendered
                context, markers included.
            multi_stage: Override the search mode.
            expand_context: ``False`` returns the hits only (still within the budget).
            path: Only files under this path prefix or matching this glob (inside the searches).
            language: Only spans of this language.
            kind: Only spans of this kind.
            filters: The same filters as a :class:`SearchFilter` or a dict.
            dense_fallback: When no word of the query occurs in the index, expand the nearest hits by meaning alone
                (dense search) instead of returning none (see :meth:`CodeIndex.search`).

        Returns:
            A :class:`Result`.
        """
        budget = self.max_context_tokens if max_context_tokens is None else max_context_tokens
        if budget <= 0:
            msg = f"max_context_tokens must be > 0, got {budget}"
            raise ConfigurationError(msg)
        k = self.k if k is RETRIEVER_K else k
        fill = k is None
        with self.index.snapshot():  # the hits and their context from one version of each file
            found = self.search(query, _FILL_CANDIDATES if fill else k, multi_stage=multi_stage, path=path,
                                language=language, kind=kind, filters=filters, dense_fallback=dense_fallback,
                                ranking=self.index.ranking.for_reply())
            contexts = [self.index.hit_context(h.span, h.score, query) for h in found.hits]
            exp = expand(
                contexts, budget, self.tokenizer.count, cut=self.tokenizer.cut, marker=self.marker,
                include_scopes=expand_context, include_imports=expand_context, fill=fill,
            )
        return Result(query, exp.pieces, exp.context, exp.token_count, budget, found.hits, found.confidence,
                      exp.dropped, found.files, found.words_in_index)

    def retrieve_per_hit(
        self,
        query: str,
        k: int | None | _RetrieverK = RETRIEVER_K,
        max_context_tokens: int | None = None,
        *,
        expand_context: bool = True,
        multi_stage: bool | None = None,
        filters: SearchFilter | Mapping[str, Any] | None = None,
    ) -> tuple[SearchResult, list[tuple[Hit, Expansion]]]:
        """Search, then give each hit its own expansion, all of them together within ``max_context_tokens``.

        What the framework faces return: one document per hit, in rank order; imports, headers and skeletons
        already shown for an earlier hit are not repeated. With ``k``, the ``k`` best hits: before hit ``i`` gets
        context, the hits after it are reserved room for their own text (at most an equal share of the budget
        each), so ``k`` hits come back whenever ``k`` bare hits fit. Without ``k`` (``k=None``, or the default when
        the retriever has no ``k``) the budget is filled as :meth:`retrieve` fills it: hits in rank order, each
        with its header chain and bindings (or alone) while they fit, then, hit by hit, their skeletons and whole
        scopes in what is left.

        Returns:
            The search result and, per hit that got room, ``(hit, expansion)``.
        """
        budget = self.max_context_tokens if max_context_tokens is None else max_context_tokens
        if budget <= 0:
            msg = f"max_context_tokens must be > 0, got {budget}"
            raise ConfigurationError(msg)
        k = self.k if k is RETRIEVER_K else k
        with self.index.snapshot():  # the hits and their context from one version of each file
            if k is None:
                return self._fill_per_hit(query, budget, expand_context=expand_context, multi_stage=multi_stage,
                                          filters=filters)
            return self._per_hit(query, k, budget, expand_context=expand_context, multi_stage=multi_stage,
                                 filters=filters)

    def _fill_per_hit(self, query: str, budget: int, *, expand_context: bool, multi_stage: bool | None,
                      filters: SearchFilter | Mapping[str, Any] | None
                      ) -> tuple[SearchResult, list[tuple[Hit, Expansion]]]:
        found = self.search(query, _FILL_CANDIDATES, multi_stage=multi_stage, filters=filters,
                            ranking=self.index.ranking.for_reply())

        def grow(ctx: HitContext, room: int, essentials_only: bool) -> Expansion:
            return expand([ctx], room, self.tokenizer.count, cut=self.tokenizer.cut, marker=self.marker,
                          include_scopes=expand_context, include_imports=expand_context, fill=True,
                          essentials_only=essentials_only)

        # 1. Which hits get in: best first, each with its header chain and bindings (or alone) in what is left.
        #    As in retrieve's fill, only the best hits are zoomed into and only the best one may be cut.
        taken: list[tuple[Hit, HitContext, Expansion]] = []
        shown: list[tuple[str | None, int, int]] = []
        skeletons: set[tuple[str | None, int, int]] = set()
        used = 0
        for i, hit in enumerate(found.hits):
            if used >= budget:
                break
            if _inside(hit.span.path, hit.span.start_line, hit.span.end_line, shown):
                continue  # shown whole already, as another hit's context (a notebook cell next to it)
            ctx = self.index.hit_context(hit.span, hit.score, query)
            if i >= ZOOM_RANKS:
                ctx = replace(ctx, zoom=None)
            exp = grow(_unseen(ctx, shown, skeletons), budget - used, True)
            if not exp.pieces or (i > 0 and any(p.truncated for p in exp.pieces)):
                continue
            used += exp.token_count
            _note_shown(exp, shown, skeletons)
            taken.append((hit, ctx, exp))
        # 2. What is left, hit by hit in rank order: skeletons and whole scopes. Each hit keeps at least the room it
        #    had in step 1, so the total stays within the budget.
        spare = budget - used
        shown, skeletons = [], set()
        out: list[tuple[Hit, Expansion]] = []
        for hit, ctx, first in taken:
            exp = grow(_unseen(ctx, shown, skeletons), first.token_count + spare, False)
            if not exp.pieces:
                exp = first
            spare -= exp.token_count - first.token_count
            _note_shown(exp, shown, skeletons)
            out.append((hit, exp))
        return found, out

    def _per_hit(self, query: str, k: int, budget: int, *, expand_context: bool, multi_stage: bool | None,
                 filters: SearchFilter | Mapping[str, Any] | None) -> tuple[SearchResult, list[tuple[Hit, Expansion]]]:
        found = self.search(query, k, multi_stage=multi_stage, filters=filters,
                            ranking=self.index.ranking.for_reply())
        hits = list(found.hits)
        count = self.tokenizer.count
        bare = [
            count(render_marker(self.marker, h.span.path, h.span.start_line, h.span.end_line) + "\n" + h.span.text)
            for h in hits
        ]
        share = budget // max(1, len(hits))
        used = 0
        shown: list[tuple[str | None, int, int]] = []
        skeletons: set[tuple[str | None, int, int]] = set()
        out: list[tuple[Hit, Expansion]] = []
        for i, hit in enumerate(hits):
            room = budget - used - sum(min(b, share) for b in bare[i + 1 :])
            if room <= 0:
                continue
            ctx = _unseen(self.index.hit_context(hit.span, hit.score, query), shown, skeletons)
            exp = expand(
                [ctx], room, count, cut=self.tokenizer.cut, marker=self.marker,
                include_scopes=expand_context, include_imports=expand_context,
            )
            if not exp.pieces:
                continue
            used += exp.token_count
            _note_shown(exp, shown, skeletons)
            out.append((hit, exp))
        return found, out


def _note_shown(exp: Expansion, shown: list[tuple[str | None, int, int]], skeletons: set[Any]) -> None:
    """Record what ``exp`` shows, so that a later hit's expansion leaves it out (see :func:`_unseen`)."""
    for p in exp.pieces:
        if p.kind == "skeleton":
            skeletons.add((p.path, p.start_line, p.end_line))
        else:
            shown.append((p.path, p.start_line, p.end_line))


def _inside(path: str | None, start: int, end: int, shown: list[tuple[str | None, int, int]]) -> bool:
    return any(p == path and a <= start and end <= b for p, a, b in shown)


def _unseen(ctx: HitContext, shown: list[tuple[str | None, int, int]], skeletons: set[Any]) -> HitContext:
    """``ctx`` without the imports, headers, neighbouring cells and skeletons an earlier hit already shows."""
    imports = tuple(s for s in ctx.imports if not _inside(s.path, s.start_line, s.end_line, shown))
    cells = tuple(s for s in ctx.neighbours if not _inside(s.path, s.start_line, s.end_line, shown))
    scopes = []
    for sc in ctx.scopes:
        snip = sc.snippet
        if sc.header is not None and _inside(sc.header.path, sc.header.start_line, sc.header.end_line, shown):
            sc = replace(sc, header=None)
        if sc.skeleton and (snip.path, snip.start_line, snip.end_line) in skeletons:
            sc = replace(sc, skeleton=None)
        scopes.append(sc)
    return replace(ctx, imports=imports, scopes=tuple(scopes), neighbours=cells)
