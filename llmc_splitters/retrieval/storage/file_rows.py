"""What the index stores of one file: its span rows, import bindings, summaries, lexical documents and embedded views.

:func:`build_file` turns a file's :class:`~llmc_splitters.chunking.span.SpanTree` into a :class:`PreparedFile`:

* every **leaf** span (role ``leaf``: searched), with the names it references and the indices of the imports /
  module-level names it uses (``metadata["uses"]``);
* every **parent** (role ``parent``): the file span and each class/function the chunker had to split, with its
  skeleton and header (their text is not stored: leaves tile the file, so it is rebuilt from them);
* **summaries** (role ``summary``; searched in multi-stage mode): one per file (path, module docstring, top-level
  symbols with signatures, optionally a user summariser's text) and one per split class (its skeleton);
* the file's import and module-level **bindings**, each widened to whole lines;
* the lexical document of every searched row and, with an embedding model, the bounded view to embed.

Pure apart from the chunker's grammar: the serial index, the process-pool index and the distributed ingestion
(:mod:`llmc_splitters.ingest.rows`) build the same rows with it.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...chunking.span import Span, SpanTree
from .lexical_tantivy import LexDoc, row_doc
from .span_rows import FileMarker, FileWrite, SpanRow

__all__ = ["FileSummaryInput", "PreparedFile", "WholeView", "build_file", "derived_id", "embed_source",
           "embedding_view", "leaf_view", "parse_note", "sha", "split_note"]

_NS = uuid.UUID("1d6c7c1e-5f0a-4c55-8a59-4b1f3f0e9a21")

CLASS_KINDS = frozenset({"class", "interface", "struct", "trait", "impl", "enum", "object", "module_block"})


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def derived_id(kind: str, target: str) -> str:
    return str(uuid.uuid5(_NS, f"{kind}\x00{target}"))


def _line_bounds(data: bytes, start: int, end: int) -> tuple[int, int]:
    """Widen ``[start, end)`` to whole lines."""
    s = data.rfind(b"\n", 0, start) + 1
    e = data.find(b"\n", max(start, end - 1))
    return s, (len(data) if e < 0 else e + 1)


@dataclass(frozen=True, slots=True)
class FileSummaryInput:
    """What a summariser hook receives for one file.

    Attributes:
        path: The file path as indexed.
        language: Its language.
        text: The whole file.
        docstring: The module docstring, if any.
        symbols: Top-level symbols as ``(kind, name, signature)``.
    """

    path: str
    language: str
    text: str
    docstring: str | None
    symbols: tuple[tuple[str, str, str], ...]


def leaf_view(s: Span) -> str:
    """What the embedding model sees for a leaf: a short header (path, symbol) and the text."""
    head = f"{s.path or ''} {s.name or ''}".strip()
    return f"{head}\n{s.text}" if head else s.text


def embed_source(span: Span, role: str) -> str:
    """What is embedded for a searched row, before the model's input bound: a leaf's path, symbol and text; a
    summary's text."""
    return leaf_view(span) if role == "leaf" else span.text


def with_meta(span: Span, extra: dict[str, Any]) -> Span:
    if not extra:
        return span
    md = dict(span.metadata)
    for k, v in extra.items():
        md.setdefault(k, v)  # what the chunker already stored wins
    d = span.to_dict()
    d["metadata"] = md
    return Span.from_dict(d)


@dataclass(slots=True)
class FileInfo:
    bindings: list[dict[str, Any]] = field(default_factory=list)
    per_span: dict[str, dict[str, Any]] = field(default_factory=dict)
    docstring: str | None = None
    top_symbols: list[tuple[str, str, str]] = field(default_factory=list)


def file_summary(path: str, tree: SpanTree, info: FileInfo) -> str:
    lines = [f"File: {path} ({tree.root.language})"]
    if info.docstring:
        lines.append(f"Docstring: {info.docstring.strip()[:1000]}")
    if info.top_symbols:
        lines.append("Symbols:")
        lines.extend(f"  {kind} {name}: {sig}" for kind, name, sig in info.top_symbols)
    names = sorted({n for b in info.bindings if b["kind"] == "import" for n in b["names"]})
    if names:
        lines.append("Imports: " + ", ".join(names))
    return "\n".join(lines) + "\n"


_CLASS_NODE_TYPES = frozenset(
    {"class_definition", "class_declaration", "abstract_class_declaration", "class", "interface_declaration",
     "struct_item", "impl_item", "trait_item", "class_specifier", "struct_specifier"}
)
_DEF_NODE_TYPES = frozenset(
    {"function_definition", "function_declaration", "method_definition", "generator_function_declaration",
     "function_item", "method_declaration", "constructor_declaration"}
) | _CLASS_NODE_TYPES


def analyze(tree: SpanTree, data: bytes) -> FileInfo:
    """Imports, used names, skeletons and headers for one file's spans.

    NOTE(chunker): this re-parses the file. When the chunker stores the analysis in span metadata (root:
    ``imports``/``module_names``; leaves: ``identifiers``/``references``; class spans: ``skeleton``,
    ``header_end_byte``), that data is used instead and only what is missing is computed here.
    """
    from ...chunking import analysis

    info = FileInfo()
    root_span = tree.root
    if root_span.metadata.get("degraded") == "wide_error":
        return info  # queries over a wide ERROR node are quadratic: no expansion data for this file
    language = root_span.language
    grammar = None
    try:
        from ...chunking.languages import get_spec

        grammar = get_spec(language).grammar
    except Exception:  # noqa: BLE001 - unknown language: no analysis, plain retrieval still works
        grammar = None
    md = root_span.metadata
    leaf_ids = {s.id for s in tree.leaves}
    complete = "imports" in md and "module_names" in md and all(
        "identifiers" in s.metadata for s in tree.leaves if s.language == language
    ) and all(
        "header_end_byte" in s.metadata
        for s in tree.spans
        if s.id not in leaf_ids and s.kind in (*CLASS_KINDS, "function", "method") and s.language == language
    )
    node_root = None
    if grammar and not complete:
        # Only for a chunker that did not record the analysis (ASTChunker(analyze=True) does).
        try:
            from ...chunking._grammar import get_parser

            node_root = get_parser(grammar).parse(data).root_node
        except Exception:  # noqa: BLE001 - a grammar that fails to load only costs the expansion
            node_root = None
    if node_root is None and not complete:
        return info
    imports = [analysis.ImportInfo.from_dict(d) for d in md["imports"]] if "imports" in md else \
        analysis.file_imports(node_root, data, grammar)
    names = [analysis.ImportInfo.from_dict(d) for d in md["module_names"]] if "module_names" in md else \
        analysis.module_names(node_root, data, grammar)
    name_to_binding: dict[str, int] = {}
    bindings = [*imports, *names]
    # Line numbers from one list of newline offsets: counting newlines from the top for each binding is quadratic
    # in a file of many module-level names.
    newlines = [m.start() for m in re.finditer(b"\n", data)] if bindings else []
    for imp in bindings:
        s, e = _line_bounds(data, imp.start_byte, imp.end_byte)
        idx = len(info.bindings)
        info.bindings.append({
            "start": s, "end": e, "start_line": bisect.bisect_left(newlines, s) + 1,
            "end_line": bisect.bisect_left(newlines, max(s, e - 1)) + 1,
            "text": data[s:e].decode("utf-8", "replace"), "names": list(imp.names), "kind": imp.kind,
        })
        for n in imp.names:
            name_to_binding.setdefault(n, idx)
    # Definition nodes, to find each class span's skeleton and header.
    defs: list[Any] = []
    stack = [node_root] if node_root is not None else []
    while stack:
        n = stack.pop()
        if n.type in _DEF_NODE_TYPES:
            defs.append(n)
        stack.extend(n.named_children)

    def def_node(span: Span) -> Any:
        best = None
        for n in defs:
            if span.start_byte <= n.start_byte and n.end_byte <= span.end_byte:
                if best is None or (n.end_byte - n.start_byte) > (best.end_byte - best.start_byte):
                    best = n
        if best is not None and best.parent is not None and best.parent.type in ("decorated_definition", "export_statement") \
                and span.start_byte <= best.parent.start_byte:
            best = best.parent
        return best

    for span in tree.spans:
        if span.id == root_span.id and span.id not in leaf_ids:
            continue
        extra: dict[str, Any] = {}
        is_leaf = span.id in leaf_ids
        if is_leaf:
            md_span = span.metadata
            ids = set(md_span["identifiers"]) if "identifiers" in md_span else analysis.identifiers(
                node_root, data, span.start_byte, span.end_byte, language=grammar) if node_root is not None else set()
            refs = md_span["references"] if "references" in md_span else sorted(
                analysis.references(node_root, data, span.start_byte, span.end_byte, language=grammar)
            ) if node_root is not None else []
            extra["identifiers"] = sorted(ids)
            extra["references"] = sorted(refs)
            uses = sorted({name_to_binding[n] for n in ids if n in name_to_binding})
            # A binding the span itself contains is not "used from outside" (the imports leaf, a constant's leaf).
            extra["uses"] = [i for i in uses if not (span.start_byte <= info.bindings[i]["start"] < span.end_byte)]
            # The names it uses from them: a multi-line binding contributes only the lines that bind these.
            outside = set(extra["uses"])
            extra["used_names"] = sorted(n for n in ids if name_to_binding.get(n) in outside)
        missing = "header_end_byte" not in span.metadata or (
            span.kind in CLASS_KINDS and "skeleton" not in span.metadata
        )
        if not is_leaf and missing and span.kind in (*CLASS_KINDS, "function", "method"):
            node = def_node(span)
            if node is not None:
                if "header_end_byte" not in span.metadata:
                    extra["header_end_byte"] = analysis.header_end(node, data)
                if span.kind in CLASS_KINDS and "skeleton" not in span.metadata:
                    extra["skeleton"] = analysis.skeleton(node, data, grammar)
        if extra:
            info.per_span[span.id] = extra
    # Module docstring and top-level symbols for the file summary.
    if "module_docstring" in md:
        info.docstring = md["module_docstring"] or None
    else:
        doc = analysis._py_docstring(node_root) if grammar == "python" and node_root is not None else None
        if doc is not None:
            raw = doc.text.decode("utf-8", "replace")
            info.docstring = raw.strip("\"'rRbBuU \n")
    listed: set[str] = set()
    for span in tree.spans:
        if span.parent_id == root_span.id and span.name and span.kind not in ("imports", "block", "comment"):
            if span.name in listed:
                continue
            listed.add(span.name)
            sig = span.metadata.get("signature") or span.text.split("\n", 1)[0]
            info.top_symbols.append((span.kind, span.name, str(sig).strip()))
    return info


# ------------------------------------------------------------------------------------------------- one file


@dataclass(slots=True)
class PreparedFile:
    """One file chunked, analysed and laid out, waiting for its vectors and its write.

    Attributes:
        path: The file's path as indexed.
        write: Its marker, span rows and bindings (what the span store writes in one transaction).
        leaves: Lexical documents of its leaves.
        summaries: Lexical documents of its summaries.
        views: ``(row index, text to embed, embed hash)`` of every row that gets a vector (empty without a model).
        update: Whether a complete version of the file was indexed before.
    """

    path: str
    write: FileWrite
    leaves: list[LexDoc] = field(default_factory=list)
    summaries: list[LexDoc] = field(default_factory=list)
    views: list[tuple[int, str, str]] = field(default_factory=list)
    update: bool = False


# Analysis the index needs only while it lays a file out (``uses`` and the bindings are what queries read): not stored.
_LAYOUT_ONLY = ("identifiers", "references", "imports", "module_names")

View = Callable[[str, dict[str, Any]], tuple[str, str]]
"""``view(text, metadata) -> (text to embed, embed hash)``: bounds the text to the model's input limit and records
how in ``metadata`` (see ``CodeIndex``)."""


@dataclass(frozen=True, slots=True)
class WholeView:
    """The :data:`View` of a model without an input window (a static embedding sums its pieces, whatever the
    length): the whole text, keyed by the model's name. Plain data, so worker processes lay files out with it."""

    name: str

    def __call__(self, text: str, meta: dict[str, Any]) -> tuple[str, str]:
        meta["embedded_view"] = "full"
        return text, sha(f"{self.name}\x00{text}")


def embedding_view(embedding: Any, name: str) -> View:
    """The :data:`View` of an index whose vectors come from ``embedding``, filed under ``name``.

    The text is cut to the model's input limit (:func:`~llmc_splitters.retrieval.embeddings.bounded_view`; a model
    without one gets a :class:`WholeView`); how is
    recorded in the row's metadata (``embedded_view``, ``embedded_tokens``, ``embedding_limit``), and the cache key
    is the hash of the name and the bounded text. Every engine that embeds a row (the serial index, the process-pool
    and the Ray ingestion) must make its view this way, so that the same text gets the same view and the same key.
    """
    if not getattr(embedding, "max_input_tokens", None) or getattr(embedding, "count_tokens", None) is None:
        return WholeView(name)
    from ..embeddings import bounded_view

    def view(text: str, meta: dict[str, Any]) -> tuple[str, str]:
        v = bounded_view(text, embedding)
        meta["embedded_view"] = "truncated" if v.truncated else "full"
        if v.tokens is not None:
            meta["embedded_tokens"] = v.tokens
        if v.limit is not None:
            meta["embedding_limit"] = v.limit
        return v.text, sha(f"{name}\x00{v.text}")

    return view


def build_file(
    path: str,
    text: str,
    tree: SpanTree,
    *,
    file_hash: str,
    settings: str,
    stat: tuple[int, int] | None = None,
    summarizer: Callable[[FileSummaryInput], str] | None = None,
    view: View | None = None,
    summaries: bool = True,
) -> PreparedFile:
    """Lay out one chunked file for the span store, the lexical index and the vector store.

    Args:
        path: The path stored and cited.
        text: The whole file.
        tree: Its span tree.
        file_hash: :func:`sha` of ``text``.
        settings: The settings fingerprint (a file indexed under other settings is redone).
        stat: ``(size, mtime_ns)`` of the file on disk, for stat-first change detection.
        summarizer: Optional hook whose text is added to the file summary.
        view: Makes the embedded view of a searched row (``None``: lexical only, nothing embedded).
        summaries: Also lay out the file and class summaries (``False``: leaves and parents only, so multi-stage
            search has nothing to zoom into in this file).

    Returns:
        A :class:`PreparedFile`.
    """
    from ...chunking.dispatch import document_trees

    root = tree.root
    rows: list[SpanRow] = []
    bindings: dict[str, list[dict[str, Any]]] = {}
    prepared = PreparedFile(path, FileWrite(FileMarker(path, file_hash, settings, root.language, None, None, 0, 0,
                                                      time.time()), rows, bindings))

    def searched(span: Span, role: str, embedded: str) -> None:
        meta = {k: v for k, v in span.metadata.items() if k not in _LAYOUT_ONLY}
        eh = None
        if view is not None:
            vtext, eh = view(embedded, meta)
            prepared.views.append((len(rows), vtext, eh))
        span = dataclasses.replace(span, metadata=meta)
        rows.append(SpanRow(span, role, path, eh))
        doc = row_doc(span, role, path)
        (prepared.leaves if role == "leaf" else prepared.summaries).append(doc)

    # One document per tree: the file itself, or each cell of a notebook (its spans' path is the cell's,
    # `nb.ipynb#cell3`, and their offsets and lines refer to the cell).
    infos: list[tuple[SpanTree, FileInfo]] = []
    for doc_tree in document_trees(tree):
        droot = doc_tree.root
        doc_path = droot.path or path
        data = "".join(s.text for s in doc_tree.leaves).encode("utf-8", "surrogatepass")
        info = analyze(doc_tree, data)
        infos.append((doc_tree, info))
        bindings[doc_path] = info.bindings
        leaf_ids = {s.id for s in doc_tree.leaves}
        for span in doc_tree.spans:
            if span.id not in leaf_ids:
                sp = with_meta(span, info.per_span.get(span.id, {}))
                rows.append(SpanRow(dataclasses.replace(sp, path=doc_path, metadata={
                    k: v for k, v in sp.metadata.items() if k not in _LAYOUT_ONLY}), "parent", path))
        for span in doc_tree.leaves:
            sp = dataclasses.replace(with_meta(span, info.per_span.get(span.id, {})), path=doc_path)
            searched(sp, "leaf", embed_source(sp, "leaf"))
    if summaries:
        # File summary (of all its documents).
        summary = file_summary(path, tree, _merged(infos))
        if summarizer is not None:
            info = _merged(infos)
            extra_text = summarizer(FileSummaryInput(path, root.language, text, info.docstring,
                                                     tuple(info.top_symbols)))
            if extra_text:
                summary = f"{summary}\nSummary: {extra_text.strip()}\n"
        searched(_summary_span(derived_id("file", path), dataclasses.replace(root, path=path), "file", None,
                               summary), "summary", summary)
        # Class summaries: one per split class (a class that fits is a leaf and is searched as such).
        for doc_tree, info in infos:
            leaf_ids = {s.id for s in doc_tree.leaves}
            for span in doc_tree.spans:
                if span.id in leaf_ids or span.kind not in CLASS_KINDS:
                    continue
                sk = info.per_span.get(span.id, {}).get("skeleton") or span.metadata.get("skeleton")
                if not sk:
                    continue
                doc = f"{path}: {span.name or span.kind}\n{sk}"
                target = dataclasses.replace(span, path=doc_tree.root.path or path)
                searched(_summary_span(derived_id("class", span.id), target, "class", span.name, doc), "summary",
                         doc)
    m = prepared.write.marker
    n_leaves = sum(r.role == "leaf" for r in rows)
    size, mtime_ns = stat if stat is not None else (None, None)
    prepared.write.marker = FileMarker(m.path, m.hash, m.settings, m.language, size, mtime_ns, len(rows), n_leaves,
                                       m.indexed_at)
    return prepared


def _merged(infos: list[tuple[SpanTree, FileInfo]]) -> FileInfo:
    """One file's analysis from its documents' (a notebook's cells): bindings, symbols, the first docstring."""
    if len(infos) == 1:
        return infos[0][1]
    out = FileInfo()
    for _, info in infos:
        out.bindings.extend(info.bindings)
        out.top_symbols.extend(info.top_symbols)
        out.docstring = out.docstring or info.docstring
    return out


def _summary_span(sid: str, target: Span, kind: str, name: str | None, text: str) -> Span:
    """A summary row, positioned over its target (the file, or a split class) and pointing at it."""
    return Span(sid, target.path, target.language, kind, name, text, target.start_byte, target.end_byte,
                target.start_char, target.end_char, target.start_line, target.end_line, target.id, 0,
                {"target_id": target.id})


def split_note(tree: SpanTree, nbytes: int) -> str | None:
    """How a file was cut when it was not parsed whole (from its root span's metadata)."""
    md = tree.root.metadata
    mb = f"{nbytes / 1e6:.1f} MB"
    if md.get("fallback") == "too_large":
        return f"{mb}, over the chunker's max_file_bytes: not parsed, cut by lines and tokens"
    if md.get("windows"):
        return f"{mb}: parsed and chunked in {md['windows']} windows of about 1 MB, one tree at a time"
    if md.get("degraded") == "wide_error":
        return f"{mb}: a syntax error spans most of the file: cut by lines and tokens inside it"
    return None


def parse_note(tree: SpanTree) -> str | None:
    """Where a file has syntax errors, and where the chunker parsed again after one (from its root span's metadata);
    ``None`` when it parsed clean. Spans around an error may have lost their names; those after a restart have not."""
    md = tree.root.metadata
    lines = md.get("parse_errors")
    if not lines:
        return None
    shown = ", ".join(map(str, lines[:_NOTE_LINES])) + (f" and {len(lines) - _NOTE_LINES} more" if len(lines) >
                                                         _NOTE_LINES else "")
    note = f"syntax error{'s' if len(lines) > 1 else ''} at line{'s' if len(lines) > 1 else ''} {shown}"
    resumed = md.get("parse_resumed")
    if resumed:
        at = ", ".join(map(str, resumed[:_NOTE_LINES])) + ("..." if len(resumed) > _NOTE_LINES else "")
        return f"{note}; parsed again from line{'s' if len(resumed) > 1 else ''} {at}, so the definitions after " \
               "them keep their names"
    return f"{note}; the definitions around them may have lost their names"


# Lines a note lists.
_NOTE_LINES = 5
