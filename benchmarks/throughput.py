"""Chunking throughput of every chunker against the parse+encode floor, in one process, on the tune files.

    python -m benchmarks.throughput            # the tune packages, median of 3 passes
    python -m benchmarks.throughput --quick    # one tune package per language, 20 kB each

Each pass is :func:`benchmarks.run.chunk_all` with one repeat: file by file, one tree-sitter parse + one
cl100k encode (the floor, as :func:`benchmarks.perf.floor_seconds`), then every chunker on the same file, each
timed by the thread's CPU time. Reported per chunker: the median over the passes of its seconds and of its
ratio to the floor of the same pass (over the languages it supports), and MB/s from the median seconds. The
corpus comes from ``benchmarks/.cache``; ``cached`` in the results says whether every package was there before
the run (nothing was downloaded). Writes ``benchmarks/results/throughput.json`` and ``throughput.md``
(``--out`` to change).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from .chunkers import all_chunkers
from .corpus import CACHE_DIR, FULL, LANGUAGES, QUICK, _safe_name, build_corpus, select_specs
from .run import CHUNK_TOKENS, RESULTS_DIR, chunk_all

REPEATS = 3


def measure(quick: bool = False, repeats: int = REPEATS, log=print) -> dict:  # noqa: ANN001
    """Time every chunker and the floor over the tune split's files; see the module docstring."""
    config = dataclasses.replace(QUICK if quick else FULL, splits=("tune",))
    specs_ = select_specs(config)
    cached = all((CACHE_DIR / _safe_name(s) / ".done").exists() for s in specs_)
    corpus = build_corpus(config, log=log)
    files = corpus.files()
    chunkers, missing = all_chunkers(CHUNK_TOKENS, corpus.queries(), files)
    for m in missing:
        log(f"  ! chunker unavailable: {m}")
    nbytes = {lang: sum(len(f.text.encode("utf-8", "surrogatepass")) for f in files if f.language == lang)
              for lang in LANGUAGES}
    mb = sum(nbytes.values()) / 1e6
    log(f"{len(files)} files, {mb:.2f} MB, {len(chunkers)} chunkers, {repeats} passes")
    passes = []
    for rep in range(repeats):
        _, secs, floor, errors = chunk_all(chunkers, files, 1)
        passes.append((secs, floor, errors))
        log(f"  pass {rep + 1}: floor {sum(floor.values()):.2f}s")
    floor_med = {lang: statistics.median(p[1].get(lang, 0.0) for p in passes) for lang in LANGUAGES}
    out: dict[str, dict] = {}
    for spec in chunkers:
        langs = [lang for lang in LANGUAGES if lang in spec.languages and nbytes[lang]]
        seconds = [sum(p[0][spec.name].get(lang, 0.0) for lang in langs) for p in passes]
        floors = [sum(p[1].get(lang, 0.0) for lang in langs) for p in passes]
        med = statistics.median(seconds)
        size = sum(nbytes[lang] for lang in langs)
        out[spec.name] = {
            "kind": spec.kind, "languages": langs, "bytes": size, "seconds": med, "seconds_per_pass": seconds,
            "mb_per_s": size / 1e6 / med if med else None,
            "ratio_to_floor": statistics.median(s / f for s, f in zip(seconds, floors, strict=True) if f),
            "ratio_per_pass": [s / f if f else None for s, f in zip(seconds, floors, strict=True)],
            "per_language": {lang: statistics.median(p[0][spec.name].get(lang, 0.0) / p[1][lang]
                                                     for p in passes if p[1].get(lang)) for lang in langs},
            "failed_files": len(passes[0][2][spec.name]),
        }
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python", "-m", "benchmarks.throughput", *(["--quick"] if quick else [])]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "quick": quick, "cached": cached, "repeats": repeats, "chunk_tokens": CHUNK_TOKENS,
        "packages": [p.spec.key for p in corpus.packages], "files": len(files), "bytes": nbytes,
        "floor": {"seconds": sum(floor_med.values()), "per_language": floor_med,
                  "mb_per_s": sum(nbytes.values()) / 1e6 / sum(floor_med.values())},
        "chunkers": out, "unavailable": missing,
    }


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table(r: dict) -> str:
    """The results of :func:`measure` as a Markdown table, fastest first."""
    langs = [lang for lang in LANGUAGES if r["bytes"].get(lang)]
    load = ", ".join(f"{x:.2f}" for x in r["machine"]["load_before"])
    lines = [f"{r['files']} files ({sum(r['bytes'].values()) / 1e6:.2f} MB) of {', '.join(r['packages'])}; "
             f"median of {r['repeats']} passes; {r['date']}; load average before: {load}",
             "",
             "| chunker | seconds | MB/s | x floor | " + " | ".join(langs) + " | failed files |",
             "|---|---|---|---|" + "---|" * len(langs) + "---|",
             f"| floor: parse + encode | {r['floor']['seconds']:.3f} | {r['floor']['mb_per_s']:.2f} | 1.00 | "
             + " | ".join("1.00" for _ in langs) + " | 0 |"]
    for name, t in sorted(r["chunkers"].items(), key=lambda kv: kv[1]["ratio_to_floor"]):
        per = [_f(t["per_language"].get(lang)) for lang in langs]
        lines.append(f"| {name} | {t['seconds']:.3f} | {_f(t['mb_per_s'])} | {_f(t['ratio_to_floor'])} | "
                     + " | ".join(per) + f" | {t['failed_files']} |")
    if r["unavailable"]:
        lines += ["", "Unavailable: " + "; ".join(r["unavailable"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one tune package per language, 20 kB each")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    r = measure(args.quick, args.repeats, log=lambda m: print(m, file=sys.stderr, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "throughput.json").write_text(json.dumps(r, indent=1) + "\n")
    md = table(r)
    (args.out / "throughput.md").write_text("# Chunking throughput\n\n" + md)
    print(md)


if __name__ == "__main__":
    main()
