"""Engine-free ingestion: one file's bytes in, its index layout out as plain rows; and the same as a columnar batch.

Everything here is a pure, picklable, module-level function of its arguments, so the same code runs in a
``ProcessPoolExecutor``, as a Ray Data ``map_batches`` UDF, or inside Spark's ``mapInPandas``:

* :func:`chunk_file` turns one file ``(repository, path, bytes, settings)`` into a :class:`FileRows`: a status
  (``chunked``, ``skipped`` with a reason, ``failed`` with a reason), the file laid out for the index
  (:func:`~llmc_splitters.retrieval.records.build_file`, the one layout the serial index uses too) and that layout
  as *span rows*, plain dicts.
* :func:`chunk_batch` is the columnar form: a dict of equal-length columns (one row per *file*: ``repository``,
  ``path``, ``data``, optionally ``blob_sha``) in, a dict of columns :data:`BATCH_COLUMNS` out with one row per
  *span* plus one ``role == "file"`` status row per file. Rows out differ from rows in, as ``map_batches`` and
  ``mapInPandas`` allow. Values are strings and integers only (``metadata`` is a JSON string), so they convert to
  Arrow, pandas and Spark columns unchanged.
* :func:`read_chunk_batch` reads the bytes first (from git's object store by blob SHA, or from a work tree), for
  batches of manifest entries (:mod:`llmc_splitters.ingest.manifest`).
* :func:`prepared_file` is the inverse: the rows of one file (in any order, from any number of batches) back into
  the :class:`~llmc_splitters.retrieval.records.PreparedFile` that the index writes in one transaction.

A span row holds one row of the span store (``id``, ``role`` ``leaf``/``parent``/``summary``, ``file``: the path the
index stores, ``document``: the span's own path, the file's or a notebook cell's ``nb.ipynb#cell3``, the span's
fields, ``metadata`` as JSON; a parent's ``text`` is empty, since the store rebuilds it from the leaves), plus
``terms`` (a searched row's lexical terms, computed here, once) and two columns that the embed
stage fills: ``embed_text`` (the view the model embeds) and ``embed_hash`` (its cache key). A file's status row
carries its completion marker (content hash, settings, how many span rows make it whole) and the import bindings
of each of its documents in ``metadata``.

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
import hashlib
import json
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..chunking.inputs import ERRORS, binary_reason, decode
from ..errors import ConfigurationError, LlmcError

if TYPE_CHECKING:
    from ..chunking.span import Span
    from ..retrieval.records import PreparedFile, View

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

ROW_SCHEMA_VERSION = 2
"""Bumped when the row layout or the id derivation changes (it is part of the fingerprint)."""

SEARCHED_ROLES = frozenset({"leaf", "summary"})
"""Roles whose rows are embedded and searched; ``parent`` rows are looked up by id and byte range only."""

BATCH_COLUMNS = (
    "id", "role", "repository", "path", "file", "document", "seq", "blob_sha", "file_version", "language", "kind",
    "name",
    "text", "start_byte", "end_byte", "start_char", "end_char", "start_line", "end_line", "parent_id",
    "token_count", "metadata", "terms", "embed_text", "embed_hash", "status", "reason",
)
"""Columns of :func:`chunk_batch`'s output, in order."""

INT_COLUMNS = frozenset({"seq", "start_byte", "end_byte", "start_char", "end_char", "start_line", "end_line",
                         "token_count"})
"""The integer columns of :data:`BATCH_COLUMNS`; every other one is a string."""

SPARK_SCHEMA = ", ".join(f"{c} {'bigint' if c in INT_COLUMNS else 'string'}" for c in BATCH_COLUMNS)
"""The output schema of :func:`chunk_batch` as a Spark DDL string."""


@dataclass(frozen=True)
class IngestSettings:
    """Chunking settings: everything that changes the spans, and nothing that cannot be pickled.

    Attributes:
        max_tokens: Leaf budget of the :class:`~llmc_splitters.ASTChunker`.
        tokenizer: A tiktoken encoding name, or ``None`` for cl100k (offline-safe). A name, not an object, so the
            settings pickle and fingerprint.
        errors: Decoding policy for bytes (``"fallback"`` or ``"strict"``, see :mod:`llmc_splitters.chunking.inputs`).
        overlap: Prose overlap ratio of the chunker.
        max_file_bytes: Files larger than this are split by lines, not parsed.
        summaries: Also emit file and class summary rows (searched in multi-stage retrieval).
    """

    max_tokens: int = 512
    tokenizer: str | None = None
    errors: str = "fallback"
    overlap: float = 0.15
    max_file_bytes: int = 16 * 1024 * 1024
    summaries: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            msg = f"max_tokens must be a positive integer, got {self.max_tokens!r}"
            raise ConfigurationError(msg)
        if self.tokenizer is not None and not isinstance(self.tokenizer, str):
            msg = (
                f"tokenizer must be a tiktoken encoding name (a str) or None so the settings can be pickled and "
                f"fingerprinted, got {type(self.tokenizer).__name__}"
            )
            raise ConfigurationError(msg)
        if self.errors not in ERRORS:
            msg = f"errors must be one of {ERRORS}, got {self.errors!r}"
            raise ConfigurationError(msg)

    @property
    def tokenizer_name(self) -> str:
        """The tokenizer's name as the chunker reports it (``tiktoken:cl100k_base``), without loading it."""
        return f"tiktoken:{(self.tokenizer or 'cl100k_base').removesuffix('_offline')}"


def _versions() -> dict[str, str]:
    from importlib import metadata

    from .. import __version__

    out = {"llmc_splitters": __version__, "rows": str(ROW_SCHEMA_VERSION)}
    for dist in ("tree-sitter", "tree-sitter-language-pack"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "none"
    return out


def settings_fingerprint(settings: IngestSettings | None = None) -> str:
    """A short, stable fingerprint of what determines the spans: settings, tokenizer, library and grammar versions.

    Changing any of them makes :class:`~llmc_splitters.ingest.manifest.ManifestState` re-chunk every file, so rows
    of different settings never mix in one index.

    Example:
        >>> settings_fingerprint(IngestSettings(max_tokens=256)) == settings_fingerprint(IngestSettings(256))
        True
        >>> settings_fingerprint(IngestSettings(256)) == settings_fingerprint(IngestSettings(512))
        False
    """
    s = settings or IngestSettings()
    payload = {
        "max_tokens": s.max_tokens,
        "tokenizer": s.tokenizer_name,
        "errors": s.errors,
        "overlap": s.overlap,
        "max_file_bytes": s.max_file_bytes,
        "summaries": s.summaries,
        **_versions(),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f"v{ROW_SCHEMA_VERSION}-{digest[:16]}"


def git_blob_sha(data: bytes) -> str:
    """git's blob SHA-1 of ``data`` (what ``git hash-object`` prints)."""
    h = hashlib.sha1(b"blob %d\0" % len(data))  # noqa: S324 - git's object id, not a security hash
    h.update(data)
    return h.hexdigest()


def display_path(repository: str, path: str) -> str:
    """The path stored and shown in results: ``path``, or ``repository/path`` when a repository is named."""
    return f"{repository}/{path}" if repository else path


def file_version(repository: str, path: str, blob_sha: str, fingerprint: str) -> str:
    """Identifies one version of one file under one set of settings (carried on every row of that file)."""
    h = hashlib.sha1(f"{repository}\x00{path}\x00{blob_sha}\x00{fingerprint}".encode("utf-8", "surrogateescape"))  # noqa: S324
    return h.hexdigest()


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


@dataclass(slots=True)
class FileRows:
    """The outcome of chunking one file.

    Attributes:
        repository: As given.
        path: As given (repository-relative).
        blob_sha: git blob SHA of the bytes actually chunked.
        file_version: See :func:`file_version`.
        status: ``chunked``; ``skipped`` (binary, undecodable: permanent, the file is not retried until it
            changes); or ``failed`` (unreadable, changed since it was planned, chunker error: retried next run).
        reason: Why it was skipped or failed (``""`` when chunked).
        prepared: The file laid out for the index (``None`` unless chunked).
        rows: ``prepared`` as span rows: one plain dict per row of the span store, with the keys of
            :data:`BATCH_COLUMNS` (``metadata`` a dict here, a JSON string in columns).
    """

    repository: str
    path: str
    blob_sha: str
    file_version: str
    status: str
    reason: str = ""
    prepared: PreparedFile | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def file(self) -> str:
        """The path the index stores (see :func:`display_path`)."""
        return display_path(self.repository, self.path)


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
    from ..retrieval.records import build_file, sha
    from ..retrieval.workers import chunk

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


def _span_rows(res: FileRows, prepared: PreparedFile) -> list[dict[str, Any]]:
    """One plain dict per row of the span store, in the order the store writes them."""
    terms = {d.id: d.terms for d in (*prepared.leaves, *prepared.summaries)}
    views = {i: (vtext, eh) for i, vtext, eh in prepared.views}
    out = []
    for seq, r in enumerate(prepared.write.rows):
        s = r.span
        vtext, eh = views.get(seq, ("", r.embed_hash or ""))
        out.append({
            "id": s.id, "role": r.role, "repository": res.repository, "path": res.path, "file": r.file,
            "document": s.path or r.file, "seq": seq,
            "blob_sha": res.blob_sha, "file_version": res.file_version, "language": s.language, "kind": s.kind,
            "name": s.name or "", "text": "" if r.role == "parent" else s.text,
            "start_byte": s.start_byte, "end_byte": s.end_byte, "start_char": s.start_char, "end_char": s.end_char,
            "start_line": s.start_line, "end_line": s.end_line, "parent_id": s.parent_id or "",
            "token_count": s.token_count, "metadata": s.metadata, "terms": terms.get(s.id, ""),
            "embed_text": vtext, "embed_hash": eh, "status": "chunked", "reason": "",
        })
    return out


def _status_row(res: FileRows) -> dict[str, Any]:
    """A file's status row: its status and, when chunked, its completion marker and import bindings."""
    row: dict[str, Any] = {c: (0 if c in INT_COLUMNS else "") for c in BATCH_COLUMNS}
    marker: dict[str, Any] = {"n_spans": 0}
    if res.prepared is not None:
        m = res.prepared.write.marker
        marker = {"hash": m.hash, "settings": m.settings, "n_spans": m.n_spans, "n_leaves": m.n_leaves,
                  "bindings": res.prepared.write.bindings}
        row["language"] = m.language
    row.update(id=f"file:{res.file_version}", role="file", repository=res.repository, path=res.path, file=res.file,
               document=res.file, seq=-1, blob_sha=res.blob_sha, file_version=res.file_version, metadata=marker, status=res.status,
               reason=res.reason)
    return row


def _json(meta: Any) -> str:
    # default=str: what the span store does with a value JSON has no type for, so the stored text is the same.
    return meta if isinstance(meta, str) else json.dumps(meta, ensure_ascii=False, default=str)


def rows_to_columns(results: Iterable[FileRows]) -> dict[str, list[Any]]:
    """Flatten :class:`FileRows` into :data:`BATCH_COLUMNS`: each file's span rows, then its ``role == "file"`` row.

    ``metadata`` becomes a JSON string. A status row has the file's ``status`` and ``reason``; span rows have
    ``status == "chunked"`` and an empty ``reason``.
    """
    out: dict[str, list[Any]] = {c: [] for c in BATCH_COLUMNS}
    for res in results:
        for r in (*res.rows, _status_row(res)):
            for c in BATCH_COLUMNS:
                out[c].append(_json(r[c]) if c == "metadata" else r[c])
    return out


def _value(v: Any) -> Any:
    """A plain Python value from a column cell (numpy and Arrow hand out their own scalar types)."""
    return v.item() if hasattr(v, "item") else v


def _meta(v: Any) -> dict[str, Any]:
    return json.loads(v) if isinstance(v, (str, bytes)) else dict(v)


def row_span(row: Mapping[str, Any]) -> Span:
    """The :class:`~llmc_splitters.chunking.span.Span` of a span row (a parent's text is empty: the span store
    rebuilds it from the leaves)."""
    from ..chunking.span import Span

    r = {c: _value(row[c]) for c in BATCH_COLUMNS}
    return Span(str(r["id"]), str(r["document"]), str(r["language"]), str(r["kind"]), str(r["name"]) or None,
                str(r["text"]), int(r["start_byte"]), int(r["end_byte"]), int(r["start_char"]), int(r["end_char"]),
                int(r["start_line"]), int(r["end_line"]), str(r["parent_id"]) or None, int(r["token_count"]),
                _meta(r["metadata"]))


def view_row(row: dict[str, Any], view: View) -> None:
    """Give a searched row its embedded view, in place: ``embed_text`` (what the model embeds), ``embed_hash`` (its
    cache key) and, in ``metadata``, how it was bounded; the same view the serial index makes of the same row."""
    from ..retrieval.records import embed_source

    span = row_span(row)
    meta = span.metadata
    vtext, eh = view(embed_source(span, str(_value(row["role"]))), meta)
    row["embed_text"], row["embed_hash"], row["metadata"] = vtext, eh, _json(meta)


def prepared_file(status: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> PreparedFile:
    """The :class:`~llmc_splitters.retrieval.records.PreparedFile` of one chunked file, back from its rows.

    Args:
        status: The file's status row (``role == "file"``, ``status == "chunked"``).
        rows: Its span rows, in any order (batches of a distributed run may deliver them out of order); values may
            be numpy or Arrow scalars. A row whose ``embed_hash`` is set gets an embedded view.

    Returns:
        The file as :func:`~llmc_splitters.retrieval.records.build_file` laid it out (and the embed stage viewed
        it); its marker's ``indexed_at`` is now.

    Raises:
        LlmcError: The rows are not those its marker counts (some were lost on the way).
    """
    from ..retrieval.lexical_index import LexDoc
    from ..retrieval.records import PreparedFile
    from ..retrieval.spanstore import FileMarker, FileWrite, SpanRow

    marker = _meta(_value(status["metadata"]))
    file = str(_value(status["file"]))
    ordered = sorted(rows, key=lambda r: int(_value(r["seq"])))
    if [int(_value(r["seq"])) for r in ordered] != list(range(int(marker["n_spans"]))):
        msg = f"{file}: {len(ordered)} rows arrived of the {marker['n_spans']} its marker counts"
        raise LlmcError(msg)
    out = PreparedFile(file, FileWrite(FileMarker(file, str(marker["hash"]), str(marker["settings"]),
                                                  str(_value(status["language"])), None, None,
                                                  int(marker["n_spans"]), int(marker["n_leaves"]), time.time()),
                                       [], marker["bindings"]))
    for r in ordered:
        span = row_span(r)
        role = str(_value(r["role"]))
        eh = str(_value(r["embed_hash"])) or None
        if eh is not None:
            out.views.append((len(out.write.rows), str(_value(r["embed_text"])), eh))
        out.write.rows.append(SpanRow(span, role, file, eh))
        if role in SEARCHED_ROLES:
            doc = LexDoc(span.id, file, span.language, span.kind, str(_value(r["terms"])))
            (out.leaves if role == "leaf" else out.summaries).append(doc)
    return out


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


def settings_dict(settings: IngestSettings) -> dict[str, Any]:
    """The settings as a plain dict (for Spark closures or JSON config); :func:`chunk_batch` accepts it back."""
    return asdict(settings)
