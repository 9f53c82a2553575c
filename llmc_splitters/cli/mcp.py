"""``llmc-splitters mcp``: open (or build) the index to serve, then run the server on stdio or streamable HTTP.

The command's arguments and what it does, with the helpers every command uses to find and open an index
(:func:`llmc_splitters.cli.common.open_index`), so that the server serves exactly what ``llmc-splitters query`` would
search. The server itself is :mod:`llmc_splitters.mcp`, which knows nothing of the command line:

* ``mcp PATH``: the tree's index (``PATH/.llmc`` or ``--db``) as ``llmc-splitters index PATH`` builds it (its recorded
  embedding, vector store and leaf size when it exists; else ``--embedding``), indexed on start and kept fresh;
* ``mcp --db DIR`` (or an index found from the current directory): that index, read-only unless it records the tree
  it was built from, which is then followed too.

The index is opened at the first request (and again at the next one after a failure), so a missing index or an
unreachable Chroma server is a tool error with the remedy, and the server stays up.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from ..errors import LlmcError, RequestError
from .common import (
    DB_DIRNAME,
    MANIFEST,
    CliError,
    ExitCode,
    add_store_args,
    choose_embedding,
    err,
    find_db,
    max_tokens_of,
    positive,
    read_manifest,
    vectors_arg,
)
from .milvus import milvus_store, open_index, recorded_of

__all__ = ["add_parser", "run"]


def _port(text: str) -> int:
    n = positive(text)
    if n > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {n}")
    return n


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= x <= 60:
        raise argparse.ArgumentTypeError(f"expected 0 to 60 seconds, got {x}")
    return x


def add_parser(sub: Any) -> None:
    """The ``mcp`` command's arguments."""
    p = sub.add_parser(
        "mcp", help="serve the index to agents over the Model Context Protocol (stdio, or HTTP on localhost)",
        description="Serve one index to an agent as an MCP server: search_code (budgeted context), get_symbol, "
        "get_lines, index_status, reindex. Given PATH, the tree is indexed on start and followed as it changes; "
        "otherwise an existing index (--db, --host) is served. stdio by default; --http PORT for streamable HTTP "
        "on 127.0.0.1. Needs the [mcp] extra.",
        epilog="A non-loopback --bind needs --allow-remote and a bearer token in $LLMC_MCP_TOKEN, checked on every "
        "request.")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help=f"source tree to serve: indexed on start (into PATH/{DB_DIRNAME} unless --db), then kept fresh")
    add_store_args(p, f"index directory (default: PATH/{DB_DIRNAME}; without PATH, {DB_DIRNAME}/ in the current "
                       "directory or a parent, or $LLMC_DB)", writes=True)
    p.add_argument("--embedding", default="auto", metavar="SPEC",
                   help="for a new index built from PATH: auto (MiniLM if installed, else lexical BM25), none, or "
                   "any spec `index --embedding` takes")
    p.add_argument("--max-tokens", type=positive,
                   help="default reply budget in tokens (search_code without max_tokens; get_symbol/get_lines); 8000, "
                   "or the hard cap if that is lower")
    p.add_argument("--hard-cap", type=positive, default=25000,
                   help="largest reply budget a request may ask for; larger requests are clamped (default 25000)")
    p.add_argument("--k", type=positive, default=None,
                   help="default number of hits of search_code (default: as many as fill the reply budget, as the "
                   "library's CodeRetriever does)")
    p.add_argument("--freshness", choices=("watch", "refresh", "off"), default="watch",
                   help="how the index follows the tree (with PATH or a recorded root): watch (a file watcher, the "
                   "default), refresh (a stat check before each request), off (PATH is still indexed on start)")
    p.add_argument("--debounce", type=_seconds, default=0.5,
                   help="watch mode: seconds without changes before changed files are indexed (default 0.5)")
    p.add_argument("--http", type=_port, metavar="PORT", help="serve streamable HTTP at http://BIND:PORT/mcp")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDR", help="HTTP interface (default 127.0.0.1)")
    p.add_argument("--allow-remote", action="store_true",
                   help="accept a non-loopback --bind; requires $LLMC_MCP_TOKEN, checked on every request")


def run(args: argparse.Namespace) -> ExitCode:
    """Run ``llmc-splitters mcp`` with parsed ``args`` until the client (stdio) or a signal (HTTP) ends it.

    Raises:
        CliError: Bad options (exit 2), a missing SDK (exit 6), a PATH that is not a directory (exit 4).
        ConfigurationError: Unsafe HTTP settings (exit 2).
    """
    if importlib.util.find_spec("mcp") is None:
        raise CliError("error: the MCP server needs the mcp SDK: pip install 'llmc-splitters[mcp]'",
                       ExitCode.MISSING_DEPENDENCY)
    from ..mcp.service import CodeService, ServiceSettings

    if args.max_tokens is None:
        args.max_tokens = min(8000, args.hard_cap)
    if args.max_tokens > args.hard_cap:
        raise CliError(f"error: --max-tokens ({args.max_tokens}) is over --hard-cap ({args.hard_cap})", ExitCode.USAGE)
    if args.k is not None and args.k > 50:
        raise CliError(f"error: --k must be at most 50, got {args.k}", ExitCode.USAGE)
    token = os.environ.get("LLMC_MCP_TOKEN") or None
    if args.http is not None:
        from ..mcp.server import check_http_settings

        check_http_settings(args.bind, allow_remote=args.allow_remote, token=token)
    milvus = milvus_store(args)  # the whole index in Milvus: no directory
    root: Path | None = None
    if args.path:
        root = Path(args.path)
        if not root.is_dir():
            code = ExitCode.NOT_FOUND if not root.exists() else ExitCode.USAGE
            raise CliError(f"error: {args.path}: not a directory (mcp PATH serves a source tree)", code)
        root = root.resolve()
        db: Path | None = None if milvus else Path(args.db).resolve() if args.db else root / DB_DIRNAME
    elif milvus is not None:
        db = None
    else:
        try:
            db = find_db(args.db).resolve()
        except LlmcError:
            db = None  # every request says how to build one
    manifest = read_manifest(db) if milvus is None else (recorded_of(milvus) or {}).get("manifest", {})
    if root is None and manifest.get("root") and Path(manifest["root"]).is_dir():
        root = Path(manifest["root"]).resolve()  # the tree the index was built from: follow it too
    options = _walk_options_from(manifest, db)

    def open_retriever() -> Any:
        from ..retrieval import CodeRetriever

        try:
            # An empty index is served: index_status says why it is empty.
            index = _open_tree_index(args, db, options, milvus) if args.path else \
                open_index(args, allow_empty=True)[0]
        except CliError as exc:
            raise RequestError(str(exc).removeprefix("error: ")) from exc
        except LlmcError as exc:  # no index there (NoIndex), a store that cannot be opened
            raise RequestError(str(exc)) from exc
        return CodeRetriever(index=index, k=args.k)

    def write_manifest(_report: Any) -> None:
        if milvus is not None and root is not None:
            _write_manifest(None, root, options, manifest, milvus)
        elif db is not None and root is not None and (db / "llmc.sqlite3").is_file():
            _write_manifest(db, root, options, manifest)

    where = f"{DB_DIRNAME}/ in the tree" if root is not None and db == root / DB_DIRNAME else "<db>"
    if args.host:
        where += f" (vectors on the Chroma server {args.host}:{args.port or 8000})"
    service = CodeService(
        open_retriever, root=root, walk_options=options,
        settings=ServiceSettings(max_tokens=args.max_tokens, hard_cap=args.hard_cap, k=args.k),
        freshness=args.freshness if root is not None else "off", debounce=args.debounce, location=where,
        hide=_hidden(db), on_refreshed=write_manifest,
    )
    service.start(catch_up=False)  # the index opens and the model loads while the MCP SDK is imported (~1 s)
    if args.http is None:
        from ..mcp.server import run_stdio

        run_stdio(service)
    else:
        from ..mcp.server import run_http

        err(f"llmc-splitters mcp: streamable HTTP on http://{args.bind}:{args.http}/mcp")
        run_http(service, host=args.bind, port=args.http, allow_remote=args.allow_remote, token=token)
    return ExitCode.OK


def _hidden(db: Path | None) -> dict[str, str]:
    """Absolute paths replies must not show (besides the root and home, which the service hides): the index's
    directory and the directory the server runs in (the "no index found in ..." message names it)."""
    out = {str(db): "<db>"} if db is not None else {}
    cwd = str(Path.cwd())
    if len(cwd) > 1:
        out.setdefault(cwd, "<cwd>")
    return out


def _walk_options_from(manifest: dict[str, Any], db: Path | None) -> Any:
    """The walk policy an index was built with (its manifest), or the ``index`` command's default one."""
    from ..ingest.walk import DEFAULT_INCLUDE, DEFAULT_SKIP_DIRS, WalkOptions

    w = manifest.get("walk") or {}
    return WalkOptions(
        include=tuple(w.get("include") or DEFAULT_INCLUDE),
        exclude=tuple(w.get("exclude") or ()),
        gitignore=bool(w.get("gitignore", True)),
        skip_dirs=DEFAULT_SKIP_DIRS if w.get("default_excludes", True) else frozenset(),
        hidden=bool(w.get("hidden", False)),
        skip_generated=bool(w.get("skip_generated", True)),
        skip_minified=bool(w.get("skip_generated", True)),
        max_file_bytes=w.get("max_file_bytes", 1024 * 1024),
        never_enter=(str(db),) if db is not None else (),
    )


def _open_tree_index(args: argparse.Namespace, db: Path | None, options: Any, milvus: Any = None) -> Any:
    """The index of the served tree, as ``llmc-splitters index PATH`` builds it: the one at ``db`` with what it
    records (embedding, vector store, leaf size), or a new one (``--embedding``; created by its first write)."""
    from ..chunking.chunker import ASTChunker
    from ..retrieval import CodeIndex
    from ..retrieval.storage.span_store import IndexNotFoundError

    if milvus is not None:
        recorded = recorded_of(milvus)
        embedding, _note = choose_embedding(args.embedding, (recorded or {}).get("embedding"), milvus.uri)
        max_tokens = (recorded or {}).get("manifest", {}).get("max_tokens") or \
            max_tokens_of((recorded or {}).get("settings")) or 512
        chunker = ASTChunker(max_tokens=max_tokens, analyze=True,
                             max_file_bytes=max(16 << 20, options.max_file_bytes))
        return CodeIndex(store=milvus, embedding=embedding, chunker=chunker)
    assert db is not None  # a tree's index is PATH/.llmc unless --db
    try:
        recorded: dict[str, Any] | None = CodeIndex.recorded(db)
    except IndexNotFoundError:
        recorded = None
    embedding, _note = choose_embedding(args.embedding, (recorded or {}).get("embedding"), db)
    if (args.host or args.collection) and embedding is None:
        msg = ("error: --host/--collection say where vectors go, but this index is lexical (BM25 only): it keeps "
               "everything in its directory. Drop them, or serve a tree with --embedding minilm")
        raise CliError(msg, ExitCode.USAGE)
    vectors = vectors_arg(args, recorded) if embedding is not None else None
    if isinstance(vectors, tuple):  # only a collection name: embedded Chroma in DB/chroma
        from ..retrieval.storage.chroma_vectors import ChromaStore

        vectors = ChromaStore(str(db / "chroma"), collection=vectors[1])
    max_tokens = read_manifest(db).get("max_tokens") or \
        max_tokens_of((recorded or {}).get("settings")) or 512
    # The chunker `llmc-splitters index` uses: the same settings, so that neither re-chunks the other's files.
    chunker = ASTChunker(max_tokens=max_tokens, analyze=True, max_file_bytes=max(16 << 20, options.max_file_bytes))
    return CodeIndex(db, vectors=vectors, embedding=embedding, chunker=chunker)


def _write_manifest(db: Path | None, root: Path, options: Any, manifest: dict[str, Any], milvus: Any = None) -> None:
    """Record the tree and its walk policy as ``llmc-splitters index`` does, so ``mcp --db`` (or ``--milvus``)
    follows it later."""
    from ..retrieval import CodeIndex

    with contextlib.suppress(LlmcError):
        recorded = milvus.recorded() if milvus is not None else CodeIndex.recorded(db)  # type: ignore[arg-type]
        emb = recorded["embedding"]
        record = {
            **manifest, "format": 2, "root": str(root),
            "embedding": "none" if emb == "none" else "minilm" if emb.startswith("minilm") else emb,
            "embedding_name": emb,
            "max_tokens": max_tokens_of(recorded.get("settings")) or manifest.get("max_tokens") or 512,
            "walk": {"include": list(options.include), "exclude": list(options.exclude),
                     "gitignore": options.gitignore, "hidden": options.hidden,
                     "default_excludes": bool(options.skip_dirs), "skip_generated": options.skip_generated,
                     "max_file_bytes": options.max_file_bytes},
            "indexed_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        if milvus is not None:
            milvus.spans.set_meta("manifest", json.dumps(record))
            return
        with contextlib.suppress(OSError):
            (db / MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")  # type: ignore[operator]
