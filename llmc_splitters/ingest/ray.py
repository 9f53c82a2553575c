"""Distributed ingestion on Ray Data: manifest -> read + chunk (tasks) -> embed (actor pool) -> vectors written from
the workers -> the index written by the driver.

Install with ``pip install 'llmc-splitters[ray]'``; Ray is imported only when :func:`run_ray` runs.

The pipeline is one streaming Ray Data job over the planned files (:class:`~llmc_splitters.ingest.manifest.Plan`):

1. ``map_batches(read_chunk_batch)`` as tasks, ``files_per_batch`` files each: read the blobs (from git's object
   store by SHA, or the work tree), chunk them and lay them out for the index (the same function a process pool
   or Spark runs), with their lexical terms;
2. with an embedding model, ``map_batches(EmbedStage)`` as an actor pool of ``embed_concurrency`` actors (each loads
   the model once; ``embed_num_gpus`` per actor for GPUs). A text embedded before is not embedded again: the
   actors look its vector up in the vector store by its cache key (``embed_hash``, in every record's metadata);
3. with a vector sink, ``map_batches(WriteStage)``: each worker opens its own client (a Chroma ``HttpClient``, in
   tasks; or a LangChain ``VectorStore`` built by a picklable factory, in an actor pool, since that store embeds)
   and upserts the vectors of ``write_batch_size`` rows at a time;
4. the driver streams the rows (``iter_batches``) and is the one writer of the index directory
   (:mod:`llmc_splitters.ingest.writer`): a group of complete files per span-store transaction, then the lexical
   index, the stale vector ids, and the vector cache (so a later serial run never embeds these texts again). It
   holds a group and the files in flight, never the run. Then the files the plan deletes are removed, and the
   manifest is committed.

Into a Milvus server (``index=MilvusStore("http://host:19530")``) the whole index is in Milvus, and the workers
write it: the embed actors look cached vectors up in the collection's vector cache, and write tasks
(:mod:`~llmc_splitters.ingest.milvus_rows`, each worker with its own client) upsert every span row with its code
terms and vector, and the vectors computed now into the cache. The driver creates the collection before the
workers start (asking the model for its dimension once, in a task, when the collection is new), then writes only
what must follow the rows: a replaced version's rows deleted and each file's marker, deleted files removed, then
the manifest. Into a Milvus Lite file (one process) the driver is the one writer, lexical only.

Why the embed actors ask the vector store for cached vectors rather than the driver's span store: the actors may
run on other machines, and the vector store (a Chroma server) is the one store they all reach; the driver only sees
rows after they were embedded, so it could not filter what to embed without holding a second copy of the cache in
every actor.

Ids are deterministic, so re-running is a no-op and a run killed at any point is completed by running it again:
the span store holds each file whole, its outbox replays what the lexical index and the vector store missed, and
the manifest's pending list makes the next plan redo the dead run's files. A driver killed after the workers
upserted some vectors and before it wrote their files leaves vectors of ids that the index does not hold yet:
searches ignore them, and the next run writes the same ids (same planned blobs); likewise in Milvus, rows the
workers wrote for files whose marker the dead driver never wrote are rewritten (or, for a file gone since, deleted)
by the next run, which redoes the dead run's files. Chroma's embedded
``PersistentClient`` is not safe across processes; use a server (``chroma run``) with
:class:`~llmc_splitters.ingest.pipeline.ChromaSink` ``(host=...)``.

Example:
    >>> import ray                                                                        # doctest: +SKIP
    >>> ray.init(num_cpus=8)                                                              # doctest: +SKIP
    >>> s = IngestSettings(max_tokens=512)                                                # doctest: +SKIP
    >>> state = ManifestState(".llmc/state")                                              # doctest: +SKIP
    >>> plan = state.plan(filter_manifest(git_manifest(".")), fingerprint=settings_fingerprint(s))  # doctest: +SKIP
    >>> summary = run_ray(plan, ChromaSink(host="chroma.internal"), index=".llmc/index",  # doctest: +SKIP
    ...                   roots=".", settings=s, embedding_factory=MiniLMEmbedding, state=state, embed_concurrency=4)
    >>> print(summary)                                                                    # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, missing_dependency
from .manifest import ManifestState, Plan
from .milvus_rows import MilvusTarget, write_rows
from .pipeline import check_index, check_plan, check_sink, open_index, plan_items, write_all
from .rows import INT_COLUMNS, IngestSettings, read_chunk_batch
from .stages import EmbedStage, WriteStage
from .summary import IngestSummary, ProgressFn, log_progress
from .writer import IndexWriter, WorkerModel, WrittenByWorkers, recorded_embedding

if TYPE_CHECKING:
    import os

__all__ = ["run_ray"]

_INTS = INT_COLUMNS | {"embedded"}


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401 - needs the [data] extra (pyarrow, pandas)
    except ImportError as exc:
        raise missing_dependency("ray", "ray") from exc
    return ray


def _columns(fn: Callable[..., Mapping[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Wrap a stage so its list columns become numpy arrays (what Ray blocks are built from)."""

    def call(batch: Mapping[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        import numpy as np

        out = fn(batch, *args, **kwargs)
        return {k: v if isinstance(v, np.ndarray) else np.asarray(v, dtype=np.int64 if k in _INTS else object)
                for k, v in out.items()}

    return call


def _read_chunk(batch: Mapping[str, Any], settings: IngestSettings, source: str) -> dict[str, Any]:
    return _columns(read_chunk_batch)(batch, settings, source=source)


class _Embed(EmbedStage):
    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        return _columns(super().__call__)(batch)


class _Write(WriteStage):
    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        return _columns(super().__call__)(batch)


_writers: dict[Any, WriteStage] = {}


def _write_task(batch: Mapping[str, Any], sink: Any) -> dict[str, Any]:
    """The write stage as a task: a pooled worker process keeps its store connection from task to task."""
    stage = _writers.get(sink)
    if stage is None:
        stage = _writers[sink] = WriteStage(sink)
    return _columns(stage)(batch)


def _milvus_write_task(batch: Mapping[str, Any], target: MilvusTarget) -> dict[str, Any]:
    """The Milvus write stage as a task: a pooled worker process keeps its client from task to task."""
    return _columns(write_rows)(batch, target)


def _identity(embedding_factory: Callable[[], Any]) -> tuple[str, int | None, int | None]:
    """``(name, dimension, input limit)`` of the model ``embedding_factory`` builds (in a Ray task)."""
    from ..retrieval.embeddings import identity_of
    from .stages import embedding_name

    model = embedding_factory()
    ident = identity_of(model, probe=True)
    return embedding_name(model), ident.dimension, ident.max_input_tokens


def _pool(concurrency: int | tuple[int, int]) -> Any:
    ray = _ray()
    if isinstance(concurrency, tuple):
        return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    return ray.data.ActorPoolStrategy(size=int(concurrency))


def _max(concurrency: int | tuple[int, int]) -> int:
    return int(concurrency[1] if isinstance(concurrency, tuple) else concurrency)


def run_ray(
    plan: Plan,
    sink: Any = None,
    *,
    index: str | os.PathLike[str] | Any = None,
    roots: Mapping[str, str] | str,
    settings: IngestSettings | None = None,
    embedding_factory: Callable[[], Any] | None = None,
    state: ManifestState | None = None,
    source: str = "git",
    files_per_batch: int = 16,
    chunk_num_cpus: float = 1.0,
    chunk_memory: int = 512 * 1024 * 1024,
    embed_concurrency: int | tuple[int, int] = 1,
    embed_num_cpus: float = 1.0,
    embed_num_gpus: float = 0.0,
    embed_batch_size: int = 256,
    embed_model_batch: int = 64,
    write_concurrency: int | tuple[int, int] = 2,
    write_num_cpus: float = 0.25,
    write_batch_size: int = 1000,
    progress: ProgressFn | None = log_progress,
) -> IngestSummary:
    """Carry out a plan on a Ray cluster (``ray.init`` first, or Ray starts a local one).

    Args:
        plan: From :meth:`~llmc_splitters.ingest.manifest.ManifestState.plan`.
        sink: Where vectors go, written by the workers: :class:`~llmc_splitters.ingest.pipeline.ChromaSink` with
            ``host=`` (a server), or :class:`~llmc_splitters.ingest.pipeline.LangChainSink`; ``None`` for a
            lexical-only index.
        index: The index directory, written by this process (the driver); created when missing. Search the
            result with ``CodeRetriever(path=index, host=..., embedding=...)``. Or a
            :class:`~llmc_splitters.retrieval.MilvusStore` (no ``sink``): a server's collection is written by the
            workers (span rows and, with ``embedding_factory``, their vectors; the driver writes the markers and
            deletes), a Lite file by the driver's one writer, lexical only. Search it with
            ``CodeRetriever(store=MilvusStore(...), embedding=...)``.
        roots: Checkout directory per repository (or one for all), readable by every worker (shared disk; with
            ``source="git"`` only the ``.git`` object store is read).
        settings: Chunking settings (the plan's fingerprint must match).
        embedding_factory: Picklable no-argument callable building the embedding model inside each embed actor
            (``MiniLMEmbedding``, ``functools.partial(...)``); needs a Chroma sink or a Milvus server ``index``.
            ``None``: lexical only, or the vector store of a :class:`~llmc_splitters.ingest.pipeline.LangChainSink`
            embeds.
        state: Commit the manifest here when the run succeeded.
        source: ``"git"`` or ``"worktree"`` (see :func:`~llmc_splitters.ingest.read_chunk_batch`).
        files_per_batch: Files per chunking task.
        chunk_num_cpus: CPUs per chunking task.
        chunk_memory: Bytes of memory Ray reserves per chunking task (``files_per_batch`` files, their parse trees
            and spans; files over ``settings.max_file_bytes`` are not parsed).
        embed_concurrency: Embed actors (``n`` or an autoscaling ``(min, max)``).
        embed_num_cpus: CPUs per embed actor (fractions let small clusters run every stage at once).
        embed_num_gpus: GPUs per embed actor.
        embed_batch_size: Rows per embed call.
        embed_model_batch: Texts per model call inside an actor.
        write_concurrency: Concurrent writers: tasks for a Chroma or a Milvus server (a client is cheap to open;
            each pooled worker keeps its own), actors for a :class:`~llmc_splitters.ingest.pipeline.LangChainSink` (its
            vector store embeds, so its model loads once per actor).
        write_num_cpus: CPUs per vector writer.
        write_batch_size: Rows per write call (the store splits it further to its maximum batch).
        progress: ``progress(stage, summary)`` after planning, after each group of files written (running totals),
            after deletions and at the end; default: log lines.

    Returns:
        The :class:`~llmc_splitters.ingest.pipeline.IngestSummary`.

    Raises:
        MissingDependencyError: Ray is not installed (``pip install 'llmc-splitters[ray]'``).
        ConfigurationError: No ``index``; the sink is not safe across processes, or missing for an embedding
            model; the plan was made for other settings; an ``embedding_factory`` is given for a sink whose vector
            store embeds by itself; the index holds another model's vectors (or none: a lexical index); a sink is
            given with a Milvus index, an ``embedding_factory`` with a Milvus Lite file, or none with a Milvus
            server collection that holds vectors.
        MilvusStoreError: (raised in a worker, so wrapped by Ray) the server cannot be reached, or its collection
            holds another model's vectors than the embed actors compute.
    """
    ray = _ray()
    directory = check_index(index, "run_ray")
    milvus = bool(getattr(directory, "holds_index", False))
    if milvus and sink is not None:
        msg = (f"run_ray(index={directory!r}): the Milvus collection holds the vectors too; drop the sink (pass "
               "embedding_factory=... for vectors)")
        raise ConfigurationError(msg)
    if milvus and directory.lite and embedding_factory is not None:
        msg = (f"run_ray(index={directory!r}) writes a Milvus Lite file through the driver's one writer (Lite is one "
               "process), lexical only; for vectors computed by Ray actors use a Milvus server "
               "(MilvusStore('http://host:19530')), or run_local(index=MilvusStore(...), embedding_factory=...), "
               "which embeds in this process")
        raise ConfigurationError(msg)
    # A server: the workers write the span rows (and vectors) themselves.
    target = MilvusTarget.of(directory) if milvus and not directory.lite else None
    if sink is None and embedding_factory is not None and target is None:
        msg = ("run_ray(embedding_factory=...) needs a vector sink the workers can all write: "
               "ChromaSink(host=...) (a `chroma run` server) or a LangChainSink; or drop embedding_factory for a "
               "lexical-only index")
        raise ConfigurationError(msg)
    if sink is not None and not sink.process_safe:
        msg = (
            f"{sink!r} cannot be written by several processes (an embedded Chroma directory); run a Chroma server "
            "(`chroma run --path DIR`) and use ChromaSink(host=...), or use run_local()"
        )
        raise ConfigurationError(msg)
    settings = settings or IngestSettings()
    check_plan(plan, settings)
    check_sink(sink, embedding_factory)
    recorded = recorded_embedding(directory)
    if (sink is not None or embedding_factory is not None) and recorded == "none":
        msg = (f"the index at {directory} is lexical-only (built without an embedding); a run with vectors needs "
               "another index directory (or collection), or this one reset")
        raise ConfigurationError(msg)
    if target is not None and embedding_factory is None and recorded not in (None, "none"):
        msg = (f"the Milvus collection at {directory} holds vectors from {recorded!r}: pass embedding_factory=... "
               "building that model (the workers write every row with its vector), or use another collection")
        raise ConfigurationError(msg)
    summary = IngestSummary.for_plan(plan, "ray")
    if progress:
        progress("plan", summary)
    t0 = time.perf_counter()
    items = plan_items(plan, roots)
    # The driver's side of the vector store: deletes of stale ids and outbox replays; the workers write the rest.
    vectors = WrittenByWorkers(sink.vectors()) if sink is not None else None
    store_model = vectors.store.embedding if sink is not None and sink.embeds_itself else None
    # Only the embed actors know a model's name; a vector store that embeds names its own; a Milvus collection the
    # workers write into must exist before they start: its model is asked for its identity once, in a task.
    known = store_model.name if store_model is not None else (
        "none" if embedding_factory is None and sink is None else None)
    identity: tuple[str | None, int | None, int | None] = (None, None, None)
    if target is not None and embedding_factory is not None:
        if recorded is not None:
            identity = (recorded, directory.recorded()["dimension"], None)
        elif items:
            identity = ray.get(ray.remote(num_cpus=embed_num_cpus, num_gpus=embed_num_gpus or None)(
                _identity).remote(embedding_factory))
            known = identity[0]

    def open_for(name: str) -> Any:
        model = store_model or (WorkerModel(name, *identity[1:]) if vectors is not None or identity[0] else None)
        idx = open_index(directory, settings, vectors, model)
        if target is not None:
            idx.span_store.rows_from_workers = True
        return idx

    writer = IndexWriter(open_for, embedding=known, recorded=recorded, summary=summary, progress=progress)

    def batches() -> Iterator[Any]:
        if not items:
            return
        blocks = max(1, math.ceil(len(items) / files_per_batch))
        ds = ray.data.from_items(items, override_num_blocks=blocks)
        ds = ds.map_batches(
            _read_chunk, fn_kwargs={"settings": settings, "source": source}, batch_size=files_per_batch,
            # The memory reservation also keeps Ray from fusing chunking into the embed actors (it fuses stages
            # with equal resource requests), where it would run serially with the model instead of as tasks.
            num_cpus=chunk_num_cpus, memory=chunk_memory,
        )
        if embedding_factory is not None:
            ds = ds.map_batches(
                _Embed,
                fn_constructor_kwargs={"embedding_factory": embedding_factory, "sink": target or sink,
                                       "batch_size": embed_model_batch},
                batch_size=embed_batch_size, compute=_pool(embed_concurrency), num_cpus=embed_num_cpus,
                num_gpus=embed_num_gpus or None,
            )
        if target is not None:
            # Each task writes its batch's span rows (and vectors) into the server; the rows go on to the driver.
            ds = ds.map_batches(_milvus_write_task, fn_kwargs={"target": target}, batch_size=write_batch_size,
                                compute=ray.data.TaskPoolStrategy(size=_max(write_concurrency)),
                                num_cpus=write_num_cpus)
        elif sink is not None and sink.embeds_itself:
            # The vector store embeds what it stores: one actor per writer, so its model loads once.
            ds = ds.map_batches(_Write, fn_constructor_kwargs={"sink": sink}, batch_size=write_batch_size,
                                compute=_pool(write_concurrency), num_cpus=write_num_cpus)
        elif sink is not None:
            # A store client is cheap: plain tasks (pooled workers, no actor start-up per run).
            ds = ds.map_batches(_write_task, fn_kwargs={"sink": sink}, batch_size=write_batch_size,
                                compute=ray.data.TaskPoolStrategy(size=_max(write_concurrency)),
                                num_cpus=write_num_cpus)
        yield from ds.iter_batches(batch_size=None, batch_format="numpy")

    return write_all(writer, batches(), plan, state, summary, progress, t0)
