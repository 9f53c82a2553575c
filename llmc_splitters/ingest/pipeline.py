"""Engine-free ingestion pipeline: a plan carried out on this machine, and the pieces it shares with Ray.

A run is planned first (:class:`~llmc_splitters.ingest.manifest.ManifestState`), then

1. **chunk**: :func:`~llmc_splitters.ingest.read_chunk_batch` in a ``spawn`` process pool (or in this process):
   each file read by blob SHA, chunked and laid out by the serial index's own
   :func:`~llmc_splitters.retrieval.storage.file_rows.build_file`, as plain rows;
2. **write**: this process is the one writer of the index directory (:mod:`llmc_splitters.ingest.writer`): it makes
   the embedded views, embeds what the span store's vector cache does not hold, and writes each group of files in
   one span-store transaction, then the lexical index and the vectors (the sink);
3. **delete**: files the plan deletes leave the index and the vector store;
4. **commit**: the planned manifest becomes the baseline.

:func:`llmc_splitters.ingest.ray.run_ray` runs the same plan on Ray Data: chunking as tasks, :class:`EmbedStage` as
an actor pool, :class:`WriteStage` writing the vectors from the workers, and the same writer on the driver.

A run killed at any point is completed by the next one: the span store holds every file whole (old or new version),
its outbox replays what the lexical index and the vector store missed, and the manifest is committed last (the
paths a dead run touched are re-processed, see :class:`~llmc_splitters.ingest.manifest.ManifestState`). Ids are
deterministic, so redoing a file that the dead run finished rewrites the same rows.

What a run writes is an ordinary index: ``CodeRetriever(path=DIR, ...)`` and ``CodeIndex(DIR, ...)`` search it, and
their ``index_files``/``index_directory`` count the ingested files as unchanged (same content hash, same settings).

Example:
    >>> from llmc_splitters.ingest.manifest import ManifestState, git_manifest              # doctest: +SKIP
    >>> s = IngestSettings(max_tokens=512)                                                 # doctest: +SKIP
    >>> state = ManifestState(".llmc/state")                                               # doctest: +SKIP
    >>> plan = state.plan(git_manifest("."), fingerprint=settings_fingerprint(s))          # doctest: +SKIP
    >>> print(run_local(plan, index=".llmc/index", roots=".", settings=s, state=state))   # doctest: +SKIP
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from .manifest import ManifestEntry, ManifestState, Plan
from .rows import IngestSettings, _chunker, display_path, read_chunk_batch, settings_fingerprint
from .sinks import ChromaSink, LangChainSink
from .stages import EmbedStage, WriteStage, embedding_name
from .summary import IngestSummary, ProgressFn, log_progress
from .writer import IndexWriter

if TYPE_CHECKING:
    import os

    from ..retrieval.index import CodeIndex

__all__ = [
    "ChromaSink",
    "EmbedStage",
    "IngestSummary",
    "LangChainSink",
    "WriteStage",
    "embedding_name",
    "plan_items",
    "run_local",
]


# ----------------------------------------------------------------------------------------------- shared checks


def check_index(index: Any, engine: str) -> Any:
    """The index directory a run writes (or the store that holds the whole index: a
    :class:`~llmc_splitters.retrieval.MilvusStore`), or a :class:`ConfigurationError` that says to give one."""
    if index is None:
        msg = (f"{engine}() writes the spans and the lexical index into an index directory since llmc-splitters 0.2 "
               f"(the sink holds vectors only): pass index=DIR, then search it with CodeRetriever(path=DIR, ...)")
        raise ConfigurationError(msg)
    if getattr(index, "holds_index", False):
        return index
    if not isinstance(index, (str, Path)) and not hasattr(index, "__fspath__"):
        msg = f"index must be the index directory (str or PathLike), got {type(index).__name__}"
        raise ConfigurationError(msg)
    return Path(index)


def check_sink(sink: Any, embedding_factory: Callable[[], Any] | None) -> None:
    """Refuse a sink and an embedding that do not go together."""
    if sink is None:
        return
    if embedding_factory is not None and sink.embeds_itself:
        msg = (
            f"{type(sink).__name__}'s vector store embeds what it stores with its own model; drop "
            "embedding_factory (give the model to the vector store your factory builds)"
        )
        raise ConfigurationError(msg)
    if embedding_factory is None and not sink.embeds_itself:
        msg = (f"{type(sink).__name__} holds vectors, and without embedding_factory there are none: pass "
               "embedding_factory=..., or drop the sink for a lexical-only index (everything in index=DIR)")
        raise ConfigurationError(msg)


def check_plan(plan: Plan, settings: IngestSettings) -> None:
    """Refuse a plan made for other settings (and give a plan without a fingerprint these settings')."""
    fp = settings_fingerprint(settings)
    if plan.fingerprint and plan.fingerprint != fp:
        msg = (
            f"the plan was made for settings {plan.fingerprint}, but these settings are {fp}; "
            "plan again with fingerprint=settings_fingerprint(settings)"
        )
        raise ConfigurationError(msg)
    if not plan.fingerprint:
        plan.fingerprint = fp


def plan_items(plan: Plan, roots: Mapping[str, str] | str) -> list[dict[str, Any]]:
    """The files to chunk as rows for :func:`~llmc_splitters.ingest.read_chunk_batch`.

    Args:
        plan: The plan.
        roots: The local checkout of each repository (``{repository: dir}``), or one directory for all.
    """
    out = []
    for e in plan.to_chunk:
        root = roots if isinstance(roots, str) else roots.get(e.repository)
        if root is None:
            msg = f"no local checkout given for repository {e.repository!r}; pass roots={{{e.repository!r}: dir}}"
            raise ConfigurationError(msg)
        out.append({"root": str(root), "repository": e.repository, "path": e.path, "blob_sha": e.blob_sha,
                    "size": e.size})
    return out


def deleted_paths(plan: Plan) -> list[str]:
    """The stored paths of the files a plan deletes."""
    return [display_path(e.repository, e.path) for e in plan.deleted]


def open_index(directory: Path, settings: IngestSettings, vectors: Any, embedding: Any) -> CodeIndex:
    """The index a run writes: ``directory``, with the chunker of ``settings`` (whose fingerprint the markers of
    ingested files record) and the run's vector store and embedding (``None``: lexical only)."""
    from ..retrieval.index import CodeIndex

    if getattr(directory, "holds_index", False):  # a MilvusStore: spans, BM25 and vectors in Milvus
        return CodeIndex(store=directory, embedding=embedding, chunker=_chunker(settings))
    return CodeIndex(directory, vectors=vectors if embedding is not None else None, embedding=embedding,
                     chunker=_chunker(settings))


def commit(plan: Plan, state: ManifestState | None, summary: IngestSummary, progress: ProgressFn | None) -> None:
    """Commit the manifest (failed files stay out of it: they are retried) and report the end."""
    if state is not None:
        state.commit(plan, failed=[(str(r), str(p)) for r, p, *_ in summary.failed])
    if progress:
        progress("done", summary)


# --------------------------------------------------------------------------------------------------- run_local


def write_all(writer: IndexWriter, batches: Iterable[Mapping[str, Any]], plan: Plan, state: ManifestState | None,
              summary: IngestSummary, progress: ProgressFn | None, t0: float) -> IngestSummary:
    """The end of a run, local or Ray: feed every batch to the one writer, delete the files the plan removes, close
    the writer (whatever happens), then commit the manifest; ``summary`` gets the times (``t0``: the run's start)."""
    try:
        for batch in batches:
            writer.feed(batch)
        writer.finish()
        summary.seconds["chunk+embed+write"] = time.perf_counter() - t0
        t = time.perf_counter()
        writer.remove(deleted_paths(plan))
        summary.seconds["delete"] = time.perf_counter() - t
    finally:
        writer.close()
    if progress:
        progress("delete", summary)
    commit(plan, state, summary, progress)
    summary.seconds["total"] = time.perf_counter() - t0
    return summary


def _batches(items: Sequence[Mapping[str, Any]], size: int) -> Iterator[dict[str, list[Any]]]:
    for i in range(0, len(items), size):
        part = items[i : i + size]
        yield {k: [it[k] for it in part] for k in ("root", "repository", "path", "blob_sha")}


def _chunked(items: Sequence[Mapping[str, Any]], settings: IngestSettings, *, workers: int, files_per_batch: int,
             source: str) -> Iterator[dict[str, list[Any]]]:
    """Chunk batches in this process (``workers == 0``) or a ``spawn`` pool, a bounded number in flight."""
    if workers == 0:
        for part in _batches(items, files_per_batch):
            yield read_chunk_batch(part, settings, source=source)
        return
    # spawn, not fork: the parent may hold threads (Chroma's client, torch) that a fork would copy mid-lock.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: list[Future[dict[str, list[Any]]]] = []
        for part in _batches(items, files_per_batch):
            pending.append(pool.submit(read_chunk_batch, part, settings, source=source))
            # Keep a bounded number of batches in flight: memory follows the batch size, not the tree.
            while len(pending) > 2 * workers:
                yield pending.pop(0).result()
        for f in pending:
            yield f.result()


def run_local(
    plan: Plan,
    sink: Any = None,
    *,
    index: str | os.PathLike[str] | Any = None,
    roots: Mapping[str, str] | str,
    settings: IngestSettings | None = None,
    embedding_factory: Callable[[], Any] | None = None,
    state: ManifestState | None = None,
    workers: int = 2,
    files_per_batch: int = 16,
    source: str = "git",
    embed_batch_size: int | None = None,
    progress: ProgressFn | None = log_progress,
) -> IngestSummary:
    """Carry out a plan on this machine: chunk in a process pool; embed and write the index here.

    Args:
        plan: From :meth:`~llmc_splitters.ingest.manifest.ManifestState.plan` (its fingerprint must match ``settings``).
        sink: Where vectors go: ``None`` (lexical only; or, with ``embedding_factory``, embedded Chroma in
            ``index/chroma``, where ``CodeRetriever(path=index, embedding=...)`` looks), a :class:`ChromaSink`
            (server or embedded directory) or a :class:`LangChainSink`.
        index: The index directory (spans, markers, the lexical index, the vector cache); created when missing. Or a
            :class:`~llmc_splitters.retrieval.MilvusStore`: the whole index in Milvus (the vectors too, computed
            here by ``embedding_factory``'s model; no sink).
        roots: Local checkout per repository (or one directory).
        settings: Chunking settings.
        embedding_factory: Builds the embedding model (``None``: lexical only, or the vector store's own model for
            a :class:`LangChainSink`).
        state: Commit the manifest here when the run succeeded.
        workers: Chunking processes (``0``: chunk in this process).
        files_per_batch: Files per chunking task.
        source: ``"git"`` (read blobs by SHA) or ``"worktree"`` (read files, check their SHA).
        embed_batch_size: No longer used (the writer embeds as ``CodeIndex`` does); giving it raises.
        progress: Called as ``progress(stage, summary)`` after planning, after each group of files written, after
            deletions and at the end (default: log lines).

    Returns:
        The :class:`IngestSummary`.

    Raises:
        ConfigurationError: No ``index``; the plan was made for other settings; an ``embedding_factory`` is given
            for a sink whose vector store embeds by itself, or a Chroma sink is given without one; the index holds
            another model's vectors; ``embed_batch_size`` is given.
    """
    directory = check_index(index, "run_local")
    if embed_batch_size is not None:
        msg = ("run_local(embed_batch_size=...) is not used since llmc-splitters 0.2: the writer embeds as CodeIndex "
               "does (64 texts per call, vectors cached in the index); drop it")
        raise ConfigurationError(msg)
    settings = settings or IngestSettings()
    check_plan(plan, settings)
    check_sink(sink, embedding_factory)
    summary = IngestSummary.for_plan(plan, "local")
    if progress:
        progress("plan", summary)
    t0 = time.perf_counter()
    items = plan_items(plan, roots)
    model = embedding_factory() if embedding_factory is not None else None
    if sink is None and model is not None and not getattr(directory, "holds_index", False):
        sink = ChromaSink(path=str(directory / "chroma"))  # where CodeIndex(path=DIR) keeps its embedded vectors
    vectors = sink.vectors() if sink is not None else None
    embedding = vectors.embedding if sink is not None and sink.embeds_itself else model
    writer = IndexWriter(lambda _: open_index(directory, settings, vectors, embedding),
                         embedding=embedding_name(embedding), recorded=None, summary=summary, progress=progress,
                         view_here=True)
    batches = _chunked(items, settings, workers=workers, files_per_batch=files_per_batch, source=source)
    return write_all(writer, batches, plan, state, summary, progress, t0)


def entries_from_items(items: Iterable[Mapping[str, Any]]) -> list[ManifestEntry]:
    """Manifest entries back from :func:`plan_items` rows (for tests and tools)."""
    return [ManifestEntry(str(i["repository"]), str(i["path"]), str(i["blob_sha"]), int(i.get("size", -1)))
            for i in items]
