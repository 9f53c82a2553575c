"""``llmc-splitters chunk``: the spans of files, as a table or as JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UnsupportedInputError
from .common import CliError, ExitCode, err, positive, use_color

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``chunk`` command's arguments."""
    p = sub.add_parser("chunk", help="show the spans of files (kind, symbol, lines, tokens, breadcrumb)",
                       description="Chunk files (directories are walked like `index` does) and show their spans.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--max-tokens", type=positive, default=512, help="token budget per span (default 512)")
    p.add_argument("--language", help="force a language instead of detecting it from the file name")
    p.add_argument("--json", action="store_true", help="one JSON object per span (with its text) per line")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="table colours")


def run(args: argparse.Namespace) -> ExitCode:
    """Show the spans of the files (and trees) in ``args.paths``."""
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
            err(f"error: {raw}: no such file or directory")
            code = code or ExitCode.NOT_FOUND
            continue
        if p.is_dir():
            got = walk(p)
            if got.skipped and not args.json:
                err(f"{raw}: {len(got.files)} files selected, {len(got.skipped)} paths skipped "
                     f"({', '.join(f'{k} {n}' for k, n in got.skipped_by_kind().most_common())})")
            files.extend(((p / f).as_posix(), p / f) for f in got.files)
        else:
            files.append((raw, p))
    color = use_color(args.color, sys.stdout)
    for shown, p in files:
        try:
            data = p.read_bytes()
        except OSError as exc:
            err(f"error: {shown}: cannot read: {exc.strerror or exc}")
            code = code or ExitCode.UNREADABLE
            continue
        why = binary_reason(data)
        if why is not None:
            err(f"error: {shown}: not chunked: {why}")
            code = code or ExitCode.UNREADABLE
            continue
        try:
            spans = chunker.chunk(data, language=args.language, path=shown)
        except UnsupportedInputError as exc:
            err(f"error: {shown}: {exc}")
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
