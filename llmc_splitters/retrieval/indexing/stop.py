"""SIGINT and SIGTERM during an indexing run: a flag the run's threads read, and a region a signal cuts short.

Used by :class:`~llmc_splitters.retrieval.indexing.indexer.Indexer`: while a run is in progress (in the main thread)
the signals set :attr:`StopFlag.signal_name` instead of raising. Every stage reads it between its steps: the
chunker between files, the embedding between calls to the model (:meth:`StopFlag.requested` is the ``stop`` test
of :meth:`~llmc_splitters.retrieval.embeddings.BatchEmbedder.embed`), the writer before it waits for more groups.
Inside :meth:`StopFlag.abandoning` (preparing one file, whose work nothing else depends on) the handler also
raises :class:`Abandon`, so a file that takes minutes to chunk does not hold the stop back. A second Ctrl-C raises
``KeyboardInterrupt`` at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Abandon", "StopFlag"]


class Abandon(BaseException):
    """Raised by the signal handler inside :meth:`StopFlag.abandoning`: the work of that region is dropped."""


class StopFlag:
    """SIGINT/SIGTERM set a flag instead of raising, while a run is in progress (main thread only; see the module
    docstring)."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._old: dict[int, Any] = {}
        self._abandoning = False

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._old[sig] = signal.signal(sig, self._handle)
                except (ValueError, OSError):  # an embedded interpreter that owns its signals
                    continue
        return self

    def requested(self) -> bool:
        """Whether a signal asked the run to stop (any thread may ask)."""
        return self.signal_name is not None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal_name is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now (the group in flight is redone next run)
        self.signal_name = signal.Signals(signum).name
        if self._abandoning:
            self._abandoning = False
            raise Abandon

    @contextlib.contextmanager
    def abandoning(self) -> Iterator[None]:
        """A region a signal interrupts (raising :class:`Abandon` out of it) instead of waiting for its end."""
        self._abandoning = self.signal_name is None
        try:
            yield
        finally:
            self._abandoning = False

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Inside :meth:`abandoning`, a write a signal must not cut; a signal meanwhile drops the region after it."""
        was, self._abandoning = self._abandoning, False
        try:
            yield
        finally:
            self._abandoning = was
        if was and self.signal_name is not None:
            self._abandoning = False
            raise Abandon

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
