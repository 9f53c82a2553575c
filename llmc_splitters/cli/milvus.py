"""``--milvus URI [--collection NAME]``: the commands' index in Milvus instead of a ``--db`` directory.

``URI`` is a Milvus Lite file (``./idx.db``) or a server (``http://host:19530``). The index's settings and the
CLI's manifest (root, walk policy) live in the collection's metadata, so ``query``, ``stats`` and ``mcp`` on another
machine need only the address.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pathlib import Path

from . import common
from .common import CliError, ExitCode, NoIndex, max_tokens_of

__all__ = ["last_run_of", "milvus_store", "open_index", "open_milvus_index", "recorded_of", "write_manifest"]

DEFAULT_COLLECTION = "llmc"


def milvus_store(args: argparse.Namespace) -> Any:
    """The :class:`~llmc_splitters.retrieval.MilvusStore` ``--milvus`` names, or ``None``."""
    uri = getattr(args, "milvus", None)
    if not uri:
        return None
    if getattr(args, "db", None) or getattr(args, "host", None):
        msg = "error: --milvus holds the whole index (spans, BM25, vectors): drop --db/--host"
        raise CliError(msg, ExitCode.USAGE)
    from ..retrieval import MilvusStore

    return MilvusStore(uri, collection=args.collection or DEFAULT_COLLECTION)


def open_index(args: argparse.Namespace, *, allow_empty: bool = False) -> tuple[Any, Path | None]:
    """The index ``query``, ``stats`` and ``mcp`` read: in Milvus with ``--milvus`` (no directory: ``None``), else
    the directory's (:func:`~llmc_splitters.cli.common.open_index`; ``allow_empty`` as there)."""
    store = milvus_store(args)
    if store is not None:
        return open_milvus_index(args, store, allow_empty=allow_empty)[0], None
    return common.open_index(args, allow_empty=allow_empty)


def recorded_of(store: Any) -> dict[str, Any] | None:
    """What the collection records (``None``: there is none yet)."""
    from ..retrieval.storage.span_store import IndexNotFoundError

    try:
        return store.recorded()  # type: ignore[no-any-return]
    except IndexNotFoundError:
        return None


def write_manifest(index: Any, manifest: dict[str, Any], summary: dict[str, Any] | None = None) -> None:
    """Keep the CLI's manifest (and the last run's summary) in the collection's metadata."""
    index.span_store.set_meta("manifest", json.dumps(manifest))
    if summary is not None:
        index.span_store.set_meta("last-index", json.dumps(summary))


def open_milvus_index(args: argparse.Namespace, store: Any, *, allow_empty: bool = False
                      ) -> tuple[Any, dict[str, Any]]:
    """An existing index in Milvus, opened to be read with the model it was built with, and its manifest; exits 3
    when there is none (or it is empty, unless ``allow_empty``)."""
    from ..errors import ConfigurationError
    from ..retrieval import CodeIndex
    from ..retrieval.storage.span_store import IndexNotFoundError
    from .common import _embedding_for

    recorded = recorded_of(store)
    if recorded is None:
        raise NoIndex(f"no index in Milvus at {store.uri} (collection {store.collection!r}): run `llmc-splitters "
                      f"index PATH --milvus {store.uri} --collection {store.collection}`")
    embedding = _embedding_for(recorded["embedding"])
    try:
        index = CodeIndex(store=store, embedding=embedding, create=False,
                          max_tokens=max_tokens_of(recorded.get("settings")) or 512)
    except IndexNotFoundError as exc:
        raise NoIndex(str(exc)) from exc
    except ConfigurationError as exc:
        raise CliError(f"error: {exc}", ExitCode.USAGE) from exc
    if not allow_empty and index.span_store.counts()["files"] == 0:
        why = common.why_empty(recorded.get("manifest") or {}, last_run_of(index))
        raise NoIndex(f"the index in Milvus at {store.uri} (collection {store.collection!r}) is empty: {why}")
    return index, recorded.get("manifest") or {}


def last_run_of(index: Any) -> dict[str, Any]:
    """The summary of the last ``index`` run into a Milvus index (its collection's metadata); empty if none."""
    try:
        return json.loads(index.span_store.get_meta("last-index") or "{}")
    except ValueError:
        return {}
