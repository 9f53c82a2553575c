"""The ``llmc-splitters`` command line: chunk files, index a source tree, query it, inspect it, serve it to agents.

Commands::

    llmc-splitters chunk PATH... [--max-tokens N] [--json]
    llmc-splitters index PATH [--db DIR] [--embedding auto|code-static|minilm|none] [--max-tokens N]
                              [--include GLOB]...
                              [--only GLOB]... [--exclude GLOB]... [--no-gitignore] [--hidden]
                              [--no-default-excludes] [--include-generated] [--max-file-size BYTES] [--reset]
                              [--json] [--watch]
    llmc-splitters index --prepare-model [--embedding SPEC]
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
files removed. The embedding model is recorded in the index, so ``query`` uses the one it was built with: by default
``code-static``, the static code embedding shipped in the package (numpy only; ``--embedding minilm`` takes
all-MiniLM-L6-v2 instead, from the ``[embeddings]`` extra), or with ``--embedding none`` lexical (BM25) search
only; a lexical query imports neither Chroma nor numpy's model.

Exit codes (:class:`ExitCode`): 0 success (a ``query`` that finds nothing included: it says why in one line); 1
unexpected error (a store failure; a bug, said in one line: ``LLMC_DEBUG=1`` shows its traceback); 2 usage error
(bad option, settings that conflict with the existing index); 3 no index at the given location; 4 a path that does
not exist; 5 unreadable or unsupported input (a binary or unreadable file given to ``chunk``; ``index`` finished but
some files could not be read or chunked: they are listed); 6 a missing optional dependency; 130 interrupted
(SIGINT), 143 terminated (SIGTERM): every file finished before the signal is kept.

Each command is a module of this package (:mod:`.chunk`, :mod:`.index`, :mod:`.query`, :mod:`.stats`,
:mod:`.mcp`) with its arguments (``add_parser``) and what it does (``run``). What they share (exit codes, errors,
finding and opening an index, choosing its embedding) is :mod:`.common`, which imports none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..errors import ConfigurationError, LlmcError, MissingDependencyError, nearest_argument
from . import chunk, index, mcp, query, stats
from .common import CliError, ExitCode, NoIndex, err

__all__ = ["ExitCode", "build_parser", "main"]

_COMMANDS = {"chunk": chunk, "index": index, "query": query, "stats": stats, "mcp": mcp}


# ------------------------------------------------------------------------------------------------------ parser


class _Parser(argparse.ArgumentParser):
    """``argparse`` that raises instead of exiting, so :func:`main` returns the usage exit code; the top-level
    one knows its commands' parsers (``commands``)."""

    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise CliError(f"{self.prog}: error: {message}", ExitCode.USAGE)


def _unrecognized(parser: argparse.ArgumentParser, extra: Sequence[str], question: str | None = None) -> str:
    """argparse's "unrecognized arguments", with the option the first one most likely stands for, as the Python API
    names the nearest argument (:func:`~llmc_splitters.errors.unknown_argument`); words after ``query``'s
    ``question`` are the rest of an unquoted question.

    Example:
        >>> p = argparse.ArgumentParser(prog="llmc-splitters query")
        >>> _ = p.add_argument("--k"), p.add_argument("--max-context-tokens")
        >>> _unrecognized(p, ["--kk", "3"])
        'unrecognized arguments: --kk 3; did you mean --k?'
    """
    message = f"unrecognized arguments: {' '.join(extra)}"
    flag = next((a for a in extra if a.startswith("--")), None)
    if flag is not None:
        options = {o[2:].replace("-", "_"): o for a in parser._actions for o in a.option_strings  # noqa: SLF001
                   if o.startswith("--")}
        best = nearest_argument(flag[2:].split("=", 1)[0].replace("-", "_"), options)
        if best is not None:
            return f"{message}; did you mean {options[best]}?"
    if not flag and question is not None:
        return f'{message}; put the whole question in quotes: {parser.prog} "{" ".join([question, *extra])}"'
    return message


def build_parser() -> _Parser:
    """The argument parser of ``llmc-splitters``."""
    parser = _Parser(
        prog="llmc-splitters",
        description="Lossless, token-exact, syntax-aligned code spans; a hierarchical index on disk (spans, BM25, "
        "vectors); parent-context retrieval.",
        epilog="Exit codes: 0 ok, 1 error, 2 usage, 3 no index, 4 path not found, 5 unreadable input, "
        "6 missing optional dependency, 130 interrupted, 143 terminated.",
    )
    parser.add_argument("--version", action="version", version=f"llmc-splitters {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in _COMMANDS.values():
        command.add_parser(sub)
    parser.commands = dict(sub.choices)
    return parser


# ------------------------------------------------------------------------------------------------------ main


def _without_iri_grammar() -> None:
    """Keep jsonschema, when nothing in this process has imported it yet, from compiling the optional
    ``rfc3987_syntax`` grammar on import (about 1 s of CPU, most of a small hybrid index's run: Chroma imports
    jsonschema, which compiles it whenever the package is installed, as Jupyter's ``jsonschema[format-nongpl]``
    installs it). The grammar only checks the ``iri`` and ``iri-reference`` formats of a JSON schema, which nothing in
    the command line's own process validates; a library caller's process is left as it is."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "import it" raises


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see :class:`ExitCode`)."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # The model loads from the package's files: no download bars, no hub chatter on stderr.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    _without_iri_grammar()
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command's own parser, with its usage and the option meant
            target = parser.commands.get(args.command) or parser
            target.error(_unrecognized(target, extra, getattr(args, "question", None)))
        if args.command is None:
            parser.print_help(sys.stderr)
            return int(ExitCode.USAGE)
        return int(_COMMANDS[args.command].run(args))
    except CliError as exc:
        err(str(exc))
        return int(exc.code)
    except MissingDependencyError as exc:
        err(f"error: {exc}")
        return int(ExitCode.MISSING_DEPENDENCY)
    except ConfigurationError as exc:
        err(f"error: {exc}")
        return int(ExitCode.USAGE)
    except NoIndex as exc:
        err(f"error: {exc}")
        return int(ExitCode.NO_INDEX)
    except LlmcError as exc:
        err(f"error: {exc}")
        return int(ExitCode.ERROR)
    except KeyboardInterrupt:
        err("interrupted")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # `llmc-splitters chunk big.py | head`: stop quietly.
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed stream until exit
        return int(ExitCode.OK)
    except Exception as exc:
        # A bug of ours or a library's: one line for the user, the traceback only when asked for.
        if os.environ.get("LLMC_DEBUG"):
            raise
        err(f"error: unexpected {type(exc).__name__}: {' '.join(str(exc).split())[:300]} (this is a bug; run again "
            "with LLMC_DEBUG=1 for the traceback)")
        return int(ExitCode.ERROR)
