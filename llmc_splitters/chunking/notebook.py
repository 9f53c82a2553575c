"""Jupyter notebooks (``.ipynb``): one document per notebook, spans per cell.

A notebook is JSON; what people ask about is the cells' source. :func:`chunk_notebook` reads the JSON with the
standard library (nbformat is not needed), checks its shape, and chunks each cell on its own:

* markdown cells through the Markdown path (sections, heading paths, fences chunked as code);
* code cells as code in the kernel's language (``metadata.kernelspec.language``, else
  ``metadata.language_info.name``, else Python), or in the language a cell magic names (``%%bash``,
  ``%%writefile util.js``, ...);
* raw cells as plain text.

A cell that fits the token budget is one span, even when it holds several definitions (a cell is the author's
unit); when it holds exactly one, the span takes that definition's kind and name (else the language's kind for
statements: ``block`` for code, ``text`` for Markdown and raw cells). A cell over budget is chunked
like a file of its language. So that a hit list shows what each span is, a whole code cell with several
definitions is named after them (``Reading, load_readings``), and any other span of a code or Markdown cell that no
definition or heading names is named after its first line (cell magics and decorators skipped, cut at
:data:`NAME_CHARS` characters): ``df.pivot_table(index="station")``, ``Here is the equivalent using pivot_table:``.

The contract, whichever door a notebook comes in by (:func:`chunk_notebook`, or ``ASTChunker.chunk``/``chunk_tree``
of a ``.ipynb`` path or of notebook JSON, which call :func:`notebook_tree`):

* **Lossless per cell.** The spans of one cell join back to that cell's source exactly.
* **Lines relative to the cell.** Offsets and line numbers refer to the cell's source, and each span's ``path`` is
  the cell's: ``<notebook>#cell<i>`` (:func:`cell_path`; ``i`` is the 0-based
  position of the cell), so a citation reads ``analysis.ipynb#cell3:1-5``.
* **Cell metadata.** Each span records ``cell_index``, ``cell_type`` (and ``execution_count``, ``cell_id`` and
  ``cell_magic`` when the cell has them), and the notebook's heading path at that point (from the markdown cells
  above) in ``metadata["breadcrumb"]``, so a code cell under "## Load the data" is found by that heading.

Outputs are left out by default. With ``include_outputs=True``, text outputs (stream text, and the ``text/plain``
of results and displays) become separate ``output`` spans (language ``text``), chunked like plain text, with
``output_index`` and ``output_type`` in their metadata; offsets and lines refer to the output's text, and their
path is ``<notebook>#cell<i>/out<k>``.

A file that is not a notebook (bad JSON, a truncated file, missing cells, a wrong shape) raises
:class:`~llmc_splitters.errors.MalformedNotebookError` saying what is wrong and where.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import MalformedNotebookError, UnsupportedInputError
from .languages import detect_language, get_spec, normalize_language
from .span import Span, SpanTree, span_id

CELL_TYPES = ("code", "markdown", "raw")
DEFAULT_LANGUAGE = "python"
# Cell magics whose body is another language (`%%bash`); `%%writefile name` takes the file's language.
_MAGIC_LANGUAGES = {
    "bash": "bash", "sh": "bash", "script": None, "html": "html", "javascript": "javascript", "js": "javascript",
    "markdown": "markdown", "ruby": "ruby", "perl": "perl", "sql": "sql", "svg": "xml",
}
_MAGIC = re.compile(r"\A[ \t]*%%([A-Za-z_]+)[ \t]*([^\n]*)")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CELL_PATH = re.compile(r"\A(.*)#cell(\d+)\Z", re.DOTALL)
_WHOLE_KINDS_SKIP = frozenset({"imports", "block", "comment", "code", "text", "section", "front_matter", "table",
                                "list", "html"})
NAME_CHARS = 60
"""The longest name a span takes from its first line (longer lines are cut at a word, with an ellipsis)."""


@dataclass(frozen=True)
class NotebookOutput:
    """A text output of a code cell (stream text or the ``text/plain`` of a result or display)."""

    index: int
    output_type: str
    text: str
    name: str | None = None  # stream name ("stdout", "stderr")


@dataclass(frozen=True)
class NotebookCell:
    """One cell of a notebook, as read from its JSON."""

    index: int
    cell_type: str
    source: str
    language: str
    execution_count: int | None = None
    cell_id: str | None = None
    magic: str | None = None
    outputs: tuple[NotebookOutput, ...] = ()


def read_notebook(source: str | bytes | Mapping[str, Any], *, path: str | None = None) -> list[NotebookCell]:
    """Parse and check a notebook; return its cells (with their languages) in order.

    Args:
        source: The ``.ipynb`` file's content (``str`` or UTF-8 ``bytes``) or the already parsed JSON object.
        path: The notebook's path, used in error messages.

    Raises:
        MalformedNotebookError: Not JSON, truncated, or not shaped like an nbformat 4 notebook.
    """
    where = path or "notebook"
    nb = _load(source, where)
    if not isinstance(nb, Mapping):
        _fail(where, f"expected a JSON object at the top level, got {_type(nb)}")
    if "worksheets" in nb or (isinstance(nb.get("nbformat"), int) and nb["nbformat"] < 4):
        _fail(
            where,
            f"nbformat {nb.get('nbformat', 3)} notebooks are not supported; convert it with "
            "`jupyter nbconvert --to notebook --nbformat 4`",
        )
    if "nbformat" in nb and not isinstance(nb["nbformat"], int):
        _fail(where, f"'nbformat' must be an integer, got {_type(nb['nbformat'])}")
    if "cells" not in nb:
        _fail(where, "no 'cells' list: this JSON is not a Jupyter notebook")
    cells = nb["cells"]
    if not isinstance(cells, list):
        _fail(where, f"'cells' must be a list, got {_type(cells)}")
    meta = nb.get("metadata", {})
    if not isinstance(meta, Mapping):
        _fail(where, f"'metadata' must be an object, got {_type(meta)}")
    kernel_language = _kernel_language(meta)
    return [_cell(raw, i, kernel_language, where) for i, raw in enumerate(cells)]


def cell_path(path: str | None, cell_index: int) -> str:
    """The path a notebook cell's spans carry, and the key under which an index stores the cell:
    ``<notebook path>#cell<i>`` (``i`` is the cell's 0-based position in the notebook), or ``#cell<i>`` for a
    notebook without a path.

    Example:
        >>> cell_path("analysis.ipynb", 3)
        'analysis.ipynb#cell3'
    """
    return f"{path or ''}#cell{cell_index}"


def split_cell_path(path: str | None) -> tuple[str, int] | None:
    """The notebook path and the cell index of a :func:`cell_path`; ``None`` for any other path (a file, an
    output's ``nb.ipynb#cell3/out0``).

    Example:
        >>> split_cell_path("analysis.ipynb#cell3"), split_cell_path("analysis.py")
        (('analysis.ipynb', 3), None)
    """
    m = _CELL_PATH.match(path or "")
    return (m.group(1), int(m.group(2))) if m else None


def chunk_notebook(
    source: str | bytes | Mapping[str, Any],
    chunker: Any,
    *,
    path: str | None = None,
    include_outputs: bool = False,
) -> list[Span]:
    """Spans of every cell of a notebook, in notebook order (the leaves of :func:`notebook_tree`).

    Args:
        source: The ``.ipynb`` content (``str``/``bytes``) or its parsed JSON object.
        chunker: An :class:`~llmc_splitters.ASTChunker` (its budget, tokenizer and overlap apply to each cell).
        path: The notebook's path, used in each span's cell path and in error messages.
        include_outputs: Also return the text outputs of code cells as ``output`` spans.

    Returns:
        Leaf spans. For each cell, ``"".join(s.text for s in spans of that cell) == cell source``; offsets and
        lines refer to the cell (or to the output, for ``output`` spans), and ``path`` is the cell's
        (``tides.ipynb#cell1``). Ids are unique across the notebook; ``parent_id`` names the structural span a
        piece was cut from inside its cell (not returned), or the cell's span.

    Raises:
        MalformedNotebookError: See :func:`read_notebook`.

    Example:
        >>> from llmc_splitters import ASTChunker
        >>> nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        ...     {"cell_type": "markdown", "metadata": {}, "source": ["# Tides\\n"]},
        ...     {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
        ...      "source": "def high(xs):\\n    return max(xs)\\n"}]}
        >>> [(s.path, s.kind, s.name, s.metadata["cell_index"], s.metadata["breadcrumb"])
        ...  for s in chunk_notebook(nb, ASTChunker(max_tokens=64), path="tides.ipynb")]
        [('tides.ipynb#cell0', 'section', 'Tides', 0, 'Tides'), ('tides.ipynb#cell1', 'function', 'high', 1, 'Tides > high')]
    """
    return list(notebook_tree(source, chunker, path=path, include_outputs=include_outputs).leaves)


def notebook_tree(
    source: str | bytes | Mapping[str, Any],
    chunker: Any,
    *,
    path: str | None = None,
    include_outputs: bool = False,
) -> SpanTree:
    """The span tree of a notebook: the notebook, one span per non-empty cell (and text output), and their leaves.

    The root (``kind="notebook"``, language ``"notebook"``) spans the notebook's file text (for a parsed JSON
    object, its ``json.dumps``); its children are the cells' spans, each the root of that cell's own tree (kind
    ``module`` for code, ``document`` for Markdown and raw cells), whose ``text`` is the cell's source and whose
    ``path`` is the cell path. ``tree.leaves`` are :func:`chunk_notebook`'s spans, in notebook order; the root's
    ``token_count`` is the sum of theirs. :func:`~llmc_splitters.chunking.dispatch.document_trees` splits the tree
    per cell.

    Raises:
        MalformedNotebookError: See :func:`read_notebook`.
    """
    cells = read_notebook(source, path=path)
    headings = _HeadingPath()
    spans: list[Span] = []  # pre-order, without the root (made last, when its token count is known)
    leaves: list[Span] = []
    placeholder = "notebook-root"
    for cell in cells:
        outer = headings.path()
        line_paths = headings.feed(cell.source) if cell.cell_type == "markdown" else None
        base: dict[str, Any] = {"cell_index": cell.index, "cell_type": cell.cell_type}
        if cell.cell_type == "code":
            base["execution_count"] = cell.execution_count
        if cell.cell_id is not None:
            base["cell_id"] = cell.cell_id
        if cell.magic is not None:
            base["cell_magic"] = cell.magic
        here = cell_path(path, cell.index)
        local = _HeadingPath().feed(cell.source) if line_paths is not None else None
        tree = _cell_tree(cell, chunker, here)
        if tree is None:
            continue
        located: dict[str, Span] = {}
        for span in tree.leaves:
            name, crumb = _locate(span, outer, line_paths, local)
            if name is None and cell.cell_type != "raw":
                name = first_line_name(span.text)
            meta = {**span.metadata, **base}
            if crumb:
                meta["breadcrumb"] = crumb
            else:
                meta.pop("breadcrumb", None)
            located[span.id] = dataclasses.replace(span, name=name, metadata=meta)
        cell_root = dataclasses.replace(tree.root, parent_id=placeholder,
                                        metadata={**tree.root.metadata, **base, "notebook_path": path})
        spans.append(cell_root)
        spans.extend(located.get(s.id, s) for s in tree.spans[1:])
        leaves.extend(located[s.id] for s in tree.leaves)
        if include_outputs:
            for out in cell.outputs:
                out_tree = _output_tree(out, chunker, f"{here}/out{out.index}")
                if out_tree is None:
                    continue
                extra = {**base, "output_index": out.index, "output_type": out.output_type}
                if out.name:
                    extra["stream"] = out.name
                if outer:
                    extra["breadcrumb"] = " > ".join(outer)
                renamed = {
                    s.id: dataclasses.replace(s, parent_id=placeholder if s.parent_id is None else s.parent_id,
                                              kind=s.kind if s.parent_id is None else "output",
                                              metadata={**s.metadata, **extra})
                    for s in out_tree.spans
                }
                spans.extend(renamed.values())
                leaves.extend(renamed[s.id] for s in out_tree.leaves)
    root = _notebook_root(source, path, sum(s.token_count for s in leaves), len(cells))
    spans = [dataclasses.replace(s, parent_id=root.id) if s.parent_id == placeholder else s for s in spans]
    by_id = {s.id: s for s in spans}
    return SpanTree.build([root, *spans], [by_id[s.id] for s in leaves])


def _notebook_root(source: str | bytes | Mapping[str, Any], path: str | None, tokens: int, cells: int) -> Span:
    if isinstance(source, Mapping):
        text = json.dumps(source, indent=1, ensure_ascii=False)
    elif isinstance(source, (bytes, bytearray)):
        text = bytes(source).removeprefix(b"\xef\xbb\xbf").decode("utf-8")  # read_notebook checked it
    else:
        text = source
    size = len(text.encode("utf-8", "surrogatepass"))
    meta: dict[str, Any] = {"cells": cells, "token_count_is_sum_of_leaves": True}
    if path:
        meta["path"] = path
    return Span(
        id=span_id(path, 0, size, text, salt="notebook/structure"),
        path=path,
        language="notebook",
        kind="notebook",
        name=None,
        text=text,
        start_byte=0,
        end_byte=size,
        start_char=0,
        end_char=len(text),
        start_line=1,
        end_line=max(1, text.count("\n", 0, max(len(text) - 1, 0)) + 1),
        parent_id=None,
        token_count=tokens,
        metadata=meta,
    )


def _locate(
    span: Span, outer: list[str], line_paths: list[list[str]] | None, local: list[list[str]] | None
) -> tuple[str | None, str]:
    """A span's name and breadcrumb in the notebook: the headings of the markdown cells above come first."""
    inner = span.metadata.get("breadcrumb") or ""
    if line_paths is None or local is None:
        # Code and raw cells: the notebook's heading path, then the definitions the span sits in.
        return span.name, " > ".join([*outer, *([inner] if inner else [])])
    # A markdown cell: the engine's path is relative to the cell (its own headings, then the definitions of a
    # fence chunked as code); the notebook's path at that line replaces the cell's part of it.
    here = " > ".join(local[span.start_line])
    full = line_paths[span.start_line]
    if not here:
        tail = inner
    elif inner == here or inner.startswith(here + " > "):
        tail = inner[len(here) :].removeprefix(" > ")
    else:
        tail = ""
    crumb = " > ".join([*full, *([tail] if tail else [])])
    name = span.name
    if span.language == "markdown" and span.kind == "section":
        name = crumb or None
    elif name and name == here:
        name = " > ".join(full)  # a piece named after its section
    return name, crumb


def first_line_name(text: str) -> str | None:
    """The name a span of a cell takes when nothing else names it: its first line that is not blank, a cell magic
    or a decorator, at most :data:`NAME_CHARS` characters (cut at a word, with an ellipsis); ``None`` when there is
    none.

    Example:
        >>> first_line_name("%%time\n\ndf.pivot_table(index='station', values='level')\n")
        "df.pivot_table(index='station', values='level')"
    """
    lines = (ln.strip() for ln in text.splitlines())
    line = next((ln for ln in lines if ln and not ln.startswith(("%%", "@"))), None)
    return None if line is None else _short(line)


def _short(line: str) -> str:
    if len(line) <= NAME_CHARS:
        return line
    head = line[: NAME_CHARS - 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > NAME_CHARS // 2 else head).rstrip(" ,") + "…"


# ------------------------------------------------------------------------------------------------ chunking a cell
def _cell_tree(cell: NotebookCell, chunker: Any, path: str) -> SpanTree | None:
    """The cell's tree (cell-relative offsets, the cell's path); ``None`` for an empty cell. A cell that fits the
    budget is one leaf under the cell's span."""
    if not cell.source:
        return None
    tree = chunker.chunk_tree(cell.source, language=cell.language, path=path)
    leaves = list(tree.leaves)
    if len(leaves) > 1 and chunker.count_tokens(cell.source) <= chunker.max_tokens:
        whole = _whole_cell(cell, leaves, tree.root, path, chunker)
        return SpanTree.build([tree.root, whole], [whole])
    return tree


def _whole_cell(cell: NotebookCell, leaves: list[Span], root: Span, path: str, chunker: Any) -> Span:
    """One span for a cell that fits: named after its single top-level definition, if it has exactly one."""
    text = cell.source
    defs = [s for s in leaves if s.kind not in _WHOLE_KINDS_SKIP and s.name]
    kind, name, meta = get_spec(cell.language).glue_kind, None, {}
    if len(defs) == 1:
        kind, name = defs[0].kind, defs[0].name
        meta = {k: v for k, v in defs[0].metadata.items() if k in ("signature", "docstring", "decorators")}
        meta["breadcrumb"] = defs[0].metadata.get("breadcrumb", name)
    elif defs and cell.cell_type == "code":
        name = _short(", ".join(d.name for d in defs if d.name))
    elif cell.cell_type == "markdown":
        crumbs = {s.metadata.get("breadcrumb") for s in leaves}
        if len(crumbs) == 1 and None not in crumbs:
            meta["breadcrumb"] = crumbs.pop()
    symbols = [sym for s in leaves for sym in s.metadata.get("symbols", ())]
    if symbols:
        meta["symbols"] = symbols
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    size = len(text.encode("utf-8", "surrogatepass"))
    return Span(
        id=span_id(path, 0, size, text, salt=f"cell:{kind}"),
        path=path,
        language=root.language,
        kind=kind,
        name=name,
        text=text,
        start_byte=0,
        end_byte=size,
        start_char=0,
        end_char=len(text),
        start_line=1,
        end_line=max(lines, 1),
        parent_id=root.id,
        token_count=chunker.count_tokens(text),
        metadata=meta,
    )


def _output_tree(out: NotebookOutput, chunker: Any, path: str) -> SpanTree | None:
    if not out.text:
        return None
    return chunker.chunk_tree(out.text, language="text", path=path)


# ------------------------------------------------------------------------------------------------- heading path
class _HeadingPath:
    """The notebook's heading path, carried across markdown cells (ATX and setext headings, fences skipped)."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []

    def path(self) -> list[str]:
        return [title for _, title in self.stack]

    def feed(self, text: str) -> list[list[str]]:
        """Consume one markdown cell; return the path in force at each of its lines (index = 1-based line)."""
        paths = [self.path()]
        fence: str | None = None
        prev = ""
        for line in text.split("\n"):
            m = _FENCE.match(line)
            if fence is not None:
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                    fence = None
            elif m:
                fence = m.group(1)
            elif (h := _ATX.match(line)) is not None:
                self._push(len(h.group(1)), (h.group(2) or "").strip())
            elif (s := _SETEXT.match(line)) is not None and prev.strip() and not _ATX.match(prev):
                # A paragraph line followed by === or ---: that line was a heading from its own line on.
                self._push(1 if s.group(1)[0] == "=" else 2, prev.strip())
                paths[-1] = self.path()
            paths.append(self.path())
            prev = line if fence is None else ""
        return paths

    def _push(self, level: int, title: str) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))


# ------------------------------------------------------------------------------------------------ reading the JSON
def _load(source: str | bytes | Mapping[str, Any], where: str) -> Any:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            _fail(where, f"not UTF-8 text (bad byte at offset {exc.start}); a notebook is UTF-8 JSON")
    if not isinstance(source, str):
        msg = f"{where}: expected the notebook's JSON as str, bytes or a dict, got {_type(source)}"
        raise MalformedNotebookError(msg)
    if not source.strip():
        _fail(where, "the file is empty; expected notebook JSON")
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        hint = ""
        if not source.lstrip().startswith(("{", "[")) and source.strip().endswith(".ipynb"):
            hint = " (this looks like a path: pass the file's content, not its name)"
        elif exc.pos >= len(source.rstrip()) or exc.msg.startswith("Unterminated string"):
            hint = " (the text ends before the JSON does: is the file truncated?)"
        what = exc.msg if exc.msg.endswith(" at") else f"{exc.msg} at"
        _fail(where, f"not valid JSON: {what} line {exc.lineno}, column {exc.colno}{hint}")
    raise AssertionError("unreachable")  # pragma: no cover


def _kernel_language(meta: Mapping[str, Any]) -> str:
    candidates = []
    kernelspec = meta.get("kernelspec")
    if isinstance(kernelspec, Mapping):
        candidates.append(kernelspec.get("language"))
    info = meta.get("language_info")
    if isinstance(info, Mapping):
        candidates.append(info.get("name"))
    for lang in candidates:
        if isinstance(lang, str) and lang.strip():
            return _known(lang) or "text"
    return DEFAULT_LANGUAGE


def _known(language: str) -> str | None:
    """``language`` normalized if the chunker can parse it, else ``None``."""
    try:
        return get_spec(normalize_language(language)).name
    except UnsupportedInputError:
        return None


def _cell(raw: Any, i: int, kernel_language: str, where: str) -> NotebookCell:
    at = f"cells[{i}]"
    if not isinstance(raw, Mapping):
        _fail(where, f"{at} must be an object, got {_type(raw)}")
    cell_type = raw.get("cell_type")
    if cell_type not in CELL_TYPES:
        got = f"{cell_type!r}" if isinstance(cell_type, str) else _type(cell_type) if "cell_type" in raw else "nothing"
        _fail(where, f"{at}.cell_type must be one of {', '.join(CELL_TYPES)}, got {got}")
    if "source" not in raw:
        _fail(where, f"{at} ({cell_type} cell) has no 'source'")
    source = _multiline(raw["source"], f"{at}.source", where)
    cell_id = raw.get("id")
    if cell_id is not None and not isinstance(cell_id, str):
        _fail(where, f"{at}.id must be a string, got {_type(cell_id)}")
    if cell_type == "markdown":
        return NotebookCell(i, cell_type, source, "markdown", cell_id=cell_id)
    if cell_type == "raw":
        return NotebookCell(i, cell_type, source, "text", cell_id=cell_id)
    count = raw.get("execution_count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
        _fail(where, f"{at}.execution_count must be an integer or null, got {_type(count)}")
    outputs_raw = raw.get("outputs", [])
    if not isinstance(outputs_raw, list):
        _fail(where, f"{at}.outputs must be a list, got {_type(outputs_raw)}")
    outputs = tuple(o for k, r in enumerate(outputs_raw) if (o := _output(r, f"{at}.outputs[{k}]", k, where)))
    language, magic = _cell_language(source, kernel_language)
    return NotebookCell(i, cell_type, source, language, count, cell_id, magic, outputs)


def _cell_language(source: str, kernel_language: str) -> tuple[str, str | None]:
    m = _MAGIC.match(source)
    if m is None:
        return kernel_language, None
    magic, arg = m.group(1), m.group(2).strip()
    if magic == "writefile" and arg:
        lang = detect_language(arg.split()[-1])
        return ("json" if lang == "notebook" else lang), magic  # a notebook written out is JSON text here
    if magic == "script" and arg:
        return _known(arg.split()[0]) or "text", magic
    lang = _MAGIC_LANGUAGES.get(magic)
    if lang is None:
        return kernel_language, magic  # %%time, %%capture, ...: the body is the kernel's language
    return (_known(lang) or "text"), magic


def _output(raw: Any, at: str, k: int, where: str) -> NotebookOutput | None:
    if not isinstance(raw, Mapping):
        _fail(where, f"{at} must be an object, got {_type(raw)}")
    kind = raw.get("output_type")
    if not isinstance(kind, str):
        _fail(where, f"{at}.output_type must be a string, got {_type(kind) if 'output_type' in raw else 'nothing'}")
    if kind == "stream":
        text = _multiline(raw.get("text", ""), f"{at}.text", where)
        name = raw.get("name")
        return NotebookOutput(k, kind, text, name if isinstance(name, str) else None)
    if kind in ("execute_result", "display_data"):
        data = raw.get("data", {})
        if not isinstance(data, Mapping):
            _fail(where, f"{at}.data must be an object, got {_type(data)}")
        if "text/plain" not in data:
            return None
        return NotebookOutput(k, kind, _multiline(data["text/plain"], f"{at}.data['text/plain']", where))
    return None  # errors (tracebacks) and unknown output types carry no text worth indexing


def _multiline(value: Any, at: str, where: str) -> str:
    """nbformat's multiline string: a string, or a list of strings to concatenate."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    if isinstance(value, list):
        bad = next(k for k, v in enumerate(value) if not isinstance(v, str))
        _fail(where, f"{at}[{bad}] must be a string, got {_type(value[bad])}")
    _fail(where, f"{at} must be a string or a list of strings, got {_type(value)}")
    raise AssertionError("unreachable")  # pragma: no cover


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
            bool: "a boolean", type(None): "null"}.get(type(value), type(value).__name__)


def _fail(where: str, what: str) -> None:
    raise MalformedNotebookError(f"{where}: {what}")
