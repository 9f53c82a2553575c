"""One decision for every door: how an input is treated.

:func:`classify` looks at one input (``str`` or ``bytes``, its path, its metadata, a forced language) and returns a
:class:`Treatment`: **code** (by extension, file name, shebang or content), a **notebook**, **Markdown**, **HTML**
(and Vue, Svelte), **plain text**, or **binary** (refused, with the reason). :meth:`ASTChunker.chunk
<llmc_splitters.ASTChunker.chunk>` and ``chunk_tree``, the LangChain ``CodeTextSplitter``, the LlamaIndex
``CodeNodeParser``, the directory walker (:mod:`llmc_splitters.ingest.walk`) and the index all go through it, so a
file kind gets the same treatment whichever door it comes in by.

The rules, in order (the first that decides wins; :attr:`Treatment.detected_by` says which one did):

1. **Binary.** ``bytes`` are checked by :func:`~llmc_splitters.chunking.inputs.binary_reason` (NUL bytes, control
   bytes, a binary signature) and then decoded under the ``errors`` policy; a ``str`` by
   :func:`~llmc_splitters.chunking.inputs.text_binary_reason` (NUL characters, a signature however it was decoded,
   more than 10% replacement/control characters or lone surrogates). Binary input is never chunked, whatever
   language is asked for.
2. ``language=`` (``"language"``): any grammar name or alias, ``"text"``, or ``"notebook"`` (alias ``"ipynb"``).
3. ``metadata["language"]`` when it names a language we parse (``"metadata"``; LangChain's ``LanguageParser`` sets
   it, as a ``str`` or a ``Language`` enum).
4. The path: a known file name (``Makefile``, ``.bashrc``: ``"filename"``) or extension (``.py``, ``.ipynb``, ...:
   ``"extension"``).
5. A shebang line naming an interpreter we parse (``#!/usr/bin/env bash``: ``"shebang"``).
6. The content (``"content"``), only when there is no path or the path has no extension, in this order: notebook
   JSON (an object with ``"cells"`` and ``"nbformat"`` that reads as a notebook); an HTML document (``<!DOCTYPE
   html`` or ``<html``); a grammar whose parse of the text (its first 64 KiB, cut at a blank line) has no error node
   and holds a definition or an import at top level, where a plain-text reading would lose that structure (Python,
   then JavaScript, TypeScript and TSX; Bash only by its shebang, since most prose parses as shell commands);
   Markdown when at least two lines are fences or ATX headings followed by a blank line (a comment in code is
   followed by code).
7. Otherwise plain text (``"default"``). With no path and no language that is a guess:
   :attr:`Treatment.guessed` is true, and the framework splitters warn once, naming the remedy.

A notebook's spans cite their cell: :func:`~llmc_splitters.chunking.notebook.cell_path` (``analysis.ipynb#cell3``,
the 0-based position of the cell in the notebook; also importable from here) is each cell span's
:attr:`~llmc_splitters.Span.path`, so a marker or a citation reads ``analysis.ipynb#cell3:1-5`` (lines relative to
the cell). :func:`document_trees` splits a notebook's tree into one tree per cell, each keyed by its cell path, for
an index that stores each cell as a document.

Example:
    >>> classify("#!/usr/bin/env bash\\necho hi\\n", path="bin/deploy").language
    'bash'
    >>> t = classify("import os\\n\\ndef home():\\n    return os.environ['HOME']\\n")
    >>> t.kind, t.language, t.detected_by
    ('code', 'python', 'content')
    >>> classify("\\x89PNG\\r\\n\\x1a\\n\\x00\\x00", path="logo.png").reason
    'starts with the signature of a PNG image (binary data handed over as text)'
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import LlmcError, UnsupportedInputError
from .inputs import ERRORS, binary_reason, decode, text_binary_reason
from .languages import get_spec, language_from_path, language_from_shebang, normalize_language
from .notebook import cell_path, read_notebook
from .span import SpanTree

__all__ = [
    "KINDS",
    "NOTEBOOK",
    "Treatment",
    "cell_path",
    "classify",
    "document_trees",
    "kind_of",
    "language_name",
    "resolve_language",
    "sniff_language",
]

NOTEBOOK = "notebook"
"""The language name of a Jupyter notebook (``language="notebook"`` or ``"ipynb"`` forces notebook treatment)."""

KINDS = ("code", "notebook", "markdown", "html", "text", "binary")
"""The treatments :func:`classify` can decide."""

_NOTEBOOK_ALIASES = frozenset({NOTEBOOK, "ipynb", "jupyter", "jupyter_notebook"})
_MARKUP = frozenset({"html", "vue", "svelte"})
_SNIFF_CHARS = 64 * 1024
# Top-level node types that a plain-text reading would cut through (definitions and imports), per sniffed grammar.
_STRUCTURE = {
    "python": frozenset({"function_definition", "class_definition", "decorated_definition", "import_statement",
                         "import_from_statement", "future_import_statement"}),
    "javascript": frozenset({"function_declaration", "generator_function_declaration", "class_declaration",
                             "import_statement", "export_statement"}),
    "typescript": frozenset({"function_declaration", "generator_function_declaration", "class_declaration",
                             "abstract_class_declaration", "interface_declaration", "type_alias_declaration",
                             "enum_declaration", "import_statement", "export_statement"}),
}
_STRUCTURE["tsx"] = _STRUCTURE["typescript"]
# A heading followed by a blank line, or a fence line. A comment line in code looks like an ATX heading, but
# code follows it on the next line; Markdown puts a blank line under a heading.
_MARKDOWN_SIGNAL = re.compile(r"^(?: {0,3}#{1,6}[ \t]+\S[^\n]*\n[ \t]*(?:\n|\Z)| {0,3}(?:```|~~~))", re.MULTILINE)
_HTML_START = re.compile(r"\A\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL)
_BLANK_CUT = re.compile(r"\n[ \t]*\n(?=\S)")


@dataclass(frozen=True)
class Treatment:
    """How one input is treated (see the module docstring for the rules).

    Attributes:
        kind: One of :data:`KINDS`: ``code``, ``notebook``, ``markdown``, ``html``, ``text`` or ``binary``.
        language: The language to chunk it as (``"python"``, ``"markdown"``, ``"text"``, :data:`NOTEBOOK`, ...);
            ``None`` for binary input.
        text: The text to chunk (``bytes`` decoded); ``None`` for binary input.
        detected_by: Which rule decided: ``binary``, ``language``, ``metadata``, ``filename``, ``extension``,
            ``shebang``, ``content`` or ``default``.
        path: The path as given.
        reason: Why binary input is refused (``None`` otherwise).
        decoded: What decoding ``bytes`` recorded (``encoding``, ``bom``, ``decode_fallback``); empty for ``str``.

    Example:
        >>> t = classify(b"caf\\xe9 = 1\\n", path="menu.py")
        >>> (t.kind, t.language, t.detected_by, t.text, dict(t.decoded))
        ('code', 'python', 'extension', 'café = 1\\n', {'encoding': 'cp1252', 'decode_fallback': True})
        >>> classify("\\x00\\x01", path="x.bin").refused
        True
    """

    kind: str
    language: str | None
    text: str | None
    detected_by: str
    path: str | None = None
    reason: str | None = None
    decoded: Mapping[str, Any] = field(default_factory=dict)

    @property
    def refused(self) -> bool:
        """Whether the input is binary and must not be chunked."""
        return self.kind == "binary"

    @property
    def guessed(self) -> bool:
        """Plain text by default, with nothing to go on: no path, no language, no telling content."""
        return self.detected_by == "default" and not self.path

    def error(self) -> UnsupportedInputError:
        """The error a chunker raises for refused input (it names the path and the reason)."""
        where = f"{self.path}: " if self.path else ""
        msg = (
            f"{where}input {self.reason}: binary data cannot be chunked; skip this input (if it really is text, "
            "decode it with its real encoding, or pass its bytes and let the chunker decode them)"
        )
        return UnsupportedInputError(msg)


def language_name(value: Any) -> str | None:
    """A language given as ``str`` or as a ``str`` enum (LangChain's ``Language.PYTHON``), normalised; ``None`` for
    anything else or an empty string. Notebook aliases give :data:`NOTEBOOK`."""
    if isinstance(value, Enum):
        value = value.value
    if not isinstance(value, str) or not value.strip():
        return None
    lang = normalize_language(value)
    return NOTEBOOK if lang in _NOTEBOOK_ALIASES else lang


def resolve_language(language: Any) -> str:
    """A forced language, normalised and checked.

    Raises:
        UnsupportedInputError: No grammar has that name (the message lists the way out).
    """
    lang = language_name(language)
    if lang is None:
        msg = f"language must be a non-empty name such as 'python', 'text' or 'notebook', got {language!r}"
        raise UnsupportedInputError(msg)
    if lang != NOTEBOOK:
        lang = get_spec(lang).name
    return lang


def _known(language: Any) -> str | None:
    lang = language_name(language)
    if lang is None:
        return None
    try:
        return resolve_language(lang)
    except UnsupportedInputError:
        return None


def kind_of(language: str) -> str:
    """The treatment of a language: ``notebook``, ``markdown``, ``html`` (HTML, Vue, Svelte), ``text`` or ``code``."""
    if language == NOTEBOOK:
        return "notebook"
    if language in ("markdown", "text"):
        return language
    return "html" if language in _MARKUP else "code"


def classify(
    data: str | bytes,
    *,
    path: str | os.PathLike[str] | None = None,
    language: Any = None,
    metadata: Mapping[str, Any] | None = None,
    errors: str = "fallback",
    sniff: bool = True,
) -> Treatment:
    """Decide how one input is treated (see the module docstring for the rules and their order).

    Args:
        data: The input: text, or the file's bytes (decoded under ``errors``).
        path: Its path (or a name such as ``"analysis.ipynb"``); ``None`` when unknown.
        language: A forced language (see rule 2); ``None`` to detect it.
        metadata: The input's metadata; only ``metadata["language"]`` is read.
        errors: Decoding policy for ``bytes`` (``"fallback"`` or ``"strict"``, see
            :mod:`llmc_splitters.chunking.inputs`).
        sniff: Look at the content when the path does not decide (rule 6).

    Returns:
        A :class:`Treatment`. Binary input is not an exception here: ``treatment.refused`` is true and
        ``treatment.reason`` says why (a chunker raises :meth:`Treatment.error`, a splitter or walker skips it).

    Raises:
        UnsupportedInputError: ``language`` names no grammar, or ``data`` is neither ``str`` nor ``bytes``.
        UndecodableInputError: ``errors="strict"`` and ``data`` is not UTF-8.
        ConfigurationError: ``errors`` is not a known policy.
    """
    shown = os.fspath(path) if path is not None else None
    forced = resolve_language(language) if language is not None else None
    decoded: dict[str, Any] = {}
    if isinstance(data, (bytes, bytearray)):
        why = binary_reason(bytes(data))
        if why is not None:
            return Treatment("binary", None, None, "binary", shown, why)
        result = decode(bytes(data), errors)
        text, decoded = result.text, result.metadata()
    elif isinstance(data, str):
        if errors not in ERRORS:
            decode(b"", errors)  # raises the ConfigurationError
        why = text_binary_reason(data)
        if why is not None:
            return Treatment("binary", None, None, "binary", shown, why)
        text = data
    else:
        msg = f"text must be str or bytes, got {type(data).__name__}"
        raise UnsupportedInputError(msg)
    lang, by = _detect(text, shown, forced, metadata, sniff)
    return Treatment(kind_of(lang), lang, text, by, shown, None, decoded)


def _detect(text: str, path: str | None, forced: str | None, metadata: Mapping[str, Any] | None,
            sniff: bool) -> tuple[str, str]:
    if forced is not None:
        return forced, "language"
    declared = _known((metadata or {}).get("language"))
    if declared is not None:
        return declared, "metadata"
    if path:
        found = language_from_path(path)
        if found is not None:
            return found
    shebang = language_from_shebang(text)
    if shebang is not None:
        return shebang, "shebang"
    if sniff and (not path or not os.path.splitext(os.path.basename(path))[1]):
        sniffed = sniff_language(text)
        if sniffed is not None:
            return sniffed, "content"
    return "text", "default"


def sniff_language(text: str) -> str | None:
    """The language ``text`` evidently is, from its content alone (rule 6 of the module docstring), or ``None``."""
    head = text[:_SNIFF_CHARS]
    if not head.strip():
        return None
    if _looks_like_notebook(text):
        return NOTEBOOK
    if _HTML_START.match(head):
        return "html"
    if len(text) > _SNIFF_CHARS:
        # A cut in the middle of a construct is a syntax error: cut at the last blank line before a new statement.
        cuts = list(_BLANK_CUT.finditer(head))
        if cuts:
            head = head[: cuts[-1].start() + 1]
    data = head.encode("utf-8", "replace")
    for grammar, structure in _STRUCTURE.items():
        if _parses_with_structure(data, grammar, structure):
            return grammar
    if len(_MARKDOWN_SIGNAL.findall(head)) >= 2:
        return "markdown"
    return None


def _looks_like_notebook(text: str) -> bool:
    if not text.lstrip().startswith("{") or '"cells"' not in text or '"nbformat"' not in text:
        return False
    try:
        read_notebook(text)
    except LlmcError:
        return False
    return True


def _parses_with_structure(data: bytes, grammar: str, structure: frozenset[str]) -> bool:
    from ._engine import parse

    root = parse(data, grammar).root_node
    if root.has_error:
        return False
    return any(child.type in structure for child in root.named_children)


# ---------------------------------------------------------------------------------------------- notebooks
def document_trees(tree: SpanTree) -> list[SpanTree]:
    """The documents a chunked input holds, one tree each: the tree itself for a file, one tree per cell (rooted
    at the cell's span, keyed by its :func:`cell_path` in ``root.path``) for a notebook.

    Each returned tree's leaves tile its root's text (``"".join(leaf.text) == root.text``) and their offsets and
    lines refer to it, which is what an index stores per document. A cell's tree is re-rooted (its root's
    ``parent_id`` is ``None``; the notebook's path is in ``root.metadata["notebook_path"]``), so no link points at
    a span the document does not hold. A notebook's empty cells hold no span and give no tree.
    """
    if tree.root.kind != NOTEBOOK:
        return [tree]
    out = []
    for cell in tree.children(tree.root):
        sub = tree.subtree(cell)
        root = dataclasses.replace(sub.root, parent_id=None)
        out.append(SpanTree.build([root, *sub.spans[1:]], list(sub.leaves)))
    return out

