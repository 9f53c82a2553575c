"""The ranking tune set: code-search questions and bug reports over real repositories, scored on files and spans.

    python -m benchmarks.ranking                          # lexical and hybrid, every question
    python -m benchmarks.ranking --mode lexical           # BM25 only (no model)
    python -m benchmarks.ranking --repos pallets/flask,honojs/hono --kinds symbol,bug
    python -m benchmarks.ranking --ablate all             # each ranking rule off in turn (lexical and hybrid)

The set (``benchmarks/tuneset/``, written by the team; see its README) holds code-search questions of three kinds
(``behaviour``: how something is implemented, in words; ``architecture``: how the code is organised; ``symbol``: where
a named entity is defined), ``short`` questions (three to eight words, or a bare name, as users type them; their
``shape`` is ``topic`` or ``name``), bug reports (``bug``: a fix commit's message as the question, the definitions it
edits as gold) and the same bugs told by their issue (``issue``: the issue's title and description, which describe a
symptom), over repositories pinned by commit. Each repository is indexed once per mode with
:class:`~llmc_splitters.retrieval.CodeRetriever` (``index_directory`` with its default file selection), then every
question is asked through the public API: ``search(q, k=50)`` for the rankings and ``retrieve(q,
max_context_tokens=B)`` for the replies.

Metrics, per question, then averaged over questions (overall, per kind, per language, per repository). The first
three score the hits, what a user, an agent or the public code-search benchmark sees; the rest score the ranked file
list and the replies:

* ``span_ndcg``: NDCG@10 of the first 10 hits; a hit is relevant when it overlaps a gold definition not already
  credited to an earlier hit (each gold definition counts once);
* ``hits_file_ndcg``: NDCG@10 of the first 10 hits against the gold files, as the public code-search benchmark scores
  file targets: each gold file is found at the first hit in it, later hits of the same file count for nothing;
* ``hits_hit@1``: the first hit is in a gold file;
* ``file_ndcg``: NDCG@10 of the ranked distinct files (``SearchResult.files`` when the library has it, else the
  hits collapsed to files in rank order) against the gold files (binary relevance);
* ``hit@1/5/10``: a gold file among the first 1/5/10 distinct files;
* ``recall@B``: the share of gold definitions the reply at ``B`` tokens shows (at least half of each one's lines in
  some piece of the same file), for B = 1,024, 2,048 and 4,096.

Repositories come from ``$LLMC_TUNE_SOURCES/<owner>+<name>`` when that holds the checkout, else are exported from a
git mirror (``$LLMC_TUNE_MIRRORS/<owner>+<name>/repo``, a bare clone with the pinned commit; the tool's ``fetch``
puts them under ``/work/.mirror``) into the cache. Nothing is downloaded here.

Results: ``benchmarks/results/ranking[-TAG].json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.gitsrc import export_commit

HERE = Path(__file__).resolve().parent
TUNESET = HERE / "tuneset"
RESULTS = HERE / "results"
CACHE = Path(os.environ.get("LLMC_BENCH_CACHE", Path.home() / ".cache" / "llmc-bench")) / "tune"
BUDGETS = (1024, 2048, 4096)
KINDS = ("behaviour", "architecture", "symbol", "bug", "short", "issue")
V1_KINDS = ("behaviour", "architecture", "symbol", "bug")  # the first tune set's kinds: its "v1" row stays comparable
SETS = {"behaviour": "code-search", "architecture": "code-search", "symbol": "code-search", "bug": "bug",
        "short": "short", "issue": "issue"}
HIT_METRICS = ("span_ndcg", "hits_file_ndcg", "hits_hit@1")
METRICS = ("file_ndcg", *HIT_METRICS, "hit@1", "hit@5", "hit@10", *(f"recall@{b}" for b in BUDGETS))


@dataclass(frozen=True)
class Gold:
    path: str
    start_line: int
    end_line: int
    symbol: str | None = None


@dataclass(frozen=True)
class Question:
    id: str
    repo: str
    kind: str
    text: str
    gold: tuple[Gold, ...]
    language: str
    shape: str | None = None  # a short question's shape: "topic" (a few words) or "name" (a bare identifier)

    @property
    def gold_files(self) -> list[str]:
        return sorted({g.path for g in self.gold})


@dataclass
class Repo:
    repo: str
    commit: str
    language: str
    questions: list[Question] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.repo.replace("/", "+")


def load_tuneset(root: Path = TUNESET, repos: Iterable[str] | None = None,
                 kinds: Iterable[str] | None = None) -> list[Repo]:
    """The pinned repositories with their questions (``questions/*.jsonl``, ``bugs/*.jsonl``, ``issues/*.jsonl``)."""
    wanted = set(repos) if repos else None
    keep = set(kinds) if kinds else set(KINDS)
    out = []
    for spec in json.loads((root / "repos.json").read_text()):
        if wanted is not None and spec["repo"] not in wanted:
            continue
        r = Repo(spec["repo"], spec["commit"], spec["language"])
        for sub in ("questions", "bugs", "issues"):
            f = root / sub / f"{r.key}.jsonl"
            if not f.is_file():
                continue
            for line in f.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                q = json.loads(line)
                if q["kind"] not in keep:
                    continue
                gold = tuple(Gold(g["path"], g["start_line"], g["end_line"], g.get("symbol")) for g in q["gold"])
                r.questions.append(Question(q["id"], r.repo, q["kind"], q["question"], gold, r.language,
                                            q.get("shape")))
        if r.questions:
            out.append(r)
    return out


def source_tree(repo: Repo) -> Path:
    """The repository's files at the pinned commit (see the module docstring for where they come from)."""
    given = os.environ.get("LLMC_TUNE_SOURCES")
    if given and (Path(given) / repo.key).is_dir():
        return Path(given) / repo.key
    dest = CACHE / "src" / f"{repo.key}@{repo.commit[:12]}"
    if dest.is_dir():
        return dest
    mirror = Path(os.environ.get("LLMC_TUNE_MIRRORS", "/work/.mirror")) / repo.key / "repo"
    if not mirror.is_dir():
        msg = (f"no source for {repo.repo}@{repo.commit[:12]}: put a checkout in $LLMC_TUNE_SOURCES/{repo.key} or a "
               f"bare clone holding that commit in $LLMC_TUNE_MIRRORS/{repo.key}/repo")
        raise SystemExit(msg)
    return export_commit(mirror, repo.commit, dest)


# ------------------------------------------------------------------------------------------------------ metrics


def _dcg(rels: Sequence[float]) -> float:
    return sum(r / math.log2(i + 2) for i, r in enumerate(rels))


def ndcg(rels: Sequence[float], n_relevant: int, k: int = 10) -> float:
    """NDCG@k of binary relevances in rank order, against an ideal list holding ``n_relevant`` relevant items."""
    ideal = _dcg([1.0] * min(n_relevant, k))
    return _dcg(list(rels[:k])) / ideal if ideal else 0.0


def _overlaps(g: Gold, path: str | None, start: int, end: int) -> bool:
    return path == g.path and start <= g.end_line and end >= g.start_line


def ranked_files(result: Any) -> list[str]:
    """The distinct files of a search result, best first: its ``files`` when it has them, else its hits'."""
    files = getattr(result, "files", None)
    if files is not None:
        return [f.path for f in files]
    seen: list[str] = []
    for h in result.hits:
        p = h.span.path
        if p is not None and p not in seen:
            seen.append(p)
    return seen


def score_hits_as_files(gold_files: set[str], hit_paths: Sequence[str | None], k: int = 10) -> float:
    """NDCG@k of ranked hits against gold files, each gold file found at the first hit in it (the public code-search
    benchmark's scoring of file targets): later hits of an already found file are not relevant."""
    rels = [1.0 if p in gold_files and p not in hit_paths[:i] else 0.0 for i, p in enumerate(hit_paths[:k])]
    return ndcg(rels, len(gold_files), k)


def score_ranking(q: Question, result: Any) -> dict[str, float]:
    """File and span metrics of one search result."""
    gold_files = set(q.gold_files)
    files = ranked_files(result)
    out = {"file_ndcg": ndcg([1.0 if f in gold_files else 0.0 for f in files], len(gold_files))}
    for k in (1, 5, 10):
        out[f"hit@{k}"] = 1.0 if gold_files & set(files[:k]) else 0.0
    hit_paths = [h.span.path for h in result.hits[:10]]
    out["hits_file_ndcg"] = score_hits_as_files(gold_files, hit_paths)
    out["hits_hit@1"] = 1.0 if hit_paths and hit_paths[0] in gold_files else 0.0
    credited: set[int] = set()
    rels = []
    for h in result.hits[:10]:
        sp = h.span
        new = [i for i, g in enumerate(q.gold) if i not in credited and _overlaps(g, sp.path, sp.start_line,
                                                                                 sp.end_line)]
        credited.update(new)
        rels.append(1.0 if new else 0.0)
    out["span_ndcg"] = ndcg(rels, len(q.gold))
    return out


def shown(gold: Sequence[Gold], pieces: Sequence[Any]) -> float:
    """The share of ``gold`` definitions with at least half of their lines shown by the pieces (of a reply) of the
    same file."""
    got = 0
    for g in gold:
        lines: set[int] = set()
        for p in pieces:
            if p.path == g.path:
                lines.update(range(max(p.start_line, g.start_line), min(p.end_line, g.end_line) + 1))
        got += len(lines) * 2 >= g.end_line - g.start_line + 1
    return got / len(gold)


def reply_recall(q: Question, pieces: Sequence[Any]) -> float:
    """The share of the question's gold definitions the reply's pieces show (see :func:`shown`)."""
    return shown(q.gold, pieces)


# ---------------------------------------------------------------------------------------------------- running


def make_retriever(index_dir: Path, mode: str, embedding: Any, ranking: Any = None) -> Any:
    from llmc_splitters.retrieval import CodeRetriever

    kwargs: dict[str, Any] = {}
    if ranking is not None:
        kwargs["ranking"] = ranking
    return CodeRetriever(path=index_dir, embedding=embedding if mode == "hybrid" else None, **kwargs)


def evaluate(retriever: Any, questions: Sequence[Question], budgets: Sequence[int] = BUDGETS,
             replies: bool = True) -> list[dict[str, Any]]:
    """Every metric of every question, one row each, with the first hit's confidence and signals and whether it is
    in a gold file (``top_in_gold``)."""
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        res = retriever.search(q.text, k=50)
        row: dict[str, Any] = {"id": q.id, "repo": q.repo, "kind": q.kind, "language": q.language,
                               "ms": (time.perf_counter() - t0) * 1000, **score_ranking(q, res)}
        if q.shape:
            row["shape"] = q.shape
        row["files"] = ranked_files(res)[:10]
        row.update(top_in_gold=bool(res.hits) and res.hits[0].span.path in q.gold_files,
                   confidence=res.confidence, signals=dict(res.signals))
        if replies:
            for b in budgets:
                row[f"recall@{b}"] = reply_recall(q, retriever.retrieve(q.text, max_context_tokens=b).pieces)
        rows.append(row)
    return rows


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Means per metric over all questions (``all``; ``v1``: the first tune set's kinds only, comparable with results
    before short questions and issue texts), and per kind, set (code-search, bug, short, issue), short question shape,
    language and repository."""
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {
        "all": {"all": list(rows), "v1": [r for r in rows if r["kind"] in V1_KINDS]}, "kind": defaultdict(list),
        "language": defaultdict(list), "repo": defaultdict(list), "set": defaultdict(list), "shape": defaultdict(list)}
    for r in rows:
        groups["kind"][r["kind"]].append(r)
        groups["language"][r["language"]].append(r)
        groups["repo"][r["repo"]].append(r)
        groups["set"][SETS[r["kind"]]].append(r)
        if r.get("shape"):
            groups["shape"][f"{r['kind']}/{r['shape']}"].append(r)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for g, members in groups.items():
        out[g] = {}
        for name, rs in sorted(members.items()):
            if not rs:
                continue
            out[g][name] = {"n": len(rs), **{m: sum(r[m] for r in rs) / len(rs) for m in METRICS
                                              if rs and all(m in r for r in rs)}}
    return out


def run_mode(repos: Sequence[Repo], mode: str, *, variants: dict[str, Any], replies: bool,
             log: Callable[[str], None] = print, reuse: bool = False) -> dict[str, Any]:
    """Index every repository once in ``mode`` and evaluate each ranking variant on it."""
    embedding = None
    if mode == "hybrid":
        from llmc_splitters.retrieval.embeddings import resolve_embedding

        embedding = resolve_embedding("minilm")
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    timings: dict[str, float] = {}
    for repo in repos:
        src = source_tree(repo)
        index_dir = CACHE / "index" / f"{repo.key}@{repo.commit[:12]}-{mode}"
        if not reuse and index_dir.exists():
            shutil.rmtree(index_dir)
        t0 = time.perf_counter()
        builder = make_retriever(index_dir, mode, embedding)
        report = builder.index_directory(src)
        timings[repo.repo] = time.perf_counter() - t0
        builder.index.close()
        log(f"{mode:7} {repo.repo:28} indexed {len(report.added) + len(report.updated) + len(report.unchanged)} files in {timings[repo.repo]:.1f} s")
        for name, ranking in variants.items():
            r = make_retriever(index_dir, mode, embedding, ranking)
            rows[name].extend(evaluate(r, repo.questions, replies=replies))
            r.index.close()
    return {"index_seconds": timings, "variants": {name: {"summary": aggregate(rs), "rows": rs}
                                                   for name, rs in rows.items()}}


def variants_for(ablate: str | None) -> dict[str, Any]:
    """The ranking settings to compare: the library's default, and with ``ablate`` each rule (or ``all`` of them)
    off in turn, or on for a rule the default leaves off (the library's
    :class:`~llmc_splitters.retrieval.search.ranking.Ranking` names its rules)."""
    if not ablate:
        return {"default": None}
    from llmc_splitters.retrieval.search.ranking import Ranking

    from dataclasses import replace

    rules = Ranking.RULES if ablate == "all" else tuple(ablate.split(","))
    out: dict[str, Any] = {"default": Ranking()}
    for rule in rules:
        if getattr(Ranking(), rule):
            out[f"-{rule}"] = Ranking().without(rule)
        else:  # a rule the default leaves off is measured on
            out[f"+{rule}"] = replace(Ranking(), **{rule: True})
    out["none"] = Ranking().without(*Ranking.RULES)
    return out


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _rows_of(s: dict[str, Any], with_languages: bool) -> list[tuple[str, str]]:
    """The groups a table shows, in order: all, v1, the sets, the kinds, the short question shapes (and languages)."""
    rows = [("all", k) for k in ("all", "v1") if k in s["all"]]
    rows += [("set", k) for k in s["set"]] + [("kind", k) for k in s["kind"] if k not in s["set"]]  # bug is both
    rows += [("shape", k) for k in s.get("shape", {})]
    return rows + ([("language", k) for k in s["language"]] if with_languages else [])


def _table(mode: str, variants: dict[str, Any], cols: Sequence[str], with_languages: bool) -> list[str]:
    lines = ["| mode | variant | group | n | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 4)]
    for name, v in variants.items():
        s = v["summary"]
        for gname, key in _rows_of(s, with_languages):
            g = s[gname][key]
            lines.append(f"| {mode} | {name} | {key} | {g['n']} | " + " | ".join(_f(g.get(c)) for c in cols) + " |")
    return lines + [""]


def render(results: dict[str, Any]) -> str:
    """The Markdown report: the hits first (what a user and the public benchmarks see), then the ranked files and
    the replies, then per repository."""
    lines = [f"# Ranking tune set ({results['date']})", "", f"`{results['command']}`; {results['machine']}.", "",
             "Metrics are means over questions (see `benchmarks/ranking.py`). Hits: span = NDCG@10 of the hits "
             "against the gold definitions, hits_file = NDCG@10 of the hits against the gold files (each file found at its "
             "first hit, as the public code-search benchmark scores), hits_hit@1 = the first hit is in a gold file. "
             "Files and replies: file = NDCG@10 over the ranked distinct files, hit@k over distinct files, recall@B = "
             "gold definitions shown in the reply at B tokens. v1 = the first tune set's kinds (behaviour, "
             "architecture, symbol, bug), comparable with earlier results; short = short questions (topic: a few "
             "words, name: a bare identifier); issue = bug reports told by their issue's text.", ""]
    file_cols = ("file_ndcg", "span_ndcg", "hit@1", "hit@5", "hit@10", "recall@1024", "recall@2048", "recall@4096")
    for mode, res in results["modes"].items():
        lines += [f"## {mode}", "", f"### {mode}, hits", ""]
        lines += _table(mode, res["variants"], HIT_METRICS, with_languages=False)
        lines += [f"### {mode}, ranked files and replies", ""]
        lines += _table(mode, res["variants"], file_cols, with_languages=True)
        default = next(iter(res["variants"].values()))["summary"]["repo"]
        cols = (*HIT_METRICS, *file_cols[:1], *file_cols[2:])
        lines += [f"### {mode}, per repository (first variant)", "", "| repo | n | " + " | ".join(cols) + " |",
                  "|" + "---|" * (len(cols) + 2)]
        for repo, g in default.items():
            lines.append(f"| {repo} | {g['n']} | " + " | ".join(_f(g.get(c)) for c in cols) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("lexical", "hybrid", "both"), default="both")
    ap.add_argument("--repos", default="", help="comma-separated owner/name (default: all)")
    ap.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    ap.add_argument("--ablate", default="", help="rules to switch off one at a time, or 'all'")
    ap.add_argument("--no-replies", action="store_true", help="rankings only (faster)")
    ap.add_argument("--reuse", action="store_true", help="keep existing indexes (only after a change that does not "
                                                         "touch indexing)")
    ap.add_argument("--tag", default="", help="results file suffix")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    repos = load_tuneset(repos=[r for r in args.repos.split(",") if r] or None,
                         kinds=[k for k in args.kinds.split(",") if k] or None)
    modes = ("lexical", "hybrid") if args.mode == "both" else (args.mode,)
    variants = variants_for(args.ablate or None)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["python -m benchmarks.ranking", *(sys.argv[1:] if argv is None else argv)]),
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
        "questions": sum(len(r.questions) for r in repos), "repos": [f"{r.repo}@{r.commit[:12]}" for r in repos],
        "modes": {m: run_mode(repos, m, variants=variants, replies=not args.no_replies, reuse=args.reuse)
                  for m in modes},
    }
    name = f"ranking-{args.tag}" if args.tag else "ranking"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
