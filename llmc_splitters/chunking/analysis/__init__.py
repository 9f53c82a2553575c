"""Pure analyses over an already-parsed tree-sitter tree: imports, module-level names, references, skeletons.

Nothing here parses: every function takes the tree (or one of its nodes) and the exact UTF-8 bytes it was parsed
from, so the chunker can call them on the tree it already built. Every result is located by half-open byte offsets
into ``data``; nothing is found by searching text.

Each pass has a module of its own; every name imports from here too.

* :mod:`.bindings`
    * :func:`file_imports` - the import statements of a file and the names each binds (``import a.b as c`` binds
      ``c``).
    * :func:`module_names` - module-level constants and type aliases, with the names they bind.
* :mod:`.references`
    * :func:`identifiers` - the names referenced inside a byte range (what an import or constant must bind to be
      *used*).
    * :func:`references` - the calls and attribute chains inside a byte range (``self.client.send``, ``fetch``).
* :mod:`.skeletons`
    * :func:`skeleton` - a class or module rendered as valid code: header, docstring, attributes, every method's
      signature and first docstring line, with bodies elided (``...`` in Python, ``{ /* … */ }`` in JS/TS).
    * :func:`header_end` - where a class/function header ends (the ``class A(B):`` line), for a one-line context.
    * :func:`body_placeholder` - what stands for an elided body (``...`` in Python).
    * :func:`skeleton_entries` - a skeleton's header, members (each whole) and closing line.
    * :func:`skeleton_for` - a skeleton cut down to the members a piece of code reaches, still balanced.

What they share (a node's text, line bounds, unwrapping decorators and ``export``, a tree walk) is in
:mod:`._syntax`.

Python and JavaScript/TypeScript (``javascript``, ``typescript``, ``tsx``) get careful rules; any other grammar gets a
generic version driven by node-type names (``*identifier``, ``*import*``, function-like nodes with a ``body``).

Example:
    >>> import tree_sitter_language_pack as tlp
    >>> data = b"import os\\nfrom a import b as c\\n\\ndef f():\\n    return c(os.sep)\\n"
    >>> root = tlp.get_parser("python").parse(data).root_node
    >>> [i.names for i in file_imports(root, data, "python")]
    [('os',), ('c',)]
    >>> sorted(identifiers(root, data, 20 + 12, len(data), language="python"))
    ['c', 'f', 'os']
"""

from __future__ import annotations

from .bindings import ImportInfo, file_imports, module_names
from .references import identifiers, references
from .skeletons import SkeletonEntry, body_placeholder, header_end, skeleton, skeleton_entries, skeleton_for

# Private names read from here today: a Python module's docstring node (the chunker, retrieval.records) and the
# compiled-query cache (the thread tests start from cold caches).
from .references import _query_cache, _query_lock  # noqa: F401
from .skeletons import _py_docstring  # noqa: F401

__all__ = [
    "ImportInfo",
    "file_imports",
    "module_names",
    "identifiers",
    "references",
    "skeleton",
    "header_end",
    "body_placeholder",
    "SkeletonEntry",
    "skeleton_entries",
    "skeleton_for",
]
