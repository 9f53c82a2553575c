"""``llmc-splitters query``: the expanded context for a question, as text, highlighted, or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError, FilterWarning, IndexWarning
from .common import DB_DIRNAME, CliError, ExitCode, add_store_args, positive, use_color
from .milvus import open_index

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``query`` command's arguments."""
    p = sub.add_parser("query", help="retrieve the expanded context for a question",
                       description="Search the index (BM25, plus dense vectors when the index has them) and print "
                       "the hits expanded with their scope, class skeleton and imports, within a token budget.")
    p.add_argument("question")
    add_store_args(p, f"index directory (default: {DB_DIRNAME}/ in the current directory or a parent, or $LLMC_DB)",
                    writes=False)
    p.add_argument("--k", type=positive, default=None,
                   help="hits to expand (default: as many as fit the budget, each with its context)")
    p.add_argument("--max-context-tokens", type=positive, default=2048, help="context budget (default 2048)")
    p.add_argument("--path", dest="filter_path", metavar="PREFIX|GLOB",
                   help="only files under this path prefix (src/) or matching this glob (src/**/*.py)")
    p.add_argument("--language", help="only spans of this language (python, typescript, ...)")
    p.add_argument("--kind", help="only spans of this kind (function, method, class, ...)")
    p.add_argument("--multi-stage", action="store_true", help="rank file/class summaries first, then their spans")
    p.add_argument("--dense-fallback", action="store_true",
                   help="when no word of the question occurs in the index, show the nearest spans by meaning alone "
                   "(dense search; a hybrid index) instead of no hits")
    p.add_argument("--json", action="store_true", help="hits, pieces and context as JSON")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="syntax highlighting")


def run(args: argparse.Namespace) -> ExitCode:
    """Print the context the index gives for ``args.question``; when nothing matches, one line that says why (no
    word of it in the index, or a filter that matches no indexed path), and exit 0. Hits found by meaning alone
    (``--dense-fallback``, no word in the index) are said to be so first."""
    from ..retrieval import CodeRetriever

    index, _db = open_index(args)
    embedding = index.embedding
    retriever = CodeRetriever(index=index, k=args.k, max_context_tokens=args.max_context_tokens)
    filters = {k: v for k, v in (("path", args.filter_path), ("language", args.language), ("kind", args.kind)) if v}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FilterWarning)
            result = retriever.retrieve(args.question, multi_stage=args.multi_stage, path=args.filter_path,
                                        language=args.language, kind=args.kind, dense_fallback=args.dense_fallback)
    except ConfigurationError as exc:
        raise CliError(f"error: {exc}", ExitCode.USAGE) from exc
    unmatched = next((str(w.message) for w in caught if issubclass(w.category, FilterWarning)), None)
    for said in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, IndexWarning)):
        sys.stderr.write(f"warning: {said}\n")  # an index of an older layout: how to bring it up to date
    message = None
    if not result.words_in_index:
        by_meaning = "--dense-fallback shows the nearest spans by meaning alone" if embedding is not None else \
            "the index is lexical: it matches words only"
        message = (f"no hits: no word of the question occurs in the index ({by_meaning})" if not result.hits else
                   "no word of the question occurs in the index: these hits are the nearest spans by meaning alone")
    elif not result.hits:
        scope = f" under the filters ({' '.join(f'{k}={v}' for k, v in filters.items())})" if filters else ""
        message = f"no hits: {unmatched}" if unmatched else f"no hits: nothing in the index{scope} matches these words"
    elif not result.pieces:
        message = (f"no hit fits a context of {result.max_context_tokens} tokens; raise --max-context-tokens to see "
                   "their code")
    mode = f"hybrid: BM25 + {index.embedding_name}" if embedding is not None else "lexical: BM25"
    if args.json:
        out = {
            "query": result.query,
            "mode": "hybrid" if embedding is not None else "lexical",
            "filters": filters,
            "message": message,
            "words_in_index": result.words_in_index,
            "confidence": result.confidence,
            "token_count": result.token_count,
            "max_context_tokens": result.max_context_tokens,
            "hits": [
                {"rank": h.rank + 1, "path": h.span.path, "start_line": h.span.start_line,
                 "end_line": h.span.end_line, "symbol": h.span.name, "kind": h.span.kind, "score": h.score,
                 "ranks": dict(h.ranks)}
                for h in result.hits
            ],
            "files": [
                {"path": f.path, "score": f.score, "start_line": f.start_line, "end_line": f.end_line,
                 "symbol": f.symbol}
                for f in result.files
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
    if not result.hits:
        sys.stdout.write(message + "\n")
        return ExitCode.OK
    head = [
        *([f"note: {message}"] if not result.words_in_index else []),
        f"query: {result.query!r}  ({mode})",
        f"confidence {result.confidence:.2f}; {len(result.hits)} hits; context {result.token_count}/"
        f"{result.max_context_tokens} tokens",
    ]
    for h in result.hits:
        head.append(f"  {h.rank + 1}. {h.span.path}:{h.span.start_line}-{h.span.end_line}  {h.span.name or '-'} "
                    f"({h.span.kind})  {_channel_ranks(h.ranks)}")
    if result.files:
        head.append("files, best first:")
        head.extend(f"  {i}. {f.path}:{f.start_line}-{f.end_line}  {f.symbol or '-'}"
                    for i, f in enumerate(result.files, 1))
    if message and result.words_in_index:
        head.append(f"  {message}")
    color = use_color(args.color, sys.stdout)
    if not color:
        context = "\n" + result.context + ("" if result.context.endswith("\n") else "\n") if result.context else ""
        sys.stdout.write("\n".join(head) + "\n" + context)
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


# Multi-stage search ranks leaves again inside the best files and classes ("local" lists).
_CHANNELS = {"local_lexical": "lexical in top files", "local_dense": "dense in top files"}


def _channel_ranks(ranks: Mapping[str, int]) -> str:
    """Where a hit ranked in each search that found it (``lexical #3, dense #1``): what a fused score means.

    Example:
        >>> _channel_ranks({"lexical": 3, "dense": 1})
        'lexical #3, dense #1'
    """
    return ", ".join(f"{_CHANNELS.get(name, name.replace('_', ' '))} #{rank}" for name, rank in ranks.items())
