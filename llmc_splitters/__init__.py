"""llmc_splitters: lossless, token-exact, syntax-aligned spans of code and documents for retrieval.

Importing this package loads no framework (LangChain, LlamaIndex), no tokenizer file and no grammar; they load on
first use. The LangChain and LlamaIndex faces live in ``llmc_splitters.langchain`` and ``llmc_splitters.llama_index``.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from .chunking.chunker import ASTChunker
from .errors import (
    ConfigurationError,
    InputWarning,
    LlmcError,
    LlmcWarning,
    MalformedNotebookError,
    MissingDependencyError,
    UndecodableInputError,
    UnsupportedInputError,
)
from .chunking.languages import detect_language
from .chunking.notebook import chunk_notebook, read_notebook
from .chunking.overlap import index_text
from .chunking.span import Span, SpanTree

__version__ = "0.2.0"  # the one place the version is written: pyproject.toml reads it

__all__ = [
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


# Modules that moved into the layer subpackages in 0.2 (see CHANGELOG.md): the old import paths still work, as
# aliases of the new modules, with a DeprecationWarning; they go away in 0.3.
_MOVED = {
    **{name: f"chunking.{name}" for name in (
        "analysis", "chunker", "fallback", "headers", "inputs", "languages", "notebook", "overlap", "span", "tokens",
        "_engine", "_grammar")},
    "walk": "ingest.walk",
    "manifest": "ingest.manifest",
    "pipeline": "ingest.pipeline",
    "ray_ingest": "ingest.ray",
    "mcp.command": "cli.mcp",
}


class _MovedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``llmc_splitters.<old name>`` and loads it as the module that now holds that code."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        prefix = __name__ + "."
        new = _MOVED.get(fullname[len(prefix):]) if fullname.startswith(prefix) else None
        return importlib.util.spec_from_loader(fullname, self) if new is not None else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> object:
        new = f"{__name__}.{_MOVED[spec.name[len(__name__) + 1:]]}"
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path goes away in 0.3)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: object) -> None:
        """Nothing to run: the module was imported under its new name."""


if not any(isinstance(f, _MovedModule) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModule())
