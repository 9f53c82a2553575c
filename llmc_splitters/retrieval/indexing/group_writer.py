"""Embed and write prepared groups of files on two threads of their own, in order, while the caller chunks the next.

Used by :class:`~llmc_splitters.retrieval.indexing.indexer.Indexer` (steps 3 and 4 of its module docstring).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from ..storage.file_rows import PreparedFile

Stage = Callable[[list[PreparedFile]], None]
Size = Callable[[list[PreparedFile]], int]

__all__ = ["GroupWriter"]


class GroupWriter:
    """Embeds and writes prepared groups on two threads of its own, in order, while the caller chunks the next files.

    Chunking is Python work under the GIL; embedding (the model), writing (SQLite, tantivy, the vector store) mostly
    release it. So the three overlap: while group N is written, group N+1 is embedded and group N+2 chunked, and the
    model waits neither for the chunker nor for the stores. When ``embed_while_opening()`` (asked at the first
    group) says so, the model starts on the first group at once and the caller goes on chunking; it opens the stores
    (importing chromadb takes about a second) once it has queued the next group and the writer holds an embedded
    one, or when it would otherwise wait for the model (``depth`` groups wait to be embedded), or at :meth:`close`:
    only when embedding imports nothing the stores import (see
    :meth:`~.embeddings._runtime.LazyModel.prepare_runtime`). Opened at the first group, the stores left the model
    without a second one for half a second on a 40-file tree. Nothing is written before the stores are open. At most
    ``depth`` groups wait at each stage (memory stays bounded).

    The writer joins the groups that reach it within ``batch_seconds`` of the first one waiting, up to
    ``batch_size`` (measured by ``size``, in rows), and writes them as one (one transaction: each commit of the span
    store rewrites every page it touched, and its id index is touched at random; on 16,000 files, writing 512 files
    per transaction instead of 32 cut the store's write time from 38 to 17 s). The very first group is written at
    once, so that a new index answers early. :meth:`close` waits for every submitted group and
    re-raises what a thread raised; :meth:`abandon` (the run failed, or a second Ctrl-C) drops the groups still
    waiting (the next run redoes them) and waits briefly for the ones in hand (each transaction is whole).

    Once ``stopped()`` says so (a signal: see :mod:`.stop`), nothing waits any longer: :meth:`submit` drops a group
    it would have to wait to queue, the writer writes what it holds at once instead of waiting to join more, and
    :meth:`close` opens the stores only if the writer holds a group (the embedding stage, given the same test,
    takes the files it has not embedded out of its groups).
    """

    def __init__(self, open_engines: Callable[[], None], embed: Stage, write: Stage, depth: int = 2, *,
                 embed_while_opening: Callable[[], bool] = lambda: False, batch_seconds: float = 0.0,
                 batch_size: int = 1, size: Size = len, stopped: Callable[[], bool] = lambda: False) -> None:
        self._open_engines = open_engines
        self._stopped = stopped
        self._batch_seconds = batch_seconds
        self._batch_size = batch_size
        self._size = size
        self._early = embed_while_opening
        self._embed_q: queue.Queue[list[PreparedFile] | None] = queue.Queue(maxsize=depth)
        self._write_q: queue.Queue[list[PreparedFile] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._abandoned = False
        self._opened = threading.Event()
        self._asked = False  # embed_while_opening() was asked (at the first group)
        self._wanted = threading.Event()  # the writer holds a group and waits for the stores
        self._threads = [threading.Thread(target=self._embed_stage, args=(embed,),
                                          name="llmc-index-embed", daemon=True),
                         threading.Thread(target=self._write_stage, args=(write,), name="llmc-index-writer",
                                          daemon=True)]
        for t in self._threads:
            t.start()

    def _embed_stage(self, embed: Stage) -> None:
        while True:
            group = self._embed_q.get()
            if group is None:
                self._write_q.put(None)
                return
            if self._abandoned or self._error is not None:
                continue
            try:
                embed(group)
            except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread)
                self._error = exc
                continue
            if group:
                self._write_q.put(group)

    def _write_stage(self, write: Stage) -> None:
        """Join the groups that arrive within ``batch_seconds`` of the first one waiting (up to ``batch_size``), and
        write them once the stores are open."""
        batch: list[PreparedFile] = []
        size = 0
        due = 0.0  # when the batch in hand is written
        wrote = False
        while True:
            try:
                group = self._write_q.get(timeout=max(0.0, due - time.monotonic()) if batch else None)
            except queue.Empty:
                group = []  # the batch in hand is due
            if group:
                if not batch:
                    due = time.monotonic() + (self._batch_seconds if wrote else 0.0)
                batch.extend(group)
                size += self._size(group)
                if size < self._batch_size and time.monotonic() < due and not self._stopped():
                    continue
            if batch:
                if not self._opened.is_set():
                    self._wanted.set()
                    self._opened.wait()
                if not self._abandoned and self._error is None:
                    try:
                        write(batch)
                    except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread)
                        self._error = exc
                batch, size, wrote = [], 0, True
            if group is None:
                return

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, group: list[PreparedFile]) -> None:
        """Queue ``group`` (waits while ``depth`` groups are waiting to be embedded, opening the stores meanwhile
        if they are not open yet)."""
        self._raise()
        if not group:
            return
        if not self._asked:
            self._asked = True
            if not self._early():
                self._open()
        self._put(group)
        if self._wanted.is_set():
            self._open()  # the model has the group just queued to embed while the stores open

    def _open(self) -> None:
        """Open the stores, here: in the caller's thread, which holds the index's lock."""
        if not self._opened.is_set():
            self._open_engines()
            self._opened.set()

    def _put(self, group: list[PreparedFile]) -> None:
        while True:
            try:
                self._embed_q.put(group, block=self._opened.is_set(), timeout=0.1)
                return
            except queue.Full:
                if self._stopped():
                    return  # dropped: the next run redoes it
                if not self._opened.is_set():
                    self._open()  # the caller would wait for the model: the stores open meanwhile
                    continue
                self._raise()
                if not all(t.is_alive() for t in self._threads):
                    return

    def close(self) -> None:
        """Open the stores if no group needed them yet, wait until every submitted group is written; re-raise what
        embedding or writing raised. Stopped, the stores open only if the writer holds a group to write."""
        try:
            if not self._stopped():
                self._open()
            while True:  # the stop mark; meanwhile open the stores if the writer waits for them
                try:
                    self._embed_q.put(None, timeout=0.05)
                    break
                except queue.Full:
                    if self._wanted.is_set():
                        self._open()
            while not self._opened.is_set() and any(t.is_alive() for t in self._threads):
                if self._wanted.wait(0.05):
                    self._open()
            for t in self._threads:
                t.join()
        except BaseException:
            self.abandon()
            raise
        self._raise()

    def abandon(self) -> None:
        """Drop the groups still waiting; wait a little for the ones in hand (their transactions are whole)."""
        self._abandoned = True
        self._opened.set()  # a writer waiting for the stores goes on to the stop mark
        for q in (self._embed_q, self._write_q):
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        self._embed_q.put(None)  # the embed stage passes the stop mark on to the writer
        for t in self._threads:
            t.join(timeout=5.0)
