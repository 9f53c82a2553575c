"""Incremental planning before any file is read: manifests from git, diffed against the last run.

A *manifest* lists ``(repository, path, blob_sha, size)`` for every file to ingest. It comes from git's own records
(``git ls-tree -r -l <ref>`` for a commit, ``git ls-files -s`` for the index), so building it reads no file: git
already knows each file's content hash (its blob SHA-1). The last successful run's manifest is kept in a small state
directory; diffing the new manifest against it gives the files to **add**, **re-chunk** and **delete**.

Scale: both manifests are *sorted* by ``(repository, path)`` (git lists paths in byte order; the state file is
written sorted), so the diff is a single merge pass over two streams. Memory holds only the change set, never
either manifest: 1,000,000 files with a 1% change set plan in seconds and a few MB (``benchmarks/scale.py``).

State directory layout (plain files, no database)::

    <state_dir>/manifest.tsv.gz      the last committed manifest (one header line, then sorted TSV rows)
    <state_dir>/manifest.next.tsv.gz the manifest being ingested (written while planning)
    <state_dir>/pending.json         the paths a started run touches; a run that dies leaves it behind and the
                                     next plan re-processes those paths, so nothing written part-way is orphaned

Example:
    >>> state = ManifestState("/tmp/llmc-state")                       # doctest: +SKIP
    >>> plan = state.plan(git_manifest("."), fingerprint="v1-...")      # doctest: +SKIP
    >>> len(plan.added), len(plan.changed), len(plan.deleted)           # doctest: +SKIP
    (0, 3, 1)
    >>> state.commit(plan)   # after the ingestion succeeded            # doctest: +SKIP
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

from ..errors import ConfigurationError, LlmcError

__all__ = [
    "DEFAULT_EXCLUDE",
    "ManifestEntry",
    "ManifestError",
    "ManifestState",
    "Plan",
    "diff_manifests",
    "filter_manifest",
    "git_manifest",
    "read_manifest",
    "write_manifest",
]

_FORMAT = "llmc-manifest/1"

DEFAULT_EXCLUDE = (
    "*.png", "*.jpg", "*.jpeg", "*.gif", "*.bmp", "*.ico", "*.webp", "*.tif", "*.tiff", "*.psd",
    "*.pdf", "*.zip", "*.gz", "*.tgz", "*.bz2", "*.xz", "*.7z", "*.rar", "*.jar", "*.war", "*.whl", "*.egg",
    "*.so", "*.dylib", "*.dll", "*.exe", "*.o", "*.a", "*.lib", "*.class", "*.pyc", "*.pyo",
    "*.woff", "*.woff2", "*.ttf", "*.otf", "*.eot", "*.mp3", "*.mp4", "*.wav", "*.ogg", "*.mov", "*.avi",
    "*.bin", "*.dat", "*.db", "*.sqlite", "*.parquet", "*.npy", "*.npz", "*.pkl", "*.pt", "*.onnx",
    "*.safetensors", "*.lock",
)
"""Name patterns :func:`filter_manifest` drops by default: files that are binary or not worth indexing."""


class ManifestError(LlmcError):
    """git failed, or a manifest file is unreadable."""


class ManifestEntry(NamedTuple):
    """One file as git records it.

    Attributes:
        repository: A name for the repository (``""`` for a single one); part of every span id.
        path: Repository-relative POSIX path.
        blob_sha: git's blob SHA-1 of the content (hex). Equal SHAs mean equal bytes.
        size: Size in bytes (``-1`` when unknown).
    """

    repository: str
    path: str
    blob_sha: str
    size: int

    @property
    def key(self) -> tuple[str, str]:
        """The sort and identity key ``(repository, path)``."""
        return (self.repository, self.path)


# --------------------------------------------------------------------------------------------------- from git


def _git(root: str | os.PathLike[str], *args: str) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            ["git", "-C", str(root), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except FileNotFoundError as exc:
        msg = "git is not installed or not on PATH; manifests are built from git's records"
        raise ManifestError(msg) from exc


def _records(stream: IO[bytes], chunk: int = 1 << 20) -> Iterator[bytes]:
    """Split a ``-z`` output stream on NUL without holding it whole."""
    buf = b""
    while True:
        block = stream.read(chunk)
        if not block:
            break
        buf += block
        parts = buf.split(b"\0")
        buf = parts.pop()
        yield from parts
    if buf:
        yield buf


def _finish(proc: subprocess.Popen[bytes], what: str) -> None:
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.wait() != 0:
        msg = f"{what} failed ({proc.returncode}): {err.strip()[:500]}"
        raise ManifestError(msg)


def git_manifest(
    root: str | os.PathLike[str],
    *,
    repository: str = "",
    ref: str | None = "HEAD",
    sizes: bool = True,
) -> Iterator[ManifestEntry]:
    """List a git repository's files with their blob SHAs and sizes, reading no file.

    Args:
        root: A directory inside the repository (a work tree or a bare repository).
        repository: The name recorded in every entry (and in every span id).
        ref: A commit-ish: ``git ls-tree -r -l <ref>`` lists that commit's files with sizes. ``None`` lists the
            index (``git ls-files -s``: staged content, including new files that are staged but not committed);
            sizes are then ``-1`` (the index does not record blob sizes).
        sizes: With a ``ref``, ask git for each blob's size (``-l``: git reads every blob's object header, a
            noticeable cost on a million files; ``False`` gives ``-1`` sizes and touches only tree objects).

    Yields:
        :class:`ManifestEntry` in git's order, which is byte order of the path. Submodules (gitlinks) and
        symbolic links are left out: they have no text of their own.

    Raises:
        ManifestError: git is missing, ``root`` is not in a repository, or ``ref`` is unknown.
    """
    if ref is not None:
        proc = _git(root, "ls-tree", "-r", *(["-l"] if sizes else []), "-z", "--full-tree", ref)
        what = f"git ls-tree -r {'-l ' if sizes else ''}{ref} in {root}"
    else:
        proc = _git(root, "ls-files", "-s", "-z")
        what = f"git ls-files -s in {root}"
    assert proc.stdout is not None
    for rec in _records(proc.stdout):
        meta, _, raw_path = rec.partition(b"\t")
        fields = meta.split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if ref is not None:
            # "<mode> <type> <sha> [<size>]\t<path>"
            mode, typ, sha = fields[0], fields[1], fields[2]
            if typ != b"blob" or mode == b"120000":
                continue
            size = fields[3] if sizes else b"-"
            yield ManifestEntry(repository, path, sha.decode(), int(size) if size != b"-" else -1)
        else:
            # "<mode> <sha> <stage>\t<path>"; a conflicted path has stages 1-3: keep stage 0 only.
            mode, sha, stage = fields[0], fields[1], fields[2]
            if stage != b"0" or mode in (b"160000", b"120000"):
                continue
            yield ManifestEntry(repository, path, sha.decode(), -1)
    _finish(proc, what)


def filter_manifest(
    entries: Iterable[ManifestEntry],
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    max_size: int | None = None,
) -> Iterator[ManifestEntry]:
    """Keep the entries worth reading, judged by path and size only.

    Args:
        entries: A manifest.
        include: Glob patterns matched against the file name or the whole path (``*.py``, ``src/*``); ``None``
            keeps every file.
        exclude: Patterns to drop (default: :data:`DEFAULT_EXCLUDE`, binary and generated formats).
        max_size: Drop files larger than this many bytes (entries of unknown size are kept).
    """
    for e in entries:
        name = e.path.rsplit("/", 1)[-1]
        if include is not None and not any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(e.path, g) for g in include):
            continue
        if any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(e.path, g) for g in exclude):
            continue
        if max_size is not None and e.size > max_size:
            continue
        yield e


# ------------------------------------------------------------------------------------------------ file format

_NEEDS_QUOTING = re.compile(r'[\t\n\r\\"]')


def _quote(path: str) -> str:
    """The path as written in a manifest line: as is, or JSON-quoted if it holds a tab, newline, ``\\`` or ``"``."""
    return json.dumps(path) if _NEEDS_QUOTING.search(path) else path


def _unquote(field: str) -> str:
    return json.loads(field) if field[:1] == '"' else field


def write_manifest(
    path: str | os.PathLike[str], entries: Iterable[ManifestEntry], *, header: dict[str, object] | None = None
) -> int:
    """Write a manifest file (gzip, a JSON header line, then one ``repository\\tpath\\tsha\\tsize`` line per file).

    The entries must come sorted by ``(repository, path)``; the file is written to a temporary name and renamed, so
    a reader never sees half a file.

    Returns:
        The number of entries written.

    Raises:
        ManifestError: The entries are not sorted or repeat a key.
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    n = 0
    prev: tuple[str, str] | None = None
    with gzip.open(tmp, "wt", encoding="utf-8", errors="surrogateescape", compresslevel=3, newline="\n") as fh:
        fh.write(json.dumps({"format": _FORMAT, **(header or {})}) + "\n")
        for e in entries:
            key = e.key
            if prev is not None and key <= prev:
                msg = f"manifest entries must be sorted by (repository, path) and unique; {key} came after {prev}"
                raise ManifestError(msg)
            prev = key
            fh.write(f"{_quote(e.repository)}\t{_quote(e.path)}\t{e.blob_sha}\t{e.size}\n")
            n += 1
    os.replace(tmp, target)
    return n


def read_manifest_header(path: str | os.PathLike[str]) -> dict[str, object]:
    """The header of a manifest file (``format`` and what the writer recorded, e.g. the settings fingerprint)."""
    with gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="\n") as fh:
        return _header(fh.readline(), path)


def _header(line: str, path: object) -> dict[str, object]:
    try:
        head = json.loads(line)
    except ValueError as exc:
        msg = f"{path} is not a manifest file (bad header line)"
        raise ManifestError(msg) from exc
    if not isinstance(head, dict) or head.get("format") != _FORMAT:
        msg = f"{path} is not a {_FORMAT} manifest (header {line[:100]!r})"
        raise ManifestError(msg)
    return head


def read_manifest(path: str | os.PathLike[str]) -> Iterator[ManifestEntry]:
    """Stream the entries of a manifest file (sorted by ``(repository, path)``)."""
    with gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="\n") as fh:
        _header(fh.readline(), path)
        for line in fh:
            repo, p, sha, size = line[:-1].split("\t")
            if repo[:1] == '"':
                repo = json.loads(repo)
            if p[:1] == '"':
                p = json.loads(p)
            yield ManifestEntry(repo, p, sha, int(size))


# ------------------------------------------------------------------------------------------------------- diff


@dataclass(slots=True)
class Plan:
    """What an ingestion run must do.

    Attributes:
        added: Files new since the last run.
        changed: Files whose blob SHA changed (or that must be re-chunked: new settings, an interrupted run).
        deleted: Files gone since the last run (their spans are removed).
        unchanged: Files left alone (counted, not listed).
        total: Files in the new manifest.
        reasons: Why a file is re-chunked although its SHA did not change, per key (``settings changed``,
            ``interrupted run``).
        fingerprint: The settings fingerprint the plan was made for.
        full: ``True`` when there was no usable previous manifest (everything is ``added``).
    """

    added: list[ManifestEntry] = field(default_factory=list)
    changed: list[ManifestEntry] = field(default_factory=list)
    deleted: list[ManifestEntry] = field(default_factory=list)
    unchanged: int = 0
    total: int = 0
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)
    fingerprint: str = ""
    full: bool = False

    @property
    def to_chunk(self) -> list[ManifestEntry]:
        """Files to read and chunk: ``added`` then ``changed``."""
        return [*self.added, *self.changed]

    def __repr__(self) -> str:
        return (
            f"Plan(total={self.total}, added={len(self.added)}, changed={len(self.changed)}, "
            f"deleted={len(self.deleted)}, unchanged={self.unchanged})"
        )


def _keyed(entries: Iterable[ManifestEntry], what: str) -> Iterator[tuple[tuple[str, str], ManifestEntry]]:
    """``(key, entry)`` pairs, checking the order on the way (the key is built once per entry)."""
    prev: tuple[str, str] | None = None
    for e in entries:
        k = (e[0], e[1])
        if prev is not None and k <= prev:
            msg = (
                f"the {what} manifest is not sorted by (repository, path) ({k} after {prev}); "
                "sort it, or list several repositories in order of their names"
            )
            raise ManifestError(msg)
        prev = k
        yield k, e


_END = (("\U0010ffff" * 2, ""), None)


def diff_manifests(
    old: Iterable[ManifestEntry],
    new: Iterable[ManifestEntry],
    *,
    force: Iterable[tuple[str, str]] = (),
    rechunk_all: bool = False,
    on_new: Callable[[ManifestEntry], None] | None = None,
) -> Plan:
    """Merge-join two sorted manifests into a :class:`Plan`, in one pass and memory for the change set only.

    Args:
        old: The last run's manifest, sorted by ``(repository, path)``.
        new: The current manifest, sorted the same way.
        force: Keys to re-process whatever their SHA (a file present in ``new`` is ``changed``; one absent from
            both is ``deleted``, so spans a dead run wrote are removed).
        rechunk_all: Treat every file present in both as ``changed`` (the chunking settings changed).
        on_new: Called with every entry of ``new`` in order (used to save the new manifest while diffing).

    Raises:
        ManifestError: A manifest is not sorted.
    """
    plan = Plan()
    forced = set(force)
    added, changed, deleted = plan.added, plan.changed, plan.deleted
    old_it = _keyed(old, "previous")
    new_it = _keyed(new, "new")
    ok, o = next(old_it, _END)
    nk, n = next(new_it, _END)
    total = unchanged = 0
    # NOTE: the loop is the hot path of planning a million files; keys are compared as tuples built once, and the
    # sentinel key sorts after every real one, so each branch has a single comparison.
    while o is not None or n is not None:
        if n is not None and (o is None or nk < ok):
            added.append(n)
            if forced:
                forced.discard(nk)
            if on_new is not None:
                on_new(n)
            total += 1
            nk, n = next(new_it, _END)
        elif o is not None and (n is None or ok < nk):
            deleted.append(o)
            if forced:
                forced.discard(ok)
            ok, o = next(old_it, _END)
        else:
            assert o is not None and n is not None
            if on_new is not None:
                on_new(n)
            total += 1
            if o[2] != n[2]:
                changed.append(n)
                if forced:
                    forced.discard(nk)
            elif rechunk_all or (forced and nk in forced):
                changed.append(n)
                plan.reasons[nk] = "settings changed" if rechunk_all else "interrupted run"
                forced.discard(nk)
            else:
                unchanged += 1
            ok, o = next(old_it, _END)
            nk, n = next(new_it, _END)
    plan.total, plan.unchanged = total, unchanged
    # Forced keys in neither manifest: a dead run may have written spans for them; delete whatever is there.
    for repo, p in sorted(forced):
        deleted.append(ManifestEntry(repo, p, "", -1))
        plan.reasons[(repo, p)] = "interrupted run"
    return plan


# ---------------------------------------------------------------------------------------------------- state


class ManifestState:
    """The manifest of the last successful run, kept in a directory, and the bookkeeping of the run in progress.

    Args:
        state_dir: Where to keep the files (created if missing). One directory per target collection.

    A run is: :meth:`plan` (diffs, saves the new manifest aside, records the touched paths in ``pending.json``),
    the ingestion itself, then :meth:`commit` (the new manifest becomes the baseline; ``pending.json`` is removed).
    A run that dies before :meth:`commit` leaves the baseline as it was and ``pending.json`` behind: the next
    :meth:`plan` re-processes every path the dead run touched, so whatever it wrote is either rewritten (same
    deterministic ids) or deleted.
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.baseline = self.dir / "manifest.tsv.gz"
        self.next = self.dir / "manifest.next.tsv.gz"
        self.pending = self.dir / "pending.json"

    def __repr__(self) -> str:
        return f"ManifestState({str(self.dir)!r})"

    def pending_keys(self) -> list[tuple[str, str]]:
        """Keys a run that did not finish was working on."""
        if not self.pending.exists():
            return []
        data = json.loads(self.pending.read_text(encoding="utf-8"))
        return [tuple(k) for k in data.get("keys", [])]  # type: ignore[misc]

    def plan(self, entries: Iterable[ManifestEntry], *, fingerprint: str, full: bool = False) -> Plan:
        """Diff ``entries`` (sorted) against the last committed manifest.

        Args:
            entries: The current manifest, e.g. :func:`git_manifest` (optionally through :func:`filter_manifest`).
            fingerprint: The chunking settings' fingerprint (:func:`llmc_splitters.ingest.settings_fingerprint`);
                when it differs from the baseline's, every file is re-chunked.
            full: Ignore the baseline: every file is ``added`` (ids are deterministic, so this rewrites the same
                records and is safe on a populated store).

        Returns:
            The :class:`Plan`. The touched keys are recorded in ``pending.json`` before this returns.
        """
        if not fingerprint:
            msg = "fingerprint must be the settings fingerprint (llmc_splitters.ingest.settings_fingerprint)"
            raise ConfigurationError(msg)
        old: Iterable[ManifestEntry] = ()
        rechunk_all = False
        have_baseline = self.baseline.exists() and not full
        if have_baseline:
            head = read_manifest_header(self.baseline)
            rechunk_all = head.get("fingerprint") != fingerprint
            old = read_manifest(self.baseline)
        force = self.pending_keys()
        tmp = self.next.with_name(self.next.name + ".part")
        with gzip.open(tmp, "wt", encoding="utf-8", errors="surrogateescape", compresslevel=3, newline="\n") as fh:
            fh.write(json.dumps({"format": _FORMAT, "fingerprint": fingerprint}) + "\n")
            lines: list[str] = []

            def save(e: ManifestEntry) -> None:
                lines.append(f"{_quote(e[0]) if e[0] else ''}\t{_quote(e[1])}\t{e[2]}\t{e[3]}\n")
                if len(lines) >= 8192:
                    fh.write("".join(lines))
                    lines.clear()

            plan = diff_manifests(old, entries, force=force, rechunk_all=rechunk_all, on_new=save)
            fh.write("".join(lines))
        os.replace(tmp, self.next)
        plan.fingerprint = fingerprint
        plan.full = not have_baseline
        touched = sorted({*force, *(e.key for e in plan.added), *(e.key for e in plan.changed),
                          *(e.key for e in plan.deleted)})
        self._write_pending(touched)
        return plan

    def _write_pending(self, keys: list[tuple[str, str]]) -> None:
        tmp = self.pending.with_name(self.pending.name + ".tmp")
        tmp.write_text(json.dumps({"keys": [list(k) for k in keys]}), encoding="utf-8")
        os.replace(tmp, self.pending)

    def commit(self, plan: Plan, *, failed: Iterable[tuple[str, str]] = ()) -> None:
        """Make the planned manifest the baseline, after the run succeeded.

        Args:
            plan: The plan that was carried out.
            failed: Keys whose ingestion failed for a reason worth retrying (a read error): they keep their old
                baseline entry (or none), so the next run plans them again, and they stay in ``pending.json``.
        """
        failed_set = set(failed)
        if not self.next.exists():
            msg = f"nothing to commit in {self.dir}: call plan() first"
            raise ManifestError(msg)
        if failed_set:
            old = {}
            if self.baseline.exists():
                old = {e.key: e for e in read_manifest(self.baseline) if e.key in failed_set}

            def merged() -> Iterator[ManifestEntry]:
                for e in read_manifest(self.next):
                    if e.key in failed_set:
                        if e.key in old:
                            yield old[e.key]
                        continue
                    yield e

            write_manifest(self.baseline, merged(), header={"fingerprint": plan.fingerprint})
            self.next.unlink()
            self._write_pending(sorted(failed_set))
            return
        os.replace(self.next, self.baseline)
        self.pending.unlink(missing_ok=True)

