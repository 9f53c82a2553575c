"""The public surface: names pinned, and the core importable and usable without loading any framework."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import llmc_splitters

CORE_ALL = [
    "ASTChunker",
    "ConfigurationError",
    "LlmcError",
    "MalformedNotebookError",
    "MissingDependencyError",
    "Span",
    "SpanTree",
    "UndecodableInputError",
    "UnsupportedInputError",
    "__version__",
    "chunk_notebook",
    "detect_language",
    "index_text",
    "read_notebook",
]

# Heavy or optional packages that importing and using the core must never load.
NEVER_LOADED_BY_CORE = ["langchain_core", "langchain_text_splitters", "llama_index", "bm25s", "chromadb", "torch",
                        "sentence_transformers", "transformers", "numpy"]


def test_core_all_is_pinned_and_every_name_resolves():
    assert sorted(llmc_splitters.__all__) == sorted(CORE_ALL)
    for name in llmc_splitters.__all__:
        assert getattr(llmc_splitters, name) is not None


def test_entry_point_signatures():
    from llmc_splitters import ASTChunker, Span

    chunker = ASTChunker(max_tokens=512)
    text = "import os\n\ndef f():\n    return os.sep\n"
    spans = chunker.chunk(text, language="python", path="pkg/mod.py")
    assert "".join(s.text for s in spans) == text
    assert all(isinstance(s, Span) for s in spans)
    fields = {"id", "path", "language", "kind", "name", "text", "start_byte", "end_byte", "start_char", "end_char",
              "start_line", "end_line", "parent_id", "token_count", "metadata"}
    assert fields <= set(Span.__dataclass_fields__)
    assert ASTChunker(max_tokens=64, tokenizer=len).chunk(text, path="m.py")


def test_adapter_subpackages_export_their_faces():
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("llama_index.core")
    import llmc_splitters.langchain as lc
    import llmc_splitters.llama_index as li

    assert sorted(lc.__all__) == ["CodeParentRetriever", "CodeTextSplitter"]
    assert sorted(li.__all__) == ["CodeNodeParser", "CodeParentRetriever"]
    for mod in (lc, li):
        for name in mod.__all__:
            assert getattr(mod, name) is not None


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_and_using_the_core_loads_no_framework():
    loaded = _fresh(
        f"""
        import json, sys
        import llmc_splitters
        after_import = sorted(m for m in sys.modules if m.split(".")[0] in {NEVER_LOADED_BY_CORE + ["tiktoken"]!r})
        from llmc_splitters import ASTChunker
        spans = ASTChunker(max_tokens=64).chunk("def f():\\n    return 1\\n", path="m.py")
        assert spans and spans[0].kind == "function"
        after_chunk = sorted(m for m in sys.modules if m.split(".")[0] in {NEVER_LOADED_BY_CORE!r})
        print(json.dumps({{"after_import": after_import, "after_chunk": after_chunk}}))
        """
    )
    assert loaded["after_import"] == [], "import llmc_splitters must load no framework and no tokenizer"
    assert loaded["after_chunk"] == [], "chunking must load no framework"


def test_importing_one_face_does_not_load_the_other_framework():
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("llama_index.core")
    loaded = _fresh(
        """
        import json, sys
        import llmc_splitters.langchain
        lc = sorted({m.split(".")[0] for m in sys.modules} & {"llama_index", "chromadb", "torch", "bm25s"})
        print(json.dumps({"lc": lc}))
        """
    )
    assert loaded["lc"] == []
    loaded = _fresh(
        """
        import json, sys
        import llmc_splitters.llama_index
        li = sorted({m.split(".")[0] for m in sys.modules} & {"langchain_core", "chromadb", "torch", "bm25s"})
        print(json.dumps({"li": li}))
        """
    )
    assert loaded["li"] == []
