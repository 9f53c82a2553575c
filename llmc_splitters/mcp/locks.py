"""A readers-writer lock: many tool calls read the index at once, a refresh batch writes it alone.

Readers (``search_code``, ``get_symbol``, ``get_lines``) share the lock; a writer (one batch of a refresh: a few
files indexed or removed) waits for the readers inside to finish and holds new readers back meanwhile (writer
preference), so a burst of searches cannot starve a refresh and a refresh never runs under a half-done read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ReadWriteLock"]


class ReadWriteLock:
    """Shared reads, exclusive writes, writers first.

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

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the lock shared."""
        with self._cond:
            while self._writing or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
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
                while self._writing or self._readers:
                    self._cond.wait()
            finally:
                self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()
