"""The LlamaIndex face of llmc_splitters: ``CodeNodeParser`` (a ``NodeParser``).

Importing this subpackage imports ``llama_index.core`` (the opt-in); when it is missing it raises
:class:`~llmc_splitters.MissingDependencyError` with the line to install it:
``pip install 'llmc-splitters[llama-index]'``.
"""

from .node_parser import CodeNodeParser

__all__ = ["CodeNodeParser"]
