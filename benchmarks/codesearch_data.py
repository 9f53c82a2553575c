"""The data and the scorer of Semble's public code-search benchmark, restricted to its dev split.

Everything is read from a git snapshot of Semble (``benchmarks/repos.json``, ``benchmarks/annotations/<repo>.json``,
``benchmarks/results/*.json`` at ``HEAD``), and only for the dev repositories in :data:`DEV_REPOS`: asking for any
other name is refused before a file is opened, and the published results keep only the dev rows.

The scorer replicates Semble's ``benchmarks/metrics.py``, ``data.py`` and ``run_benchmark.py``:

* a question's targets are its ``relevant`` and ``secondary`` ones together (``Task.all_relevant``), with equal
  weight; a target is a path, with or without a line range;
* a target's rank is the 1-based rank of the first of the top 10 hits whose path matches it (either path a suffix of
  the other, at a ``/``) and, when the target has lines, whose lines overlap them;
* NDCG@10 marks each rank that some target found as relevant (two targets found by one hit count once) against an
  ideal list of ``min(10, number of targets)`` relevant items;
* a repository's score is the mean over its questions; the benchmark's is the mean over repositories; a language's
  is the mean over its repositories; a category's is the mean, over the repositories that have it, of each one's
  mean over its questions of that category. The category is the annotation's, else :func:`infer_category`.

As diagnostics :func:`score_files` scores a ranked list of distinct files (path matches only) against the
question's distinct target paths.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.gitsrc import list_dir, show
from benchmarks.ranking import ndcg
from llmc_splitters.errors import ConfigurationError

DEV_REPOS = ("abseil-cpp", "aeson", "aiohttp", "alamofire", "axios", "axum", "bats-core", "cats", "chi", "click",
             "commons-lang", "curl", "dapper", "ecto", "exposed", "express", "flask", "guzzle", "httpx", "lazy.nvim",
             "nvm", "rack", "requests", "vitest", "zig-clap", "zod")
K = 10

# Published runs in Semble's benchmarks/results: (our label, file name prefix, the rows' "mode" or None).
PUBLISHED = (("semble-hybrid (published)", "semble-hybrid-", None),
             ("semble-bm25+rules (published)", "semble-ablations-", "semble-bm25"),
             ("semble-bm25 (published)", "semble-ablations-", "bm25"),
             ("coderankembed-hybrid (published)", "coderankembed-", "hybrid"))


@dataclass(frozen=True)
class Target:
    path: str
    start_line: int | None = None
    end_line: int | None = None

    @property
    def has_span(self) -> bool:
        return self.start_line is not None and self.end_line is not None

    def __str__(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}" if self.has_span else self.path


@dataclass(frozen=True)
class Task:
    repo: str
    language: str
    query: str
    relevant: tuple[Target, ...]
    secondary: tuple[Target, ...]
    category: str

    @property
    def all_relevant(self) -> tuple[Target, ...]:
        return self.relevant + self.secondary


@dataclass(frozen=True)
class RepoSpec:
    name: str
    language: str
    url: str
    revision: str
    benchmark_root: str | None = None


def check_dev(names: Iterable[str]) -> list[str]:
    """``names`` when every one is a dev repository; else a :class:`ConfigurationError` naming the others."""
    names = list(names)
    bad = [n for n in names if n not in DEV_REPOS]
    if bad:
        msg = (f"{', '.join(map(repr, bad))} not in the dev split of the code-search benchmark (the other repositories "
               f"are held out and never read); the dev repositories are: {', '.join(DEV_REPOS)}")
        raise ConfigurationError(msg)
    return names


def load_specs(semble: Path, names: Sequence[str] = DEV_REPOS) -> list[RepoSpec]:
    """The pinned dev repositories ``names`` from the snapshot's ``repos.json``, in the order given."""
    check_dev(names)
    specs = {s["name"]: s for s in json.loads(show(semble, "benchmarks/repos.json")) if s["name"] in names}
    missing = [n for n in names if n not in specs]
    if missing:
        msg = f"repos.json of {semble} has no entry for {', '.join(missing)}"
        raise ConfigurationError(msg)
    return [RepoSpec(**{k: specs[n].get(k) for k in ("name", "language", "url", "revision", "benchmark_root")})
            for n in names]


def infer_category(query: str) -> str:
    """Semble's category of a question without one: one word is ``symbol``, ``how ...`` is ``architecture``."""
    if " " not in query.strip():
        return "symbol"
    lowered = query.lower()
    if lowered.startswith(("how ", "how does", "how are")):
        return "architecture"
    return "semantic"


def _target(raw: str | dict[str, Any]) -> Target:
    if isinstance(raw, str):
        return Target(raw)
    start, end = raw.get("start_line"), raw.get("end_line")
    return Target(str(raw["path"]), None if start is None else int(start), None if end is None else int(end))


def load_tasks(semble: Path, spec: RepoSpec) -> list[Task]:
    """The questions of one dev repository, in annotation order. An item naming another repository (Semble's
    ``repo`` key) belongs to that one and is left out here."""
    check_dev([spec.name])
    tasks = []
    for item in json.loads(show(semble, f"benchmarks/annotations/{spec.name}.json")):
        if item.get("repo", spec.name) != spec.name:
            continue
        category = item.get("category")
        tasks.append(Task(spec.name, spec.language, item["query"], tuple(map(_target, item.get("relevant", []))),
                          tuple(map(_target, item.get("secondary", []))),
                          category if isinstance(category, str) else infer_category(item["query"])))
    return tasks


# ------------------------------------------------------------------------------------------------------ scoring


def path_matches(file_path: str, target_path: str) -> bool:
    """Either path is the other, or ends with it after a ``/`` (absolute against relative paths)."""
    f, t = file_path.replace("\\", "/"), target_path.replace("\\", "/")
    return f == t or f.endswith(f"/{t}") or t.endswith(f"/{f}")


def target_matches(path: str, start_line: int, end_line: int, target: Target) -> bool:
    """A hit at ``path:start_line-end_line`` finds ``target``: its path matches and, if the target has lines, its
    lines overlap them."""
    if not path_matches(path, target.path):
        return False
    if not target.has_span:
        return True
    return not (end_line < target.start_line or start_line > target.end_line)  # type: ignore[operator]


def ndcg_from_ranks(ranks: Iterable[int], n_relevant: int, k: int = K) -> float:
    """Semble's ``ndcg_at_k``: the 1-based ``ranks`` found (a rank found twice counts once) against ``n_relevant``."""
    found = set(ranks)
    return ndcg([1.0 if r in found else 0.0 for r in range(1, k + 1)], n_relevant, k) if n_relevant else 0.0


def score_hits(task: Task, hits: Sequence[tuple[str, int, int]], k: int = K) -> tuple[float, list[int | None]]:
    """NDCG@k of ranked hits ``(path, start_line, end_line)``, and each target's rank (``None``: not in the top
    ``k``), targets in ``all_relevant`` order."""
    top = hits[:k]
    ranks = [next((i for i, (p, s, e) in enumerate(top, 1) if target_matches(p, s, e, t)), None)
             for t in task.all_relevant]
    return ndcg_from_ranks([r for r in ranks if r is not None], len(task.all_relevant), k), ranks


def top_in_gold(task: Task, hits: Sequence[tuple[str, int, int]]) -> bool:
    """Whether the first hit is in a file of one of the question's targets (lines ignored)."""
    return bool(hits) and any(path_matches(hits[0][0], t.path) for t in task.all_relevant)


def distinct_files(hits: Sequence[tuple[str, int, int]]) -> list[str]:
    """The hits' paths, each once, in rank order."""
    return list(dict.fromkeys(p for p, _, _ in hits))


def score_files(task: Task, files: Sequence[str], k: int = K) -> float:
    """NDCG@k of ranked distinct ``files`` against the question's distinct target paths (lines ignored)."""
    gold = list(dict.fromkeys(t.path for t in task.all_relevant))
    ranks = [next((i for i, f in enumerate(files[:k], 1) if path_matches(f, g)), None) for g in gold]
    return ndcg_from_ranks([r for r in ranks if r is not None], len(gold), k)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def summarize(rows: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """Semble's aggregation of per-question rows (``repo``, ``language``, ``category`` and ``metrics``): means per
    repository and per category within it, then :func:`over_repos`."""
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    repos: dict[str, Any] = {}
    for name, rs in by_repo.items():
        cats: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rs:
            cats[r["category"]].append(r)
        repos[name] = {"language": rs[0]["language"], "n": len(rs), **{m: _mean([r[m] for r in rs]) for m in metrics},
                       "by_category": {c: {m: _mean([r[m] for r in cs]) for m in metrics}
                                       for c, cs in sorted(cats.items())}}
    return over_repos(repos, metrics)


def over_repos(repos: dict[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    """Per-repository scores (``{name: {"language", metric..., "by_category": {category: {metric...}}}}``) averaged
    over repositories: overall, per language, and per category over the repositories that have it."""

    def over(names: Sequence[str], get: Any) -> dict[str, Any]:
        return {"repos": len(names), **{m: _mean([get(n)[m] for n in names]) for m in metrics}}

    languages = sorted({v["language"] for v in repos.values()})
    categories = sorted({c for v in repos.values() for c in v["by_category"]})
    return {
        "overall": over(list(repos), repos.__getitem__) if repos else {},
        "by_language": {lang: over([n for n, v in repos.items() if v["language"] == lang], repos.__getitem__)
                        for lang in languages},
        "by_category": {c: over([n for n, v in repos.items() if c in v["by_category"]],
                                lambda n, c=c: repos[n]["by_category"][c]) for c in categories},
        "repos": repos,
    }


def published(semble: Path, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The published NDCG@10 of Semble's own runs for the dev repositories ``names``: ``{label: {"file": ...,
    "repos": {repo: {"language", "ndcg10", "by_category": {category: {"ndcg10"}}}}}}`` (the form
    :func:`over_repos` takes). The rows of held-out repositories are dropped as each file is parsed."""
    check_dev(names)
    files = list_dir(semble, "benchmarks/results")
    out: dict[str, dict[str, Any]] = {}
    for label, prefix, mode in PUBLISHED:
        for fname in sorted(f for f in files if f.startswith(prefix) and f.endswith(".json")):
            rows = [r for r in json.loads(show(semble, f"benchmarks/results/{fname}"))["repos"]
                    if r.get("mode") == mode and r["repo"] in names]
            if rows:
                out[label] = {"file": fname, "repos": {
                    r["repo"]: {"language": r["language"], "ndcg10": r["ndcg10"],
                                "by_category": {c: {"ndcg10": v} for c, v in r.get("by_category", {}).items()}}
                    for r in rows}}
    return out
