"""The Markdown report of :mod:`benchmarks.codesearch`: overall, per repository, per language and per category
NDCG@10 of every system (ours, Semble run here, Semble's published rows), all over the same repositories."""

from __future__ import annotations

from typing import Any


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _short(name: str) -> str:
    return name.replace(" (published)", " (pub)").replace(" (run here)", " (here)")


def render(results: dict[str, Any]) -> str:
    systems = results["systems"]
    names = list(systems)
    lines = [f"# Code-search benchmark, dev split ({results['date']})", "",
             f"`{results['command']}`; {results['machine']}; wall time {results['wall_seconds']:.0f} s.", "",
             f"Semble's benchmark (snapshot {results['semble_snapshot'][:12]}), dev split only: "
             f"{len(results['scored_repos'])} of {len(results['repos'])} requested repositories scored. NDCG@10 of "
             "the top 10 hits of one search, Semble's scorer (`benchmarks/codesearch_data.py`), mean over questions "
             "per repository then over repositories. Our ranking: "
             f"`{results['ranking']}`.", ""]
    standins = results.get("standins", {})
    if standins:
        lines += ["Stand-ins: no mirror here holds the pinned commit of these repositories, so every system here ran "
                  "on a release from a package registry instead (`benchmarks/codesearch_standins.py`); their scores "
                  "are of that release, Semble's published ones of the pinned commit:", ""]
        lines += [f"- {n}: **stand-in {s['standin']}** for {s['pinned'][:12]}; {s['because']}. Why this release: "
                  f"{s['why']}." for n, s in standins.items()]
        lines.append("")
    if results["skipped"]:
        lines += ["Skipped (not scored by any system; the published means below leave them out too):", ""]
        lines += [f"- {n}: {why}" for n, why in results["skipped"].items()]
        lines.append("")
    lines += ["## Overall (mean over repositories)", "",
              "file = the same hits collapsed to distinct files, scored on paths; files = the retriever's own ranked "
              "file list (`SearchResult.files`), scored the same way.", "",
              "| system | repos | NDCG@10 | file NDCG@10 | files NDCG@10 | note |", "|---|---|---|---|---|---|"]
    for name, s in systems.items():
        o = s["summary"]["overall"]
        note = ""
        if "file" in s:
            note = f"{s['file']}; all {s['all_dev']['repos']} requested dev repos: {_f(s['all_dev']['ndcg10'])}"
        elif "version" in s:
            note = f"semble {s['version']}, alpha=0 (stand-in model)"
        lines.append(f"| {name} | {o.get('repos', 0)} | {_f(o.get('ndcg10'))} | {_f(o.get('file_ndcg10'))} | "
                     f"{_f(o.get('files_ndcg10'))} | {note} |")
    head = " | ".join(_short(n) for n in names)
    lines += ["", "## Per language (NDCG@10, mean over its repositories)", "", f"| language | repos | {head} |",
              "|" + "---|" * (len(names) + 2)]
    languages = sorted({lang for s in systems.values() for lang in s["summary"]["by_language"]})
    for lang in languages:
        cells = [systems[n]["summary"]["by_language"].get(lang, {}) for n in names]
        repos = max(c.get("repos", 0) for c in cells)
        lines.append(f"| {lang} | {repos} | " + " | ".join(_f(c.get("ndcg10")) for c in cells) + " |")
    lines += ["", "## Per category (NDCG@10, mean over the repositories that have it)", "",
              f"| category | {head} |", "|" + "---|" * (len(names) + 1)]
    categories = sorted({c for s in systems.values() for c in s["summary"]["by_category"]})
    for cat in categories:
        lines.append(f"| {cat} | " + " | ".join(_f(systems[n]["summary"]["by_category"].get(cat, {}).get("ndcg10"))
                                               for n in names) + " |")
    lines += ["", "## Per repository (NDCG@10)", "", f"| repo | language | questions | {head} |",
              "|" + "---|" * (len(names) + 3)]
    for repo in results["scored_repos"]:
        cells = [systems[n]["summary"]["repos"].get(repo, {}) for n in names]
        lang = next((c["language"] for c in cells if c), "")
        n_q = next((c["n"] for c in cells if "n" in c), "-")
        shown = f"{repo} (stand-in {standins[repo]['standin']})" if repo in standins else repo
        lines.append(f"| {shown} | {lang} | {n_q} | " + " | ".join(_f(c.get("ndcg10")) for c in cells) + " |")
    timings = [(n, s["index_seconds"]) for n, s in systems.items() if "index_seconds" in s]
    if timings:
        lines += ["", "## Indexing (seconds; re-used = a cached index of the same digest)", ""]
        for n, t in timings:
            built = {k: v for k, v in t.items() if v is not None}
            lines.append(f"- {n}: built {len(built)} ({sum(built.values()):.0f} s), re-used {len(t) - len(built)}")
    lines.append("")
    return "\n".join(lines)
