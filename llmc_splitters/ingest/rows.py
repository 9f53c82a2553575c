"""Engine-free ingestion: one file's bytes in, its index layout out as plain rows; and the same as a columnar batch.

Everything here is a pure, picklable, module-level function of its arguments, so the same code runs in a
``ProcessPoolExecutor``, as a Ray Data ``map_batches`` UDF, or inside Spark's ``mapInPandas``:

* :func:`chunk_file` turns one file ``(repository, path, bytes, settings)`` into a :class:`FileRows`: a status
  (``chunked``, ``skipped`` with a reason, ``failed`` with a reason), the file laid out for the index
  (:func:`~llmc_splitters.retrieval.storage.file_rows.build_file`, the one layout the serial index uses too) and that layout
  as *span rows*, plain dicts.
* :func:`chunk_batch` is the columnar form: a dict of equal-length columns (one row per *file*: ``repository``,
  ``path``, ``data``, optionally ``blob_sha``) in, a dict of columns :data:`BATCH_COLUMNS` out with one row per
  *span* plus one ``role == "file"`` status row per file. Rows out differ from rows in, as ``map_batches`` and
  ``mapInPandas`` allow. Values are strings and integers only (``metadata`` is a JSON string), so they convert to
  Arrow, pandas and Spark columns unchanged.
* :func:`read_chunk_batch` reads the bytes first (from git's object store by blob SHA, or from a work tree), for
  batches of manifest entries (:mod:`llmc_splitters.ingest.manifest`).
* :func:`prepared_file` is the inverse: the rows of one file (in any order, from any number of batches) back into
  the :class:`~llmc_splitters.retrieval.storage.file_rows.PreparedFile` that the index writes in one transaction.

The span-row format (the columns, :class:`FileRows`, rows back to spans) is in :mod:`.row_format`; the
settings and the names derived from a file (fingerprint, blob SHA, stored path, file version) in
:mod:`.settings`.

Ids are the chunker's own (:func:`~llmc_splitters.chunking.span.span_id` of the stored path, the byte range and the
text), so the same file ingested twice, by any engine, on any machine, gives the same ids, and re-ingestion is a
no-op; a span that an edit elsewhere in the file did not move or touch keeps its id. The stored path is
``repository/path`` when a repository is named, so repositories never share ids.

Example:
    >>> from llmc_splitters.ingest import IngestSettings, chunk_file
    >>> res = chunk_file("demo", "m.py", b"def f():\\n    return 1\\n", IngestSettings(max_tokens=64))
    >>> res.status, [(r["role"], r["kind"]) for r in res.rows]
    ('chunked', [('parent', 'module'), ('leaf', 'function'), ('summary', 'file')])
"""

from __future__ import annotations

import functools
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..chunking.inputs import binary_reason, decode
from ..errors import ConfigurationError, LlmcError
from .row_format import (  # noqa: F401 - SEARCHED_ROLES: re-exported for callers
    BATCH_COLUMNS,
    INT_COLUMNS,
    SEARCHED_ROLES,
    SPARK_SCHEMA,
    FileRows,
    _span_rows,
    prepared_file,
    row_span,
    rows_to_columns,
    view_row,
)
from .settings import (  # noqa: F401 - ROW_SCHEMA_VERSION, settings_dict: re-exported for callers
    ROW_SCHEMA_VERSION,
    IngestSettings,
    display_path,
    file_version,
    git_blob_sha,
    settings_dict,
    settings_fingerprint,
)

__all__ = [
    "BATCH_COLUMNS",
    "INT_COLUMNS",
    "SPARK_SCHEMA",
    "FileRows",
    "IngestSettings",
    "chunk_batch",
    "chunk_file",
    "display_path",
    "file_version",
    "git_blob_sha",
    "index_settings",
    "prepared_file",
    "read_chunk_batch",
    "row_span",
    "rows_to_columns",
    "settings_fingerprint",
    "view_row",
]


# -------------------------------------------------------------------------------------------------- one file


_chunkers: dict[IngestSettings, Any] = {}
_chunkers_lock = threading.Lock()


def _chunker(settings: IngestSettings) -> Any:
    """One :class:`~llmc_splitters.ASTChunker` per settings per process (the tokenizer loads once)."""
    with _chunkers_lock:
        c = _chunkers.get(settings)
        if c is None:
            from ..chunking.chunker import ASTChunker

            c = ASTChunker(
                settings.max_tokens, settings.tokenizer,
                max_file_bytes=settings.max_file_bytes, errors=settings.errors, analyze=True,
                overlap=settings.overlap,
            )
            _chunkers[settings] = c
        return c


@functools.lru_cache(maxsize=16)
def index_settings(settings: IngestSettings) -> str:
    """The settings string an index's file markers record for files chunked with ``settings``.

    It is :attr:`CodeIndex.settings_fingerprint <llmc_splitters.retrieval.CodeIndex.settings_fingerprint>` of the
    chunker these settings build, so a file ingested here counts as unchanged for ``CodeIndex.index_files`` /
    ``index_directory`` over the same index (same content hash, same settings); without summaries it differs, so
    that such an index re-lays those files out whole.
    """
    from types import SimpleNamespace

    from ..retrieval.index import CodeIndex

    # NOTE: CodeIndex derives its fingerprint from its chunker alone; calling its getter on the chunker these
    # settings build keeps one formula for both.
    getter = CodeIndex.settings_fingerprint.fget  # type: ignore[attr-defined]
    fp = str(getter(SimpleNamespace(chunker=_chunker(settings))))
    return fp if settings.summaries else f"{fp}:no-summaries"


def chunk_file(
    repository: str,
    path: str,
    data: bytes,
    settings: IngestSettings | None = None,
    *,
    blob_sha: str | None = None,
    fingerprint: str | None = None,
) -> FileRows:
    """Chunk one file and lay it out for the index. Pure: the same arguments always give the same rows.

    Args:
        repository: Repository name (``""`` for one repository); the stored path is ``repository/path``.
        path: Repository-relative path (used for language detection).
        data: The file's bytes, decoded by ``settings.errors`` exactly as the serial index decodes a file.
        settings: Chunking settings (default :class:`IngestSettings()`).
        blob_sha: The blob SHA the manifest planned. When given and the bytes hash differently (the work tree
            changed after planning), the file ``failed`` with that reason and is retried by the next run.
        fingerprint: :func:`settings_fingerprint` of ``settings`` (computed when omitted; pass it in hot loops).

    Returns:
        A :class:`FileRows`. Bad input never raises: binary or undecodable bytes give ``skipped``, a chunker
        error gives ``failed``, each with the reason.
    """
    from ..retrieval.storage.file_rows import build_file, sha
    from ..retrieval.indexing.workers import chunk

    settings = settings or IngestSettings()
    fp = fingerprint or settings_fingerprint(settings)
    actual = git_blob_sha(data)
    version = file_version(repository, path, actual, fp)
    if blob_sha is not None and blob_sha != actual:
        reason = f"content changed since it was planned (manifest blob {blob_sha[:12]}, read {actual[:12]})"
        return FileRows(repository, path, actual, version, "failed", reason)
    why = binary_reason(data)
    if why is not None:
        return FileRows(repository, path, actual, version, "skipped", f"binary: {why}")
    try:
        text = decode(data, settings.errors).text
    except LlmcError as exc:
        return FileRows(repository, path, actual, version, "skipped", f"undecodable: {exc}")
    shown = display_path(repository, path)
    try:
        # The serial index's own two steps: chunk the decoded text, then lay the tree out.
        tree = chunk(_chunker(settings), shown, text)
        prepared = build_file(shown, text, tree, file_hash=sha(text), settings=index_settings(settings),
                              summaries=settings.summaries)
    except LlmcError as exc:
        return FileRows(repository, path, actual, version, "failed", f"chunker error: {exc}")
    res = FileRows(repository, path, actual, version, "chunked", "", prepared)
    res.rows = _span_rows(res, prepared)
    return res


# ------------------------------------------------------------------------------------------------- columnar


def _column(batch: Mapping[str, Any], name: str, n: int, default: Any = None) -> list[Any]:
    col = batch.get(name)
    if col is None:
        return [default] * n
    return list(col)


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return str(v)


def _as_settings(settings: IngestSettings | Mapping[str, Any] | None) -> IngestSettings:
    if settings is None:
        return IngestSettings()
    if isinstance(settings, IngestSettings):
        return settings
    return IngestSettings(**dict(settings))


def chunk_batch(
    batch: Mapping[str, Sequence[Any]],
    settings: IngestSettings | Mapping[str, Any] | None = None,
) -> dict[str, list[Any]]:
    """Columnar :func:`chunk_file`: one row per file in, one row per span (plus a status row per file) out.

    Args:
        batch: Equal-length columns ``repository`` (optional, default ``""``), ``path``, ``data`` (bytes) and
            optionally ``blob_sha`` (checked against the bytes). Lists, numpy arrays and pandas Series all work:
            it is the batch of Ray's ``map_batches`` (default format), of Spark's ``mapInPandas`` (one
            ``DataFrame`` converted with ``{c: df[c] for c in df}``), or a plain dict.
        settings: :class:`IngestSettings` or a dict of its fields (JSON-friendly for Spark closures).

    Returns:
        Columns :data:`BATCH_COLUMNS` (``metadata`` as JSON); see :func:`rows_to_columns`.

    Example:
        >>> out = chunk_batch({"path": ["a.py"], "data": [b"x = 1\\n"]}, {"max_tokens": 64})
        >>> out["role"], out["status"]
        (['parent', 'leaf', 'summary', 'file'], ['chunked', 'chunked', 'chunked', 'chunked'])
    """
    s = _as_settings(settings)
    fp = settings_fingerprint(s)
    paths = [_text(p) for p in batch["path"]]
    n = len(paths)
    repos = [_text(r) for r in _column(batch, "repository", n, "")]
    datas = _column(batch, "data", n)
    shas = [(_text(x) or None) for x in _column(batch, "blob_sha", n)]
    results = []
    for repo, path, data, sha in zip(repos, paths, datas, shas):
        if data is None:
            fv = file_version(repo, path, sha or "", fp)
            results.append(FileRows(repo, path, sha or "", fv, "failed", "no data"))
            continue
        results.append(chunk_file(repo, path, bytes(data), s, blob_sha=sha, fingerprint=fp))
    return rows_to_columns(results)


# ------------------------------------------------------------------------------------------------- reading


def _read_git_blobs(root: str, shas: Sequence[str]) -> dict[str, bytes | str]:
    """Blob contents by SHA from git's object store (``git cat-file --batch``); an error message for a missing one."""
    out: dict[str, bytes | str] = {}
    if not shas:
        return out
    try:
        proc = subprocess.Popen(
            ["git", "-C", root, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        return {s: f"could not run git: {exc}" for s in shas}
    assert proc.stdin is not None and proc.stdout is not None
    # Feed and read in turn (one object at a time) so neither pipe fills up.
    for sha in shas:
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().decode().split()
        if len(header) < 3 or header[1] == "missing":
            out[sha] = f"blob {sha} not found in the git repository at {root}"
            continue
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)  # the newline after the content
        out[sha] = data if header[1] == "blob" else f"{sha} is a {header[1]}, not a blob"
    proc.stdin.close()
    proc.wait()
    return out


def read_chunk_batch(
    batch: Mapping[str, Sequence[Any]],
    settings: IngestSettings | Mapping[str, Any] | None = None,
    *,
    source: str = "git",
) -> dict[str, list[str]]:
    """Read a batch of manifest entries, then :func:`chunk_batch` them.

    Args:
        batch: Columns ``root`` (a local checkout of the repository), ``repository``, ``path``, ``blob_sha``.
        settings: Chunking settings.
        source: ``"git"`` reads each planned blob from the object store by SHA (exactly the planned content,
            whatever the work tree holds); ``"worktree"`` reads ``root/path`` from disk and checks its SHA (a file
            edited since planning ``failed`` and is retried next run).

    Returns:
        Columns as :func:`chunk_batch`; unreadable files get a ``failed`` status row.
    """
    if source not in ("git", "worktree"):
        msg = f"source must be 'git' or 'worktree', got {source!r}"
        raise ConfigurationError(msg)
    paths = [_text(p) for p in batch["path"]]
    n = len(paths)
    roots = [_text(r) for r in _column(batch, "root", n, ".")]
    repos = [_text(r) for r in _column(batch, "repository", n, "")]
    shas = [_text(s) for s in _column(batch, "blob_sha", n, "")]
    datas: list[bytes | None] = [None] * n
    errors: dict[int, str] = {}
    if source == "git":
        by_root: dict[str, list[int]] = {}
        for i, r in enumerate(roots):
            by_root.setdefault(r, []).append(i)
        for r, idx in by_root.items():
            got = _read_git_blobs(r, sorted({shas[i] for i in idx if shas[i]}))
            for i in idx:
                v = got.get(shas[i], "no blob SHA in the manifest entry")
                if isinstance(v, bytes):
                    datas[i] = v
                else:
                    errors[i] = v
    else:
        for i, (r, p) in enumerate(zip(roots, paths)):
            try:
                datas[i] = (Path(r) / p).read_bytes()
            except OSError as exc:
                errors[i] = f"could not read {p}: {type(exc).__name__}: {exc}"
    s = _as_settings(settings)
    fp = settings_fingerprint(s)
    results = []
    for i in range(n):
        data = datas[i]
        if data is None:
            fv = file_version(repos[i], paths[i], shas[i], fp)
            results.append(FileRows(repos[i], paths[i], shas[i], fv, "failed", errors.get(i, "not read")))
        else:
            results.append(chunk_file(repos[i], paths[i], data, s, blob_sha=shas[i] or None, fingerprint=fp))
    return rows_to_columns(results)
