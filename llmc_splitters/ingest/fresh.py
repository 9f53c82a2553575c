"""Keep an index in step with its tree on disk: a stat-first scan that finds the candidates, refreshes, a watcher.

Two layers check stats, each for its own job:

* :class:`TreeState` finds *which paths may have changed* without reading files or the index: it keeps the
  ``stat`` of every file it handed to the index, and the modification times of every directory the last walk
  entered and of their ``.gitignore`` files. A file whose size and modification time are what they were is not a
  candidate; a changed or vanished one is. The tree is walked again
  (:func:`~llmc_splitters.ingest.walk.walk`, which reads the first 8 KiB of each file to skip binary and generated
  ones) only when a directory changed (a file added, removed or renamed) or a ``.gitignore`` was edited. So a check
  of an unchanged tree costs one ``stat`` per file and directory and reads no file contents, which is what lets a
  server check before every request.
* :meth:`CodeIndex.index_files <llmc_splitters.retrieval.CodeIndex.index_files>` decides *what to re-index*: its own
  stat check (against the size and modification time recorded with each file) skips files that did not change, and
  a content hash skips those only touched, so the first refresh after a start (which hands every selected file to
  the index, :class:`TreeState` having no stats yet) reads no unchanged file either.

:class:`Refresher` applies the changes. Searches need no lock against it: each file's rows are replaced in one
transaction and a query reads in one snapshot (:meth:`SpanStore.snapshot
<llmc_splitters.retrieval.storage.span_store.SpanStore.snapshot>`), so it sees each file whole, before or after. It keeps the
index fresh in one of two ways:

* **watch**: a ``watchdog`` observer on the root; each event marks the tree dirty, and once no event has come for
  ``debounce`` seconds a scan runs (so a file being written is indexed once, after its last write);
* **refresh**: before each request, :meth:`Refresher.before_request` runs a scan (a burst of concurrent requests
  shares one), indexing up to a few changed files inline; more changes, or a refresh that is already running, are
  left to a background refresh and the caller is told so.

Example:
    >>> import tempfile, pathlib
    >>> from llmc_splitters.retrieval import CodeIndex
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "m.py").write_text("def ping():\\n    return 1\\n")
    >>> index = CodeIndex()
    >>> refresher = Refresher(lambda: index, root, WalkOptions())
    >>> refresher.refresh().added
    ['m.py']
    >>> refresher.refresh().changed           # nothing changed: one stat per file, nothing read
    False
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import LlmcError, missing_dependency
from .walk import ALWAYS_ENTER, WalkOptions, walk

__all__ = ["Changes", "RefreshReport", "Refresher", "TreeState"]

log = logging.getLogger(__name__)

_Stat = tuple[int, int]  # (size, mtime_ns)


def _stat(p: Path) -> _Stat | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _dir_mtime(p: Path) -> int | None:
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return None


@dataclass
class Changes:
    """What a scan found. ``stats`` holds the new ``stat`` of each changed file, taken before it is read."""

    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    walked: bool = False
    stats: dict[str, _Stat] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why the walk left it out (for reindex(paths))
    selected: set[str] | None = None  # the walk's selection, when it walked
    # The mtimes of the directories walked and of their .gitignore files, and whether one changed during the walk.
    layout: tuple[dict[str, int | None], dict[str, int | None], bool] | None = None

    def __bool__(self) -> bool:
        return bool(self.changed or self.removed)


class TreeState:
    """The ``stat`` table of one indexed tree (see the module docstring).

    Args:
        root: The tree.
        options: The walk policy that selects its files (the one it was indexed with).

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "m.py").write_text("x = 1\\n")
        >>> state = TreeState(root, WalkOptions())
        >>> state.scan().changed
        ['m.py']
        >>> state.commit(state.scan())
        >>> bool(state.scan())                  # nothing changed: no file was read
        False
    """

    def __init__(self, root: Path, options: WalkOptions) -> None:
        self.root = root
        self.options = options
        self.files: dict[str, _Stat] = {}
        self._dirs: dict[str, int | None] = {}
        self._ignores: dict[str, int | None] = {}
        self._walked = False

    def _layout_changed(self) -> bool:
        if not self._walked:
            return True
        for rel, mtime in self._dirs.items():
            if _dir_mtime(self.root / rel) != mtime:
                return True
        return any(_dir_mtime(self.root / rel) != m for rel, m in self._ignores.items())

    def _layout(self, skipped_dirs: set[str]) -> tuple[dict[str, int | None], dict[str, int | None]]:
        """The mtime of every directory the walk entered and of their ``.gitignore`` files."""
        dirs: dict[str, int | None] = {}
        ignores: dict[str, int | None] = {}
        never = {Path(p).resolve() for p in self.options.never_enter}
        for dirpath, dirnames, _files in os.walk(self.root):
            here = Path(dirpath)
            rel = here.relative_to(self.root).as_posix()
            rel = "" if rel == "." else rel
            dirs[rel] = _dir_mtime(here)
            ign = here / ".gitignore"
            if ign.is_file():
                ignores[f"{rel}/.gitignore" if rel else ".gitignore"] = _dir_mtime(ign)
            dirnames[:] = [
                d for d in dirnames
                if (f"{rel}/{d}/" if rel else f"{d}/") not in skipped_dirs and (here / d).resolve() not in never
            ]
        return dirs, ignores

    def scan(self, *, full: bool = False) -> Changes:
        """Compare the tree with the table (walking only if the layout changed, or with ``full``).

        Nothing is recorded until :meth:`commit`: a scan whose changes are not applied is found again.
        """
        out = Changes()
        if full or self._layout_changed():
            started = time.time_ns()
            walked = walk(self.root, self.options)
            out.walked = True
            out.selected = set(walked.files)
            out.skipped = {s.path: s.reason for s in walked.skipped}
            dirs, ignores = self._layout({s.path for s in walked.skipped if s.path.endswith("/")})
            # A directory changed while the walk ran may hold files the walk missed: the next scan walks again.
            # (A margin for file systems whose timestamps lag the clock by a tick.)
            recent = started - 50_000_000
            out.layout = (dirs, ignores, any(m is None or m >= recent for m in (*dirs.values(), *ignores.values())))
            candidates: Iterable[str] = walked.files
            out.removed = sorted(set(self.files) - out.selected)
        else:
            candidates = list(self.files)
        for rel in candidates:
            st = _stat(self.root / rel)
            if st is None:
                if rel in self.files:
                    out.removed.append(rel)
                continue
            if self.files.get(rel) != st:
                out.changed.append(rel)
                out.stats[rel] = st
        out.removed = sorted(set(out.removed))
        return out

    def commit(self, changes: Changes, done: Iterable[str] | None = None) -> None:
        """Record ``changes`` as applied (only the paths in ``done``, when given: the rest is retried next scan)."""
        keep = set(changes.changed) if done is None else set(done)
        for rel in changes.changed:
            if rel in keep:
                self.files[rel] = changes.stats[rel]
        for rel in changes.removed:
            self.files.pop(rel, None)
        if changes.layout is not None:
            self._dirs, self._ignores, racy = changes.layout
            self._walked = not racy

    def forget(self, rel: str) -> None:
        """Drop one file's row, so the next scan looks at it again."""
        self.files.pop(rel, None)


@dataclass
class RefreshReport:
    """What one refresh did. Paths are relative to the root.

    Attributes:
        bytes_read: File content the index read (0 when every file it was handed had the stat it recorded).
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    walked: bool = False
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the index changed."""
        return bool(self.added or self.updated or self.removed)


class Refresher:
    """Applies scans to an index and keeps it fresh (watch or refresh mode; see the module docstring).

    Args:
        index: Returns the open :class:`~llmc_splitters.retrieval.CodeIndex` (may raise an
            :class:`~llmc_splitters.errors.LlmcError`, for example when the index cannot be opened yet).
        root: The indexed tree.
        options: Its walk policy (the one it was indexed with).
        on_refreshed: Called after each refresh that changed something (the CLI writes its manifest).
    """

    INLINE_LIMIT = 20  # changed files a request indexes before it answers; more go to a background refresh
    RETRY_SECONDS = 5.0  # watch mode: a refresh that failed (the index busy with another writer) is tried again

    def __init__(
        self,
        index: Callable[[], Any],
        root: Path,
        options: WalkOptions,
        *,
        on_refreshed: Callable[[RefreshReport], None] | None = None,
    ) -> None:
        self._index = index
        self.root = root
        self.state = TreeState(root, options)
        self.on_refreshed = on_refreshed
        self.mode = "refresh"
        self.last_update: datetime | None = None
        self.last_report: RefreshReport | None = None
        self.last_error: str | None = None
        self._run_lock = threading.Lock()
        self._running = False
        self._scan_started = -1.0
        self._first_done = False
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._last_event = 0.0
        self._scheduled = False
        self._stop = threading.Event()
        self._observer: Any = None
        self._threads: list[threading.Thread] = []
        self.debounce = 0.5

    # ---------------------------------------------------------------------------------------------- status

    @property
    def running(self) -> bool:
        """Whether a refresh is running now."""
        return self._running

    @property
    def pending(self) -> int:
        """Paths the watcher reported that no refresh has looked at yet."""
        with self._cond:
            return len(self._pending)

    @property
    def caught_up(self) -> bool:
        """Whether the first full refresh (the catch-up after start) has finished."""
        return self._first_done

    # --------------------------------------------------------------------------------------------- refresh

    def refresh(self, *, full: bool = False, only: list[str] | None = None, force: bool = False) -> RefreshReport:
        """Scan and apply the changes; waits for a refresh already running, then runs its own.

        Args:
            full: Walk the tree even if no directory changed (``reindex()``, the first refresh).
            only: Apply only changes under these relative paths (files or directories; ``""`` is the root).
            force: Hand the files under ``only`` to the index even if the scan saw no new ``stat`` (the index
                still skips a file whose recorded stat matches, and one whose content hash matches).
        """
        with self._run_lock:
            return self._refresh_locked(full=full or not self._first_done, only=only, force=force)

    def _refresh_locked(self, *, full: bool, only: list[str] | None, force: bool,
                        changes: Changes | None = None) -> RefreshReport:
        t0 = time.monotonic()
        self._running = True
        self._scan_started = t0
        with self._cond:
            self._pending.clear()
        whole_tree = only is None or "" in only
        try:
            index = self._index()
            if changes is None:
                changes = self.state.scan(full=full)
            report = RefreshReport(walked=changes.walked)
            if full and changes.selected is not None and whole_tree:
                # Files the index holds that the tree no longer selects (deleted while no one watched, ignored
                # since, or indexed by another run with other rules).
                changes.removed = sorted(set(changes.removed) | (set(index.paths) - changes.selected))
            if only is not None:
                changes = self._restrict(changes, only, force)
                report.skipped = {p: why for p, why in changes.skipped.items() if _under(p.rstrip("/"), only)}
            # The first refresh always goes through the index, even with nothing to hand it: the index then
            # replays what a killed run left for its lexical index and vector store.
            self._apply(index, changes, report, replay=not self._first_done)
            if whole_tree:
                self._first_done = True
            self.last_error = None
        except LlmcError as exc:
            self.last_error = str(exc)
            raise
        finally:
            self._running = False
        report.seconds = round(time.monotonic() - t0, 3)
        self.last_report = report
        if report.changed or self.last_update is None:
            self.last_update = datetime.now(timezone.utc)
        if report.changed and self.on_refreshed is not None:
            self.on_refreshed(report)
        return report

    def _restrict(self, changes: Changes, only: list[str], force: bool) -> Changes:
        out = Changes(walked=changes.walked, skipped=changes.skipped, selected=changes.selected)
        out.changed = [p for p in changes.changed if _under(p, only)]
        out.removed = [p for p in changes.removed if _under(p, only)]
        out.stats = {p: changes.stats[p] for p in out.changed}
        if force and changes.selected is not None:
            for rel in sorted(changes.selected):
                if _under(rel, only) and rel not in out.stats:
                    st = _stat(self.root / rel)
                    if st is not None:
                        out.changed.append(rel)
                        out.stats[rel] = st
        return out

    def _apply(self, index: Any, changes: Changes, report: RefreshReport, *, replay: bool) -> None:
        try:
            if changes.changed or replay:
                got = index.index_files([self.root / rel for rel in changes.changed], root=self.root)
                report.added += got.added
                report.updated += got.updated
                report.removed += got.removed
                report.unchanged += len(got.unchanged)
                report.failed.update(got.failed)
                report.bytes_read += got.bytes_read
            if changes.removed:
                report.removed += index.remove_many(changes.removed)
        finally:
            # Let another process (`llmc-splitters index`) write between refreshes: the lexical index admits one
            # writer, and holds its directory lock as long as a writer is open.
            index.release_writers()
        report.removed = sorted(set(report.removed))
        # A failed file keeps its stat too: it is retried when it changes again, not at every scan.
        self.state.commit(changes)

    def before_request(self, *, wait: float = 2.0) -> str | None:
        """Refresh mode: bring the index up to date before a request; returns a note when it could not.

        A scan that started after this request arrived serves it (a burst of requests shares one). If a refresh
        is running and does not finish within ``wait`` seconds, or the scan finds more than :attr:`INLINE_LIMIT`
        changed files, the request is answered from the index as it is, and the changes are applied in the
        background.
        """
        arrived = time.monotonic()
        if not self._run_lock.acquire(timeout=wait):
            return "a refresh is running: results may miss the latest edits"
        try:
            if self._scan_started >= arrived:
                return None
            if not self._first_done:
                self._background(full=True)
                return "the index is still catching up with the tree: results may miss recent edits"
            changes = self.state.scan()
            if len(changes.changed) > self.INLINE_LIMIT:
                self._background(full=False)
                return f"{len(changes.changed)} changed files are being indexed: results may miss them"
            if changes:
                self._refresh_locked(full=False, only=None, force=False, changes=changes)
            else:
                self.state.commit(changes)  # a walk with nothing new still records the layout it saw
                self._scan_started = arrived
            return None
        finally:
            self._run_lock.release()

    def _background(self, *, full: bool) -> None:
        with self._cond:
            if self._scheduled:  # one queued background refresh is enough: it scans when it gets to run
                return
            self._scheduled = True
        t = threading.Thread(target=self._safe_refresh, kwargs={"full": full, "scheduled": True},
                             name="llmc-refresh", daemon=True)
        self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _safe_refresh(self, *, full: bool = False, scheduled: bool = False) -> bool:
        """One refresh in a background thread; ``False`` when it failed (logged, and kept in :attr:`last_error`)."""
        try:
            with self._run_lock:
                if scheduled:
                    with self._cond:
                        self._scheduled = False
                self._refresh_locked(full=full or not self._first_done, only=None, force=False)
            return True
        except LlmcError as exc:
            log.warning("refresh failed: %s", exc)
        except Exception:
            log.exception("refresh failed")
        return False

    # ----------------------------------------------------------------------------------------------- watch

    def watch(self, debounce: float = 0.5) -> None:
        """Start the ``watchdog`` observer and the debounce thread (watch mode).

        Raises:
            MissingDependencyError: ``watchdog`` is not installed.
            OSError: The platform refused a watch (for example the inotify watch limit).
        """
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError as exc:
            raise missing_dependency("watchdog", "mcp") from exc
        self.debounce = debounce
        refresher = self

        class _Handler(FileSystemEventHandler):  # type: ignore[misc]
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                for p in (getattr(event, "src_path", None), getattr(event, "dest_path", None)):
                    if p:
                        refresher._event(os.fsdecode(p))

        observer = Observer()
        observer.schedule(_Handler(), str(self.root), recursive=True)
        observer.daemon = True
        observer.start()
        self._observer = observer
        self.mode = "watch"
        t = threading.Thread(target=self._debounce_loop, name="llmc-watch", daemon=True)
        self._threads.append(t)
        t.start()

    def _event(self, path: str) -> None:
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return
        if not self._relevant(rel):
            return
        with self._cond:
            self._pending.add(rel)
            self._last_event = time.monotonic()
            self._cond.notify_all()

    def _relevant(self, rel: str) -> bool:
        """Whether an event on ``rel`` can change the selection (not in the database, VCS or cache directories)."""
        opts = self.state.options
        never = [Path(p).resolve() for p in opts.never_enter]
        full = (self.root / rel).resolve() if rel not in ("", ".") else self.root.resolve()
        if any(full == n or n in full.parents for n in never):
            return False
        parts = rel.split("/")
        for d in parts[:-1]:
            if any(fnmatch.fnmatchcase(d, pat) for pat in opts.skip_dirs):
                return False
            if d.startswith(".") and not opts.hidden and d not in ALWAYS_ENTER:
                return False
        name = parts[-1]
        return not (name.startswith(".") and name != ".gitignore" and not opts.hidden and name not in ALWAYS_ENTER)

    def _debounce_loop(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._pending and not self._stop.is_set():
                    self._cond.wait(1.0)
                if self._stop.is_set():
                    return
                # Wait until the tree has been quiet for `debounce` seconds: a file being written is indexed once.
                while (quiet := self._last_event + self.debounce - time.monotonic()) > 0:
                    self._cond.wait(quiet)
            if not self._safe_refresh():
                # Nothing was recorded as applied: the next scan finds the same changes. Schedule it, since no
                # event may come to trigger it.
                with self._cond:
                    self._pending.add("")
                    self._last_event = time.monotonic() + self.RETRY_SECONDS

    def stop(self, *, wait: float | None = None) -> None:
        """Stop watching; with ``wait``, give a refresh that is running that many seconds to finish its writes."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._observer is not None:
            # watchdog's inotify emitter logs an ERROR when it is stopped during a read ("... called when the thread
            # is inactive"): a race of its own shutdown, not a failure, which would end every session on stderr.
            logging.getLogger("watchdog.observers.inotify").addFilter(_quiet_stop)
            self._observer.stop()
        if wait is not None:
            deadline = time.monotonic() + wait
            for t in list(self._threads):
                t.join(max(0.0, deadline - time.monotonic()))


def _under(rel: str, only: Iterable[str]) -> bool:
    return any(o == "" or rel == o or rel.startswith(o + "/") for o in only)


def _quiet_stop(record: logging.LogRecord) -> bool:
    """Drop watchdog's "called when the thread is inactive" record (see :meth:`Refresher.stop`)."""
    return "called when the thread is inactive" not in record.getMessage()
