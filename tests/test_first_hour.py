"""What a new user hits in the first hour (issue 22), through the Python API, on files the tests write or copy.

One test (or a few) per item; the command line and the MCP server are checked end to end in
``integration_tests/test_cli.py`` and ``integration_tests/test_mcp.py``, and the README's snippets in
``integration_tests/test_readme.py``.

* 2: a path filter that matches no indexed path warns (:class:`~llmc_splitters.errors.FilterWarning`) with what the
  stored paths look like; the same for a language, a kind, and filters that match only one by one.
* 7: ``.bats`` files (by extension and by their ``#!/usr/bin/env bats`` line) are Bash, and every file kind the
  chunker parses is selected by ``CodeIndex.index_directory`` as by the walker (issue 23, point 7).
* 8: a hand-written README that says "Do not edit" about other files is not generated; generators' markers are.
* 11: ``embedding=None`` opens a hybrid index for lexical search, with a note; writing to it, or another model, says
  exactly what to pass.
* 14: the one-time model build says so in one line.
* 15: an index directory gets a ``.gitignore`` of its own, so ``git status`` stays clean.
* 16: skip reasons name a ``.gitignore`` relative to the tree, and a dangling symlink as one.
"""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sysconfig
import warnings
from pathlib import Path

import pytest

pytest.importorskip("tantivy")
pytest.importorskip("pathspec")

from llmc_splitters import ASTChunker  # noqa: E402
from llmc_splitters.chunking.languages import INDEXED_PATTERNS, detect_language, language_from_shebang  # noqa: E402
from llmc_splitters.errors import ConfigurationError, FilterWarning, IndexWarning  # noqa: E402
from llmc_splitters.ingest.walk import DEFAULT_INCLUDE, generated_marker, walk  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever  # noqa: E402
from llmc_splitters.retrieval.embeddings import resolve_embedding  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def put(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def src_tree(tmp_path_factory) -> Path:
    """``src/`` holding the standard library's ``http`` and ``json`` packages, as the README's example has it."""
    root = tmp_path_factory.mktemp("repo")
    for pkg in ("http", "json"):
        shutil.copytree(STDLIB / pkg, root / "src" / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def indexed(src_tree) -> CodeRetriever:
    r = CodeRetriever(path=src_tree / ".llmc" / "index", embedding=None)
    r.index_directory(src_tree / "src")
    return r


# ----------------------------------------------------------------------------------------- 2: filters


def test_a_path_filter_under_the_indexed_root_says_how_paths_are_stored(indexed):
    """The README's example as it was: ``src/`` indexed, then ``path="src/http/"``. Stored paths are relative to the
    indexed root, so nothing matches, and the warning says so (it was silent: confidence 0.0, an empty context)."""
    with pytest.warns(FilterWarning) as got:
        result = indexed.retrieve("parse the status line of an HTTP response", max_context_tokens=2048,
                                  path="src/http/")
    assert result.hits == () and result.context == ""
    assert [str(w.message) for w in got] == [
        "no indexed path starts with 'src/http/'; paths are stored relative to the indexed root, like "
        "'http/__init__.py' (try path='http/')"
    ]
    assert got[0].filename == __file__  # the warning points at the caller's line, not at our internals
    with warnings.catch_warnings():
        warnings.simplefilter("error", FilterWarning)
        fixed = indexed.retrieve("parse the status line of an HTTP response", max_context_tokens=2048, path="http/")
    assert fixed.hits and all(h.span.path.startswith("http/") for h in fixed.hits)
    assert fixed.hits[0].span.name == "HTTPResponse._read_status"


@pytest.mark.parametrize(
    ("filters", "said"),
    [
        ({"path": "src/**/*.py"}, "no indexed path matches 'src/**/*.py'; paths are stored relative to the indexed "
                                  "root, like 'http/__init__.py' (try path='**/*.py')"),
        ({"path": "lib/"}, "no indexed path starts with 'lib/'; paths are stored relative to the indexed root, like "),
        ({"language": "go"}, "no indexed file is in the language 'go' (the index holds python)"),
        ({"kind": "struct"}, "no indexed span is of the kind 'struct' (the index holds "),
        ({"path": "json/", "kind": "section"}, "no indexed span is of the kind 'section'"),
        ({"path": "json/decoder.py", "language": "python", "kind": "class"}, None),
    ],
)
def test_each_filter_that_matches_nothing_is_named(indexed, filters, said):
    if said is None:  # json/decoder.py has classes: the filter matches, so no warning even if the words do not
        with warnings.catch_warnings():
            warnings.simplefilter("error", FilterWarning)
            indexed.search("zebra giraffe", **filters)
        assert indexed.index.unmatched_filter(**filters) is None
        return
    with pytest.warns(FilterWarning, match="^" + said.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        assert indexed.search("decode a document", **filters).hits == ()
    assert indexed.index.unmatched_filter(**filters).startswith(said)


def test_filters_that_match_only_one_by_one_say_so():
    idx = CodeIndex()
    idx.index_texts({"pkg/mod.py": "def parse():\n    return 1\n", "docs/guide.md": "# Parsing\n\nHow to parse.\n"})
    assert idx.search("parse", path="pkg/mod.py").hits and idx.search("parse", language="markdown").hits
    with pytest.warns(FilterWarning, match=r"^no indexed span passes the filters together \(path=pkg/mod.py "
                                           r"language=markdown\), though each matches alone$"):
        assert idx.search("parse", path="pkg/mod.py", language="markdown").hits == ()


# ----------------------------------------------------------------------------------------- 7: file kinds

BATS = """\
#!/usr/bin/env bats

load test_helper

setup() {
  export RBENV_ROOT="$BATS_TEST_TMPDIR/root"
}

@test "prints the version" {
  run rbenv --version
  assert_success
  [[ $output == "rbenv "* ]]
}
"""


def test_bats_files_are_bash_by_extension_and_by_shebang(tmp_path):
    assert detect_language("test/version.bats") == "bash"
    assert language_from_shebang(BATS) == "bash"
    put(tmp_path, "test/version.bats", BATS)
    put(tmp_path, "test/libexec/run-tests", BATS)  # extensionless, known by its #! line
    got = walk(tmp_path)
    assert got.files == ["test/libexec/run-tests", "test/version.bats"]
    assert got.languages == {"test/libexec/run-tests": "bash", "test/version.bats": "bash"}
    spans = ASTChunker(max_tokens=40).chunk(BATS, path="test/version.bats")
    assert {s.language for s in spans} == {"bash"} and "".join(s.text for s in spans) == BATS
    assert [s.name for s in spans if s.kind == "function"][:2] == ["setup", "prints the version"]


# One small file per language of the README's table (Python, JavaScript, TypeScript, TSX, Bash, Markdown, notebooks,
# HTML/Vue/Svelte, and the generic tree-sitter languages it names), as a real project would hold them.
PER_LANGUAGE = {
    "app/main.py": "def main():\n    return 0\n",
    "web/client.js": "export function get(url) {\n  return fetch(url);\n}\n",
    "web/types.ts": "export interface Job {\n  id: string;\n}\n",
    "web/View.tsx": "export const View = () => <div />;\n",
    "bin/build.sh": "build() {\n  make all\n}\n",
    "test/run.bats": BATS,
    "docs/guide.md": "# Guide\n\nText.\n",
    "docs/api.rst": "API\n===\n\nText.\n",
    "docs/index.html": "<html><body><p>Hi</p></body></html>\n",
    "web/App.vue": "<template><p>{{ msg }}</p></template>\n",
    "web/Card.svelte": "<p>card</p>\n",
    "notebooks/eda.ipynb": '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n',
    "go/server.go": "package main\n\nfunc main() {}\n",
    "rust/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    "java/App.java": "class App {\n  void run() {}\n}\n",
    "c/util.c": "int add(int a, int b) { return a + b; }\n",
    "c/util.h": "int add(int a, int b);\n",
    "cpp/vec.cpp": "int dot(int a, int b) { return a * b; }\n",
    "cs/Program.cs": "class Program { static void Main() {} }\n",
    "ruby/app.rb": "def hello\n  puts 'hi'\nend\n",
    "php/index.php": "<?php\nfunction hello() { return 1; }\n",
    "kotlin/Client.kt": "class Client {\n    fun send() {}\n}\n",
    "swift/Client.swift": "class Client {\n    func send() {}\n}\n",
    "lua/init.lua": "local function f()\n  return 1\nend\n",
    "scala/App.scala": "object App {\n  def main(args: Array[String]): Unit = {}\n}\n",
}


def test_index_directory_selects_every_file_kind_the_walker_does(tmp_path):
    """Issue 23, point 7: ``CodeIndex.index_directory`` chose 4 of the README's languages; it now takes the same
    kinds as the CLI and the MCP server (the walker), and leaves vendored and build directories out."""
    for rel, text in PER_LANGUAGE.items():
        put(tmp_path, rel, text)
    put(tmp_path, "vendor/github.com/x/y.go", "package y\n")
    put(tmp_path, "node_modules/dep/index.js", "module.exports = 1;\n")
    put(tmp_path, "data/config.json", "{}\n")  # data formats stay out
    assert DEFAULT_INCLUDE is INDEXED_PATTERNS
    for door in (CodeIndex.index_directory, CodeRetriever.index_directory):
        assert inspect.signature(door).parameters["include"].default is INDEXED_PATTERNS
    expected = sorted(PER_LANGUAGE)
    assert walk(tmp_path).files == expected
    idx = CodeIndex(chunker=ASTChunker(max_tokens=256))
    report = idx.index_directory(tmp_path)
    assert sorted(report.added) == expected
    assert not report.failed
    languages = {p: detect_language(p) for p in expected}
    assert {"python", "javascript", "typescript", "tsx", "bash", "markdown", "text", "html", "vue", "svelte",
            "notebook", "go", "rust", "java", "c", "cpp", "csharp", "ruby", "php", "kotlin", "swift", "lua",
            "scala"} == set(languages.values())


def test_every_default_pattern_is_a_language_the_chunker_parses():
    for pattern in INDEXED_PATTERNS:
        lang = detect_language("x" + pattern.removeprefix("*"))
        assert lang != "text" or pattern == "*.rst", pattern


# ----------------------------------------------------------------------------------------- 8: generated files

HAND_WRITTEN_README = """\
# rbenv-build

Tools to build Ruby versions.

Do not edit the files in `share/definitions/` by hand: they are generated by `script/update`.
Files marked `@generated` or "DO NOT EDIT" are skipped by the linter.
"""


@pytest.mark.parametrize(
    ("path", "head", "generated"),
    [
        ("README.md", HAND_WRITTEN_README, False),
        ("CONTRIBUTING.md", "# Contributing\n\n## Do not edit generated code\n\nRun `make gen` instead.\n", False),
        ("docs/README.rst", "Notes\n=====\n\nDo not edit ``api.rst``; it is generated.\n", False),
        ("src/consts.py", "# Do not edit these constants without updating docs/limits.md.\nLIMIT = 3\n", False),
        ("docs/cli.md", "<!-- DO NOT EDIT: generated by scripts/gen_cli_docs.py -->\n# CLI\n", True),
        ("docs/api.rst", ".. This file was generated by sphinx-apidoc.\n\nAPI\n===\n", True),
        ("pkg/api_pb2.py", '"""\nGenerated by the protocol buffer compiler.\n"""\nDESCRIPTOR = None\n', True),
        ("pkg/x.py", "# This file is generated; do not edit.\nX = 1\n", True),
        ("web/gen.ts", "/*\n * DO NOT EDIT\n * Produced by openapi-typescript.\n */\nexport type A = 1;\n", True),
    ],
)
def test_generated_markers_are_those_generators_write_in_a_comment(tmp_path, path, head, generated):
    assert (generated_marker(head, path) is not None) is generated
    put(tmp_path, path, head)
    got = walk(tmp_path)
    assert (got.files == []) is generated, got.skipped


# ----------------------------------------------------------------------------------------- 11: embedding=None


def test_embedding_none_opens_a_hybrid_index_lexically_and_says_what_to_pass(tmp_path, src_tree):
    where = tmp_path / "hybrid"
    built = CodeRetriever(path=where, embedding=resolve_embedding("hashing"))
    built.index_directory(src_tree / "src")
    built.index.close()

    with pytest.warns(IndexWarning) as got:
        lexical = CodeRetriever(path=where, embedding=None)
    assert [str(w.message) for w in got] == [
        f"the index at {where} holds vectors from 'hashing:256'; with embedding=None it is searched lexically (BM25 "
        "only) and cannot be written to. For hybrid search pass embedding=resolve_embedding('hashing') (from "
        "llmc_splitters.retrieval.embeddings)"
    ]
    top = lexical.search("JSONDecoder raw_decode", k=3).hits[0]
    assert top.span.path == "json/decoder.py" and set(top.ranks) == {"lexical"}
    with pytest.raises(ConfigurationError, match=r"writing to it would leave new spans without vectors; pass "
                                                 r"embedding=resolve_embedding\('hashing'\)"):
        lexical.index_texts({"x.py": "x = 1\n"})
    with pytest.raises(ConfigurationError) as other:
        CodeRetriever(path=where, embedding=resolve_embedding("minilm-static"))
    assert str(other.value) == (
        f"the index at {where} holds vectors from 'hashing:256', not 'minilm-static256:model': pass "
        "embedding=resolve_embedding('hashing') (from llmc_splitters.retrieval.embeddings), or embedding=None to "
        "search it lexically (BM25 only), or reset=True to rebuild it with 'minilm-static256:model'"
    )
    reopened = CodeRetriever(path=where, embedding=resolve_embedding("hashing"))  # what the message says works
    assert set(reopened.search("JSONDecoder raw_decode", k=3).hits[0].ranks) == {"lexical", "dense"}


# ----------------------------------------------------------------------------------------- 14: first run


def test_the_one_time_model_build_says_what_and_how_long_in_one_line(tmp_path, monkeypatch, capsys):
    from llmc_splitters.retrieval.embeddings._runtime import cached_build

    monkeypatch.setenv("LLMC_CACHE_DIR", str(tmp_path))

    def build(out: Path) -> None:
        (out / "model.bin").write_bytes(b"weights")

    first = cached_build("kind", {"source": "abc"}, build, what="the embedding model m (an ONNX export)",
                         expect="20-30 s")
    err = capsys.readouterr().err
    assert err == (f"llmc-splitters: preparing the embedding model m (an ONNX export), once (about 20-30 s); later "
                   f"runs reuse it from {first}\n")
    assert cached_build("kind", {"source": "abc"}, build, what="the embedding model m", expect="20-30 s") == first
    assert capsys.readouterr().err == ""  # built once: said once


# ----------------------------------------------------------------------------------------- 15: .gitignore


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_an_index_in_a_repository_never_shows_up_as_untracked(tmp_path):
    repo = tmp_path / "repo"
    put(repo, "pkg/mod.py", "def f():\n    return 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "pkg")
    r = CodeRetriever(path=repo / ".llmc", embedding=None)
    r.index_directory(repo)
    assert (repo / ".llmc" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    assert _git(repo, "status", "--porcelain", "--untracked-files=all") == "A  pkg/mod.py\n"
    # An index inside a directory of the user's (--db DIR that holds other files) leaves its rules alone.
    mine = tmp_path / "mine"
    put(mine, "notes.txt", "keep me tracked\n")
    CodeIndex(mine).index_texts({"a.py": "x = 1\n"})
    assert not (mine / ".gitignore").exists()


# ----------------------------------------------------------------------------------------- 16: skip reasons


def test_skip_reasons_name_the_gitignore_relatively_and_a_dangling_symlink_as_one(tmp_path):
    put(tmp_path, ".gitignore", "scratch/\n")
    put(tmp_path, "scratch/notes.py", "x = 1\n")
    put(tmp_path, "ok.py", "x = 1\n")
    (tmp_path / "gone.py").symlink_to(tmp_path / "removed.py")
    got = {s.path: (s.kind, s.detail) for s in walk(tmp_path).skipped}
    assert got["scratch/"] == ("gitignored", "ignored by scratch/ (.gitignore)")
    assert got["gone.py"] == ("special", f"dangling symlink to {str(tmp_path / 'removed.py')!r}: its target does not "
                                         "exist")
    assert str(tmp_path) not in got["scratch/"][1]


# ------------------------------------------------------------------------------- 7 (leftover): Bats test names

BATS_FILE = """\
#!/usr/bin/env bats

load 'test_helper/bats-support/load'
load 'test_helper/bats-assert/load'

setup() {
  TMP="$(mktemp -d)"
  export PATH="$BATS_TEST_DIRNAME/../bin:$PATH"
}

teardown() {
  rm -rf "$TMP"
}

@test "install creates the prefix directory" {
  run rbenv-install --prefix "$TMP/ruby" 3.3.0
  assert_success
  [ -d "$TMP/ruby" ]
}

@test 'install fails on an unknown version' {
  run rbenv-install 0.0.0

  assert_failure
  assert_output --partial "definition not found: 0.0.0"
}

@test "uninstall removes the version" {
  mkdir -p "$TMP/versions/3.3.0"
  run rbenv-uninstall -f 3.3.0
  assert_success
  [ ! -d "$TMP/versions/3.3.0" ]
}
"""


@pytest.mark.parametrize("budget", [48, 64, 128])
def test_bats_tests_are_spans_named_by_their_test(budget):
    spans = ASTChunker(max_tokens=budget).chunk(BATS_FILE, path="test/install.bats")
    assert "".join(s.text for s in spans) == BATS_FILE
    tests = ("install creates the prefix directory", "install fails on an unknown version",
             "uninstall removes the version")
    for name in tests:
        named = [s for s in spans if s.name == name]
        assert named and all(s.kind == "function" for s in named), (name, [(s.name, s.text[:30]) for s in spans])
        body = BATS_FILE[BATS_FILE.index(name) - len('@test "'):]
        body = body[: body.index("\n}\n") + 3]
        assert "".join(s.text for s in named).strip() == body.strip()  # the whole test, nothing else
    assert {s.name for s in spans} >= {"setup", "teardown", *tests}


def test_a_bats_test_is_found_by_its_name_in_the_index(tmp_path):
    put(tmp_path, "test/install.bats", BATS_FILE)
    idx = CodeIndex(chunker=ASTChunker(max_tokens=64))
    idx.index_directory(tmp_path)
    hits = idx.get_symbol("install fails on an unknown version")
    text = "".join(h.text for h in hits)
    assert text.startswith("@test 'install fails on an unknown version' {") and "assert_failure" in text
    assert "uninstall" not in text
