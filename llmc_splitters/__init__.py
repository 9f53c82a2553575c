"""llmc_splitters: lossless, token-exact, syntax-aligned spans of code and documents for retrieval.

Importing this package loads no framework (LangChain, LlamaIndex), no tokenizer file and no grammar; they load on
first use. The LangChain and LlamaIndex faces live in ``llmc_splitters.langchain`` and ``llmc_splitters.llama_index``.
"""

from .chunking.chunker import ASTChunker
from .errors import (
    ConfigurationError,
    LlmcError,
    MalformedNotebookError,
    MissingDependencyError,
    UndecodableInputError,
    UnsupportedInputError,
)
from .chunking.languages import detect_language
from .chunking.notebook import chunk_notebook, read_notebook
from .chunking.overlap import index_text
from .chunking.span import Span, SpanTree

__version__ = "0.1.0"

__all__ = [
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
