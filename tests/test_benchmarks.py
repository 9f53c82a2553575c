"""The benchmark code: metric functions on hand-made examples, query extraction, and an end-to-end run on a tiny
corpus written to tmp_path (no network, no model, no timed asserts)."""

from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("bm25s")
pytest.importorskip("tree_sitter_language_pack")

from benchmarks import metrics as M  # noqa: E402
from benchmarks.chunkers import Chunk, RawChunk, _NwsIndex, count_tokens, finish, fixed_windows, locate  # noqa: E402
from benchmarks.corpus import CorpusConfig, Query, SourceFile, corpus_from_dir, extract_queries  # noqa: E402

SRC = textwrap.dedent("""\
    import os
    from x import y as z

    class A:
        def m(self):
            return os.sep + z
""")


def _query(**kw) -> Query:
    f = SourceFile("p", "python", "m.py", SRC)
    start = SRC.index("    def m")
    end = SRC.index("+ z") + 3
    base = dict(qid="q", package="p", language="python", path="m.py", text="q", name="A.m", gold_start=start,
                gold_end=end, start_line=5, end_line=6, is_method=True, class_line=4, import_lines=[1, 2])
    base.update(kw)
    return f, Query(**base)


def _lines(f: SourceFile, a: int, b: int, tokens: int = 10) -> M.Piece:
    return M.Piece(f.path, f.line_range(a)[0], f.line_range(b)[1], tokens)


def test_full_hit_and_line_recall() -> None:
    f, q = _query()
    assert M.full_hit(f, q, [_lines(f, 5, 6)])
    assert M.line_recall(f, q, [_lines(f, 5, 6)]) == 1.0
    assert not M.full_hit(f, q, [_lines(f, 5, 5)])
    assert M.line_recall(f, q, [_lines(f, 5, 5)]) == 0.5
    assert M.line_recall(f, q, []) == 0.0
    # Two pieces that together hold the function are a full hit; a piece of another file counts for nothing.
    assert M.full_hit(f, q, [_lines(f, 6, 6), _lines(f, 4, 5)])
    assert not M.full_hit(f, q, [M.Piece("other.py", 0, len(SRC), 5)])


def test_whitespace_is_not_needed() -> None:
    f, q = _query()
    # A chunk that strips the method's indentation still holds every non-whitespace char of it.
    start = SRC.index("def m")
    assert M.full_hit(f, q, [M.Piece("m.py", start, len(SRC), 10)])
    # Missing one visible char is a miss.
    assert not M.full_hit(f, q, [M.Piece("m.py", start + 1, len(SRC), 10)])


def test_precision() -> None:
    f, q = _query()
    gold = count_tokens(SRC[q.gold_start:q.gold_end])
    exact = M.Piece("m.py", q.gold_start, q.gold_end, gold)
    assert M.precision(f, q, [exact], count_tokens) == 1.0
    assert M.precision(f, q, [exact, M.Piece("m.py", 0, 10, 30)], count_tokens) == pytest.approx(gold / (gold + 30))
    # Gold tokens are counted once even when two pieces overlap on them.
    assert M.precision(f, q, [exact, exact], count_tokens) == pytest.approx(0.5)
    assert M.precision(f, q, [], count_tokens) == 0.0


def test_completeness() -> None:
    f, q = _query()
    assert M.completeness(f, q, [_lines(f, 5, 6)]) is False  # no class header, no imports
    assert M.completeness(f, q, [_lines(f, 4, 6)]) is False  # no imports
    assert M.completeness(f, q, [_lines(f, 1, 2), _lines(f, 4, 6)]) is True
    assert M.completeness(f, q, [_lines(f, 1, 1), _lines(f, 4, 6)]) is False  # `z` binding line missing
    assert M.completeness(f, q, [_lines(f, 1, 2), _lines(f, 4, 5)]) is False  # function not whole
    _, free = _query(is_method=False, class_line=None, import_lines=[])
    assert M.completeness(f, free, [_lines(f, 5, 6)]) is None  # needs no context: not counted


def test_fill_skips_what_does_not_fit() -> None:
    assert M.fill([("a", 600), ("b", 500), ("c", 400), ("d", 100)], 1024) == ["a", "c"]
    assert M.fill([("a", 2000), ("b", 10)], 512) == ["b"]


def test_chunk_stats_lossless_and_boundaries() -> None:
    f = SourceFile("p", "python", "m.py", SRC)
    cut = SRC.index("class")
    tiles = [Chunk("m.py", 0, cut, SRC[:cut], 20), Chunk("m.py", cut, len(SRC), SRC[cut:], 300)]
    st = M.chunk_stats([f], [tiles], budget=256)
    assert st["lossless_files"] == 1.0 and st["nws_coverage"] == 1.0
    assert st["over_budget"] == 0.5 and st["max_tokens"] == 300
    assert st["boundary_inside_line"] == 0.0
    mid = SRC.index("sep")
    halves = [Chunk("m.py", 0, mid, SRC[:mid], 5), Chunk("m.py", mid, len(SRC) - 4, SRC[mid:-4], 5)]
    st = M.chunk_stats([f], [halves], budget=256)
    assert st["lossless_files"] == 0.0 and 0 < st["nws_coverage"] < 1.0
    assert st["boundary_inside_line"] == 1.0  # the cuts at "sep" and before "+ z" both split a line


def test_locate_and_fixed_windows() -> None:
    f = SourceFile("p", "python", "m.py", SRC)
    idx = _NwsIndex(SRC)
    start, end, _ = locate(idx, "def m(self):\n        return os.sep + z", 0)
    assert SRC[start:end] == "def m(self):\n        return os.sep + z"
    chunks = finish(f, [RawChunk("class A:\n    def m(self):"), RawChunk("return os.sep + z\n")])
    assert [c.start >= 0 for c in chunks] == [True, True]
    assert chunks[0].verbatim and chunks[1].verbatim
    wins = fixed_windows(SRC * 20, 64, 0.0)
    assert "".join(w.body for w in wins) == SRC * 20
    assert all(count_tokens(w.body) <= 66 for w in wins)
    over = fixed_windows(SRC * 20, 64, 0.15)
    assert len(over) > len(wins)


def test_extract_python_query_removes_docstring() -> None:
    src = textwrap.dedent('''\
        import json


        @decorator
        def load(path):
            """Load a JSON document from disk. More text follows.

            Args:
                path: where.
            """
            with open(path) as fh:
                return json.load(fh)
    ''')
    new, qs = extract_queries("p", "python", "m.py", src)
    assert len(qs) == 1
    q = qs[0]
    assert q.text == "Load a JSON document from disk."
    assert '"""' not in new
    assert new[q.gold_start:q.gold_end].startswith("@decorator\ndef load(path):")
    assert new[q.gold_start:q.gold_end].endswith("return json.load(fh)")
    assert (q.start_line, q.end_line) == (4, 7)
    assert q.import_lines == [1] and not q.is_method
    compile(new, "m.py", "exec")


def test_extract_js_ts_bash_queries() -> None:
    js = textwrap.dedent("""\
        import { a } from './a';

        class Box {
          /**
           * Opens the box with the given key.
           * @param {string} key
           */
          open(key) {
            const x = a(key);
            return x;
          }
        }
    """)
    new, qs = extract_queries("p", "javascript", "box.js", js)
    assert [q.text for q in qs] == ["Opens the box with the given key."]
    q = qs[0]
    assert "/**" not in new and q.is_method and q.class_line == 3 and q.import_lines == [1]
    assert new[q.gold_start:q.gold_end].startswith("open(key)")

    ts = "/**\n * Adds two numbers together.\n */\nexport function add(a: number, b: number): number {\n" \
         "  const c = a + b;\n  return c;\n}\n"
    new, qs = extract_queries("p", "typescript", "add.ts", ts)
    assert [q.text for q in qs] == ["Adds two numbers together."]
    assert new.startswith("export function add")

    sh = "#!/bin/bash\n\n# Print a greeting to the user.\n# Second line.\ngreet() {\n  local n=$1\n  echo hi $n\n}\n"
    new, qs = extract_queries("p", "bash", "g.sh", sh)
    assert [q.text for q in qs] == ["Print a greeting to the user."]
    assert "# Print" not in new and new[qs[0].gold_start:qs[0].gold_end].startswith("greet() {")


def _write_tiny_corpus(root) -> None:  # noqa: ANN001
    py = textwrap.dedent('''\
        import os
        from collections import OrderedDict


        class Registry:
            """A registry."""

            def register(self, name, value):
                """Register a value under a name in the registry table."""
                table = OrderedDict()
                table[name] = value
                return table

            def lookup_env(self, key):
                """Look up an environment variable with a default fallback."""
                value = os.environ.get(key)
                if value is None:
                    return ""
                return value


        def join_paths(a, b):
            """Join two filesystem paths with the platform separator."""
            sep = os.sep
            out = a + sep + b
            return out
    ''')
    js = textwrap.dedent("""\
        const util = require('util');

        /**
         * Formats a message with the given arguments for logging.
         */
        function formatMessage(msg, args) {
          const out = util.format(msg, ...args);
          return out.trim();
        }

        /**
         * Counts the words in a sentence of text.
         */
        function countWords(text) {
          const parts = text.split(/\\s+/);
          return parts.length;
        }
    """)
    ts = textwrap.dedent("""\
        import { clamp } from './math';

        export class Slider {
          /**
           * Moves the slider handle to a new position.
           */
          move(pos: number): number {
            const p = clamp(pos, 0, 100);
            return p;
          }
        }
    """)
    sh = textwrap.dedent("""\
        #!/bin/bash

        # Print the usage message for this tool.
        usage() {
          echo "usage: tool [options]"
          exit 1
        }

        # Remove temporary files left behind by a run.
        cleanup() {
          rm -rf "$TMPDIR/tool"
          return 0
        }
    """)
    for split in ("tunepkg", "heldoutpkg"):
        for lang, name, text in (("python", "mod.py", py), ("javascript", "mod.js", js),
                                 ("typescript", "mod.ts", ts), ("bash", "mod.sh", sh)):
            d = root / lang / split
            d.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text)


def test_end_to_end_on_a_tiny_corpus(tmp_path) -> None:  # noqa: ANN001
    from benchmarks.retrieval import FakeDense
    from benchmarks.run import Settings, run, write_results

    _write_tiny_corpus(tmp_path / "corpus")
    corpus = corpus_from_dir(tmp_path / "corpus", CorpusConfig())
    assert {p.spec.split for p in corpus.packages} == {"tune", "heldout"}
    assert len(corpus.queries("python")) == 6 and len(corpus.queries("bash")) == 4
    settings = Settings(chunk_tokens=64, budgets=(128, 256), dense=True, throughput_repeats=1,
                        measure_memory=False)
    results = run(corpus, settings, dense=FakeDense(), log=lambda _m: None)
    write_results(results, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    md = (tmp_path / "out" / "results.md").read_text()
    assert (tmp_path / "out" / "retrieval.png").stat().st_size > 1000
    assert "Full-hit rate" in md
    names = {c["name"] for c in data["chunkers"]}
    assert {"fixed-0%", "fixed-15%", "exact-boundary (ceiling)"} <= names
    for split in ("tune", "heldout"):
        for ret in ("bm25", "dense"):
            cell = data["retrieval"][split][ret]["256"]["exact-boundary (ceiling)"]["macro"]
            assert 0.0 <= cell["full_hit"] <= 1.0
            assert set(cell["languages"]) == {"python", "javascript", "typescript", "bash"}
    # The ceiling's chunks are exact slices: lossless and full coverage on every file.
    st = data["chunk_stats"]["exact-boundary (ceiling)"]["all"]
    assert st["lossless_files"] == 1.0 and st["nws_coverage"] == 1.0
    # Every system's throughput row has a ratio to the floor.
    assert all(t["ratio_to_floor"] is not None for t in data["throughput"].values())


def test_index_probe_on_a_tiny_tree(tmp_path) -> None:
    pytest.importorskip("chromadb")
    from benchmarks import perf

    assert perf.index_tree(tmp_path, 3) > 0
    assert sorted(p.parent.name for p in tmp_path.rglob("*.py")) == ["p00000", "p00001", "p00002"]
    got = perf._index_probe(3, "none", trace=False)
    assert got["target"] == "index" and got["files"] == 3 and got["failed"] == 0
    assert got["records"] == got["written"] > 0
    assert got["peak_rss_mb"] >= got["peak_before_mb"] > 0


def test_throughput_table() -> None:
    from benchmarks.throughput import table

    row = {"kind": "peer", "languages": ["python"], "bytes": 2000, "seconds": 0.004, "mb_per_s": 0.5,
           "ratio_to_floor": 2.0, "per_language": {"python": 2.0}, "failed_files": 0}
    r = {"files": 1, "bytes": {"python": 2000, "bash": 0}, "packages": ["p==1"], "repeats": 3, "date": "now",
         "machine": {"load_before": [0.5, 0.4, 0.3]}, "floor": {"seconds": 0.002, "mb_per_s": 1.0},
         "chunkers": {"slow": {**row, "ratio_to_floor": 3.0}, "fast": row}, "unavailable": ["x: missing"]}
    md = table(r)
    lines = md.splitlines()
    assert lines[2] == "| chunker | seconds | MB/s | x floor | python | failed files |"
    assert lines[4].startswith("| floor: parse + encode | 0.002 | 1.00 | 1.00 |")
    assert lines[5].startswith("| fast |") and lines[6].startswith("| slow |")  # fastest first
    assert "Unavailable: x: missing" in md


def test_speed_targets_say_which_are_met() -> None:
    from benchmarks.speed import targets

    hyb = {"embedded": 1000, "command_seconds": 10.0}
    res = {"hybrid_files": 40,
           "hybrid": [{**hyb, "backend": "minilm", "index_vs_direct": 1.1},
                      {**hyb, "backend": "minilm-torch", "index_vs_direct": 0.7, "command_seconds": 30.0}],
           "queries": [{"files": n, "hybrid_query_seconds": q, "hybrid_query_peak_mb": 150,
                        "lexical_mcp_first_search_seconds": 2.5, "hybrid_mcp_first_search_seconds": 1.5}
                       for n, q in ((250, 0.9), (4000, 1.6))],
           "lexical": [{"files": 2000, "lexical_vs_chunk": 0.85}, {"files": 16000, "lexical_vs_chunk": 0.6}],
           "throughput": {"chunkers": {"llmc ASTChunker": {"ratio_to_floor": 1.4},
                                       "astchunk": {"ratio_to_floor": 1.3},
                                       "langchain-recursive": {"ratio_to_floor": 1.9}}}}
    met = {(t, w): ok for t, _, w, ok in targets(res)}
    assert met[("`index` >= 0.8x direct encode (minilm)", "1,000 texts")]
    assert not met[("`index` >= 0.8x direct encode (minilm-torch)", "1,000 texts")]
    assert not met[("whole `index`: default >= 4x MiniLM on torch", "40 files")]  # 3x
    assert not met[("fresh hybrid `query` < 1.5 s and < 200 MB", "4,000 files")]  # the largest tree decides
    assert not met[("MCP first search within 2 s (lexical)", "250, 4,000 files")]
    assert met[("MCP first search within 2 s (hybrid)", "250, 4,000 files")]
    assert [ok for (t, _), ok in met.items() if t.startswith("lexical")] == [True, False]
    assert met[("chunker < 1.5x the floor", "tune files")]
    assert not met[("chunker faster than astchunk", "tune files")]
    assert met[("chunker faster than langchain-recursive", "tune files")]
    assert ("chunker faster than chonkie-code", "tune files") not in met  # not in the run: no row


def test_alternate_runs_the_revision_and_the_checkout_in_turn(tmp_path) -> None:  # noqa: ANN001
    import subprocess

    from benchmarks import alternate

    if subprocess.run(["git", "-C", str(alternate.ROOT), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    lib = alternate._library_at("HEAD", tmp_path)
    committed = subprocess.run(["git", "-C", str(alternate.ROOT), "show", "HEAD:llmc_splitters/__init__.py"],
                               check=True, capture_output=True).stdout
    assert (lib / "llmc_splitters" / "__init__.py").read_bytes() == committed
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("def alpha():\n    return 1\n")
    (tree / "b.py").write_text("class Beta:\n    def gamma(self):\n        return 2\n")
    res = alternate.run("HEAD", 1, [str(tree), "--embedding", "none"])
    assert [r["files"] for r in res["runs"]["before"] + res["runs"]["after"]] == [2, 2]
    assert set(res["means"]) == {"before", "after"} and res["means"]["after"]["index_seconds"] >= 0


# ------------------------------------------------------------------------------------------- the ranking tune set


def _hit(path: str, start: int, end: int):  # noqa: ANN202
    from types import SimpleNamespace

    return SimpleNamespace(span=SimpleNamespace(path=path, start_line=start, end_line=end))


def ndcg_of(rels: list[int], n: int) -> float:
    from benchmarks.ranking import ndcg

    return ndcg([float(r) for r in rels], n)


def test_hits_as_files_credit_each_gold_file_at_its_first_hit() -> None:
    from benchmarks.ranking import ndcg, score_hits_as_files

    # Two pieces of a wrong file push the gold file to the third hit: the hits score it at rank 3, where the list of
    # distinct files would put it at rank 2.
    assert score_hits_as_files({"b.py"}, ["a.py", "a.py", "b.py"]) == pytest.approx(ndcg([0, 0, 1], 1))
    assert score_hits_as_files({"b.py"}, ["a.py", "a.py", "b.py"]) == pytest.approx(0.5)
    # A second hit in an already found gold file earns nothing; a second gold file found later does.
    assert score_hits_as_files({"b.py", "c.py"}, ["b.py", "b.py", "c.py"]) == pytest.approx(ndcg([1, 0, 1], 2))
    assert score_hits_as_files({"b.py"}, ["b.py", "b.py"]) == 1.0
    # Only the first k hits count, and no hits score nothing.
    assert score_hits_as_files({"b.py"}, ["a.py"] * 10 + ["b.py"]) == 0.0
    assert score_hits_as_files({"b.py"}, []) == 0.0


def test_score_ranking_reports_the_hits_beside_the_file_list() -> None:
    from types import SimpleNamespace

    from benchmarks.ranking import Gold, Question, score_ranking

    q = Question("q", "o/r", "short", "Session", (Gold("s.py", 10, 40, "Session"), Gold("t.py", 1, 5)), "python",
                 "name")
    # No `files` on the result: the file list is the hits' distinct paths (a.py, s.py, t.py).
    res = SimpleNamespace(hits=[_hit("a.py", 1, 9), _hit("a.py", 10, 20), _hit("s.py", 12, 30), _hit("s.py", 35, 50),
                                _hit("t.py", 2, 3)])
    got = score_ranking(q, res)
    assert got["hits_hit@1"] == 0.0 and got["hit@1"] == 0.0 and got["hit@5"] == 1.0
    assert got["hits_file_ndcg"] == pytest.approx(ndcg_of([0, 0, 1, 0, 1], 2))
    assert got["file_ndcg"] == pytest.approx(ndcg_of([0, 1, 1], 2))
    assert got["hits_file_ndcg"] < got["file_ndcg"]
    # Span: s.py's definition is credited once (at hit 3), t.py's at hit 5.
    assert got["span_ndcg"] == pytest.approx(ndcg_of([0, 0, 1, 0, 1], 2))
    res = SimpleNamespace(hits=[_hit("s.py", 12, 30)])
    assert score_ranking(q, res)["hits_hit@1"] == 1.0


def _write_tuneset(root, src) -> None:  # noqa: ANN001
    (root / "questions").mkdir(parents=True)
    (root / "bugs").mkdir()
    (root / "issues").mkdir()
    (root / "repos.json").write_text(json.dumps([{"repo": "o/r", "commit": "0" * 40, "language": "python"}]))
    gold = [{"path": "sessions.py", "start_line": 1, "end_line": 6, "symbol": "Session"}]
    questions = [
        {"id": "r-s01", "repo": "o/r", "kind": "symbol", "question": "where is the Session class", "gold": gold},
        {"id": "r-n01", "repo": "o/r", "kind": "short", "shape": "name", "question": "Session", "gold": gold},
        {"id": "r-t01", "repo": "o/r", "kind": "short", "shape": "topic", "question": "retry backoff delay",
         "gold": [{"path": "retry.py", "start_line": 1, "end_line": 3, "symbol": "backoff"}]},
    ]
    (root / "questions" / "o+r.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    bug = {"id": "r-bug-001", "repo": "o/r", "kind": "bug", "question": "Fix backoff growing without bound",
           "gold": [{"path": "retry.py", "start_line": 1, "end_line": 3, "symbol": "backoff"}]}
    (root / "bugs" / "o+r.jsonl").write_text(json.dumps(bug) + "\n")
    issue = {**bug, "id": "r-issue-001", "kind": "issue", "bug": "r-bug-001",
             "question": "Retries wait for hours\n\nAfter ten failures the client sleeps far too long.",
             "issue_url": "https://github.com/o/r/issues/1"}
    (root / "issues" / "o+r.jsonl").write_text(json.dumps(issue) + "\n")
    (src / "o+r").mkdir(parents=True)
    (src / "o+r" / "sessions.py").write_text(textwrap.dedent("""\
        class Session:
            \"\"\"A session keeps settings across requests.\"\"\"

            def send(self, request):
                return self.adapter.send(request)

        """))
    (src / "o+r" / "retry.py").write_text(textwrap.dedent("""\
        def backoff(attempt, base=0.5, cap=30.0):
            \"\"\"Exponential backoff delay for a retry attempt, capped.\"\"\"
            return min(cap, base * 2 ** attempt)
        """))


def test_tuneset_loads_short_questions_and_issue_texts(tmp_path) -> None:  # noqa: ANN001
    from benchmarks.ranking import load_tuneset

    _write_tuneset(tmp_path / "set", tmp_path / "src")
    (repo,) = load_tuneset(tmp_path / "set")
    assert [(q.kind, q.shape) for q in repo.questions] == [
        ("symbol", None), ("short", "name"), ("short", "topic"), ("bug", None), ("issue", None)]
    (only,) = load_tuneset(tmp_path / "set", kinds=["issue"])
    assert [q.id for q in only.questions] == ["r-issue-001"]
    assert only.questions[0].gold_files == ["retry.py"]


def test_tuneset_run_reports_hits_per_kind_and_keeps_v1_comparable(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from benchmarks import ranking

    _write_tuneset(tmp_path / "set", tmp_path / "src")
    monkeypatch.setenv("LLMC_TUNE_SOURCES", str(tmp_path / "src"))
    monkeypatch.setattr(ranking, "CACHE", tmp_path / "cache")
    repos = ranking.load_tuneset(tmp_path / "set")
    res = ranking.run_mode(repos, "lexical", variants={"default": None}, replies=False, log=lambda _m: None)
    rows = res["variants"]["default"]["rows"]
    assert {r["kind"] for r in rows} == {"symbol", "short", "bug", "issue"}
    for r in rows:
        assert all(0.0 <= r[m] <= 1.0 for m in ranking.HIT_METRICS)
    s = res["variants"]["default"]["summary"]
    assert s["all"]["all"]["n"] == 5 and s["all"]["v1"]["n"] == 2  # v1: the symbol question and the commit bug
    assert set(s["set"]) == {"code-search", "bug", "short", "issue"}
    assert s["shape"]["short/name"]["n"] == 1 and s["shape"]["short/topic"]["n"] == 1
    md = ranking.render({"date": "d", "command": "c", "machine": "m", "modes": {"lexical": res}})
    hits, files = md.index("### lexical, hits"), md.index("### lexical, ranked files and replies")
    assert hits < files < md.index("### lexical, per repository")
    hit_table = md[hits:files]
    for key in ("all", "v1", "short", "issue", "short/name"):
        assert f"| lexical | default | {key} |" in hit_table
    assert "hits_file_ndcg" in hit_table and "recall@2048" not in hit_table
    assert hit_table.count("| lexical | default | issue |") == 1  # a kind that is its own set is shown once
