"""Semble's public code-search benchmark, dev split only: our retriever's NDCG@10 beside Semble's.

    python -m benchmarks.codesearch --mode both --tag baseline       # lexical and hybrid, the 26 dev repositories
    python -m benchmarks.codesearch --mode lexical --repos flask,click --no-peer
    python -m benchmarks.codesearch --mode lexical --ablate noise,tiny --tag no-noise-tiny
    python -m benchmarks.codesearch --mode lexical --rank noise_factor=0.5 --dump /tmp/misses.jsonl
    python -m benchmarks.codesearch --prepare-standins                # download the registry stand-ins, then exit

The benchmark (questions, gold targets, pinned repositories) is read from a git snapshot of Semble (``--semble``),
only for the 26 dev repositories of :data:`~benchmarks.codesearch_data.DEV_REPOS`; any other name is refused
(the rest are held out). Each repository is exported at its pinned ``revision`` from its mirror (``--mirrors``:
``<owner>+<name>/repo``, bare clones the tool's ``fetch`` made) into ``$LLMC_BENCH_CACHE/codesearch/src`` and only its
``benchmark_root`` is indexed, as Semble does. A repository whose mirror is missing or lacks the commit runs on its
registry stand-in (:mod:`benchmarks.codesearch_standins`: axios, httpx and guzzle have one) when
``--prepare-standins`` has downloaded it and its gold check passes, and is recorded as such; otherwise it is skipped
with its reason printed and recorded. Only ``--prepare-standins`` downloads; a run downloads nothing.

Our system: :class:`~llmc_splitters.retrieval.CodeRetriever` ``index_directory`` with its default file selection
(lexical: ``embedding=None``; hybrid: the local ``minilm``, or ``--embedding``), then ``search(question, k=10)`` per question, scored as
:mod:`benchmarks.codesearch_data` says (Semble's scorer, replicated). Indexes are cached per (repository, mode) under
a digest of the library files that decide indexing (:func:`index_digest`), so a run that changes only the ranking
re-uses them; ``--reindex`` rebuilds. :func:`run` is the entry point for a loop over ranking variants.

Peers: Semble's published rows for the dev repositories (its hybrid, its BM25 with its ranking rules, its raw BM25,
CodeRankEmbed hybrid), and Semble itself run here (``pip install semble`` in ``--semble-python``'s venv) through
:mod:`benchmarks.codesearch_semble` on a stand-in model with ``alpha=0``: its BM25-and-rules path.

Results: ``benchmarks/results/codesearch[-TAG].json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import codesearch_data as D
from benchmarks import codesearch_standins as S
from benchmarks.codesearch_report import render
from benchmarks.variants import ranking_from
from benchmarks.gitsrc import ExportError, export_commit, has_commit, mirror_key

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = Path(os.environ.get("LLMC_BENCH_CACHE", Path.home() / ".cache" / "llmc-bench")) / "codesearch"
MIRRORS = Path("/work/.mirror")
SEMBLE = MIRRORS / "michalfedyna+semble" / "repo"
SEMBLE_PYTHON = Path("/work/venvs/semble/bin/python")
MODES = ("lexical", "hybrid")
METRICS = ("ndcg10", "file_ndcg10", "files_ndcg10")
PACKAGE = Path(__file__).resolve().parent.parent / "llmc_splitters"
# Modules of retrieval/ that only answer queries: a change to them leaves an index valid. Everything else under
# retrieval/ (and all of chunking/) is taken to decide what an index holds; embeddings/ only for a hybrid one.
QUERY_SIDE = ("retrieval/search/", "retrieval/context/", "retrieval/retriever.py", "retrieval/vectorstore.py",
              "retrieval/storage/filters.py", "retrieval/storage/chroma_files.py",
              "retrieval/storage/langchain_vectors.py")
SOURCE_SUFFIXES = frozenset({".py", ".scm", ".json", ".npz", ".npy", ".safetensors"})
INDEX_DISTS = ("tree-sitter", "tree-sitter-language-pack", "tantivy", "bm25s")
EMBEDDINGS = "retrieval/embeddings/"
# Modules of embeddings/ every model's vectors pass through (bounding texts, batching, lazy loading).
EMBED_SHARED = frozenset({"base.py", "batching.py", "_runtime.py"})


@dataclass
class Prepared:
    """A dev repository ready to index: its spec, questions and the directory to index (``None`` when skipped), and
    the registry stand-in it runs on when the mirror lacks its pinned commit."""

    spec: D.RepoSpec
    tasks: list[D.Task]
    root: Path | None = None
    skip: str | None = None
    standin: S.Standin | None = None
    standin_because: str = ""

    @property
    def key(self) -> str:
        """The tree's name in the index cache: the pinned commit, or the stand-in's version."""
        if self.standin is not None:
            return f"{self.spec.name}@{self.standin.registry}-{self.standin.version}"
        return f"{self.spec.name}@{self.spec.revision[:12]}"


@dataclass
class Config:
    """Where things are and how indexes are built (defaults: this machine's layout)."""

    semble: Path = SEMBLE
    mirrors: Path = MIRRORS
    cache: Path = CACHE
    max_tokens: int = 512
    workers: int = 1
    reindex: bool = False
    embedding: str = "minilm"
    log: Callable[[str], None] = field(default=print)


def prepare(names: Sequence[str], cfg: Config) -> list[Prepared]:
    """The dev repositories ``names``: their questions and exported trees (a registry stand-in, see
    :mod:`benchmarks.codesearch_standins`, when the mirror lacks the pinned commit), or why each is skipped."""
    out = []
    for spec in D.load_specs(cfg.semble, D.check_dev(names)):
        p = Prepared(spec, D.load_tasks(cfg.semble, spec))
        mirror = cfg.mirrors / mirror_key(spec.url) / "repo"
        lacks = None
        if not mirror.is_dir():
            lacks = f"no mirror at {mirror} (not fetched, or over the snapshot size limit)"
        elif not has_commit(mirror, spec.revision):
            lacks = f"the mirror {mirror} lacks the pinned commit {spec.revision[:12]} (snapshot older or pruned)"
        else:
            _export(p, mirror, cfg)
        if lacks and spec.name in S.STANDINS:
            standin = S.STANDINS[spec.name]
            p.root, why_not = S.locate(standin, spec, p.tasks, cfg.cache)
            if p.root is None:
                p.skip = f"{lacks}; {why_not}"
            else:
                p.standin, p.standin_because = standin, lacks
                cfg.log(f"standin {spec.name:14} {standin.registry} {standin.label}: {lacks}")
        elif lacks:
            p.skip = lacks
        if p.skip:
            cfg.log(f"skip    {spec.name:14} {p.skip}")
        out.append(p)
    return out


def _export(p: Prepared, mirror: Path, cfg: Config) -> None:
    """``p``'s benchmark root at its pinned commit, exported from ``mirror`` (``p.root``), or why not (``p.skip``)."""
    spec = p.spec
    root_paths = (spec.benchmark_root,) if spec.benchmark_root else ()
    try:
        src = export_commit(mirror, spec.revision, cfg.cache / "src" / p.key, root_paths)
    except ExportError as exc:
        p.skip = str(exc)
        return
    root = src / spec.benchmark_root if spec.benchmark_root else src
    if root.is_dir():
        p.root = root
    else:
        p.skip = f"benchmark_root {spec.benchmark_root!r} is not a directory at {spec.revision[:12]}"


def standins(prepared: Sequence[Prepared]) -> dict[str, dict[str, str]]:
    """The repositories of ``prepared`` that run on a registry stand-in, with what it is (for the results)."""
    return {p.spec.name: {**p.standin.record(p.spec.revision), "because": p.standin_because}
            for p in prepared if p.standin is not None}


def model_modules(embedding: str) -> tuple[str, frozenset[str]]:
    """The identity of the model ``embedding`` names and the ``embeddings/`` modules that make its vectors: the one
    its class is defined in, the ``embeddings/`` modules that one imports at its top (transitively), and
    :data:`EMBED_SHARED`. Another backend's module, its data, and the name registry (``resolve.py``,
    ``__init__.py``) are not among them: adding or re-defaulting a model leaves the other models' indexes valid. A
    model's weights are named by its identity (code-static's records its table's digest; MiniLM's live outside the
    package)."""
    emb = _embedding(embedding)
    prefix = "llmc_splitters.retrieval.embeddings."
    names, todo = set(EMBED_SHARED), [type(emb).__module__]
    while todo:
        mod = todo.pop()
        file = f"{mod[len(prefix):]}.py"
        if not mod.startswith(prefix) or file in names:
            continue
        names.add(file)
        tree = ast.parse((PACKAGE / EMBEDDINGS / file).read_text(encoding="utf-8"))
        todo += [f"{prefix}{node.module}" for node in tree.body
                 if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module]
    return str(emb.identity), frozenset(names)


def index_digest(mode: str, max_tokens: int, package: Path = PACKAGE, embedding: str = "minilm") -> str:
    """A digest of what decides an index's content in ``mode``: the files under ``chunking/`` and the
    non-query modules of ``retrieval/`` (of ``embeddings/``, for hybrid only, the model's own: :func:`model_modules`,
    and its identity), the versions of the parsing and index packages, and ``max_tokens``."""
    h = hashlib.sha256(f"{mode}\0{max_tokens}".encode())
    own: frozenset[str] = frozenset()
    if mode == "hybrid":
        identity, own = model_modules(embedding)
        h.update(f"\0{identity}".encode())
    for dist in INDEX_DISTS:
        try:
            h.update(f"\0{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"\0{dist}=-".encode())
    # Source files only: a file a running process leaves beside them for a moment must not change the key.
    files = sorted(p for p in (*(package / "chunking").rglob("*"), *(package / "retrieval").rglob("*"))
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix in SOURCE_SUFFIXES)
    for p in files:
        rel = p.relative_to(package).as_posix()
        if rel.startswith(QUERY_SIDE) or (rel.startswith(EMBEDDINGS) and rel[len(EMBEDDINGS):] not in own):
            continue
        h.update(f"\0{rel}\0".encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def _embedding(spec: str) -> Any:
    from llmc_splitters.retrieval.embeddings import resolve_embedding

    return resolve_embedding(spec)


def _retriever(index_dir: Path, mode: str, cfg: Config) -> Any:
    from llmc_splitters.retrieval import CodeRetriever

    return CodeRetriever(path=index_dir, embedding=_embedding(cfg.embedding) if mode == "hybrid" else None,
                         max_tokens=cfg.max_tokens)


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in spec)


def ensure_index(p: Prepared, mode: str, cfg: Config) -> tuple[Path, float | None]:
    """The index of ``p`` in ``mode``, built unless a complete one with the current digest exists; and the seconds
    building took (``None``: re-used). Indexes of other digests for the same repository and mode are removed."""
    assert p.root is not None
    # A hybrid index is filed under its model too: indexes of two models never replace each other.
    stem = f"{p.key}-{mode}" if mode == "lexical" else f"{p.key}-{mode}-{_slug(cfg.embedding)}"
    index_dir = cfg.cache / "index" / f"{stem}-{index_digest(mode, cfg.max_tokens, embedding=cfg.embedding)}"
    done = index_dir / ".complete"
    for old in (cfg.cache / "index").glob(f"{stem}-*"):
        if old != index_dir or cfg.reindex or not done.is_file():
            shutil.rmtree(old)
    if done.is_file():
        return index_dir, None
    t0 = time.perf_counter()
    r = _retriever(index_dir, mode, cfg)
    try:
        report = r.index_directory(p.root, workers=cfg.workers)
    finally:
        r.index.close()
    seconds = time.perf_counter() - t0
    done.write_text(json.dumps({"files": len(report.added) + len(report.updated) + len(report.unchanged),
                                "seconds": seconds}) + "\n")
    cfg.log(f"{mode:7} {p.spec.name:14} indexed {len(report.added)} files in {seconds:.1f} s")
    return index_dir, seconds


def score(task: D.Task, hits: list[tuple[str, int, int]], files: list[str] | None) -> dict[str, Any]:
    """One question's row: NDCG@10 of the hits (Semble's metric), of the hits collapsed to distinct files, and of
    the retriever's own file list (``files``; ``None`` for a system without one)."""
    ndcg10, ranks = D.score_hits(task, hits)
    row = {"repo": task.repo, "language": task.language, "category": task.category, "query": task.query,
           "ndcg10": ndcg10, "file_ndcg10": D.score_files(task, D.distinct_files(hits)), "ranks": ranks}
    if files is not None:
        row["files_ndcg10"] = D.score_files(task, files)
    return row


def evaluate(p: Prepared, index_dir: Path, mode: str, ranking: Any, cfg: Config) -> tuple[list[dict], list[dict]]:
    """Every question of ``p``: the scored rows, and what was returned (for ``--dump``; with the confidence, its
    signals and whether the first hit is in a gold file, for :mod:`benchmarks.calibrate`)."""
    r = _retriever(index_dir, mode, cfg)
    rows, seen = [], []
    try:
        for task in p.tasks:
            res = r.search(task.query, k=D.K, ranking=ranking)
            hits = [(h.span.path or "", h.span.start_line, h.span.end_line) for h in res.hits]
            rows.append(score(task, hits, [f.path for f in res.files]))
            seen.append({"hits": hits, "files": [f.path for f in res.files[:D.K]], "confidence": res.confidence,
                         "signals": dict(res.signals), "top_in_gold": D.top_in_gold(task, hits)})
    finally:
        r.index.close()
    return rows, seen


def run(repos: Sequence[str] = D.DEV_REPOS, mode: str = "lexical", ranking: Any = None, *,
        cfg: Config | None = None) -> dict[str, Any]:
    """Index (or re-use) and score the dev repositories ``repos`` in ``mode`` with ``ranking`` (a
    :class:`~llmc_splitters.retrieval.Ranking`; ``None``: the library's default). Returns ``{"mode", "ranking",
    "summary", "rows", "skipped", "index_seconds", "returned"}``; ``summary`` is
    :func:`~benchmarks.codesearch_data.summarize` of the rows (``summary["overall"]["ndcg10"]`` is the benchmark's
    number)."""
    if mode not in MODES:
        msg = f"mode must be one of {', '.join(MODES)}, got {mode!r}"
        raise ValueError(msg)
    cfg = cfg or Config()
    rows: list[dict] = []
    returned: list[dict] = []
    timings: dict[str, float | None] = {}
    prepared = prepare(repos, cfg)
    for p in prepared:
        if p.root is None:
            continue
        index_dir, timings[p.spec.name] = ensure_index(p, mode, cfg)
        got, seen = evaluate(p, index_dir, mode, ranking, cfg)
        rows += got
        returned += seen
    summary = D.summarize(rows, METRICS)
    cfg.log(f"{mode:7} NDCG@10 {summary['overall'].get('ndcg10', float('nan')):.4f} over "
            f"{summary['overall'].get('repos', 0)} repositories ({len(rows)} questions)")
    return {"mode": mode, "ranking": repr(ranking) if ranking is not None else "default", "summary": summary,
            "rows": rows, "returned": returned, "index_seconds": timings,
            "skipped": {p.spec.name: p.skip for p in prepared if p.skip}, "standins": standins(prepared)}


def run_semble(prepared: Sequence[Prepared], cfg: Config, python: Path = SEMBLE_PYTHON) -> dict[str, Any]:
    """Semble (the PyPI package, in ``python``'s venv) on the same trees, BM25 and its rules (``alpha=0``), scored
    with our scorer."""
    ready = [p for p in prepared if p.root is not None]
    job = {"model_dir": str(cfg.cache / "semble-standin-model"), "alpha": 0.0, "k": D.K,
           "repos": [{"name": p.spec.name, "root": str(p.root), "queries": [t.query for t in p.tasks]} for p in ready]}
    env = {**os.environ, "SEMBLE_CACHE_LOCATION": str(cfg.cache / "semble-cache"), "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    done = subprocess.run([str(python), str(HERE / "codesearch_semble.py")], input=json.dumps(job), env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"the Semble driver failed ({python}):\n{done.stderr[-3000:]}"
        raise RuntimeError(msg)
    answer = json.loads(done.stdout)
    rows, returned, skipped, notes = [], [], {}, {}
    for p in ready:
        got = answer["repos"][p.spec.name]
        if "error" in got:
            skipped[p.spec.name] = got["error"]
            cfg.log(f"semble  {p.spec.name:14} failed: {got['error']}")
            continue
        notes[p.spec.name] = {"chunks": got["chunks"], "index_s": got["index_s"], "warnings": got["warnings"]}
        for task, hits in zip(p.tasks, got["hits"]):
            hits = [tuple(h) for h in hits]
            rows.append(score(task, hits, None))
            returned.append({"hits": hits})
    summary = D.summarize(rows, METRICS[:2])
    cfg.log(f"semble  NDCG@10 {summary['overall'].get('ndcg10', float('nan')):.4f} (semble "
            f"{answer['semble_version']}, alpha=0, {time.perf_counter() - t0:.0f} s)")
    return {"version": answer["semble_version"], "summary": summary, "rows": rows, "returned": returned,
            "skipped": skipped, "repos": notes}


def _dump(path: Path, system: str, rows: Sequence[dict], returned: Sequence[dict], tasks: dict[str, D.Task]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for row, got in zip(rows, returned):
            task = tasks[f"{row['repo']}\0{row['query']}"]
            f.write(json.dumps({"system": system, **{k: row[k] for k in ("repo", "category", "query", "ndcg10",
                                                                           "ranks")},
                                "gold": [str(t) for t in task.relevant], "secondary": [str(t) for t in task.secondary],
                                **got}) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=(*MODES, "both"), default="both")
    ap.add_argument("--repos", default="", help="comma-separated dev repository names (default: all 26)")
    ap.add_argument("--tag", default="", help="results file suffix")
    ap.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True,
                    help="run Semble beside us (needs --semble-python)")
    ap.add_argument("--ablate", default="", help="ranking rules to switch off together (Ranking().without)")
    ap.add_argument("--rank", action="append", default=[], metavar="NAME=VALUE",
                    help="a Ranking field to set (JSON value), e.g. noise_factor=0.5; repeatable")
    ap.add_argument("--reindex", action="store_true", help="rebuild the indexes even if cached")
    ap.add_argument("--max-tokens", type=int, default=512, help="leaf size of the chunker (part of the index key)")
    ap.add_argument("--workers", type=int, default=1, help="chunking processes while indexing")
    ap.add_argument("--embedding", default="minilm", help="the hybrid runs' model (any spec resolve_embedding takes; "
                                                          "part of the index key)")
    ap.add_argument("--semble", type=Path, default=SEMBLE, help="git snapshot of Semble (the benchmark data)")
    ap.add_argument("--mirrors", type=Path, default=MIRRORS, help="folder of <owner>+<name>/repo mirrors")
    ap.add_argument("--semble-python", type=Path, default=SEMBLE_PYTHON, help="python of the venv with semble")
    ap.add_argument("--dump", type=Path, help="write each question's gold and top-10 hits here (JSON lines)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--prepare-standins", action="store_true",
                    help="download the registry stand-ins of --repos (default: all that have one), check their gold "
                         "paths and exit; the only step that downloads")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        names = D.check_dev([r for r in args.repos.split(",") if r] or D.DEV_REPOS)
        ranking = ranking_from(args.ablate, args.rank)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"codesearch: {exc}") from None
    cfg = Config(semble=args.semble, mirrors=args.mirrors, max_tokens=args.max_tokens, workers=args.workers,
                 reindex=args.reindex, embedding=args.embedding)
    if args.prepare_standins:
        try:
            ok = S.prepare_standins(args.semble, names, cfg.cache)
        except S.StandinError as exc:
            raise SystemExit(f"codesearch: {exc}") from None
        raise SystemExit(0 if ok else "codesearch: a stand-in lacks gold (see above)")
    commit = subprocess.run(["git", "-C", str(args.semble), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    systems: dict[str, Any] = {}
    for mode in MODES if args.mode == "both" else (args.mode,):
        label = f"ours-{mode}" if mode == "lexical" or cfg.embedding == "minilm" else f"ours-hybrid ({cfg.embedding})"
        systems[label] = run(names, mode, ranking, cfg=cfg)
    prepared = prepare(names, replace(cfg, log=lambda _: None))
    if args.peer:
        peer = run_semble(prepared, cfg, args.semble_python)
        systems[f"semble-{peer['version']} bm25+rules (run here)"] = peer
    scored = sorted({r["repo"] for s in systems.values() for r in s["rows"]}) or [p.spec.name for p in prepared]
    for label, pub in D.published(args.semble, names).items():
        repos = {n: v for n, v in pub["repos"].items() if n in scored}
        systems[label] = {"file": pub["file"], "summary": D.over_repos(repos, ("ndcg10",)),
                          "all_dev": D.over_repos(pub["repos"], ("ndcg10",))["overall"]}
    if args.dump:
        args.dump.unlink(missing_ok=True)
        tasks = {f"{t.repo}\0{t.query}": t for p in prepared for t in p.tasks}
        for name, s in systems.items():
            if "returned" in s:
                _dump(args.dump, name, s["rows"], s["returned"], tasks)
    for s in systems.values():
        s.pop("returned", None)
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["python -m benchmarks.codesearch", *(sys.argv[1:] if argv is None else argv)]),
        "machine": f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores",
        "semble_snapshot": commit, "k": D.K, "repos": names, "scored_repos": scored,
        "skipped": {p.spec.name: p.skip for p in prepared if p.skip}, "standins": standins(prepared),
        "ranking": repr(ranking) if ranking is not None else "default", "systems": systems,
        "wall_seconds": time.perf_counter() - t0,
    }
    name = f"codesearch-{args.tag}" if args.tag else "codesearch"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
