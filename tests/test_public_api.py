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
    "InputWarning",
    "LlmcError",
    "LlmcWarning",
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
NEVER_LOADED_BY_CORE = ["langchain_core", "langchain_text_splitters", "llama_index", "tantivy", "chromadb", "torch",
                        "sentence_transformers", "transformers", "numpy", "mcp", "watchdog", "uvicorn", "starlette"]


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
    assert sorted(li.__all__) == ["CodeNodeParser", "CodeParentRetriever", "LocalEmbedding"]
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


def test_importing_the_mcp_package_loads_neither_the_sdk_nor_watchdog():
    loaded = _fresh(
        """
        import json, sys
        import llmc_splitters.mcp
        from llmc_splitters.mcp import CodeService
        print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"mcp", "watchdog", "uvicorn", "starlette"})))
        """
    )
    assert loaded == []


def test_importing_one_face_does_not_load_the_other_framework():
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("llama_index.core")
    loaded = _fresh(
        """
        import json, sys
        import llmc_splitters.langchain
        lc = sorted({m.split(".")[0] for m in sys.modules} & {"llama_index", "chromadb", "torch", "tantivy"})
        print(json.dumps({"lc": lc}))
        """
    )
    assert loaded["lc"] == []
    loaded = _fresh(
        """
        import json, sys
        import llmc_splitters.llama_index
        li = sorted({m.split(".")[0] for m in sys.modules} & {"langchain_core", "chromadb", "torch", "tantivy"})
        print(json.dumps({"li": li}))
        """
    )
    assert loaded["li"] == []


def test_the_llama_index_embedding_loads_on_first_use_and_its_model_on_first_embed():
    pytest.importorskip("llama_index.core")
    heavy = ["onnxruntime", "torch", "sentence_transformers", "transformers"]
    loaded = _fresh(
        f"""
        import json, sys
        import llmc_splitters
        core = "llama_index" in {{m.split(".")[0] for m in sys.modules}}
        import llmc_splitters.llama_index as li
        face = "llmc_splitters.llama_index.embedding" in sys.modules
        model = li.LocalEmbedding()
        built = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
        print(json.dumps({{"core": core, "face": face, "built": built, "name": model.model_name}}))
        """
    )
    assert loaded == {"core": False, "face": False, "built": [], "name": "code-static"}


# ---------------------------------------------------------------------------------------------- module paths
import ast  # noqa: E402
import importlib  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTED = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "notebooks").glob("*.ipynb")),
]
_DOTTED = re.compile(r"\bllmc_splitters(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# Written in the docs as a pattern or an attribute of an instance, not as an import path.
_NOT_PATHS = {"llmc_splitters.__all__"}


def _documented_paths() -> list[str]:
    found: set[str] = set()
    for f in DOCUMENTED:
        if f.exists():
            found.update(m.group(0) for m in _DOTTED.finditer(f.read_text(encoding="utf-8")))
    return sorted(found - _NOT_PATHS)


def _resolve(dotted: str) -> object:
    """Import the longest module prefix of ``dotted``, then follow the rest as attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_documented_module_path_resolves():
    paths = _documented_paths()
    assert "llmc_splitters.ingest.ray.run_ray" in paths and "llmc_splitters.chunking.tokens" in paths
    for dotted in paths:
        if dotted.split(".")[1] in ("langchain", "llama_index"):
            pytest.importorskip("langchain_text_splitters")
            pytest.importorskip("llama_index.core")
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # the docs name the new paths, not the moved ones
            assert _resolve(dotted) is not None, dotted


MOVED = {
    "llmc_splitters.span": "llmc_splitters.chunking.span",
    "llmc_splitters.tokens": "llmc_splitters.chunking.tokens",
    "llmc_splitters.chunker": "llmc_splitters.chunking.chunker",
    "llmc_splitters.inputs": "llmc_splitters.chunking.inputs",
    "llmc_splitters.headers": "llmc_splitters.chunking.headers",
    "llmc_splitters.notebook": "llmc_splitters.chunking.notebook",
    "llmc_splitters.walk": "llmc_splitters.ingest.walk",
    "llmc_splitters.manifest": "llmc_splitters.ingest.manifest",
    "llmc_splitters.pipeline": "llmc_splitters.ingest.pipeline",
    "llmc_splitters.ray_ingest": "llmc_splitters.ingest.ray",
    "llmc_splitters.mcp.command": "llmc_splitters.cli.mcp",
}


def test_moved_module_paths_still_import_with_a_deprecation_warning():
    loaded = _fresh(
        f"""
        import importlib, json, warnings
        out = {{}}
        for old, new in {MOVED!r}.items():
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                mod = importlib.import_module(old)
            out[old] = [mod is importlib.import_module(new), [str(x.message) for x in w]]
        from llmc_splitters.tokens import resolve_tokenizer
        from llmc_splitters.ray_ingest import run_ray
        out["names"] = [resolve_tokenizer.__module__, run_ray.__module__]
        print(json.dumps(out))
        """
    )
    names = loaded.pop("names")
    assert names == ["llmc_splitters.chunking.tokens", "llmc_splitters.ingest.ray"]
    for old, (same, messages) in loaded.items():
        assert same, old
        assert any("moved to " + MOVED[old] in m for m in messages), (old, messages)


# Modules split in place (issue 21): the old path keeps every name it had; each name lives in one module.
SPLIT = {
    "llmc_splitters.retrieval.storage.span_store": {
        "llmc_splitters.retrieval.storage.span_rows": [
            "DB_FILE", "FORMAT", "LEXICAL", "VECTORS", "FileMarker", "FileWrite", "SpanRow", "pack_vector",
            "unpack_vector",
        ],
        "llmc_splitters.retrieval.storage.span_sqlite": ["IndexNotFoundError", "StoreError"],
        "llmc_splitters.retrieval.storage.span_store": ["SpanStore"],
    },
    "llmc_splitters.ingest.rows": {
        "llmc_splitters.ingest.settings": [
            "ROW_SCHEMA_VERSION", "IngestSettings", "display_path", "file_version", "git_blob_sha",
            "settings_dict", "settings_fingerprint",
        ],
        "llmc_splitters.ingest.row_format": [
            "BATCH_COLUMNS", "INT_COLUMNS", "SEARCHED_ROLES", "SPARK_SCHEMA", "FileRows", "prepared_file",
            "row_span", "rows_to_columns", "view_row",
        ],
        "llmc_splitters.ingest.rows": ["chunk_batch", "chunk_file", "index_settings", "read_chunk_batch"],
    },
    "llmc_splitters.chunking._engine": {
        "llmc_splitters.chunking.definitions": ["Context", "DefInfo", "wide_error"],
        "llmc_splitters.chunking.units": ["Leaf", "Scope", "Unit"],
        "llmc_splitters.chunking._engine": ["Engine", "parse"],
    },
    "llmc_splitters.chunking.analysis": {
        "llmc_splitters.chunking.analysis.bindings": ["ImportInfo", "file_imports", "module_names"],
        "llmc_splitters.chunking.analysis.references": ["identifiers", "references"],
        "llmc_splitters.chunking.analysis.skeletons": [
            "SkeletonEntry", "body_placeholder", "header_end", "skeleton", "skeleton_entries", "skeleton_for",
        ],
    },
}


def test_split_modules_keep_every_name_at_their_old_path():
    for old, parts in SPLIT.items():
        facade = importlib.import_module(old)
        assert set(facade.__all__) <= {name for names in parts.values() for name in names}, old
        for new, names in parts.items():
            home = importlib.import_module(new)
            for name in names:
                assert getattr(facade, name) is getattr(home, name), f"{old}.{name}"
                obj = getattr(home, name)
                if callable(obj):
                    assert obj.__module__ == new, f"{new}.{name} is defined in {obj.__module__}"


# Names that moved down a layer (issue 21) and still import from where they were documented: the same objects.
MOVED_NAMES = {
    "llmc_splitters.chunking.dispatch.cell_path": "llmc_splitters.chunking.notebook.cell_path",
    "llmc_splitters.retrieval.vectorstore.VectorStoreAdapter":
        "llmc_splitters.retrieval.storage.langchain_vectors.VectorStoreAdapter",
    "llmc_splitters.retrieval.vectorstore.StoreEmbedding": "llmc_splitters.retrieval.storage.langchain_vectors.StoreEmbedding",
}


def test_moved_names_import_from_both_paths():
    for old, new in MOVED_NAMES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            assert _resolve(old) is _resolve(new), old
    from llmc_splitters.retrieval import CodeIndex
    from llmc_splitters.retrieval.storage.parts import IndexParts

    index = CodeIndex()
    assert isinstance(index.parts, IndexParts) and index.parts.spans is index.span_store
    index.close()


# The chunker's stages, each in a module of its own (issue 21): it imports, says in its docstring what its one job
# is, and is the home of the names it holds.
CHUNKING_STAGES = {
    "llmc_splitters.chunking.counting": ["RangeCounter"],
    "llmc_splitters.chunking.definitions": ["find_definitions"],
    "llmc_splitters.chunking.packing": ["merge"],
    "llmc_splitters.chunking.labels": ["Labeler"],
    "llmc_splitters.chunking.assemble": ["assemble"],
    "llmc_splitters.chunking.chunker": ["ASTChunker"],
}


def test_the_chunkers_stages_each_have_a_module():
    for module, names in CHUNKING_STAGES.items():
        mod = importlib.import_module(module)
        assert (mod.__doc__ or "").strip(), f"{module} has no docstring"
        for name in names:
            assert getattr(mod, name).__module__ == module, f"{module}.{name}"


def test_every_name_of_every_all_resolves():
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("llama_index.core")
    for name in ("llmc_splitters", "llmc_splitters.retrieval", "llmc_splitters.ingest", "llmc_splitters.langchain",
                 "llmc_splitters.llama_index"):
        mod = importlib.import_module(name)
        for attr in mod.__all__:
            assert getattr(mod, attr) is not None, f"{name}.{attr}"


def test_package_top_level_holds_only_layers_faces_and_errors():
    top = REPO / "llmc_splitters"
    modules = sorted(p.name for p in top.glob("*.py"))
    packages = sorted(p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert modules == ["__init__.py", "__main__.py", "_faces.py", "errors.py"]
    assert {"chunking", "retrieval", "ingest", "langchain", "llama_index", "cli", "mcp"} <= set(packages)


CLI_COMMANDS = ["chunk", "index", "query", "stats", "mcp"]


def test_the_cli_has_one_module_per_command_and_one_shared_module():
    import argparse

    from llmc_splitters import cli
    from llmc_splitters.cli import common

    assert cli.__all__ == ["ExitCode", "build_parser", "main"]
    assert cli.ExitCode is common.ExitCode and cli.CliError is common.CliError
    for name in common.__all__:
        assert getattr(common, name) is not None, name
    parser = cli.build_parser()
    for command in CLI_COMMANDS:
        module = importlib.import_module(f"llmc_splitters.cli.{command}")
        assert sorted(module.__all__) == ["add_parser", "run"]
        sub = argparse.ArgumentParser().add_subparsers(dest="command")
        module.add_parser(sub)
        assert list(sub.choices) == [command]  # each module holds its own command's arguments, and only those
        assert parser.parse_args([command, "x"] if command != "stats" else [command]).command == command
    assert cli.main(["--no-such-option"]) == cli.ExitCode.USAGE


def _imported(f: pathlib.Path) -> set[str]:
    """Every module a file imports: at module level, in functions and for type checking, as absolute names."""
    package = f.relative_to(REPO).with_suffix("").parts[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return out


def test_the_mcp_server_and_the_shared_cli_module_never_import_the_commands():
    """``llmc_splitters.mcp`` stands below the command line, and ``cli.common`` below every command: no import
    circle between them, counting imports inside functions and under ``TYPE_CHECKING``."""
    for f in sorted((REPO / "llmc_splitters" / "mcp").glob("*.py")):
        cli = sorted(m for m in _imported(f) if m == "llmc_splitters.cli" or m.startswith("llmc_splitters.cli."))
        assert cli == [], (f.name, cli)
    common = _imported(REPO / "llmc_splitters" / "cli" / "common.py")
    assert not {f"llmc_splitters.cli.{c}" for c in CLI_COMMANDS} & common
    assert not any(m.startswith("llmc_splitters.mcp") for m in common)
    loaded = _fresh(
        """
        import importlib.util, json, pkgutil, sys
        import llmc_splitters.mcp
        for m in pkgutil.iter_modules(llmc_splitters.mcp.__path__):
            if m.name != "server" or importlib.util.find_spec("mcp") is not None:
                importlib.import_module(f"llmc_splitters.mcp.{m.name}")
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("llmc_splitters.cli"))))
        """
    )
    assert loaded == []
