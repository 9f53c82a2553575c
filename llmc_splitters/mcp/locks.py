"""A readers-writer lock: many tool calls read the index at once, a refresh batch writes it alone.

Readers (``search_code``, ``get_symbol``, ``get_lines``, ``index_status``) share the lock; a writer (one batch of a
refresh: a few files indexed or removed) holds it alone. Turns alternate: a waiting writer holds new readers back
(a burst of searches cannot starve a refresh), and the readers waiting when a writer finishes go in before the
next writer (a refresh of many batches cannot starve the searches). So a search waits for at most one batch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ReadWriteLock"]


class ReadWriteLock:
    """Shared reads, exclusive writes, alternating turns when both wait.

    Example:
        >>> lock = ReadWriteLock()
        >>> with lock.read():
        ...     pass
        >>> with lock.write():
        ...     pass
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0
        self._waiting_readers = 0
        self._readers_turn = False  # set when a writer leaves with readers waiting: they go first

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the lock shared."""
        with self._cond:
            self._waiting_readers += 1
            try:
                while self._writing or (self._waiting_writers and not self._readers_turn):
                    self._cond.wait()
            finally:
                self._waiting_readers -= 1
            self._readers += 1
            if not self._waiting_readers and self._readers_turn:
                self._readers_turn = False
                self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        """Hold the lock alone."""
        with self._cond:
            self._waiting_writers += 1
            try:
                while self._writing or self._readers or self._readers_turn:
                    self._cond.wait()
            finally:
                self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._readers_turn = self._waiting_readers > 0
                self._cond.notify_all()
