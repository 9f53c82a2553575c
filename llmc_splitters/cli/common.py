"""What every ``llmc-splitters`` command shares: exit codes and errors, common arguments, finding and opening
an index, choosing its embedding, and the index directory's file names."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from enum import IntEnum
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigurationError, LlmcError, MissingDependencyError

__all__ = [
    "DB_DIRNAME",
    "DEFAULT_COLLECTION",
    "LAST_RUN",
    "MANIFEST",
    "CliError",
    "ExitCode",
    "NoIndex",
    "add_store_args",
    "choose_embedding",
    "err",
    "find_db",
    "max_tokens_of",
    "open_index",
    "positive",
    "read_last_run",
    "read_manifest",
    "store_location",
    "use_color",
    "vectors_arg",
    "why_empty",
]

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


class NoIndex(LlmcError):
    """There is no index where the command looked (exit code 3)."""


# ------------------------------------------------------------------------------------------------------ arguments


def positive(text: str) -> int:
    """An ``argparse`` type: a positive integer."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def add_store_args(p: argparse.ArgumentParser, db_help: str, *, writes: bool) -> None:
    """``--db``, ``--host``, ``--port``, ``--milvus`` and ``--collection``: where the index (and its vectors) are."""
    g = p.add_argument_group("index location")
    g.add_argument("--db", metavar="DIR", help=db_help)
    where = ("keep the vectors on a Chroma server (`chroma run`) at this host instead of in DIR/chroma"
             if writes else "read the vectors from this Chroma server instead of where the index records them")
    g.add_argument("--host", help=where)
    g.add_argument("--port", type=positive, help="Chroma server port (default 8000)")
    g.add_argument("--milvus", metavar="URI",
                   help="the whole index (spans, BM25, vectors) in Milvus instead of --db: a Milvus Lite file "
                        "(./idx.db) or a server (http://host:19530)")
    g.add_argument("--collection", default=None,
                   help=f"Chroma collection of the vectors (default {DEFAULT_COLLECTION}, or the index's); with "
                        "--milvus, the index's collection (default llmc)")


# ------------------------------------------------------------------------------------------------------ output


def err(message: str) -> None:
    """A line for the user on stderr."""
    print(message, file=sys.stderr, flush=True)


def use_color(choice: str, stream: IO[str]) -> bool:
    """Whether to colour ``stream`` (``--color auto|always|never``; auto: a terminal, rich installed, no
    ``$NO_COLOR``)."""
    if choice == "never" or importlib.util.find_spec("rich") is None:
        return False
    if choice == "always":
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("NO_COLOR") is None


# ------------------------------------------------------------------------------------------------------ store


def _default_model_available() -> bool:
    """Whether the default model (``code-static``: a table shipped in the package) can run: it needs numpy."""
    return importlib.util.find_spec("numpy") is not None


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
        said = str(exc)
        named = said if said.startswith(f"--embedding {spec!r}") else f"--embedding {spec!r}: {said}"
        raise CliError(f"error: {named}", ExitCode.USAGE) from exc


def choose_embedding(spec: str, recorded: str | None, where: Path) -> tuple[Any, str | None]:
    """The embedding ``index`` (or ``mcp PATH``) builds with, and a note for the user.

    ``auto`` is the model the index was built with, else for a new index the default model
    (:data:`~llmc_splitters.retrieval.embeddings.DEFAULT_BACKEND`, the static code embedding shipped in the package)
    when numpy is installed, else lexical search only (said in the note). Any other spec must name the model the
    index was built with.
    """
    from ..retrieval.embeddings import DEFAULT_BACKEND
    from ..retrieval.storage.index_dir import embedding_name

    if spec == "auto":
        if recorded is not None:
            return _embedding_for(recorded), None
        if _default_model_available():
            return _embedding_for(DEFAULT_BACKEND), None
        return None, ("note: numpy is not installed: lexical (BM25) search only; pip install numpy (or "
                      "'llmc-splitters[cli]') for hybrid search")
    embedding = _embedding_for(spec)
    name = embedding_name(embedding)
    if recorded is not None and recorded != name:
        msg = (f"error: the index in {where} was built with embedding {recorded!r}, not {name!r} "
               f"(--embedding {spec}); re-run with --embedding auto (or the same model), or add --reset to rebuild "
               "it")
        raise CliError(msg, ExitCode.USAGE)
    return embedding, None


def find_db(explicit: str | None) -> Path:
    """The index directory: ``--db``, else ``$LLMC_DB``, else ``.llmc/`` in the current directory or a parent;
    :class:`NoIndex` when there is none."""
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


def vectors_arg(args: argparse.Namespace, recorded: dict[str, Any] | None) -> Any:
    """The vector store the command line names (``--host``), else the one the index records, else ``None``
    (embedded Chroma in the index directory). Nothing is imported for a lexical index."""
    from ..retrieval.storage.chroma_vectors import ChromaStore

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


def store_location(db: Path, vectors: Any) -> str:
    """Where an index is, for the user: its directory, and the Chroma server that holds its vectors."""
    if getattr(vectors, "host", None):
        return f"{db} (vectors on the Chroma server {vectors.host}:{vectors.port or 8000}, collection " \
               f"{vectors.collection_name!r})"
    return str(db)


def open_index(args: argparse.Namespace, *, allow_empty: bool = False) -> tuple[Any, Path]:
    """An existing index, opened to be read, with the embedding it was built with; exits 3 when there is none, or
    when it holds no file (unless ``allow_empty``: ``stats`` shows an empty index, and why it is empty)."""
    from ..retrieval import CodeIndex
    from ..retrieval.storage.span_store import IndexNotFoundError
    db = find_db(args.db)
    try:
        recorded = CodeIndex.recorded(db)
    except IndexNotFoundError as exc:
        raise NoIndex(str(exc)) from exc
    if recorded["embedding"] == "none" and (args.host or args.collection):
        msg = (f"error: the index in {db} is lexical (BM25 only): it keeps no vectors, so --host/--collection do not "
               "apply; drop them")
        raise CliError(msg, ExitCode.USAGE)
    embedding = _embedding_for(recorded["embedding"])
    vectors = vectors_arg(args, recorded) if embedding is not None else None
    if isinstance(vectors, tuple):  # only a collection name: embedded Chroma in DB/chroma
        from ..retrieval.storage.chroma_vectors import ChromaStore

        vectors = ChromaStore(str(db / "chroma"), collection=vectors[1])
    if vectors is not None and embedding is not None:
        _check_collection(vectors, db)
    try:
        index = CodeIndex(db, vectors=vectors, embedding=embedding, create=False,
                          max_tokens=max_tokens_of(recorded.get("settings")) or 512)
    except IndexNotFoundError as exc:
        raise NoIndex(str(exc)) from exc
    except ConfigurationError as exc:
        raise CliError(f"error: {exc}", ExitCode.USAGE) from exc
    if not allow_empty and index.span_store.counts()["files"] == 0 and not index.span_store.pending(3):
        raise NoIndex(f"the index in {db} is empty: {why_empty(read_manifest(db), read_last_run(db))}")
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


def why_empty(manifest: dict[str, Any], last_run: dict[str, Any]) -> str:
    """Why an index holds no file, from what ``index`` recorded: its root and file patterns (``manifest``), and
    what its last run skipped or failed (``last_run``, the summary it printed).

    Example:
        >>> why_empty({}, {})
        'no file was indexed into it: `llmc-splitters index PATH` indexes the source files under PATH'
    """
    from ..ingest.walk import DEFAULT_INCLUDE, Skip, nothing_selected

    root = manifest.get("root") or last_run.get("root")
    if not root:
        return "no file was indexed into it: `llmc-splitters index PATH` indexes the source files under PATH"
    if last_run.get("failed"):
        return f"every file selected under {root} failed to index; `llmc-splitters index {root}` lists why"
    include = (manifest.get("walk") or {}).get("include") or DEFAULT_INCLUDE
    skipped = [Skip(d["path"], d["kind"], d.get("reason", "")) for d in last_run.get("skipped_paths") or ()]
    return nothing_selected(root, include, skipped)


def read_last_run(db: Path | None) -> dict[str, Any]:
    """The summary of the last ``index`` run (``DB/last-index.json``); empty if there is none."""
    if db is None:
        return {}
    try:
        return json.loads((db / LAST_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def read_manifest(db: Path | None) -> dict[str, Any]:
    """What ``index`` recorded in ``DB/llmc-index.json`` (root, walk policy, ...); empty if there is none."""
    if db is None:
        return {}
    try:
        return json.loads((db / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def max_tokens_of(settings: str | None) -> int | None:
    """The leaf budget in a settings fingerprint (``ASTChunker:512:<tokenizer>:<version>``)."""
    parts = str(settings or "").split(":")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
