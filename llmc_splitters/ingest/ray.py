"""Distributed ingestion on Ray Data: manifest -> read + chunk -> embed (actor pool) -> write from the workers.

Install with ``pip install 'llmc-splitters[ray]'``; Ray is imported only when :func:`run_ray` runs.

The pipeline is one streaming Ray Data job over the planned files (:class:`~llmc_splitters.ingest.manifest.Plan`):

1. ``map_batches(read_chunk_batch)`` as tasks, ``files_per_batch`` files each: read the blobs (from git's object
   store by SHA, or the work tree) and chunk them (:mod:`llmc_splitters.ingest`, the same function a process pool
   or Spark runs);
2. ``map_batches(EmbedStage)`` as an actor pool of ``embed_concurrency`` actors (each loads the model once;
   ``embed_num_gpus`` per actor for GPUs); vectors of texts the store already holds come from its cache;
3. ``map_batches(WriteStage)``: each worker opens its own client (a Chroma ``HttpClient``, in tasks; or a LangChain
   ``VectorStore`` + docstore built by picklable factories, in an actor pool, since the vector store embeds) and
   upserts ``write_batch_size`` rows at a time (split further to the store's maximum batch), returning **one row
   of counts per batch**. The driver streams
   those count rows only (``iter_rows`` for progress), never spans, texts or vectors;
4. deletions (older versions of changed files, deleted files) run as Ray tasks once every write is done; then the
   manifest is committed.

Ids are deterministic (:mod:`llmc_splitters.ingest`), so re-running is a no-op and a run killed at any point is
completed by running it again (see :class:`~llmc_splitters.ingest.manifest.ManifestState`). Chroma's embedded
``PersistentClient`` is not safe across processes; use a server (``chroma run``) with :class:`~llmc_splitters.
pipeline.ChromaSink` ``(host=...)``.

Example:
    >>> import ray                                                                        # doctest: +SKIP
    >>> ray.init(num_cpus=8)                                                              # doctest: +SKIP
    >>> s = IngestSettings(max_tokens=512)                                                # doctest: +SKIP
    >>> state = ManifestState(".llmc/state")                                              # doctest: +SKIP
    >>> plan = state.plan(filter_manifest(git_manifest(".")), fingerprint=settings_fingerprint(s))  # doctest: +SKIP
    >>> summary = run_ray(plan, ChromaSink(host="chroma.internal"), roots=".", settings=s,           # doctest: +SKIP
    ...                   embedding_factory=MiniLMEmbedding, state=state, embed_concurrency=4)
    >>> print(summary)                                                                    # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigurationError, missing_dependency
from .rows import IngestSettings, read_chunk_batch
from .manifest import ManifestState, Plan
from .pipeline import (
    EmbedStage,
    IngestSummary,
    ProgressFn,
    WriteStage,
    _check_plan,
    _check_sink,
    apply_deletions,
    finish,
    log_progress,
    plan_items,
)

__all__ = ["run_ray"]

_DELETE_CHUNK = 2000


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
        return {k: v if isinstance(v, np.ndarray) else np.asarray(v, dtype=object) for k, v in out.items()}

    return call


def _read_chunk(batch: Mapping[str, Any], settings: IngestSettings, source: str) -> dict[str, Any]:
    return _columns(read_chunk_batch)(batch, settings, source=source)


class _Embed(EmbedStage):
    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        return _columns(super().__call__)(batch)


class _Write(WriteStage):
    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        return _columns(super().__call__)(batch)


_writers: dict[tuple[Any, str | None], WriteStage] = {}


def _write_task(batch: Mapping[str, Any], sink: Any, embedding: str | None) -> dict[str, Any]:
    """The write stage as a task: a pooled worker process keeps its store connection from task to task."""
    stage = _writers.get((sink, embedding))
    if stage is None:
        stage = _writers[(sink, embedding)] = WriteStage(sink, embedding)
    return _columns(stage)(batch)


def _pool(concurrency: int | tuple[int, int]) -> Any:
    ray = _ray()
    if isinstance(concurrency, tuple):
        return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    return ray.data.ActorPoolStrategy(size=int(concurrency))


def _max(concurrency: int | tuple[int, int]) -> int:
    return int(concurrency[1] if isinstance(concurrency, tuple) else concurrency)


def run_ray(
    plan: Plan,
    sink: Any,
    *,
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
        sink: :class:`~llmc_splitters.ingest.pipeline.ChromaSink` with ``host=`` (a server), or
            :class:`~llmc_splitters.ingest.pipeline.LangChainSink`.
        roots: Checkout directory per repository (or one for all), readable by every worker (shared disk; with
            ``source="git"`` only the ``.git`` object store is read).
        settings: Chunking settings (the plan's fingerprint must match).
        embedding_factory: Picklable no-argument callable building the embedding model inside each embed actor
            (``MiniLMEmbedding``, ``functools.partial(...)``); ``None`` writes lexical-only records (or lets a
            :class:`~llmc_splitters.ingest.pipeline.LangChainSink`'s vector store embed).
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
        write_concurrency: Concurrent writers: tasks for a Chroma server (a client is cheap to open; each pooled
            worker keeps its own), actors for a :class:`~llmc_splitters.ingest.pipeline.LangChainSink` (its vector store
            embeds, so its model loads once per actor).
        write_num_cpus: CPUs per writer.
        write_batch_size: Rows per write call (the writer splits it further to the store's maximum batch).
        progress: ``progress(stage, summary)`` after planning, after each write batch (running totals per stage),
            after deletions and at the end; default: log lines.

    Returns:
        The :class:`~llmc_splitters.ingest.pipeline.IngestSummary`.

    Raises:
        MissingDependencyError: Ray is not installed (``pip install 'llmc-splitters[ray]'``).
        ConfigurationError: The sink is not safe across processes, the plan was made for other settings, or an
            ``embedding_factory`` is given for a sink whose vector store embeds by itself.
    """
    ray = _ray()
    if not getattr(sink, "process_safe", False):
        msg = (
            f"{sink!r} cannot be written by several processes (an embedded Chroma directory); run a Chroma server "
            "(`chroma run --path DIR`) and use ChromaSink(host=...), or use run_local()"
        )
        raise ConfigurationError(msg)
    settings = settings or IngestSettings()
    _check_plan(plan, settings)
    _check_sink(sink, embedding_factory)
    summary = IngestSummary.for_plan(plan, "ray")
    if progress:
        progress("plan", summary)
    t0 = time.perf_counter()
    items = plan_items(plan, roots)
    if items:
        blocks = max(1, math.ceil(len(items) / files_per_batch))
        ds = ray.data.from_items(items, override_num_blocks=blocks)
        ds = ds.map_batches(
            _read_chunk, fn_kwargs={"settings": settings, "source": source}, batch_size=files_per_batch,
            # The memory reservation also keeps Ray from fusing chunking into the embed actors (it fuses stages
            # with equal resource requests), where it would run serially with the model instead of as tasks.
            num_cpus=chunk_num_cpus, memory=chunk_memory,
        )
        embed = embedding_factory is not None
        if embed:
            ds = ds.map_batches(
                _Embed,
                fn_constructor_kwargs={"embedding_factory": embedding_factory, "sink": sink,
                                       "batch_size": embed_model_batch},
                batch_size=embed_batch_size, compute=_pool(embed_concurrency), num_cpus=embed_num_cpus,
                num_gpus=embed_num_gpus or None,
            )
        write_embedding = None if (embed or sink.embeds_itself) else "none"
        if sink.embeds_itself:
            # The vector store embeds what it stores: one actor per writer, so its model loads once.
            ds = ds.map_batches(
                _Write, fn_constructor_kwargs={"sink": sink, "embedding": write_embedding},
                batch_size=write_batch_size, compute=_pool(write_concurrency), num_cpus=write_num_cpus,
            )
        else:
            # A store client is cheap: plain tasks (pooled workers, no actor start-up per run).
            ds = ds.map_batches(
                _write_task, fn_kwargs={"sink": sink, "embedding": write_embedding}, batch_size=write_batch_size,
                compute=ray.data.TaskPoolStrategy(size=_max(write_concurrency)), num_cpus=write_num_cpus,
            )
        # Only count rows come back: one per write batch.
        for row in ds.iter_rows():
            summary.add(row)
            if progress:
                progress("write", summary)
    summary.seconds["chunk+embed+write"] = time.perf_counter() - t0
    remote_delete = ray.remote(num_cpus=write_num_cpus)(apply_deletions)

    def run_deletions(stale: list[tuple[str, str]], gone: list[str]) -> int:
        name = summary.embedding or None
        refs = [remote_delete.remote(sink, name, stale[i : i + _DELETE_CHUNK], [])
                for i in range(0, len(stale), _DELETE_CHUNK)]
        refs += [remote_delete.remote(sink, name, [], gone[i : i + _DELETE_CHUNK])
                 for i in range(0, len(gone), _DELETE_CHUNK)]
        return int(sum(ray.get(refs)))

    finish(plan, state, sink, summary, progress, run_deletions)
    summary.seconds["total"] = time.perf_counter() - t0
    return summary
