"""The ``index`` command's progress on stderr: files chunked, and for a hybrid index the texts embedded.

On a hybrid index the model is what takes the time, and it runs behind the chunker: a count of files alone reached
90% with most of the run still to come. So the embedding is a phase of its own, counted in texts (a big file moves
too), with a rate and an estimate of the time left. The total of texts is known only once every file is chunked;
until then it is estimated from the files chunked so far and shown as ``~N``.

On a terminal each phase is a tqdm bar; otherwise (a pipe, a log) a line at every tenth of a phase, and one at
least every :data:`EVERY` seconds while a phase is under way, moving or not (one big file being chunked, one slow
call to the model: the elapsed time still moves)::

    indexing: 40/99 files (40%), 91.7 files/s, 0.4 s, eta 1 s                          (a lexical index)
    chunking: 40/99 files (40%), 91.7 files/s, 0.4 s                                   (a hybrid index)
    embedding: 320/~2800 texts (11%), 24.1 texts/s, 13.3 s, eta 104 s; 12/99 files written
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from typing import IO, Any

from ..retrieval.indexing.progress import IndexProgress

__all__ = ["EVERY", "Progress"]

EVERY = 5.0
"""Seconds: a phase under way prints a line at least this often (line mode; a bar is redrawn)."""


class _Phase:
    """One counted phase: its numbers, when it started, and when it last printed."""

    def __init__(self, name: str, unit: str) -> None:
        self.name = name
        self.unit = unit
        self.done = 0
        self.total = 0
        self.estimated = False
        self.start: float | None = None
        self.last_line = 0.0
        self.last_tenth = -1
        self.shown: tuple[int, ...] = ()  # the counts of the last line
        self.bar: Any = None

    def line(self, now: float, *, eta: bool = True, tail: str = "") -> str:
        start = self.start if self.start is not None else now
        elapsed = now - start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        total = f"~{self.total}" if self.estimated else str(self.total)
        pct = 100 * self.done // self.total if self.total else 100
        left = f", eta {(self.total - self.done) / rate:.0f} s" if eta and rate > 0 and self.done < self.total else ""
        return (f"{self.name}: {self.done}/{total} {self.unit} ({pct}%), {rate:.1f} {self.unit}/s, {elapsed:.1f} s"
                f"{left}{tail}")


class Progress:
    """Prints an index run's :class:`~llmc_splitters.retrieval.IndexProgress` (see the module docstring).

    Args:
        total: Files the run was given.
        enabled: ``False``: print nothing (``--quiet``).
        hybrid: The index embeds: chunking and embedding are shown as two phases.
        stream: Where to print (default stderr).
    """

    def __init__(self, total: int, *, enabled: bool, hybrid: bool, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.hybrid = hybrid
        self.now = IndexProgress()
        self.files = _Phase("chunking" if hybrid else "indexing", "files")
        self.files.total = total
        self.files.start = time.monotonic()
        self.texts = _Phase("embedding", "texts")
        self.enabled = enabled and total > 0
        self.bars = self.enabled and bool(getattr(self.stream, "isatty", lambda: False)()) and \
            importlib.util.find_spec("tqdm") is not None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        if self.enabled and self.bars:
            self.files.bar = self._bar(self.files)
        elif self.enabled:
            self._print(self.files)
        if self.enabled:
            threading.Thread(target=self._beat, name="llmc-progress", daemon=True).start()

    @property
    def done(self) -> int:
        """Files dealt with so far."""
        return self.files.done

    def update(self, p: IndexProgress) -> None:
        """The callback the index calls at every step (one call at a time)."""
        self.now = p
        if not self.enabled:
            return
        with self._lock:
            self._update(p)

    def _update(self, p: IndexProgress) -> None:
        self.files.done = p.files
        if p.texts and self.texts.start is None:
            self.texts.start = time.monotonic()
        self.texts.done = p.embedded
        # Texts of the files still to chunk: as many per file as so far.
        rest = self.files.total - p.files
        self.texts.estimated = rest > 0
        self.texts.total = p.texts + (rest * p.texts // p.chunked if p.chunked and rest > 0 else 0)
        for phase in (self.files, self.texts):
            if phase is self.texts and (not self.hybrid or phase.start is None):
                continue
            self._show(phase, path=p.path)

    def finish(self) -> None:
        """The run is over: every phase at its end."""
        self._closed.set()
        if not self.enabled:
            return
        with self._lock:
            self._finish()

    def _finish(self) -> None:
        self.files.done = self.files.total
        self.texts.estimated = False
        self.texts.total = self.texts.done = self.now.texts
        for phase in (self.files, self.texts):
            if phase is self.texts and (not self.hybrid or phase.start is None):
                continue
            self._show(phase, final=True)

    def close(self) -> None:
        """Stop the heartbeat and take the bars down (also after an interruption)."""
        self._closed.set()
        with self._lock:
            for phase in (self.texts, self.files):
                if phase.bar is not None:
                    phase.bar.close()
                    phase.bar = None

    def _beat(self) -> None:
        """Every :data:`EVERY` seconds, the line (or the bar) of the phase under way, if nothing said it since."""
        while not self._closed.wait(EVERY):
            with self._lock:
                if self._closed.is_set():
                    return
                now = self.now
                if self.hybrid and self.texts.start is not None and now.embedded < now.texts:
                    phase = self.texts  # the model has texts in hand
                elif self.files.done < self.files.total:
                    phase = self.files  # a file is being read or chunked
                else:
                    continue  # the last writes
                if phase.bar is not None:
                    phase.bar.refresh()
                elif not self.bars and time.monotonic() - phase.last_line >= EVERY:
                    self._print(phase)

    # ------------------------------------------------------------------------------------------------ output

    def _show(self, phase: _Phase, *, path: str | None = None, final: bool = False) -> None:
        if self.bars:
            if phase.bar is None:
                phase.bar = self._bar(phase)
            if phase.bar.total != phase.total:
                phase.bar.total = phase.total
            if path and phase is self.files:
                phase.bar.set_postfix_str(path[-40:], refresh=False)
            elif phase is self.texts:
                phase.bar.set_postfix_str(f"{self.now.written}/{self.files.total} files written", refresh=False)
            phase.bar.update(phase.done - phase.bar.n)
            return
        if self._counts(phase) == phase.shown:
            return  # nothing moved since the last line
        tenth = 10 * phase.done // phase.total if phase.total else 10
        if final or tenth > phase.last_tenth or time.monotonic() - phase.last_line >= EVERY:
            self._print(phase)

    def _print(self, phase: _Phase) -> None:
        now = time.monotonic()
        phase.last_line = now
        phase.last_tenth = max(phase.last_tenth, 10 * phase.done // phase.total if phase.total else 10)
        phase.shown = self._counts(phase)
        tail = f"; {self.now.written}/{self.files.total} files written" if phase is self.texts else ""
        # On a hybrid index the time left is the model's: the embedding line says it, not the chunking one.
        print(phase.line(now, eta=not (self.hybrid and phase is self.files), tail=tail), file=self.stream, flush=True)

    def _counts(self, phase: _Phase) -> tuple[int, ...]:
        """What a line of ``phase`` shows, as numbers (a write moves the embedding line too)."""
        return phase.done, phase.total, phase.estimated, self.now.written if phase is self.texts else 0

    def _bar(self, phase: _Phase) -> Any:
        from tqdm import tqdm

        try:
            size = os.get_terminal_size(self.stream.fileno())
            sized = size.columns > 0 and size.lines > 0
        except (OSError, ValueError, AttributeError):
            sized = False
        # NOTE: tqdm hides its bar on a terminal that reports 0 rows (a pseudo-terminal nobody sized): give a size.
        extra: dict[str, Any] = {"dynamic_ncols": True} if sized else {"ncols": 100, "nrows": 24}
        unit = "file" if phase is self.files else "text"
        return tqdm(total=phase.total, unit=unit, file=self.stream, desc=phase.name, **extra)
