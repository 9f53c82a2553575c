"""The span-row format: the columns of a row, a chunked file as rows and as columns, and rows back to spans.

A span row holds one row of the span store (``id``, ``role`` ``leaf``/``parent``/``summary``, ``file``: the path the
index stores, ``document``: the span's own path, the file's or a notebook cell's ``nb.ipynb#cell3``, the span's
fields, ``metadata`` as JSON; a parent's ``text`` is empty, since the store rebuilds it from the leaves), plus
``terms`` (a searched row's lexical terms, computed here, once) and two columns that the embed
stage fills: ``embed_text`` (the view the model embeds) and ``embed_hash`` (its cache key). A file's status row
carries its completion marker (content hash, settings, how many span rows make it whole) and the import bindings
of each of its documents in ``metadata``.

:class:`FileRows` is one file's outcome with its rows; :func:`rows_to_columns` flattens many into the
columns :data:`BATCH_COLUMNS`; :func:`row_span`, :func:`view_row` and :func:`prepared_file` read rows back
(values may be numpy or Arrow scalars), the last into the
:class:`~llmc_splitters.retrieval.storage.file_rows.PreparedFile` that the index writes in one transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import LlmcError
from .settings import display_path

if TYPE_CHECKING:
    from ..chunking.span import Span
    from ..retrieval.storage.file_rows import PreparedFile, View

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
    from ..retrieval.storage.file_rows import embed_source

    span = row_span(row)
    meta = span.metadata
    vtext, eh = view(embed_source(span, str(_value(row["role"]))), meta)
    row["embed_text"], row["embed_hash"], row["metadata"] = vtext, eh, _json(meta)


def prepared_file(status: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> PreparedFile:
    """The :class:`~llmc_splitters.retrieval.storage.file_rows.PreparedFile` of one chunked file, back from its rows.

    Args:
        status: The file's status row (``role == "file"``, ``status == "chunked"``).
        rows: Its span rows, in any order (batches of a distributed run may deliver them out of order); values may
            be numpy or Arrow scalars. A row whose ``embed_hash`` is set gets an embedded view.

    Returns:
        The file as :func:`~llmc_splitters.retrieval.storage.file_rows.build_file` laid it out (and the embed stage viewed
        it); its marker's ``indexed_at`` is now.

    Raises:
        LlmcError: The rows are not those its marker counts (some were lost on the way).
    """
    from ..retrieval.storage.lexical_tantivy import row_doc
    from ..retrieval.storage.file_rows import PreparedFile
    from ..retrieval.storage.span_rows import FileMarker, FileWrite, SpanRow

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
            doc = row_doc(span, role, file, str(_value(r["terms"])))
            (out.leaves if role == "leaf" else out.summaries).append(doc)
    return out
