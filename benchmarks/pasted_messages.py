"""Pasted error messages against the code that raises them (issue 37, item 8), on real repositories.

    python -m benchmarks.pasted_messages                       # the nine Python tune/dev repositories
    python -m benchmarks.pasted_messages --repos pallets+flask --per-repo 50

Each single-line ``raise Name(<string literal>)`` outside the tests whose literal holds at least three words of
literal text (an f-string, a ``.format`` or ``%`` template, or a plain string) becomes a question as a user pastes
it: ``Name: <the message>``, every placeholder (``{...}``, ``%s``, ``%(name)r``) printed as ``x``. At most
``--per-repo`` of them per repository (a fixed shuffle), each asked of a lexical index of the repository's tree
(``git archive HEAD`` of the mirror, ``$LLMC_TUNE_MIRRORS/<owner>+<name>/repo``): the rank, in the first 10 hits,
of the span holding the raise line, with the default ranking and without its ``message`` rule. Nothing is tuned on
these: the rule's parameters were set on the tests' tree before this ran.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path

from llmc_splitters.retrieval import CodeIndex, Ranking

MIRRORS = Path(os.environ.get("LLMC_TUNE_MIRRORS", "/work/.mirror"))
REPOS = ("pallets+flask", "pallets+click", "psf+requests", "encode+httpx", "python-attrs+attrs",
         "marshmallow-code+marshmallow", "Textualize+rich", "tqdm+tqdm", "aio-libs+aiohttp")
RAISE = re.compile(r"""^\s*raise (\w+)\((f?)(["'])((?:(?!\3).){12,160})\3"""
                   r"""(\.format\([^)]*\)|\s*%\s*[\w(][^)]*\)?)?\)\s*$""")
FILL = re.compile(r"\{[^{}]*\}|%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifx]")


def cases(tree: Path, per_repo: int) -> list[tuple[str, str, str]]:
    """``(question, path, raise line)`` of the tree's raise sites (see the module docstring)."""
    out = []
    for p in sorted(tree.rglob("*.py")):
        rel = p.relative_to(tree).as_posix()
        if "/tests/" in f"/{rel}" or "test" in p.name:
            continue
        for line in p.read_text(errors="replace").splitlines():
            m = RAISE.match(line)
            if m and len(re.findall(r"[A-Za-z]+", FILL.sub(" ", m.group(4)))) >= 3:
                out.append((f"{m.group(1)}: {FILL.sub('x', m.group(4))}", rel, line.strip()))
    random.Random(7).shuffle(out)
    return out[:per_repo]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", default=",".join(REPOS), help="owner+name of mirrors, comma-separated")
    ap.add_argument("--per-repo", type=int, default=25)
    args = ap.parse_args(argv)
    ranks: dict[str, list[int | None]] = {"default": [], "without message": []}
    start = time.perf_counter()
    for repo in args.repos.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(f"git --git-dir={MIRRORS / repo / 'repo'} archive HEAD | tar -x -C {tmp}", shell=True,
                           check=True)
            found = cases(Path(tmp), args.per_repo)
            idx = CodeIndex()
            idx.index_directory(tmp)
            for q, rel, line in found:
                for name, ranking in (("default", None), ("without message", Ranking().without("message"))):
                    hits = idx.search(q, k=10, ranking=ranking).hits
                    ranks[name].append(next((n for n, h in enumerate(hits, 1)
                                             if h.span.path == rel and line in h.span.text), None))
        print(f"{repo:32} {len(found)} messages", flush=True)
    print(f"lexical, {len(ranks['default'])} pasted messages, {time.perf_counter() - start:.0f} s")
    for name, rs in ranks.items():
        n = len(rs) or 1
        print(f"  {name:16} hit@1 {sum(r == 1 for r in rs) / n:.3f}  hit@10 {sum(r is not None for r in rs) / n:.3f}"
              f"  MRR@10 {sum(1 / r for r in rs if r) / n:.3f}")


if __name__ == "__main__":
    main()
