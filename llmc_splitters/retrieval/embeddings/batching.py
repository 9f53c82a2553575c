"""Embed many texts in batches bounded by tokens and provider limits; retry, split, and isolate what fails.

Texts from many files are sorted by length (similar lengths share a batch, so a local model pads little) and
packed into batches of at most ``max_items`` texts and ``max_batch_tokens`` tokens. A text over
``max_text_tokens`` is failed without a call. A batch that raises is retried with exponential backoff; if it keeps
failing it is split in halves, each retried the same way, so a text that always fails ends alone and is reported
with its reason while every other text gets its vector. The caller (the index) then fails just the files of the
failed texts.

Workers: ``workers=N`` runs N batches at once, in threads or in processes (``kind``); ``kind="auto"`` takes the
backend's ``parallelism`` attribute (what measured faster for it, see ``benchmarks/results/embeddings.md``), and
``workers="auto"`` one worker per core for a local model that runs batches side by side (:func:`auto_workers`).

Stopping: a call to the model cannot be cut, so it is what a stop waits for. :meth:`BatchEmbedder.embed` takes a
``stop`` test, asked before every call: once it says stop, no further call starts and the result says which texts
were not tried. A model with a ``batch_size`` of its own (the package's local ones) gets calls of at most that many
texts: a longer call only loops over batches inside the model, where a stop cannot reach it, and measured no faster
(480 code spans on minilm-onnx-128 with 2 workers, 4 alternating runs: 7.6-12.2 s in calls of 64, 5.9-13.3 s in
calls of 16, 6.1-11.0 s in calls of 8).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import ConfigurationError, check_workers

__all__ = ["BatchEmbedder", "BatchLimits", "EmbedFailure", "EmbedResult", "auto_workers", "default_limits",
           "embed_texts", "plan_batches"]

AUTO_MAX_WORKERS = 4
"""With ``workers="auto"``, at most this many batches at once."""


@dataclass(frozen=True)
class BatchLimits:
    """How large a batch may be, and how hard a failing batch is retried.

    Attributes:
        max_items: Texts per call.
        max_batch_tokens: Tokens per call, all texts together (``None``: no limit).
        max_text_tokens: Tokens per text; a longer text is failed without a call (``None``: no limit).
        retries: Attempts after the first, for every batch (and every half of a split batch).
        backoff: Seconds before the first retry; doubled for each further retry.
        max_backoff: Cap of one wait.

    Example:
        >>> BatchLimits(max_items=64, max_batch_tokens=3072).max_batch_tokens
        3072
    """

    max_items: int = 64
    max_batch_tokens: int | None = None
    max_text_tokens: int | None = None
    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0

    def __post_init__(self) -> None:
        for name in ("max_items", "max_batch_tokens", "max_text_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                msg = f"{name} must be > 0, got {value}"
                raise ConfigurationError(msg)
        if self.retries < 0 or self.backoff < 0 or self.max_backoff < 0:
            msg = (f"retries, backoff and max_backoff must be >= 0, got {self.retries}, {self.backoff}, "
                   f"{self.max_backoff}")
            raise ConfigurationError(msg)


@dataclass(frozen=True)
class EmbedFailure:
    """A text that got no vector: its position in the input, and why."""

    index: int
    reason: str


@dataclass
class EmbedResult:
    """Vectors in input order (``None`` for a failed text), the failures, and what it took.

    Attributes:
        vectors: One entry per input text.
        failures: The texts that failed, in input order.
        calls: Calls made to the model (retries included).
        batches: Calls that succeeded.
        stopped: The ``stop`` test said stop before every text was tried: the texts with no vector and no failure
            were not sent to the model.
    """

    vectors: list[list[float] | None]
    failures: list[EmbedFailure] = field(default_factory=list)
    calls: int = 0
    batches: int = 0
    stopped: bool = False

    @property
    def failed(self) -> set[int]:
        """Indices of the texts that failed."""
        return {f.index for f in self.failures}


def plan_batches(lengths: Sequence[int], limits: BatchLimits) -> tuple[list[list[int]], list[EmbedFailure]]:
    """Group text indices into batches within ``limits``, longest texts first; texts that can never fit fail.

    Args:
        lengths: Tokens of each text.
        limits: The limits.

    Returns:
        ``(batches, failures)``: each batch lists input indices, sorted by decreasing length.

    Example:
        >>> plan_batches([5, 1, 9, 3], BatchLimits(max_items=2, max_batch_tokens=10))[0]
        [[2, 1], [0, 3]]
    """
    failures: list[EmbedFailure] = []
    cap = limits.max_text_tokens
    if limits.max_batch_tokens is not None:
        cap = limits.max_batch_tokens if cap is None else min(cap, limits.max_batch_tokens)
    ok = []
    for i, n in enumerate(lengths):
        if cap is not None and n > cap:
            which = "per text" if limits.max_text_tokens is not None and n > limits.max_text_tokens else "per batch"
            failures.append(EmbedFailure(i, f"text has {n} tokens, over the limit of {cap} tokens {which}"))
        else:
            ok.append(i)
    ok.sort(key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    # Longest first, and each batch tops up with the shortest remaining texts when the token budget allows:
    # batches stay full under a token limit without mixing lengths where no limit forces it.
    lo, hi = 0, len(ok) - 1
    while lo <= hi:
        batch, tokens = [ok[lo]], lengths[ok[lo]]
        lo += 1
        while lo <= hi and len(batch) < limits.max_items:
            n = lengths[ok[lo]]
            if limits.max_batch_tokens is None or tokens + n <= limits.max_batch_tokens:
                batch.append(ok[lo])
                tokens += n
                lo += 1
                continue
            n = lengths[ok[hi]]
            if tokens + n <= limits.max_batch_tokens:
                batch.append(ok[hi])
                tokens += n
                hi -= 1
                continue
            break
        batches.append(sorted(batch, key=lambda i: -lengths[i]))
    return batches, failures


def _counter_for(embedding: Any) -> Callable[[str], int]:
    count = getattr(embedding, "count_tokens", None)
    if callable(count):
        return count
    from ...chunking.tokens import get_tiktoken

    # No tokenizer of its own: cl100k is what most hosted providers count (close enough to plan batches).
    return get_tiktoken().count


# ----------------------------------------------------------------------------------------------------------------
# Process workers: each rebuilds the embedding from its pickled settings and loads its own weights.
# ----------------------------------------------------------------------------------------------------------------

_worker_embedding: Any = None


def _init_worker(embedding: Any, threads: int) -> None:
    # Before any numerical library loads: one process per core, each single-threaded, is the point of processes.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    if hasattr(embedding, "threads"):
        embedding.threads = threads
    global _worker_embedding
    _worker_embedding = embedding


def auto_workers(embedding: Any) -> int:
    """How many batches ``workers="auto"`` embeds at once: one per core (at most :data:`AUTO_MAX_WORKERS`) for a
    local model that runs batches side by side on threads (``parallelism == "thread"``: the package's ONNX, torch
    and static backends, each call then given its share of the cores), else one (a hosted model's rate limits, or
    a model this package knows nothing of, are not ours to test).

    Beside chunking and the stores' writes, the index's two cores are never the model's alone: one call whose
    intra-op threads wait for each other at every layer stalls when either is preempted, where two single-threaded
    calls each keep going. ``index tree-40 --embedding minilm --workers 1``, alternating runs on a loaded 2-core
    machine: 31.2, 26.0 and 16.3 s with one worker against 14.9, 19.8 and 11.6 s with two.
    """
    if getattr(embedding, "parallelism", None) != "thread":
        return 1
    return max(1, min(os.cpu_count() or 1, AUTO_MAX_WORKERS))


def _embed_in_worker(texts: list[str]) -> list[list[float]]:
    return _worker_embedding.embed_documents(texts)


def default_limits(embedding: Any) -> BatchLimits:
    """The embedding's ``batch_limits``, else calls of at most its own ``batch_size`` texts (a local model: see the
    module docstring), else :class:`BatchLimits()`.

    Example:
        >>> from llmc_splitters.retrieval.embeddings import HashingEmbedding
        >>> default_limits(HashingEmbedding()).max_items
        64
    """
    own = getattr(embedding, "batch_limits", None)
    if isinstance(own, BatchLimits):
        return own
    size = getattr(embedding, "batch_size", None)
    if isinstance(size, int) and not isinstance(size, bool) and 0 < size < BatchLimits.max_items:
        return BatchLimits(max_items=size)
    return BatchLimits()


class BatchEmbedder:
    """Embeds lists of texts with :func:`plan_batches`, retries and splitting, on ``workers`` at once.

    Keep one for the life of an index: process workers are started once and keep their loaded model.

    Args:
        embedding: The model.
        limits: Batch limits (default: :func:`default_limits`).
        workers: Batches embedded at once, or ``"auto"`` (:func:`auto_workers`).
        kind: ``"thread"``, ``"process"`` or ``"auto"`` (the embedding's ``parallelism``, else threads).
        count_tokens: Token counter for the limits (default: the embedding's, else cl100k).
        sleep: Called with the seconds to wait before a retry (tests pass a recorder).

    Raises:
        ConfigurationError: ``workers`` is not positive or ``kind`` is unknown.

    Example:
        >>> from llmc_splitters.retrieval.embeddings import HashingEmbedding
        >>> with BatchEmbedder(HashingEmbedding(dim=4), limits=BatchLimits(max_items=2)) as be:
        ...     res = be.embed(["a", "b c", "d"])
        >>> len(res.vectors), res.batches, res.failures
        (3, 2, [])
    """

    def __init__(self, embedding: Any, *, limits: BatchLimits | None = None, workers: int | str = 1,
                 kind: str = "auto", count_tokens: Callable[[str], int] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        check_workers("embed workers", workers)
        if workers == "auto":
            workers = auto_workers(embedding)
        if kind not in ("auto", "thread", "process"):
            msg = f"kind must be 'auto', 'thread' or 'process', got {kind!r}"
            raise ConfigurationError(msg)
        if kind == "auto":
            kind = str(getattr(embedding, "parallelism", "thread"))
        self.kind = kind if workers > 1 else "thread"
        if workers > 1 and self.kind == "thread" and hasattr(embedding, "for_workers"):
            # N threads share the cores: each model call gets its share (a local backend would otherwise run
            # N x cores threads, which measured slower than one call at a time).
            embedding = embedding.for_workers(max(1, (os.cpu_count() or 1) // workers))
        self.embedding = embedding
        self.limits = limits or default_limits(embedding)
        self.workers = workers
        self.count_tokens = count_tokens or _counter_for(embedding)
        self.sleep = sleep
        self._threads: ThreadPoolExecutor | None = None
        self._procs: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._calls = 0

    def _pools(self) -> tuple[ThreadPoolExecutor | None, ProcessPoolExecutor | None]:
        with self._lock:
            if self.workers > 1 and self._threads is None:
                self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="llmc-embed")
            if self.kind == "process" and self._procs is None:
                threads = max(1, (os.cpu_count() or 1) // self.workers)
                # spawn: a forked copy of a process that already runs torch or onnxruntime threads can deadlock.
                self._procs = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_init_worker, initargs=(self.embedding, threads))
            return self._threads, self._procs

    def _call(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self._calls += 1
        _, procs = self._pools()
        if procs is not None:
            return procs.submit(_embed_in_worker, texts).result()
        return self.embedding.embed_documents(texts)

    def _run(self, batch: list[int], texts: Sequence[str], out: list[Any], failures: list[EmbedFailure],
             run: _Run) -> int:
        """Embed one batch into ``out``; on failure retry, then split. Returns the successful calls; none once
        ``run`` says stop (before a call, or a wait before a retry)."""
        last: BaseException | None = None
        for attempt in range(self.limits.retries + 1):
            if attempt:
                self.sleep(min(self.limits.max_backoff, self.limits.backoff * 2 ** (attempt - 1)))
            if run.stopping():
                return 0
            try:
                vecs = self._call([texts[i] for i in batch])
                if len(vecs) != len(batch):
                    msg = f"the embedding model returned {len(vecs)} vectors for {len(batch)} texts"
                    raise ValueError(msg)  # noqa: TRY301 - handled as any failed call below
            except Exception as exc:  # noqa: BLE001 - a provider may raise anything; it is retried, then reported
                last = exc
                continue
            for i, v in zip(batch, vecs):
                out[i] = [float(x) for x in v]
            run.embedded(len(batch))
            return 1
        if len(batch) == 1:
            failures.append(EmbedFailure(batch[0], f"{type(last).__name__}: {last}"))
            run.embedded(1)
            return 0
        mid = len(batch) // 2
        return self._run(batch[:mid], texts, out, failures, run) + self._run(batch[mid:], texts, out, failures, run)

    def embed(self, texts: Sequence[str], *, stop: Callable[[], bool] | None = None,
              done: Callable[[int], None] | None = None) -> EmbedResult:
        """Embed ``texts``; never raises for a failing model call (see :attr:`EmbedResult.failures`).

        Args:
            texts: The texts.
            stop: Asked before each call to the model (from the worker threads): once it returns true no further
                call starts, the calls in flight finish, and the result has ``stopped`` set.
            done: Called (from the worker threads) with the number of texts each finished call settled (embedded,
                or failed for good): a progress count.
        """
        out: list[Any] = [None] * len(texts)
        run = _Run(stop, done)
        if not texts or run.stopping():
            return EmbedResult(out, stopped=run.stopped)
        if self.limits.max_batch_tokens is None and self.limits.max_text_tokens is None:
            # No token limit to respect: lengths only sort the texts, and characters sort them as well as tokens
            # without a tokenizer pass (which costs as much as a static model's whole embedding).
            lengths = [len(t) for t in texts]
        else:
            lengths = [int(self.count_tokens(t)) for t in texts]
        batches, failures = plan_batches(lengths, self._spread(len(texts)))
        calls_before = self._calls
        threads, _ = self._pools()
        if failures:
            run.embedded(len(failures))  # over a limit: settled without a call
        if threads is None or len(batches) == 1:
            succeeded = sum(self._run(b, texts, out, failures, run) for b in batches)
        else:
            parts: list[list[EmbedFailure]] = [[] for _ in batches]
            futures: list[Future[int]] = [threads.submit(self._run, b, texts, out, parts[k], run)
                                          for k, b in enumerate(batches)]
            succeeded = sum(f.result() for f in futures)
            failures += [f for part in parts for f in part]
        failures.sort(key=lambda f: f.index)
        return EmbedResult(out, failures, calls=self._calls - calls_before, batches=succeeded, stopped=run.stopped)

    def _spread(self, n: int) -> BatchLimits:
        """The limits for ``n`` texts: with several workers, at most as many texts per call as make the calls a
        multiple of the workers, of even sizes, so that no worker idles while another finishes a call (a group of
        one file, 20 texts, is two calls of 10 on two workers, not one of 20 beside an idle worker; 700 texts are 12
        calls of 59, not 11 of 64)."""
        limits = self.limits
        if self.workers <= 1 or n <= 1:
            return limits
        rounds = -(-n // (self.workers * limits.max_items))
        return replace(limits, max_items=min(limits.max_items, -(-n // (rounds * self.workers))))

    def close(self) -> None:
        """Stop the workers (a closed embedder starts new ones if used again)."""
        with self._lock:
            threads, procs, self._threads, self._procs = self._threads, self._procs, None, None
        if threads is not None:
            threads.shutdown()
        if procs is not None:
            procs.shutdown()

    def __enter__(self) -> BatchEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Run:
    """The ``stop`` test and the ``done`` count of one :meth:`BatchEmbedder.embed` call, shared by its workers."""

    def __init__(self, stop: Callable[[], bool] | None, done: Callable[[int], None] | None) -> None:
        self._stop = stop
        self._done = done
        self.stopped = False

    def stopping(self) -> bool:
        if not self.stopped and self._stop is not None and self._stop():
            self.stopped = True
        return self.stopped

    def embedded(self, n: int) -> None:
        if self._done is not None:
            self._done(n)


def embed_texts(embedding: Any, texts: Sequence[str], *, limits: BatchLimits | None = None, workers: int = 1,
                kind: str = "auto", count_tokens: Callable[[str], int] | None = None,
                sleep: Callable[[float], None] = time.sleep) -> EmbedResult:
    """Embed ``texts`` once with a temporary :class:`BatchEmbedder` (same arguments); see there.

    Example:
        >>> from llmc_splitters.retrieval.embeddings import HashingEmbedding
        >>> res = embed_texts(HashingEmbedding(dim=4), ["open a file", "close it"])
        >>> [len(v) for v in res.vectors], res.failed
        ([4, 4], set())
    """
    with BatchEmbedder(embedding, limits=limits, workers=workers, kind=kind, count_tokens=count_tokens,
                       sleep=sleep) as be:
        return be.embed(texts)
