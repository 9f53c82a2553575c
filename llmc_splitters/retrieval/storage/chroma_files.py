"""The read path of an embedded Chroma store, without ``chromadb``: what one unfiltered query needs.

``import chromadb`` costs 1.4-3 s and its client ~200 MB before the first search; a ``query`` needs one nearest
neighbour search. :class:`ChromaFiles` reads the files an embedded ``PersistentClient`` (chromadb 1.x) keeps in its
directory and searches them as Chroma does:

* ``chroma.sqlite3``: the collection (by name), its metadata (the model that filled it, ``hnsw:space``), its
  persisted vector segment and the sequence number up to which that segment holds the writes (``max_seq_id``), and
  the write-ahead log (``embeddings_queue``) with every later write;
* the segment's directory: the HNSW graph as hnswlib persists it (``header.bin``, ``data_level0.bin``: each node's
  level-0 links, its normalised vector and its label; ``link_lists.bin``: the upper levels' links) and
  ``index_metadata.pickle`` (a plain dict: label to id).

A query walks the graph as hnswlib's ``searchKnn`` does (greedy descent through the upper levels, then a best-first
search of level 0 with ``ef = max(ef_search, n)``), reading only the nodes it visits (``os.pread``: the memory of a
query does not grow with the index), skips nodes that are deleted or rewritten by the log, and adds the log's vectors
by exact search. Anything it does not recognise (another layout or version, a filter) is not guessed at:
:meth:`ChromaFiles.open` returns ``None`` or the query says it cannot answer, and the caller uses ``chromadb``.
Nothing here writes.
"""

from __future__ import annotations

import heapq
import io
import json
import os
import pickle
import sqlite3
import struct
from pathlib import Path
from typing import Any

__all__ = ["ChromaFiles"]

_VECTOR_SEGMENT = "urn:chroma:segment/vector/hnsw-local-persisted"
_HEADER = struct.Struct("<iQQQQQQiIQQQdQ")  # hnswlib's header.bin, persistence version 1
_ADD, _UPDATE, _UPSERT, _DELETE = 0, 1, 2, 3  # chromadb's embeddings_queue operation codes
_DEFAULT_EF = 100


class _PlainUnpickler(pickle.Unpickler):
    """``index_metadata.pickle`` holds only dicts, strings and integers: anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"unexpected {module}.{name} in Chroma's index metadata")


_ENTRY = None  # numpy dtype of one ``label_to_id`` item as chromadb 1.x pickles it: BININT label, BINUNICODE id


def _label_to_id(data: bytes) -> tuple[Any, Any]:
    """``label_to_id`` of ``index_metadata.pickle`` as two arrays, labels (sorted) and ids (``S`` strings).

    At 100,000 vectors a Python dict of it (and the two other maps of the file) would add ~60 MB to a query; the
    items are read from the pickle's bytes instead: batches of ``MARK (BININT label, BINUNICODE id)* SETITEMS``.
    Any other layout is read by the (restricted) unpickler.
    """
    import numpy as np

    global _ENTRY  # noqa: PLW0603 - built once, when numpy is loaded
    key = b"X\x0b\x00\x00\x00label_to_id}"
    at = data.find(key)
    labels: list[Any] = []
    ids: list[Any] = []
    if at >= 0:
        if _ENTRY is None:
            _ENTRY = np.dtype([("j", "u1"), ("label", "<u4"), ("x", "u1"), ("n", "<u4"), ("id", "S36")])
        at += len(key)
        while data[at : at + 1] == b"(":
            end = data.find(b"u", at + 1)
            while end > 0 and (end - at - 1) % _ENTRY.itemsize:
                end = data.find(b"u", end + 1)
            if end < 0:
                break
            batch = np.frombuffer(data, dtype=_ENTRY, count=(end - at - 1) // _ENTRY.itemsize, offset=at + 1)
            if not (np.all(batch["j"] == ord("J")) and np.all(batch["x"] == ord("X")) and np.all(batch["n"] == 36)):
                break
            labels.append(batch["label"].astype(np.int64))
            ids.append(batch["id"])
            at = end + 1
        else:
            if data[at : at + 1] in (b"X", b"s", b"u", b"."):  # the next key, or the end of the dict
                lab = np.concatenate(labels) if labels else np.zeros(0, np.int64)
                idv = np.concatenate(ids) if ids else np.zeros(0, "S36")
                order = np.argsort(lab, kind="stable")
                return lab[order], idv[order]
    mapping = _PlainUnpickler(io.BytesIO(data)).load()["label_to_id"]
    if not isinstance(mapping, dict):
        raise ValueError("unexpected label_to_id")
    lab = np.fromiter(mapping.keys(), dtype=np.int64, count=len(mapping))
    width = max((len(str(v)) for v in mapping.values()), default=1)
    idv = np.array([str(v).encode() for v in mapping.values()], dtype=f"S{width}")
    order = np.argsort(lab, kind="stable")
    return lab[order], idv[order]


class _Graph:
    """One persisted HNSW segment, read on demand."""

    def __init__(self, seg_dir: Path, dim: int) -> None:
        self._fd = -1
        (version, _off0, _max, count, size, label_off, data_off, maxlevel, enter, max_m, max_m0, _m, _mult,
         _efc) = _HEADER.unpack((seg_dir / "header.bin").read_bytes()[: _HEADER.size])
        if version != 1 or data_off + 4 * dim > label_off or size < label_off + 8:
            raise ValueError("unknown HNSW layout")
        self.count, self.size, self.data_off, self.dim = count, size, data_off, dim
        self.maxlevel, self.enter, self.max_m, self.max_m0 = maxlevel, enter, max_m, max_m0
        # link_lists.bin: for each node in order, its upper levels' links as (uint32 bytes, those bytes).
        self.upper = (seg_dir / "link_lists.bin").read_bytes()
        self.upper_at: dict[int, int] = {}
        at, unpack = 0, struct.Struct("<I").unpack_from
        for i in range(count):
            (n,) = unpack(self.upper, at)
            if n:
                self.upper_at[i] = at + 4
            at += 4 + n
        self._fd = os.open(seg_dir / "data_level0.bin", os.O_RDONLY)
        if os.fstat(self._fd).st_size < count * size:
            self.close()
            raise ValueError("data_level0.bin is shorter than its header says")
        import numpy as np

        self._np = np

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def node(self, i: int, cache: dict[int, tuple[Any, tuple[int, ...], bool, int]]
             ) -> tuple[Any, tuple[int, ...], bool, int]:
        """``(vector, level-0 links, deleted, label)`` of node ``i``."""
        got = cache.get(i)
        if got is None:
            raw = os.pread(self._fd, self.size, i * self.size)
            head = raw[0:4]
            n = head[0] | head[1] << 8
            links = struct.unpack_from(f"<{n}I", raw, 4)
            vec = self._np.frombuffer(raw, dtype="<f4", count=self.dim, offset=self.data_off)
            got = (vec, links, bool(head[2] & 1), struct.unpack_from("<Q", raw, self.size - 8)[0])
            cache[i] = got
        return got

    def upper_links(self, i: int, level: int) -> tuple[int, ...]:
        block = 4 + 4 * self.max_m
        at = self.upper_at[i] + (level - 1) * block
        n = struct.unpack_from("<I", self.upper, at)[0] & 0xFFFF
        return struct.unpack_from(f"<{n}I", self.upper, at + 4)

    def search(self, q: Any, ef: int, skip: Any) -> list[tuple[float, int]]:
        """hnswlib's ``searchKnn``: up to ``ef`` ``(distance, label)`` pairs, nearest first. A deleted node, or one
        whose label ``skip(label)`` refuses (rewritten by the log), is walked through but not returned."""
        if self.count == 0 or self.enter >= self.count:
            return []
        cache: dict[int, tuple[Any, tuple[int, ...], bool, int]] = {}

        def dropped(node: int) -> bool:
            _v, _l, deleted, label = cache[node]
            return deleted or skip(label)

        cur = self.enter
        cur_d = 1.0 - float(self.node(cur, cache)[0] @ q)
        for level in range(self.maxlevel, 0, -1):
            changed = True
            while changed:
                changed = False
                for c in self.upper_links(cur, level):
                    d = 1.0 - float(self.node(c, cache)[0] @ q)
                    if d < cur_d:
                        cur, cur_d, changed = c, d, True
        visited = {cur}
        top: list[tuple[float, int]] = []  # max-heap by distance: (-d, node)
        if not dropped(cur):
            top.append((-cur_d, cur))
        bound = cur_d if top else float("inf")
        cand = [(cur_d, cur)]
        while cand:
            d, c = heapq.heappop(cand)
            if d > bound and len(top) >= ef:
                break
            fresh = [x for x in self.node(c, cache)[1] if x not in visited and x < self.count]
            if not fresh:
                continue
            visited.update(fresh)
            vecs = self._np.stack([self.node(x, cache)[0] for x in fresh])
            for x, dx in zip(fresh, (1.0 - vecs @ q).tolist()):
                if len(top) < ef or bound > dx:
                    heapq.heappush(cand, (dx, x))
                    if not dropped(x):
                        heapq.heappush(top, (-dx, x))
                        if len(top) > ef:
                            heapq.heappop(top)
                    if top:
                        bound = -top[0][0]
        return sorted((-nd, cache[x][3]) for nd, x in top)


class ChromaFiles:
    """One collection of an embedded Chroma directory, read from its files (see the module docstring).

    Use :meth:`open`; it returns ``None`` when the directory is not one this reader understands.
    """

    def __init__(self, graph: _Graph | None, labels: Any, ids: Any, log: dict[str, Any], ef: int,
                 metadata: dict[str, Any]) -> None:
        import numpy as np

        self.graph = graph
        self.labels, self.ids = labels, ids  # the persisted label -> id map, sorted by label
        self.log = log  # id -> normalised vector (a later write) or None (deleted)
        self.ef = ef
        self.metadata = metadata
        logged = np.isin(ids, np.array([i.encode() for i in log], dtype=ids.dtype)) if log else np.zeros(len(ids),
                                                                                                       bool)
        self._stale = {int(x) for x in labels[logged]}  # persisted labels the log rewrote or deleted
        self._log_ids = [i for i, v in log.items() if v is not None]
        self._count = len(ids) - len(self._stale) + len(self._log_ids)
        if self._log_ids:
            self._log_vecs = np.stack([log[i] for i in self._log_ids])

    @classmethod
    def open(cls, path: str | os.PathLike[str], collection: str) -> ChromaFiles | None:
        """The reader of ``collection`` in the embedded store at ``path``, or ``None``: no such collection, or a
        layout this reader does not know (then ``chromadb`` reads it)."""
        db = Path(path) / "chroma.sqlite3"
        if not db.is_file():
            return None
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        except sqlite3.Error:
            return None
        try:
            return cls._read(con, Path(path), collection)
        except (sqlite3.Error, OSError, ValueError, KeyError, struct.error, pickle.UnpicklingError, EOFError):
            return None
        finally:
            con.close()

    @classmethod
    def _read(cls, con: sqlite3.Connection, root: Path, collection: str) -> ChromaFiles | None:
        rows = con.execute("SELECT id, dimension, schema_str FROM collections WHERE name = ?",
                           (collection,)).fetchall()
        if len(rows) != 1:
            return None
        col_id, dim, schema = rows[0]
        metadata = {k: (s if s is not None else i if i is not None else f) for k, s, i, f in con.execute(
            "SELECT key, str_value, int_value, float_value FROM collection_metadata WHERE collection_id = ?",
            (col_id,))}
        if metadata.get("hnsw:space", "l2") != "cosine":
            return None
        ef = _ef_search(schema)
        segs = con.execute("SELECT id FROM segments WHERE collection = ? AND type = ?",
                           (col_id, _VECTOR_SEGMENT)).fetchall()
        if len(segs) != 1:
            return None
        seg = segs[0][0]
        got = con.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (seg,)).fetchone()
        persisted = _seq(got[0]) if got else None
        import numpy as np

        graph, labels, ids = None, np.zeros(0, np.int64), np.zeros(0, "S36")
        if persisted is not None:
            seg_dir = root / seg
            labels, ids = _label_to_id((seg_dir / "index_metadata.pickle").read_bytes())
            if dim is None:
                return None
            graph = _Graph(seg_dir, int(dim))

        log: dict[str, Any] = {}
        for op, rid, vec, enc in con.execute(
                "SELECT operation, id, vector, encoding FROM embeddings_queue WHERE topic LIKE ? AND seq_id > ? "
                "ORDER BY seq_id", (f"persistent://%/{col_id}", persisted if persisted is not None else -1)):
            if op == _DELETE:
                log[rid] = None
            elif op in (_ADD, _UPSERT, _UPDATE) and vec is not None:
                if enc != "FLOAT32":
                    return None
                if op == _ADD and (rid in log and log[rid] is not None):
                    continue
                v = np.frombuffer(vec, dtype="<f4").astype(np.float32)
                log[rid] = v / max(float(np.linalg.norm(v)), 1e-12)
            elif op not in (_ADD, _UPSERT, _UPDATE):
                return None
        return cls(graph, labels, ids, log, ef, metadata)

    def close(self) -> None:
        """Close the graph's file now (it closes with the reader otherwise)."""
        if self.graph is not None:
            self.graph.close()

    def count(self) -> int:
        """Records in the collection (persisted, less deleted, plus the log's)."""
        return self._count

    def query(self, vector: list[float], n: int) -> list[tuple[str, float]]:
        """The ``n`` nearest records as ``(id, cosine distance)``, nearest first."""
        import numpy as np

        q = np.asarray(vector, dtype=np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        found: dict[str, float] = {}
        if self.graph is not None:
            labels = self.labels
            for d, label in self.graph.search(q, max(self.ef, n), self._stale.__contains__):
                at = int(np.searchsorted(labels, label))
                if at < len(labels) and int(labels[at]) == label:  # else deleted without its mark: left out
                    found[self.ids[at].decode()] = d
        if self._log_ids:
            ds = 1.0 - self._log_vecs @ q
            for i in np.argsort(ds, kind="stable")[:n].tolist():
                found[self._log_ids[i]] = float(ds[i])
        return sorted(found.items(), key=lambda kv: kv[1])[:n]


def _seq(value: Any) -> int:
    """A ``max_seq_id`` value: an integer, or (older Chroma) 8 big-endian bytes."""
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return int(value)


def _ef_search(schema: str | None) -> int:
    """The collection's ``ef_search`` (Chroma's default 100)."""
    try:
        emb = json.loads(schema or "{}")["keys"]["#embedding"]["float_list"]["vector_index"]["config"]
        return int(emb.get("hnsw", {}).get("ef_search", _DEFAULT_EF))
    except (ValueError, KeyError, TypeError):
        return _DEFAULT_EF
