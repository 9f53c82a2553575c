"""Chunking in worker processes: a ``spawn`` pool that chunks files while the calling process embeds and writes.

Sent a :class:`Layout` instead of a bare chunker (a lexical index, or a model whose view of a text is plain data:
a static one), a worker also lays each file out as the index stores it (:func:`~llmc_splitters.retrieval.storage.file_rows.build_file`: rows, bindings, summaries, lexical
terms), so the calling process only writes.

Results come back in input order with a bounded number of files in flight. A worker that dies (a crash in native
code) fails only the file it was chunking: the files in flight are redone one at a time in a fresh pool to find
it. Workers ignore SIGINT, so that Ctrl-C reaches only the calling process, which finishes the files it holds
before it stops (see :mod:`.indexing`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...chunking.span import Span, SpanTree
from ...errors import ConfigurationError, LlmcError, UnsupportedInputError
from ..storage.file_rows import FileSummaryInput, PreparedFile, View, build_file, parse_note, sha, split_note

if TYPE_CHECKING:
    from ..storage.parts import Chunking

__all__ = ["Layout", "chunk", "chunk_in_processes", "payload"]

Stat = tuple[int, int] | None
Outcome = SpanTree | str | tuple[PreparedFile, str | None, str | None]
"""A file's tree, the reason it failed, or (with a :class:`Layout`) the file laid out, how it was cut and where it
has syntax errors (:func:`~llmc_splitters.retrieval.records.parse_note`)."""


@dataclass(frozen=True)
class Layout:
    """What a worker needs to lay files out as the index does (see the module docstring)."""

    chunker: Any
    settings: str
    summarizer: Callable[[FileSummaryInput], str] | None = None
    view: View | None = None

    def prepare(self, path: str, text: str, stat: Stat) -> tuple[str, Any]:
        """``("prepared", (PreparedFile, split note, parse note))`` or ``("error", reason)``."""
        try:
            tree = chunk(self.chunker, path, text)
            prepared = build_file(path, text, tree, file_hash=sha(text), settings=self.settings, stat=stat,
                                  summarizer=self.summarizer, view=self.view)
        except LlmcError as exc:
            return "error", str(exc)
        return "prepared", (prepared, split_note(tree, len(text.encode("utf-8", "surrogatepass"))), parse_note(tree))


def payload(chunking: Chunking, workers: int, *, layout: str | None = None, dense: bool = False,
            view: View | None = None) -> bytes:
    """``chunking``'s chunker, pickled to send it to ``workers`` worker processes; with ``layout`` (the settings
    fingerprint), a :class:`Layout` of it, the summariser and, for an index with a model (``dense``), the model's
    ``view``, so the workers lay the files out too (when one of them cannot be pickled, as the view of a model that
    bounds its input by its tokenizer, the chunker alone).

    Raises:
        ConfigurationError: The chunker cannot be pickled (the message says what to do instead).
    """
    if layout is not None and (view is not None or not dense):
        with contextlib.suppress(Exception):  # pickling raises PicklingError, TypeError, AttributeError...
            return pickle.dumps(Layout(chunking.chunker, layout, chunking.summarizer, view))
    try:
        return pickle.dumps(chunking.chunker)
    except Exception as exc:  # noqa: BLE001 - pickling raises PicklingError, TypeError, AttributeError...
        msg = (
            f"workers={workers} needs a chunker that can be pickled to send it to worker processes, but "
            f"{type(chunking.chunker).__name__} cannot ({type(exc).__name__}: {exc}). Use workers=1, or a "
            "tokenizer defined at module level (not a lambda or a closure)."
        )
        raise ConfigurationError(msg) from exc


def chunk(chunker: Any, path: str, text: str) -> SpanTree:
    """``chunker.chunk_tree(text, path=path)``; any failure becomes an :class:`UnsupportedInputError` naming the file."""
    try:
        return chunker.chunk_tree(text, path=path)
    except Exception as exc:  # noqa: BLE001 - one file the chunker fails on (even by a bug) must not stop a run
        msg = f"could not chunk {path}: {exc}" if isinstance(exc, (LlmcError, ValueError)) else \
            f"could not chunk {path}: {type(exc).__name__}: {exc}"
        raise UnsupportedInputError(msg) from exc


def _chunk_rows(chunker: Any, path: str, text: str) -> tuple[str, Any]:
    """Chunk one file into picklable rows: ``("ok", {"spans": [...], "leaves": [...]})`` or ``("error", reason)``.

    ``spans`` holds every span of the tree as :meth:`Span.to_dict` (pre-order, root first) and ``leaves`` the leaf
    ids in file order; :func:`_tree_from_rows` rebuilds the :class:`SpanTree`. A top-level function of plain data,
    so a ``spawn`` worker process can run it.
    """
    try:
        tree = chunk(chunker, path, text)
    except LlmcError as exc:
        return "error", str(exc)
    return "ok", {"spans": [s.to_dict() for s in tree.spans], "leaves": [s.id for s in tree.leaves]}


def _tree_from_rows(rows: Mapping[str, Any]) -> SpanTree:
    """The :class:`SpanTree` of :func:`_chunk_rows` output."""
    spans = [Span.from_dict(d) for d in rows["spans"]]
    by_id = {s.id: s for s in spans}
    return SpanTree.build(spans, [by_id[i] for i in rows["leaves"]])


_worker_job: Any = None  # the chunker, or a Layout


def _worker_init(payload: bytes, parent_pid: int) -> None:
    """Set up a chunking worker: unpickle its chunker (or :class:`Layout`) once; exit when the parent is gone."""
    global _worker_job  # noqa: PLW0603 - one chunker per worker process
    _worker_job = pickle.loads(payload)  # noqa: S301 - pickled by the parent process a moment ago
    # Ctrl-C is the parent's to handle: it finishes the files it holds, then shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        # A parent killed with SIGKILL cannot shut the pool down; without this, idle workers would wait forever.
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="llmc-parent-watch", daemon=True).start()


def _discard(pool: ProcessPoolExecutor) -> None:
    """Shut a broken pool down. Its surviving workers are killed first: on Python 3.11 a broken pool waits for them
    at shutdown and at interpreter exit, and they wait for work that never comes."""
    workers = getattr(pool, "_processes", None) or {}
    for proc in list(workers.values()):
        if proc.is_alive():
            proc.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def _worker_chunk(path: str, text: str, stat: Stat) -> tuple[str, Any]:
    if isinstance(_worker_job, Layout):
        return _worker_job.prepare(path, text, stat)
    return _chunk_rows(_worker_job, path, text)


def chunk_in_processes(
    payload: bytes, items: Iterator[tuple[str, str, Stat]], workers: int
) -> Iterator[tuple[str, str, Outcome]]:
    """Chunk ``(path, text, stat)`` items in a ``spawn`` process pool; yield ``(path, text, outcome)``: the tree
    or the failure reason, or, when ``payload`` is a pickled :class:`Layout`, the file laid out (``stat`` is its
    marker's size and modification time) with its split note.

    Results come back in input order, with at most ``2 * workers`` files in flight. If a worker dies (the pool
    breaks), the files that were in flight are chunked again one at a time in a fresh pool, so only the file that
    kills its worker is reported as failed.
    """
    ctx = multiprocessing.get_context("spawn")

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                                   initargs=(payload, os.getpid()))

    pool = new_pool()

    def submit(path: str, text: str, stat: Stat) -> Future[tuple[str, Any]]:
        # A pool can break between two results: a submit to it fails like the files in flight do.
        try:
            return pool.submit(_worker_chunk, path, text, stat)
        except BrokenProcessPool as exc:
            failed: Future[tuple[str, Any]] = Future()
            failed.set_exception(exc)
            return failed

    inflight: deque[tuple[str, str, Stat, Future[tuple[str, Any]], bool]] = deque()  # (..., future, alone)
    suspects: deque[tuple[str, str, Stat]] = deque()
    try:
        while True:
            if suspects:
                # Files that were in flight when a worker died go one at a time, to find the one that kills it.
                if not inflight:
                    path, text, stat = suspects.popleft()
                    inflight.append((path, text, stat, submit(path, text, stat), True))
            else:
                while len(inflight) < 2 * workers:
                    nxt = next(items, None)
                    if nxt is None:
                        break
                    inflight.append((*nxt, submit(*nxt), False))
            if not inflight:
                return
            path, text, stat, fut, alone = inflight.popleft()
            try:
                status, value = fut.result()
            except BrokenProcessPool as exc:
                _discard(pool)
                pool = new_pool()
                if alone:
                    yield path, text, f"could not chunk {path}: the chunking process died ({exc})"
                else:
                    suspects.append((path, text, stat))
                    suspects.extend((p, t, st) for p, t, st, _, _ in inflight)
                    inflight.clear()
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be unpickled: that file fails
                yield path, text, f"could not chunk {path}: {type(exc).__name__}: {exc}"
                continue
            yield path, text, (_tree_from_rows(value) if status == "ok" else value)
    except BaseException:
        # Stopped mid-run (a signal in the caller): the files in flight are dropped, not waited for.
        _discard(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
