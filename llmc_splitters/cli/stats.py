"""``llmc-splitters stats``: what an index holds."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from collections import Counter
from typing import Any

from .common import DB_DIRNAME, ExitCode, add_store_args, read_last_run, read_manifest, store_location, why_empty
from .milvus import last_run_of, open_index

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``stats`` command's arguments."""
    p = sub.add_parser("stats", help="what an index holds", description="Files, spans, languages, settings.")
    add_store_args(p, f"index directory (default: {DB_DIRNAME}/ in the current directory or a parent, or $LLMC_DB)",
                    writes=False)
    p.add_argument("--json", action="store_true", help="as JSON")


def run(args: argparse.Namespace) -> ExitCode:
    """Print what the index holds (an empty index too, with why it is empty)."""
    index, db = open_index(args, allow_empty=True)
    manifest = read_manifest(db) if db is not None else json.loads(index.span_store.get_meta("manifest") or "{}")
    store = index.span_store
    st = store.stats()
    counts = store.counts()
    status = index.status()
    settings = sorted({m.settings for m in store.markers().values()})
    size = sum(f.stat().st_size for f in db.rglob("*") if f.is_file()) if db is not None else None
    updated = status["updated_at"]
    out = {
        "store": store_location(db, index._vectors) if db is not None else repr(index.store),  # noqa: SLF001
        "root": manifest.get("root"),
        "indexed_at": manifest.get("indexed_at") or (
            _dt.datetime.fromtimestamp(updated, _dt.timezone.utc).isoformat(timespec="seconds") if updated else None),
        "embedding": index.embedding_name,
        "settings": settings,
        "files": counts["files"],
        "files_by_language": st["files_by_language"],
        "records": st["roles"],
        "leaf_spans": counts["leaves"],
        "leaf_spans_by_language": st["leaves_by_language"],
        "leaf_spans_by_kind": st["leaves_by_kind"],
        "leaf_tokens": st["tokens"]["leaf_tokens"],
        "max_leaf_tokens": st["tokens"]["max_leaf_tokens"],
        "cached_vectors": counts["vectors"],
        "pending": status["pending"],
        "failed": status["failed"],
        "disk_bytes": size,
        "empty": why_empty(manifest, read_last_run(db) if db is not None else last_run_of(index))
        if counts["files"] == 0 and not status["pending"] else None,
    }
    roles = Counter(out["records"])
    by_lang = Counter(out["leaf_spans_by_language"])
    by_kind = Counter(out["leaf_spans_by_kind"])
    files_by_lang = Counter(out["files_by_language"])
    leaves, tokens, largest = out["leaf_spans"], out["leaf_tokens"], out["max_leaf_tokens"]
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return ExitCode.OK
    lines = [
        f"index      {out['store']}",
        f"root       {out['root'] or '(unknown: built by another tool)'}; indexed at {out['indexed_at'] or '?'}",
        f"embedding  {out['embedding']}{' (lexical BM25 only)' if out['embedding'] == 'none' else ''}",
        f"chunking   {', '.join(out['settings']) or '?'}",
        f"files      {out['files']} ({', '.join(f'{k} {v}' for k, v in files_by_lang.most_common())})",
        f"records    {sum(roles.values())} ({', '.join(f'{k} {v}' for k, v in roles.most_common())})",
        f"leaf spans {leaves} ({', '.join(f'{k} {v}' for k, v in by_lang.most_common())}), {tokens} tokens, "
        f"largest {largest}",
        f"  kinds    {', '.join(f'{k} {v}' for k, v in by_kind.most_common(10))}",
    ]
    if size is not None:
        lines.append(f"disk       {size / 1e6:.1f} MB")
    if out["empty"]:
        lines.append(f"empty      the index holds no file: {out['empty']}")
    sys.stdout.write("\n".join(lines) + "\n")
    return ExitCode.OK
