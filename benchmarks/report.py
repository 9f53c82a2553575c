"""results.json -> results.md and retrieval.png."""

from __future__ import annotations

from pathlib import Path

LANGS = ("python", "javascript", "typescript", "bash")
HEADLINE_BUDGET = "1024"


def _f(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _systems(results: dict) -> list[str]:
    names = [c["name"] for c in results["chunkers"]]
    seen = set()
    out = []
    for split in results["retrieval"].values():
        for ret in split.values():
            for bud in ret.values():
                for s in bud:
                    if s not in seen:
                        seen.add(s)
    # Chunker order first, then plug-ins.
    out = [n for n in names if n in seen] + sorted(seen - set(names))
    return out


def _cell(results: dict, split: str, ret: str, budget: str, system: str, lang: str, metric: str) -> float | None:
    try:
        return results["retrieval"][split][ret][budget][system][lang][metric]
    except KeyError:
        return None


def _best_peer(results: dict, split: str, ret: str, budget: str, metric: str = "full_hit") -> tuple[str, float]:
    kinds = {c["name"]: c["kind"] for c in results["chunkers"]}
    best = ("", -1.0)
    for s in _systems(results):
        if kinds.get(s) not in ("peer", "baseline"):
            continue
        v = _cell(results, split, ret, budget, s, "macro", metric)
        if v is not None and v > best[1]:
            best = (s, v)
    return best


def retrieval_table(results: dict, split: str, budget: str, metric: str) -> list[str]:
    rets = [r for r in ("bm25", "dense") if r in results["retrieval"].get(split, {})]
    head = "| system | " + " | ".join(f"{r} {lang[:2]}" for r in rets for lang in (*LANGS, "macro")) + " |"
    lines = [head, "|" + "---|" * (1 + len(rets) * (len(LANGS) + 1))]
    for s in _systems(results):
        vals = [_f(_cell(results, split, r, budget, s, lang, metric)) for r in rets for lang in (*LANGS, "macro")]
        lines.append(f"| {s} | " + " | ".join(vals) + " |")
    return lines


def summary_table(results: dict, split: str, budget: str) -> list[str]:
    rets = [r for r in ("bm25", "dense") if r in results["retrieval"].get(split, {})]
    cols = ("line_recall", "full_hit", "precision", "completeness")
    head = "| system | " + " | ".join(f"{r} {c.replace('_', ' ')}" for r in rets for c in cols) + " |"
    lines = [head, "|" + "---|" * (1 + len(rets) * len(cols))]
    for s in _systems(results):
        vals = [_f(_cell(results, split, r, budget, s, "macro", c)) for r in rets for c in cols]
        lines.append(f"| {s} | " + " | ".join(vals) + " |")
    return lines


def budget_table(results: dict, split: str) -> list[str]:
    rets = [r for r in ("bm25", "dense") if r in results["retrieval"].get(split, {})]
    budgets = [str(b) for b in results["settings"]["budgets"]]
    head = "| system | " + " | ".join(f"{r} @{b}" for r in rets for b in budgets) + " |"
    lines = [head, "|" + "---|" * (1 + len(rets) * len(budgets))]
    for s in _systems(results):
        vals = [_f(_cell(results, split, r, b, s, "macro", "full_hit")) for r in rets for b in budgets]
        lines.append(f"| {s} | " + " | ".join(vals) + " |")
    return lines


def stats_table(results: dict) -> list[str]:
    lines = ["| chunker | lang | chunks | mean tok | max tok | over budget | boundary inside line | lossless files "
             "| nws coverage |", "|---|---|---|---|---|---|---|---|---|"]
    for name, per in results["chunk_stats"].items():
        for lang in (*LANGS, "all"):
            st = per.get(lang)
            if not st:
                continue
            lines.append(f"| {name} | {lang} | {st['chunks']} | {st['mean_tokens']:.0f} | {st['max_tokens']} | "
                         f"{_pct(st['over_budget'])} | {_pct(st['boundary_inside_line'])} | "
                         f"{_pct(st['lossless_files'])} | {_pct(st['nws_coverage'])} |")
    return lines


def throughput_table(results: dict) -> list[str]:
    lines = ["| chunker | MB/s | x floor | python | javascript | typescript | bash | failed files |",
             "|---|---|---|---|---|---|---|---|"]
    fl = results["floor"]
    total_b = sum(fl["bytes"].values())
    total_s = sum(fl["seconds"].values())
    lines.append(f"| floor: parse + encode | {total_b / 1e6 / total_s:.2f} | 1.00 | "
                 + " | ".join("1.00" for _ in LANGS) + " | 0 |")
    for name, t in results["throughput"].items():
        per = [_f(t["per_language"].get(lang, {}).get("ratio_to_floor")) for lang in LANGS]
        lines.append(f"| {name} | {_f(t['mb_per_s'])} | {_f(t['ratio_to_floor'])} | " + " | ".join(per)
                     + f" | {t['failed_files']} |")
    return lines


def corpus_table(results: dict) -> list[str]:
    lines = ["| language | split | package | version | files kept / in package | kB | queries | needing context |",
             "|---|---|---|---|---|---|---|---|"]
    for p in results["corpus"]:
        ver = p["version"] + ("" if p["version"] == p["pinned"] else f" (pinned {p['pinned']})")
        lines.append(f"| {p['language']} | {p['split']} | {p['registry']}:{p['package']} | {ver} | "
                     f"{p['files']} / {p['files_in_package']} | {p['bytes'] / 1000:.1f} | {p['queries']} | "
                     f"{p['queries_needing_context']} |")
    return lines


def targets(results: dict) -> list[str]:
    """The issue's targets, checked on these numbers."""
    out = []
    split, b = "heldout", HEADLINE_BUDGET
    ours = "llmc ASTChunker"
    ours_h = "llmc ASTChunker + header"
    stats = results["chunk_stats"].get(ours)
    if stats:
        ok = all(stats[lang]["lossless_files"] == 1.0 and stats[lang]["over_budget"] == 0.0
                 and stats[lang]["nws_coverage"] == 1.0 for lang in LANGS if lang in stats)
        out.append(f"- Chunker invariants (100% lossless files, 0% over budget, 100% nws coverage, every language): "
                   f"**{'met' if ok else 'MISSED'}**")
    for ret, rule in (("dense", "beats the best peer by >= 0.10"), ("bm25", "no worse than the best peer")):
        if ret not in results["retrieval"].get(split, {}):
            continue
        peer, pv = _best_peer(results, split, ret, b)
        mine = {s: _cell(results, split, ret, b, s, "macro", "full_hit") for s in (ours, ours_h)}
        mine = {k: v for k, v in mine.items() if v is not None}
        if not mine:
            continue
        s, v = max(mine.items(), key=lambda kv: kv[1])
        need = pv + 0.10 if ret == "dense" else pv
        out.append(f"- {ret} full-hit @{b}, held-out macro: ours best = {s} {v:.3f}; best peer = {peer} {pv:.3f}; "
                   f"target ({rule}): **{'met' if v >= need - 1e-9 else 'MISSED'}**")
    comp = {}
    for ret in ("bm25", "dense"):
        for s in _systems(results):
            v = _cell(results, split, ret, b, s, "macro", "completeness")
            if v is not None:
                comp[(s, ret)] = v
    pr = {k: v for k, v in comp.items() if k[0].startswith("llmc parent-context")}
    others = {k: v for k, v in comp.items() if not k[0].startswith("llmc parent-context")
              and not k[0].startswith("exact-boundary")}
    if pr and others:
        bo = max(others.items(), key=lambda kv: kv[1])
        bp = max(pr.items(), key=lambda kv: kv[1])
        out.append(f"- Context-completeness @{b}, held-out macro: parent-context retriever {bp[1]:.3f} ({bp[0][1]}) "
                   f"vs best chunker {bo[1]:.3f} ({bo[0][0]}, {bo[0][1]}): "
                   f"**{'met' if all(v > bo[1] for v in pr.values()) else 'MISSED'}**")
    elif not pr:
        out.append("- Context-completeness of the parent-context retriever: not measured (plug-in unavailable)")
    t = results["throughput"].get(ours)
    if t and t.get("ratio_to_floor"):
        counting = [n for n, c in results["throughput"].items() if n not in (ours, ours_h)
                    and not n.startswith(("fixed", "exact", "astchunk", "llamaindex-code-default"))]
        slower = all((results["throughput"][n]["ratio_to_floor"] or 0) > t["ratio_to_floor"] for n in counting)
        out.append(f"- Speed: ours {t['ratio_to_floor']:.2f}x the parse+encode floor (target <= 1.5x: "
                   f"**{'met' if t['ratio_to_floor'] <= 1.5 else 'MISSED'}**); faster than every token-counting peer "
                   f"({', '.join(counting)}): **{'met' if slower else 'MISSED'}**")
    mem = results.get("memory", {}).get("llmc")
    if mem and "peak_rss_mb" in mem:
        out.append(f"- Memory on a {mem['bytes'] / 1e6:.1f} MB file: peak RSS {mem['peak_rss_mb']:.0f} MB "
                   f"(target < 300 MB: **{'met' if mem['peak_rss_mb'] < 300 else 'MISSED'}**)")
    return out


CAVEATS = [
    "Retrieval is per package (each package is its own index, as one repository would be); a package's corpus is "
    "a seeded sample of its source files capped in size (see Corpus), so budgets are a real share of the index.",
    "The dense model reads at most 256 word pieces of a chunk; longer chunks are judged on their beginning "
    "(this favours chunks that start at a definition).",
    "Held-out samples are small (see n in results.json): differences of a few points are within noise.",
    "Peers that return bare strings are located in the file ignoring whitespace; a chunk that cannot be located "
    "counts as covering nothing (chunk_stats.unlocated_chunks).",
]


def render_markdown(results: dict, notes: str = "") -> str:
    s = results["settings"]
    lines = [
        "# llmc_splitters benchmark results",
        "",
        f"Generated {results['date']} by `{results['command']}` ({results.get('mode', '?')} mode, "
        f"{results['elapsed_seconds'] / 60:.1f} min on {results['machine']['cpus']} CPUs). "
        f"Chunk budget {s['chunk_tokens']} cl100k tokens; context budgets {', '.join(map(str, s['budgets']))}; "
        f"dense model {s.get('dense_model')} (reads at most {s.get('dense_max_seq_length')} word pieces per chunk).",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + ".",
        "",
        *(["**Quick mode**: one small package sample per split and language (20 kB indexes, a few queries each): "
           "a smoke run of the pipeline, not a basis for conclusions.", ""] if results.get("mode") == "quick"
          else []),
        "## Targets (held-out packages, 1024-token contexts, macro over languages)",
        "",
        *targets(results),
        "",
        "## Full-hit rate, held-out packages, 1024-token contexts",
        "",
        "Share of queries whose whole gold function (all its non-whitespace characters) is in the context.",
        "",
        *retrieval_table(results, "heldout", HEADLINE_BUDGET, "full_hit"),
        "",
        "## All metrics, held-out, 1024 tokens (macro over languages)",
        "",
        "line recall: share of the gold function's non-blank lines in the context; precision: gold tokens in the "
        "context / context tokens; completeness: for methods and functions using imported names, share whose "
        "context holds the whole function, the class header line and every import line binding a used name.",
        "",
        *summary_table(results, "heldout", HEADLINE_BUDGET),
        "",
        "## Full-hit by budget (macro), held-out",
        "",
        *budget_table(results, "heldout"),
        "",
        "## Tune packages (full-hit @1024 and all metrics)",
        "",
        *retrieval_table(results, "tune", HEADLINE_BUDGET, "full_hit"),
        "",
        *summary_table(results, "tune", HEADLINE_BUDGET),
        "",
        "## Chunk statistics (all packages)",
        "",
        f"Over budget: chunks over {s['chunk_tokens']} tokens (header included). Boundary inside a line: a chunk "
        "start with code before it on its line, or an end with code after it. Lossless file: every chunk is an "
        "exact slice of the file and together they cover every character. nws coverage: share of the corpus's "
        "non-whitespace characters inside some chunk.",
        "",
        *stats_table(results),
        "",
        "## Throughput (same files, one process, per-file minimum over "
        f"{s['throughput_repeats']} interleaved passes)",
        "",
        "Floor = one tree-sitter parse + one cl100k encode per file. x floor = chunker time / floor time on the "
        "languages it supports. Times are CPU seconds of the chunking thread (`time.thread_time`), so other load "
        "on the machine matters less; MB/s = corpus MB / those seconds.",
        "",
        *throughput_table(results),
        "",
        "## Memory",
        "",
    ]
    for target, m in results.get("memory", {}).items():
        if "error" in m:
            lines.append(f"- {target}: error `{m['error'][-300:]}`")
        else:
            lines.append(f"- {target}: generated Python file of {m['bytes'] / 1e6:.1f} MB, {m['seconds']:.1f}s, "
                         f"RSS before {m['rss_before_mb']:.0f} MB, peak RSS {m['peak_rss_mb']:.0f} MB "
                         f"(+{m['peak_delta_mb']:.0f} MB), lossless {m['lossless']}, over budget {m['over_budget']}")
    lines += ["", "## Corpus", "", *corpus_table(results), "", "## Systems", ""]
    for c in results["chunkers"]:
        lines.append(f"- **{c['name']}** ({c['kind']}): {c['note']}")
    for m in results.get("unavailable", []):
        lines.append(f"- unavailable: {m}")
    if results.get("error_counts"):
        lines += ["", "## Errors", ""]
        for k, n in results["error_counts"].items():
            lines.append(f"- {k}: {n} file(s) failed; first: `{results['errors'][k][0][:300]}`")
    lines += ["", "## Caveats", "", *(f"- {c}" for c in CAVEATS)]
    if notes.strip():
        lines += ["", "## Closing notes", "", notes.strip()]
    lines.append("")
    return "\n".join(lines)


def render_plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    split = "heldout" if "heldout" in results["retrieval"] else next(iter(results["retrieval"]), None)
    if split is None:
        return
    rets = [r for r in ("bm25", "dense") if r in results["retrieval"][split]]
    budgets = [str(b) for b in results["settings"]["budgets"]]
    fig, axes = plt.subplots(1, len(rets), figsize=(6.5 * len(rets), 4.8), squeeze=False)
    for ax, ret in zip(axes[0], rets, strict=True):
        for s in _systems(results):
            ys = [_cell(results, split, ret, b, s, "macro", "full_hit") for b in budgets]
            if all(y is None for y in ys):
                continue
            style = "-o" if s.startswith("llmc") else ("--" if s.startswith("exact") else ":.")
            ax.plot([int(b) for b in budgets], [y if y is not None else float("nan") for y in ys], style, label=s,
                    linewidth=2.2 if s.startswith("llmc") else 1.2)
        ax.set_xscale("log", base=2)
        ax.set_xticks([int(b) for b in budgets], budgets)
        ax.set_xlabel("context budget (cl100k tokens)")
        ax.set_ylabel("full-hit rate (macro over languages)")
        ax.set_title(f"{ret}, {split} packages")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
