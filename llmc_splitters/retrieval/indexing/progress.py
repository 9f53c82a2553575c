"""Where an indexing run is, phase by phase, for a progress display.

A run has three phases that overlap (see :mod:`.indexer`): files are chunked, their texts embedded (with a model),
and files written. A count of files alone stalls on a hybrid index: chunking runs ahead of the model, so "90% of
the files" can leave most of the time still to come. :class:`IndexProgress` counts each phase, the embedding in
texts (so that one big file moves too), and the ``progress`` callback of
:meth:`~llmc_splitters.retrieval.CodeIndex.index_files` receives one at every change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["IndexProgress", "ProgressCallback", "Tracker"]


@dataclass(frozen=True, slots=True)
class IndexProgress:
    """Counts of one indexing run so far.

    Attributes:
        files: Files dealt with by the first phase: chunked, found unchanged, or failed.
        chunked: Of those, files chunked in this run (they go on to be embedded and written).
        texts: Texts to embed of the files chunked so far (each leaf and summary has one; 0 for a lexical index).
        embedded: Of those, texts settled: embedded, found in the vector cache, or failed.
        written: Files written to the index (in the span store, the lexical index and the vectors).
        path: The file last chunked (``None`` before the first).

    Example:
        >>> p = IndexProgress(files=3, chunked=2, texts=40, embedded=10, written=1)
        >>> p.embedded / p.texts
        0.25
    """

    files: int = 0
    chunked: int = 0
    texts: int = 0
    embedded: int = 0
    written: int = 0
    path: str | None = None


ProgressCallback = Callable[[IndexProgress], None]


class Tracker:
    """Counts a run's progress from its threads and hands each new :class:`IndexProgress` to ``callback``, one
    at a time (under a lock, so a display sees the counts in order; keep the callback quick)."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self._callback = callback
        self._lock = threading.Lock()
        self.now = IndexProgress()

    def _add(self, **counts: int | str | None) -> None:
        if self._callback is None:
            return
        with self._lock:
            changes = {k: (v if k == "path" else getattr(self.now, k) + v) for k, v in counts.items()}
            self.now = replace(self.now, **changes)  # type: ignore[arg-type]
            self._callback(self.now)

    def skipped(self) -> None:
        """A file needed no chunking (unchanged), or failed before it."""
        self._add(files=1)

    def chunked(self, path: str, texts: int) -> None:
        """A file was chunked; ``texts`` of its texts go to the model."""
        self._add(files=1, chunked=1, texts=texts, path=path)

    def embedded(self, texts: int) -> None:
        """``texts`` more texts were settled."""
        if texts:
            self._add(embedded=texts)

    def written(self, files: int) -> None:
        """``files`` more files were written."""
        if files:
            self._add(written=files)
