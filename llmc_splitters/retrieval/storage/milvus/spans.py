"""The span store of an index on Milvus: :class:`MilvusSpans`, the interface of
:class:`~llmc_splitters.retrieval.storage.span_store.SpanStore` over the collections of :mod:`.client`.

A file is written as its rows (text, place, metadata, code terms and, for a dense index, the vector from the
vector cache, so the BM25 postings and the vectors are written with the rows and nothing is left pending), then
its marker, last: a file is complete when its marker is there. Milvus has no multi-row transaction: a run killed
in the middle of a file leaves it without its new marker, so the next run re-indexes it; until then a search may
meet rows of its new version. Rows left of a version that was replaced are deleted after the new ones are in.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ....chunking.span import Span
from ..filters import ancestor_dirs
from ..lexical_tantivy import row_lexical_text
from ..span_rows import FileMarker, FileWrite, SpanRow
from ..span_store import IndexNotFoundError
from .client import Collections, fit_terms, in_list, key_is, literal, pack_text, unpack_text

__all__ = ["MilvusSpans", "milvus_row"]

_ROW_FIELDS = ["id", "file", "path", "role", "kind", "name", "language", "start_byte", "end_byte", "start_char",
               "end_char", "start_line", "end_line", "parent_id", "token_count", "text", "metadata", "embed_hash"]
_MARKER_FIELDS = ["path", "hash", "settings", "language", "size", "mtime_ns", "n_spans", "n_leaves", "indexed_at"]
_FAILED = "failed:"
_DELETE_IDS = 2000  # kept ids in one delete's expression (a batch of files)


def milvus_row(r: SpanRow, vector: list[float] | None, dense: bool) -> dict[str, Any]:
    """A span row as the rows collection holds it (``vector``: a searched row's, for a ``dense`` collection); what
    the span store writes, and what Ray's write tasks write from the workers."""
    s = r.span
    searched = r.role != "parent"
    out: dict[str, Any] = {
        "id": s.id, "file": r.file, "path": s.path or r.file, "dirs": ancestor_dirs(r.file), "role": r.role,
        "kind": s.kind, "language": s.language, "name": s.name,
        "tail": s.name.rsplit(".", 1)[-1] if s.name and r.role != "summary" else None,
        "parent_id": s.parent_id, "embed_hash": r.embed_hash, "start_byte": s.start_byte, "end_byte": s.end_byte,
        "start_char": s.start_char, "end_char": s.end_char, "start_line": s.start_line, "end_line": s.end_line,
        "token_count": s.token_count, "text": pack_text(s.text if searched else ""),
        "metadata": pack_text(json.dumps(s.metadata, ensure_ascii=False, default=str)),
        "terms": fit_terms(row_lexical_text(s, r.role)) if searched else "",
    }
    if dense:
        out["dense"] = vector
    return out


def _span(row: Mapping[str, Any], text: str | None = None) -> Span:
    return Span(row["id"], row["path"], row["language"], row["kind"], row.get("name"),
                unpack_text(row["text"]) if text is None else text, int(row["start_byte"]), int(row["end_byte"]),
                int(row["start_char"]), int(row["end_char"]), int(row["start_line"]), int(row["end_line"]),
                row.get("parent_id"), int(row["token_count"]), json.loads(unpack_text(row["metadata"])))


def _marker(row: Mapping[str, Any]) -> FileMarker:
    return FileMarker(row["path"], row["hash"], row["settings"], row["language"], row.get("size"), row.get("mtime_ns"),
                      int(row["n_spans"]), int(row["n_leaves"]), float(row["indexed_at"]))


def _by_place(rows: Iterable[Span]) -> list[Span]:
    """In file order, outer first; spans of the same range (a section that is all its subsection) in tree order,
    as the local store returns them (it keeps the order they were written in)."""
    spans = list(rows)
    by_id = {s.id: s for s in spans}

    def depth(s: Span) -> int:
        d, seen = 0, set()
        while s.parent_id in by_id and s.parent_id not in seen:
            seen.add(s.parent_id)
            s = by_id[s.parent_id]
            d += 1
        return d

    return sorted(spans, key=lambda s: (s.start_byte, -s.end_byte, depth(s)))


class MilvusSpans:
    """The span store of a :class:`~llmc_splitters.retrieval.storage.milvus.MilvusStore` (see the module docstring); the
    same public interface as :class:`~llmc_splitters.retrieval.storage.span_store.SpanStore`.

    Every write is complete in Milvus when it returns: the outbox (``pending``, ``stale``) stays empty.

    Attributes:
        rows_from_workers: The rows of the files written were already upserted (with their terms and vectors) by
            the workers of a Ray run (:func:`~llmc_splitters.ingest.ray.run_ray` into a server):
            :meth:`write_files` then writes only what must follow them, the deletes of a replaced version's rows
            and the markers.
    """

    temporary = False
    rows_from_workers = False

    def __init__(self, cols: Collections) -> None:
        self.cols = cols
        self.dir = cols.uri
        self.file = cols.uri
        self._on_create: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"MilvusSpans({self.cols.uri!r}, collection={self.cols.name!r})"

    @property
    def exists(self) -> bool:
        return self.cols.exists()

    def require(self) -> None:
        """Raise :class:`IndexNotFoundError` unless the collection holds an index."""
        if not self.exists:
            msg = (f"no index in Milvus at {self.cols.uri} (collection {self.cols.name!r}): index files first "
                   f"(llmc-splitters index PATH --milvus {self.cols.uri} --collection {self.cols.name})")
            raise IndexNotFoundError(msg)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Milvus reads see the latest write (strong consistency); there is no read snapshot to take."""
        yield

    def close(self) -> None:
        """Seal what was written (the store's client is closed by the store)."""
        self.cols.flush()

    # ------------------------------------------------------------------------------------------------- meta

    def get_meta(self, key: str) -> str | None:
        got = self.cols.query(self.cols.meta, key_is("key", key), ["value"], limit=1) if self.exists else []
        return unpack_text(got[0]["value"]) if got else self._on_create.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self.cols.upsert(self.cols.meta, [{"key": key, "value": pack_text(value), "v": self.cols.placeholder()}])

    def set_meta_on_create(self, key: str, value: str) -> None:
        if self.exists:
            if self.get_meta(key) != value:
                self.set_meta(key, value)
        else:
            self._on_create[key] = value

    # ------------------------------------------------------------------------------------------------ writes

    def write_files(self, writes: Sequence[FileWrite], *, pending: int) -> None:  # noqa: ARG002 - nothing pends
        """Replace the rows of each file of ``writes`` (with their terms and vectors; see
        :attr:`rows_from_workers`), then its marker."""
        if not writes:
            return
        dense = bool(self.cols.dimension) and not self.rows_from_workers
        vectors = self.cached_vectors({r.embed_hash for w in writes for r in w.rows if r.embed_hash}) if dense else {}
        if not self.rows_from_workers:
            self.cols.upsert(self.cols.rows, [
                milvus_row(r, vectors.get(r.embed_hash or "") if r.role != "parent" else None, dense)
                for w in writes for r in w.rows])
        # The rows of each file's earlier version (or of a run killed before its marker) go before the markers
        # come: one delete per batch of files, as a filtered delete scans the collection (one per file made
        # indexing quadratic in the rows: 4,000 files took over 20 minutes on Milvus Lite).
        batch: list[FileWrite] = []
        kept = 0  # rows of the batch: ids its delete keeps
        for i, w in enumerate(writes):
            batch.append(w)
            kept += len(w.rows)
            if i + 1 == len(writes) or kept + len(writes[i + 1].rows) > _DELETE_IDS:
                new = [r.span.id for b in batch for r in b.rows]
                expr = in_list("file", [b.marker.path for b in batch]) + \
                    (f" and not ({in_list('id', new)})" if new else "")
                self.cols.delete(self.cols.rows, expr)
                batch, kept = [], 0
        self.cols.upsert(self.cols.files, [{
            "path": m.path, "hash": m.hash, "settings": m.settings, "language": m.language, "size": m.size,
            "mtime_ns": m.mtime_ns, "n_spans": m.n_spans, "n_leaves": m.n_leaves,
            "bindings": pack_text(json.dumps(w.bindings, ensure_ascii=False)), "indexed_at": m.indexed_at,
            "v": self.cols.placeholder()} for w in writes for m in (w.marker,)])
        self.clear_failed([w.marker.path for w in writes])
        self.set_meta("updated_at", repr(time.time()))

    def remove_files(self, paths: Iterable[str], *, pending: int) -> None:  # noqa: ARG002
        """Delete every row of these files, their markers first."""
        paths = list(paths)
        if not paths:
            return
        for i in range(0, len(paths), 200):
            part = paths[i : i + 200]
            self.cols.delete(self.cols.files, in_list("path", part))
            self.cols.delete(self.cols.rows, in_list("file", part))
        self.set_meta("updated_at", repr(time.time()))

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        got = self.cols.query(self.cols.files, key_is("path", path), [*_MARKER_FIELDS, "bindings"], limit=1)
        if got:
            row = dict(got[0], size=size, mtime_ns=mtime_ns, v=self.cols.placeholder())
            self.cols.upsert(self.cols.files, [row])

    def set_failed(self, failures: Mapping[str, str]) -> None:
        if failures:
            self.cols.upsert(self.cols.meta, [{"key": _FAILED + p, "value": pack_text(r), "v": self.cols.placeholder()}
                                              for p, r in failures.items()])

    def clear_failed(self, paths: Iterable[str]) -> None:
        keys = [_FAILED + p for p in paths]
        for i in range(0, len(keys), 200):
            self.cols.delete(self.cols.meta, in_list("key", keys[i : i + 200]))

    def failed(self) -> dict[str, str]:
        rows = self.cols.query(self.cols.meta, f"key like {literal(_FAILED + '%')}", ["key", "value"])
        return {r["key"][len(_FAILED):]: unpack_text(r["value"]) for r in sorted(rows, key=lambda r: r["key"])}

    # ------------------------------------------------------------------------------------------------ outbox

    def pending(self, what: int) -> list[str]:  # noqa: ARG002 - a write is whole when it returns
        return []

    def done(self, paths: Iterable[str], what: int) -> None:
        """Nothing to clear: the rows carry their terms and vectors."""

    def stale_ids(self) -> list[str]:
        return []

    def drop_stale(self, ids: Iterable[str]) -> None:
        """Nothing to drop: a file's old rows are deleted with it."""

    # ------------------------------------------------------------------------------------------------ vectors

    def cached_vectors(self, hashes: Iterable[str]) -> dict[str, list[float]]:
        want = sorted(set(hashes))
        if not want or not self.cols.dimension:
            return {}
        out: dict[str, list[float]] = {}
        for i in range(0, len(want), 500):
            part = want[i : i + 500]
            for r in self.cols.query(self.cols.vectors, in_list("hash", part), ["hash", "v"], limit=len(part)):
                out[r["hash"]] = [float(x) for x in r["v"]]
        return out

    def cache_vectors(self, vectors: Mapping[str, Sequence[float]]) -> None:
        if vectors:
            self.cols.upsert(self.cols.vectors, [{"hash": h, "v": [float(x) for x in v]} for h, v in vectors.items()])

    def prune_vectors(self) -> int:
        used = {r["embed_hash"] for r in self.cols.iterate(self.cols.rows, "embed_hash is not null", ["embed_hash"])}
        unused = [r["hash"] for r in self.cols.iterate(self.cols.vectors, "", ["hash"]) if r["hash"] not in used]
        for i in range(0, len(unused), 500):
            self.cols.delete(self.cols.vectors, in_list("hash", unused[i : i + 500]))
        return len(unused)

    # -------------------------------------------------------------------------------------------------- files

    def markers(self) -> dict[str, FileMarker]:
        return {r["path"]: _marker(r) for r in self.cols.iterate(self.cols.files, "", _MARKER_FIELDS)} \
            if self.exists else {}

    def marker(self, path: str) -> FileMarker | None:
        got = self.cols.query(self.cols.files, key_is("path", path), _MARKER_FIELDS, limit=1)
        return _marker(got[0]) if got else None

    def paths(self, *, prefix: str | None = None, glob: str | None = None) -> list[str]:
        expr = ""
        if glob is None and prefix:
            expr = f"path >= {literal(prefix)} and path < {literal(prefix[:-1] + chr(ord(prefix[-1]) + 1))}"
        got = sorted(r["path"] for r in self.cols.iterate(self.cols.files, expr, ["path"]))
        return [p for p in got if fnmatch.fnmatchcase(p, glob)] if glob is not None else got

    def count_paths(self, prefix: str) -> int:
        hi = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return self.cols.count(self.cols.files, f"path >= {literal(prefix)} and path < {literal(hi)}")

    def counts(self) -> dict[str, int]:
        if not self.exists:
            return {"files": 0, "leaves": 0, "spans": 0, "vectors": 0}
        files = leaves = spans = 0
        for r in self.cols.iterate(self.cols.files, "", ["n_spans", "n_leaves"]):
            files, leaves, spans = files + 1, leaves + int(r["n_leaves"]), spans + int(r["n_spans"])
        vectors = self.cols.count(self.cols.vectors) if self.cols.dimension else 0
        return {"files": files, "leaves": leaves, "spans": spans, "vectors": vectors}

    def _tally(self, collection: str, expr: str, field: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.cols.iterate(collection, expr, [field]):
            out[r[field]] = out.get(r[field], 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def stats(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {"files_by_language": self._tally(self.cols.files, "", "language"),
                                          "leaves_by_language": self.leaf_counts("language"),
                                          "leaves_by_kind": self.leaf_counts("kind"),
                                          "roles": self._tally(self.cols.rows, "", "role")}
        tokens = [int(r["token_count"]) for r in self.cols.iterate(self.cols.rows, 'role == "leaf"', ["token_count"])]
        out["tokens"] = {"leaf_tokens": sum(tokens), "max_leaf_tokens": max(tokens, default=0)}
        return out

    def leaf_counts(self, column: str) -> dict[str, int]:
        if column not in ("language", "kind"):
            msg = f"leaf_counts counts by 'language' or 'kind', not {column!r}"
            raise ValueError(msg)
        return self._tally(self.cols.rows, 'role == "leaf"', column)

    def first_file(self, *, prefix: str | None = None, glob: str | None = None, language: str | None = None,
                   kind: str | None = None) -> str | None:
        clauses = ['role == "leaf"']
        if glob is None and prefix:
            clauses.append(f"file >= {literal(prefix)} and file < {literal(prefix[:-1] + chr(ord(prefix[-1]) + 1))}")
        for column, value in (("language", language), ("kind", kind)):
            if value is not None:
                clauses.append(f"{column} == {literal(value)}")
        expr = " and ".join(clauses)
        if glob is None:
            got = self.cols.query(self.cols.rows, expr, ["file"], limit=1)
            return got[0]["file"] if got else None
        return next((r["file"] for r in self.cols.iterate(self.cols.rows, expr, ["file"])
                     if fnmatch.fnmatchcase(r["file"], glob)), None)

    def bindings(self, path: str) -> list[dict[str, Any]]:
        # Most documents are files: their marker is read by key; a notebook cell's file is looked up by a scan.
        got = self.cols.query(self.cols.files, key_is("path", path), ["bindings"], limit=1)
        if not got and (file := self.file_of(path)) is not None:
            got = self.cols.query(self.cols.files, key_is("path", file), ["bindings"], limit=1)
        return json.loads(unpack_text(got[0]["bindings"])).get(path, []) if got else []

    def file_of(self, path: str) -> str | None:
        got = self.cols.query(self.cols.rows, f"path == {literal(path)}", ["file"], limit=1)
        return got[0]["file"] if got else None

    def documents(self, file: str) -> list[str]:
        got = {r["path"] for r in self.cols.iterate(self.cols.rows, f'file == {literal(file)} and role == "leaf"',
                                                    ["path"])}
        return sorted(got, key=lambda p: (len(p), p))

    # -------------------------------------------------------------------------------------------------- spans

    def _rows(self, expr: str, limit: int | None = None) -> list[dict[str, Any]]:
        return self.cols.query(self.cols.rows, expr, _ROW_FIELDS, limit)

    def _with_parent_text(self, row: Mapping[str, Any], parent_text: bool = True) -> Span:
        if row["role"] != "parent":
            return _span(row)
        return _span(row, self.text(row["path"], int(row["start_byte"]), int(row["end_byte"])) if parent_text else "")

    def get(self, ids: Sequence[str], *, parent_text: bool = True) -> dict[str, SpanRow]:
        want = list(dict.fromkeys(ids))
        out: dict[str, SpanRow] = {}
        for i in range(0, len(want), 500):
            part = want[i : i + 500]
            for r in self._rows(in_list("id", part), limit=len(part)):
                out[r["id"]] = SpanRow(self._with_parent_text(r, parent_text), r["role"], r["file"], r.get("embed_hash"))
        return out

    def spans(self, path: str, role: str = "leaf") -> list[Span]:
        return _by_place(self._with_parent_text(r) for r in self._rows(f"path == {literal(path)} and role == "
                                                                       f"{literal(role)}"))

    def all_spans(self, role: str = "leaf") -> Iterator[Span]:
        docs = sorted({r["path"] for r in self.cols.iterate(self.cols.rows, f"role == {literal(role)}", ["path"])})
        for path in docs:
            yield from self.spans(path, role)

    def _leaves(self, path: str, cond: str, limit: int | None = None) -> list[Span]:
        rows = self._rows(f'path == {literal(path)} and role == "leaf" and {cond}', limit)
        return sorted((_span(r) for r in rows), key=lambda s: s.start_byte)

    def leaves_in(self, path: str, start_byte: int, end_byte: int) -> list[Span]:
        return self._leaves(path, f"start_byte < {max(end_byte, start_byte + 1)} and end_byte > {start_byte}")

    def leaves_in_lines(self, path: str, start_line: int, end_line: int) -> list[Span]:
        return self._leaves(path, f"start_line <= {end_line} and end_line >= {start_line}")

    def text(self, path: str, start_byte: int, end_byte: int) -> str:
        leaves = self.leaves_in(path, start_byte, end_byte)
        if not leaves:
            return ""
        data = "".join(s.text for s in leaves).encode("utf-8", "surrogatepass")
        base = leaves[0].start_byte
        return data[start_byte - base : end_byte - base].decode("utf-8", "surrogatepass")

    def leaf_at(self, path: str, line: int) -> Span | None:
        got = self._leaves(path, f"start_line <= {line} and end_line >= {line}")
        return got[0] if got else None

    def leaf_starting_at(self, path: str, start_byte: int) -> Span | None:
        got = self._leaves(path, f"start_byte == {start_byte}", limit=1)
        return got[0] if got else None

    def last_line(self, path: str) -> tuple[int, int] | None:
        rows = self.cols.query(self.cols.rows, f'path == {literal(path)} and role == "leaf"',
                               ["start_byte", "end_line", "end_byte"])
        if not rows:
            return None
        last = max(rows, key=lambda r: int(r["start_byte"]))
        return int(last["end_line"]), int(last["end_byte"])

    def by_name(self, name: str, path: str | None = None, *, tail: bool = False) -> list[SpanRow]:
        expr = f'{"tail" if tail else "name"} == {literal(name)} and role != "summary"'
        if path is not None:
            expr += f" and path == {literal(path)}"
        return [SpanRow(self._with_parent_text(r), r["role"], r["file"], r.get("embed_hash")) for r in self._rows(expr)]

    def with_symbol(self, name: str, path: str | None = None, *, suffix: bool = False) -> list[Span]:
        quoted = json.dumps(name, ensure_ascii=False)  # as the metadata field is written
        like = f'%"name": "%.{quoted[1:]}%' if suffix else f'%"name": {quoted}%'
        expr = f'role == "leaf" and metadata like {literal(like)}'
        if path is not None:
            expr += f" and path == {literal(path)}"
        return [_span(r) for r in self._rows(expr)]

    def leaves_under(self, span_id: str) -> list[str]:
        got = self.cols.query(self.cols.rows, key_is("id", span_id), ["path", "start_byte", "end_byte"], limit=1)
        if not got:
            return []
        g = got[0]
        expr = (f'path == {literal(g["path"])} and role == "leaf" and start_byte >= {int(g["start_byte"])} and '
                f'end_byte <= {int(g["end_byte"])}')
        return [r["id"] for r in self.cols.query(self.cols.rows, expr, ["id"])]

    def searched(self, path: str) -> list[SpanRow]:
        rows = self._rows(f'file == {literal(path)} and role != "parent"')
        rows.sort(key=lambda r: (r["path"], int(r["start_byte"])))
        return [SpanRow(_span(r), r["role"], r["file"], r.get("embed_hash")) for r in rows]
