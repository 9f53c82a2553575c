"""Engine-free ingestion: one file's bytes in, span rows out; and the same as a columnar batch function.

Everything here is a pure, picklable, module-level function of its arguments, so the same code runs in a
``ProcessPoolExecutor``, as a Ray Data ``map_batches`` UDF, or inside Spark's ``mapInPandas``:

* :func:`chunk_file` turns one file ``(repository, path, bytes, settings)`` into a :class:`FileRows`: a status
  (``chunked``, ``skipped`` with a reason, ``failed`` with a reason) and its *span rows*, plain dicts ready for a
  vector store and a docstore.
* :func:`chunk_batch` is the columnar form: a dict of equal-length columns (one row per *file*: ``repository``,
  ``path``, ``data``, optionally ``blob_sha``) in, a dict of columns out with one row per *span* plus one
  ``role == "file"`` status row per file. Rows out differ from rows in, as ``map_batches`` and ``mapInPandas``
  allow. Values are strings and integers only (``metadata`` is a JSON string), so they convert to Arrow, pandas
  and Spark columns unchanged.
* :func:`read_chunk_batch` reads the bytes first (from git's object store by blob SHA, or from a work tree), for
  batches of manifest entries (:mod:`llmc_splitters.ingest.manifest`).

Ids make re-ingestion a no-op. A span row's id is a UUID string derived from the repository, the path, the git blob
SHA of the file's content, the span's byte range, its role and kind, and the fingerprint of the chunking settings
(:func:`settings_fingerprint`: ``max_tokens``, tokenizer name, library and grammar versions...). The same file
ingested twice, by any engine, on any machine, gives the same ids, so writes are upserts. A separate
``content_hash`` (SHA-256 of exactly the text that gets embedded) keys the embedding cache: a span whose text did not
change keeps its vector even though its id changed with the file's blob SHA.

The rows are laid out like :class:`~llmc_splitters.retrieval.CodeIndex`'s own records (roles ``leaf``, ``parent``,
``summary``; ``span_json``; parent links; class skeletons and import bindings; a completion marker on the file's
root record), so a store filled by a distributed ingestion is searchable with
:class:`~llmc_splitters.retrieval.CodeRetriever` directly.

Example:
    >>> from llmc_splitters.ingest import IngestSettings, chunk_file
    >>> res = chunk_file("demo", "m.py", b"def f():\\n    return 1\\n", IngestSettings(max_tokens=64))
    >>> res.status, [(r["role"], r["metadata"]["kind"]) for r in res.rows]
    ('chunked', [('parent', 'module'), ('leaf', 'function'), ('summary', 'file')])
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LlmcError
from ..chunking.inputs import ERRORS, binary_reason, decode
from ..chunking.span import Span, SpanTree, span_id

__all__ = [
    "BATCH_COLUMNS",
    "FileRows",
    "IngestSettings",
    "SPARK_SCHEMA",
    "chunk_batch",
    "chunk_file",
    "display_path",
    "file_version",
    "git_blob_sha",
    "read_chunk_batch",
    "rows_to_columns",
    "settings_fingerprint",
]

ROW_SCHEMA_VERSION = 1
"""Bumped when the row layout or the id derivation changes (it is part of the fingerprint)."""

SEARCHED_ROLES = frozenset({"leaf", "summary"})
"""Roles whose rows are embedded and searched; ``parent`` rows are looked up by id only."""

BATCH_COLUMNS = (
    "id", "role", "repository", "path", "blob_sha", "file_version", "text", "embed_text", "content_hash",
    "parent_id", "skeleton", "metadata", "status", "reason",
)
"""Columns of :func:`chunk_batch`'s output, in order."""

SPARK_SCHEMA = ", ".join(f"{c} string" for c in BATCH_COLUMNS)
"""The output schema of :func:`chunk_batch` as a Spark DDL string (every column is a string)."""


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

    Changing any of them changes every span id (and makes :class:`~llmc_splitters.ingest.manifest.ManifestState`
    re-chunk every file), so records of different settings never mix under one id.

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
    """Identifies one version of one file under one set of settings (stored on every row of that file).

    Rows of a file whose ``file_version`` differs from the current one are stale and are deleted after the new
    rows are written.
    """
    h = hashlib.sha1(f"{repository}\x00{path}\x00{blob_sha}\x00{fingerprint}".encode("utf-8", "surrogateescape"))  # noqa: S324
    return h.hexdigest()


def _row_id(repository: str, path: str, blob_sha: str, fingerprint: str, span: Span, role: str) -> str:
    # The blob SHA pins the content, so the span's text need not be hashed again.
    salt = f"{repository}\x00{blob_sha}\x00{fingerprint}\x00{role}\x00{span.kind}"
    return span_id(path, span.start_byte, span.end_byte, "", salt=salt)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -------------------------------------------------------------------------------------------------- one file


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
        rows: The span rows (empty unless chunked). Each is a dict with ``id``, ``role`` (``leaf``, ``parent``,
            ``summary``), ``repository``, ``path``, ``blob_sha``, ``file_version``, ``text`` (what is stored),
            ``embed_text`` (what is embedded; ``""`` for parents), ``content_hash`` (SHA-256 of ``embed_text``,
            the embedding-cache key; ``""`` for parents), ``parent_id`` (the enclosing span's row id, ``""`` for
            the file), ``skeleton`` (a split class's skeleton, else ``""``) and ``metadata`` (flat
            str/int/float/bool values for the store, including ``span_json``).
    """

    repository: str
    path: str
    blob_sha: str
    file_version: str
    status: str
    reason: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)


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


def chunk_file(
    repository: str,
    path: str,
    data: bytes,
    settings: IngestSettings | None = None,
    *,
    blob_sha: str | None = None,
    fingerprint: str | None = None,
) -> FileRows:
    """Chunk one file into span rows. Pure: the same arguments always give the same rows.

    Args:
        repository: Repository name (``""`` for one repository); part of every id and of the stored path.
        path: Repository-relative path (used for language detection and stored with every row).
        data: The file's bytes.
        settings: Chunking settings (default :class:`IngestSettings()`).
        blob_sha: The blob SHA the manifest planned. When given and the bytes hash differently (the work tree
            changed after planning), the file ``failed`` with that reason and is retried by the next run.
        fingerprint: :func:`settings_fingerprint` of ``settings`` (computed when omitted; pass it in hot loops).

    Returns:
        A :class:`FileRows`. Bad input never raises: binary or undecodable bytes give ``skipped``, a chunker
        error gives ``failed``, each with the reason.
    """
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
        tree = _chunker(settings).chunk_tree(data, path=shown)
    except (LlmcError, ValueError, RecursionError) as exc:
        return FileRows(repository, path, actual, version, "failed", f"chunker error: {type(exc).__name__}: {exc}")
    rows = _rows(repository, path, shown, actual, version, fp, text, tree, settings)
    return FileRows(repository, path, actual, version, "chunked", "", rows)


def _rows(
    repository: str, path: str, shown: str, blob: str, version: str, fp: str, text: str, tree: SpanTree,
    settings: IngestSettings,
) -> list[dict[str, Any]]:
    """Rows laid out like :class:`~llmc_splitters.retrieval.CodeIndex` records, with ingestion ids."""
    from ..retrieval.index import (
        _CLASS_KINDS,
        _analyze,
        _derived_id,
        _file_summary,
        _leaf_view,
        _span_json,
        _with_meta,
    )

    from types import SimpleNamespace

    from ..retrieval.index import CodeIndex

    # CodeIndex's own settings string (what it compares to skip unchanged files), computed by its own code.
    index_fp = CodeIndex.settings_fingerprint.fget(SimpleNamespace(chunker=_chunker(settings)))  # type: ignore[attr-defined]
    data = text.encode("utf-8", "surrogatepass")
    info = _analyze(tree, data)
    root = tree.root
    leaf_ids = {s.id for s in tree.leaves}
    roles = {s.id: ("leaf" if s.id in leaf_ids else "parent") for s in tree.spans}
    new_id = {s.id: _row_id(repository, path, blob, fp, s, roles[s.id]) for s in tree.spans}
    file_hash = _sha256(text)
    common = {"repository": repository, "repo_path": path, "blob_sha": blob, "file_version": version,
              "settings_fingerprint": fp}
    rows: list[dict[str, Any]] = []

    def row(rid: str, role: str, doc: str, meta: dict[str, Any], embed: str = "", parent: str = "",
            skeleton: str = "") -> dict[str, Any]:
        meta.update(common)
        ch = _sha256(embed) if embed else ""
        if ch:
            meta["content_hash"] = ch
        return {"id": rid, "role": role, "repository": repository, "path": path, "blob_sha": blob,
                "file_version": version, "text": doc, "embed_text": embed, "content_hash": ch,
                "parent_id": parent, "skeleton": skeleton, "metadata": meta}

    ordered = [s for s in tree.spans if s.id not in leaf_ids] + list(tree.leaves)
    for span in ordered:
        role = roles[span.id]
        sp = _with_meta(span, info.per_span.get(span.id, {}))
        d = sp.to_dict()
        d["id"] = new_id[span.id]
        d["parent_id"] = new_id[span.parent_id] if span.parent_id else None
        sp = Span.from_dict(d)
        meta = {k: v for k, v in sp.to_metadata().items() if isinstance(v, (str, int, float, bool))}
        meta.pop("source", None)
        meta.update(role=role, path=shown, file_hash=file_hash)
        if span.id == root.id:
            meta.update(is_root=True, settings=index_fp, bindings_json=json.dumps(info.bindings))
        meta["span_json"] = _span_json(sp)
        skeleton = str(sp.metadata.get("skeleton") or "") if role == "parent" else ""
        embed = _leaf_view(sp) if role == "leaf" else ""
        rows.append(row(sp.id, role, span.text, meta, embed, sp.parent_id or "", skeleton))
    if settings.summaries:
        summary = _file_summary(shown, tree, info)
        smeta = {"role": "summary", "kind": "file", "path": shown, "file_hash": file_hash,
                 "target_id": new_id[root.id], "language": root.language}
        rows.append(row(_derived_id("file", shown), "summary", summary, smeta, summary, new_id[root.id]))
        for span in tree.spans:
            if span.id in leaf_ids or span.kind not in _CLASS_KINDS:
                continue
            sk = info.per_span.get(span.id, {}).get("skeleton") or span.metadata.get("skeleton")
            if not sk:
                continue
            doc = f"{shown}: {span.name or span.kind}\n{sk}"
            cmeta = {"role": "summary", "kind": "class", "path": shown, "file_hash": file_hash,
                     "target_id": new_id[span.id], "symbol": span.name or "", "language": span.language,
                     "start_line": span.start_line, "end_line": span.end_line}
            rows.append(row(_derived_id("class", new_id[span.id]), "summary", doc, cmeta, doc, new_id[span.id]))
    # The file's completion marker (its root record) says how many records make the file whole.
    for r in rows:
        if r["metadata"].get("is_root"):
            r["metadata"]["n_records"] = len(rows)
    return rows


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


def rows_to_columns(results: Iterable[FileRows]) -> dict[str, list[str]]:
    """Flatten :class:`FileRows` into :data:`BATCH_COLUMNS`: the span rows, then one ``role == "file"`` row per file.

    ``metadata`` becomes a JSON string. A status row has the file's ``status`` and ``reason``; span rows have
    ``status == "chunked"`` and an empty ``reason``.
    """
    out: dict[str, list[str]] = {c: [] for c in BATCH_COLUMNS}
    for res in results:
        for r in res.rows:
            for c in BATCH_COLUMNS:
                if c == "metadata":
                    out[c].append(json.dumps(r["metadata"], ensure_ascii=False))
                elif c == "status":
                    out[c].append("chunked")
                elif c == "reason":
                    out[c].append("")
                else:
                    out[c].append(r[c])
        status = {c: "" for c in BATCH_COLUMNS}
        status.update(id=f"file:{res.file_version}", role="file", repository=res.repository, path=res.path,
                      blob_sha=res.blob_sha, file_version=res.file_version, metadata="{}", status=res.status,
                      reason=res.reason)
        for c in BATCH_COLUMNS:
            out[c].append(status[c])
    return out


def _as_settings(settings: IngestSettings | Mapping[str, Any] | None) -> IngestSettings:
    if settings is None:
        return IngestSettings()
    if isinstance(settings, IngestSettings):
        return settings
    return IngestSettings(**dict(settings))


def chunk_batch(
    batch: Mapping[str, Sequence[Any]],
    settings: IngestSettings | Mapping[str, Any] | None = None,
) -> dict[str, list[str]]:
    """Columnar :func:`chunk_file`: one row per file in, one row per span (plus a status row per file) out.

    Args:
        batch: Equal-length columns ``repository`` (optional, default ``""``), ``path``, ``data`` (bytes) and
            optionally ``blob_sha`` (checked against the bytes). Lists, numpy arrays and pandas Series all work:
            it is the batch of Ray's ``map_batches`` (default format), of Spark's ``mapInPandas`` (one
            ``DataFrame`` converted with ``{c: df[c] for c in df}``), or a plain dict.
        settings: :class:`IngestSettings` or a dict of its fields (JSON-friendly for Spark closures).

    Returns:
        Columns :data:`BATCH_COLUMNS`, all strings (``metadata`` as JSON); see :func:`rows_to_columns`.

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
