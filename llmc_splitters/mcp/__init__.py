"""Serve an index to agents over the Model Context Protocol: budgeted search, exact slices, a fresh index.

``llmc-splitters mcp`` runs the server (stdio by default, streamable HTTP with ``--http PORT``). The tools
(``search_code``, ``get_symbol``, ``get_lines``, ``index_status``, ``reindex``) are :class:`CodeService` methods;
:mod:`llmc_splitters.mcp.server` maps MCP calls onto them. Importing this package loads neither the ``mcp`` SDK nor
``watchdog``: the server module imports them when it starts (``pip install 'llmc-splitters[mcp]'``).

Example:
    >>> from llmc_splitters.retrieval import CodeRetriever
    >>> from llmc_splitters.mcp import CodeService
    >>> r = CodeRetriever()
    >>> _ = r.index_texts({"m.py": "def greet(name):\\n    return f'hello {name}'\\n"})
    >>> CodeService(lambda: r, freshness="off").search_code("greet", max_tokens=200).data["hits"][0]["path"]
    'm.py'
"""

from __future__ import annotations

from .replies import Reply
from .service import CodeService, ServiceSettings

__all__ = ["CodeService", "Reply", "ServiceSettings"]
