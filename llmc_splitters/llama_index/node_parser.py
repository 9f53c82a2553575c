"""``CodeNodeParser``: the chunker as a LlamaIndex ``NodeParser``.

Importing this module imports ``llama_index.core``; that import is the opt-in to the LlamaIndex face.
``import llmc_splitters`` alone never loads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Dict, List, Literal, Optional

from .._faces import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_HEADER_RESERVE,
    Intake,
    check_on_unsupported,
    check_overlap,
    chunk_budget,
    document_language,
    first_path,
    fitting_tail,
    forced_language,
    framework_metadata,
    overlap_reserve,
    resolve_size,
    with_overlap,
)
from ..chunking.dispatch import document_trees
from ..errors import ConfigurationError, checked_arguments, missing_dependency

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.node_parser.node_utils import default_id_func
    from llama_index.core.schema import (
        BaseNode,
        Document,
        MetadataMode,
        NodeRelationship,
        RelatedNodeInfo,
        TextNode,
    )
    from llama_index.core.utils import get_tqdm_iterable
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by tests/test_llama_index_node_parser.py
    raise missing_dependency(exc.name or "llama-index-core", "llama-index") from exc

from ..chunking.chunker import ASTChunker
from ..chunking.headers import context_header
from ..chunking.span import Span, SpanTree
from ..chunking.tokens import TiktokenTokenizer, Tokenizer, resolve_tokenizer
from .nodes import node_id, related, text_node

__all__ = ["CodeNodeParser", "PATH_KEYS"]

PATH_KEYS = ("file_path", "file_name", "source", "path", "filename")
"""Metadata keys read, in this order, for a document's path (``SimpleDirectoryReader`` sets ``file_path``)."""

# The views LlamaIndex renders a node in: what an embedding model reads, what an LLM reads.
_VIEWS = (MetadataMode.EMBED, MetadataMode.LLM)
# The symbol a document's budget is first estimated with: a qualified name of typical length (a longer one cuts the
# document again; with this one, the standard library's json and email packages are cut once each).
_TYPICAL_SYMBOL = "Client._send_request"


def path_of(metadata: Mapping[str, Any]) -> str | None:
    """The node's path: the first of :data:`PATH_KEYS` that holds a non-empty value, as ``str``."""
    return first_path(metadata, PATH_KEYS)


def _tokenizer_setting(tokenizer: Any) -> tuple[Optional[str], Tokenizer]:
    """The serializable ``tokenizer`` field and the resolved tokenizer for what the user passed."""
    if tokenizer is None:
        return None, resolve_tokenizer(None)
    if isinstance(tokenizer, str):
        name = tokenizer.removeprefix("tiktoken:")
        if ":" in name:
            msg = (
                f"tokenizer {tokenizer!r} names a custom tokenizer, which cannot be rebuilt from its name; pass "
                "the object again, e.g. CodeNodeParser.from_dict(data, tokenizer=my_tokenizer)"
            )
            raise ConfigurationError(msg)
        return name, resolve_tokenizer(name)
    tok = resolve_tokenizer(tokenizer)
    if isinstance(tok, TiktokenTokenizer):
        return tok.name.removeprefix("tiktoken:"), tok
    return tok.name, tok


def _id_func_setting(id_func: Any) -> Any:
    """Accept what ``to_dict`` wrote for ``id_func`` (``{"id_func_name": ...}``), so ``from_dict`` round-trips."""
    if isinstance(id_func, Mapping):
        name = id_func.get("id_func_name")
        if name in (None, default_id_func.__name__):
            return None
        msg = (
            f"id_func {name!r} cannot be restored from its name; pass it again, e.g. "
            "CodeNodeParser.from_dict(data, id_func=my_id_func)"
        )
        raise ConfigurationError(msg)
    return id_func


class CodeNodeParser(NodeParser):
    """Parse code and docs into lossless, syntax-aligned ``TextNode``s whose size is counted in tokens.

    A drop-in for ``CodeSplitter``/``SentenceSplitter`` in an ``IngestionPipeline`` or
    ``VectorStoreIndex.from_documents(..., transformations=[...])``. Every function, class or method that fits
    ``chunk_size`` tokens is one node; a bigger one is split only along its own statements. Each node's ``text`` is
    the source verbatim: ``document.text[node.start_char_idx:node.end_char_idx] == node.text``. Whitespace-only
    pieces are not emitted.

    Each document is treated as at every other door (:func:`~llmc_splitters.chunking.dispatch.classify`): the
    language is ``language`` when set, otherwise detected from ``metadata["language"]``, then from the path in
    ``metadata["file_path"]`` (what ``SimpleDirectoryReader`` sets), ``"file_name"`` or ``"source"``, then from a
    shebang, then, for a document without a path, from its content (notebook JSON, HTML, Python/JavaScript/
    TypeScript that parses cleanly with definitions or imports, Markdown headings); anything else is split as plain
    text, and documents that had nothing to go on get one :class:`~llmc_splitters.errors.InputWarning` per call
    naming the remedy.

    Special inputs:

    * A Jupyter notebook (``.ipynb``) gives nodes per cell: ``metadata["cell_index"]``/``["cell_type"]`` say which,
      ``start_line``/``end_line`` and ``start_index``/``end_index`` count in the cell, ``source`` is the cell's path
      (``nb.ipynb#cell3``) unless the input has one, and ``start_char_idx``/``end_char_idx`` are ``None``: a cell's
      text is not a slice of the notebook's JSON. With ``include_parents`` each cell is a top-level node.
    * Binary input and malformed notebooks are skipped, with one warning per call naming each document and the
      reason (``on_unsupported``).
    * Lone surrogates (text read with ``errors="surrogateescape"``), which LlamaIndex cannot hash, are escaped in the
      node's text and metadata one character for one (see :func:`~llmc_splitters.chunking.inputs.escape_surrogates`);
      ``metadata["surrogates"]`` then holds what :func:`~llmc_splitters.chunking.inputs.restore_surrogates` needs
      to give the exact text back. The ``SOURCE`` link of such a document is built without hashing its raw text.
    * Documents that share one path with different texts (a reader that splits files) get one warning: their line
      numbers count from each piece.

    Node metadata is the input's (with ``include_metadata``) plus ``language``, ``kind``, ``symbol``,
    ``start_line``/``end_line`` (1-based, inclusive), ``start_index``/``end_index``, ``start_byte``/``end_byte``,
    ``span_id``, ``parent_id`` (the node id of the enclosing span's node, see below), ``token_count``,
    ``breadcrumb`` and ``source`` (the path, unless the input already has ``source``); ``symbol`` and
    ``breadcrumb`` are ``""`` outside any named definition (no value is ``None``).
    Bookkeeping keys are listed in ``excluded_embed_metadata_keys`` (and most of them in
    ``excluded_llm_metadata_keys``), so the embedding sees the code, its symbol and language.

    ``chunk_size`` bounds what LlamaIndex shows of a leaf, not only its text: both its embedding view and its LLM
    view (``node.get_content(metadata_mode=MetadataMode.EMBED)`` and ``LLM``: the visible metadata lines, then the
    text) are at most ``chunk_size`` tokens, as LlamaIndex's ``SentenceSplitter`` budgets them. A document is cut
    at ``chunk_size`` less what its metadata lines take (the input's visible keys, such as ``file_path``, and
    ours); a node whose own lines (a long symbol) still push it over has its document cut again at a budget smaller
    by that much. A document whose metadata leaves less than a quarter of ``chunk_size`` for the text is cut at
    that quarter instead, and one :class:`~llmc_splitters.errors.InputWarning` per call names it: exclude keys from
    its views (``excluded_embed_metadata_keys``/``excluded_llm_metadata_keys``) or raise ``chunk_size``. With
    ``include_metadata=False`` (LlamaIndex's "consider metadata when splitting"), nodes carry only this parser's
    keys and ``chunk_size`` counts the text alone, with its context header and overlap, as ``ASTChunker``'s
    ``max_tokens`` does.

    ``chunk_overlap`` (tokens, default 0): code never overlaps (a piece of a split definition is located by its
    ``symbol``, ``breadcrumb`` and ``context_header`` instead). Where prose had to be split (the pieces of a long
    Markdown section, plain text), each piece gets the tail of the piece before it, about ``chunk_overlap`` tokens
    cut at a sentence or word, in ``metadata["overlap"]``, which both views show before the text; the node's text
    stays the verbatim slice. Prose documents are cut ``chunk_overlap`` tokens smaller so that it fits (a tail that
    still does not fit is shortened at a word, then dropped).

    Relationships, which this parser sets itself (it overrides ``get_nodes_from_documents``, as
    ``HierarchicalNodeParser`` does, so that offsets are exact and links never cross levels):

    * ``SOURCE``: the input document (or, for an input node that has a source, that node's source);
    * ``PREVIOUS``/``NEXT``: between consecutive *leaf* nodes of the same input (``include_prev_next_rel``);
    * ``PARENT``/``CHILD``: from the span tree, whose structural spans are the file and each class/function/section
      that had to be split. With ``include_parents=True`` those spans are emitted as nodes too, before their
      children: each node's ``PARENT`` is its enclosing span's node and each parent's ``CHILD`` lists its direct
      children in file order. Parent nodes are bigger than ``chunk_size`` by nature: give
      ``get_leaf_nodes(nodes)`` to the vector index and all nodes to the docstore, as with
      ``HierarchicalNodeParser``; docstore-based retrievers such as ``AutoMergingRetriever`` follow the links. (The
      tree is as deep as the code: a split class's children mix leaves and split methods, so levels are not uniform
      as in ``HierarchicalNodeParser``.) With the default ``include_parents=False`` only leaves are emitted, each
      within ``chunk_size``, so the output can go straight into a vector index, and no leaf has a ``PARENT``: a
      relationship always resolves to a node that was emitted.

    ``metadata["parent_id"]`` is the id of the enclosing span's node: the ``PARENT`` node's id with
    ``include_parents=True``; without it, the id that node gets with ``include_parents=True`` (ids are
    deterministic), so leaves of one class share it and a later parse with parents resolves it. (With a custom
    ``id_func`` and no parents that id cannot be known, and the key is left out.)

    Node ids are deterministic (derived from the source id and the span) unless an ``id_func`` is given.

    Example:
        >>> from llama_index.core import Document
        >>> parser = CodeNodeParser(chunk_size=64)
        >>> nodes = parser.get_nodes_from_documents(
        ...     [Document(text="import os\\n\\ndef f():\\n    return os.sep\\n", metadata={"file_path": "m.py"})]
        ... )
        >>> [(n.metadata["kind"], n.start_char_idx, n.end_char_idx) for n in nodes]
        [('imports', 0, 11), ('function', 11, 38)]
    """

    chunk_size: int = Field(
        default=DEFAULT_CHUNK_SIZE,
        description="Token budget per leaf node, counted with `tokenizer` (also accepted as `max_tokens=`).",
        gt=0,
    )
    tokenizer: Optional[str] = Field(
        default=None,
        description=(
            "tiktoken encoding name (None: cl100k_base, offline-safe). A custom tokenizer object or callable given "
            "to the constructor is recorded here by label (e.g. 'callable:len') and must be passed again on load."
        ),
    )
    language: Optional[str] = Field(
        default=None,
        description="Language of every document (e.g. 'python'); None detects it per document from its path.",
    )
    include_parents: bool = Field(
        default=False,
        description=(
            "Also emit the structural spans (file, split classes/functions) as nodes, linked by PARENT/CHILD. "
            "Without it only leaves are emitted; their PARENT names the id the enclosing span's node would have."
        ),
    )
    context_header: bool = Field(
        default=False,
        description=(
            "Put a context header (path, breadcrumb, enclosing signatures) in metadata['context_header'], "
            "visible to embeddings and LLMs; chunks are then cut at chunk_size - header_reserve tokens so that "
            "header plus text fit chunk_size. The node text is always the verbatim source."
        ),
    )
    header_reserve: int = Field(
        default=DEFAULT_HEADER_RESERVE,
        description="Tokens kept free for the context header when context_header is on.",
        ge=0,
    )
    chunk_overlap: int = Field(
        default=0,
        description=(
            "Tokens of the previous piece repeated, in metadata['overlap'], before a piece of split prose (Markdown, "
            "plain text); code never overlaps. Below chunk_size / 2."
        ),
        ge=0,
    )
    on_unsupported: Literal["warn", "raise", "ignore"] = Field(
        default="warn",
        description=(
            "Input that cannot be chunked (binary, a malformed notebook): skipped with one warning per call "
            "('warn'), raised as UnsupportedInputError ('raise'), or skipped silently ('ignore')."
        ),
    )

    _tok: Optional[Any] = PrivateAttr(default=None)
    _chunkers: Dict[int, ASTChunker] = PrivateAttr(default_factory=dict)

    @checked_arguments
    def __init__(
        self,
        chunk_size: Optional[int] = None,
        chunk_overlap: int = 0,
        *,
        max_tokens: Optional[int] = None,
        tokenizer: Any = None,
        language: Any = None,
        include_parents: bool = False,
        context_header: bool = False,
        header_reserve: int = DEFAULT_HEADER_RESERVE,
        include_metadata: bool = True,
        include_prev_next_rel: bool = True,
        callback_manager: Optional[CallbackManager] = None,
        id_func: Any = None,
        on_unsupported: str = "warn",
    ) -> None:
        """Create a parser; every argument is described on the class and in its pydantic fields.

        Raises:
            ConfigurationError: An invalid setting, or an unknown argument (the message names the nearest one).
        """
        size = resolve_size(chunk_size, max_tokens)
        check_on_unsupported(on_unsupported)
        chunk_budget(size, header_reserve, context_header)
        check_overlap(chunk_overlap, size)
        lang = forced_language(language)
        label, tok = _tokenizer_setting(tokenizer)
        id_func = _id_func_setting(id_func)
        super().__init__(
            chunk_size=size,
            chunk_overlap=chunk_overlap,
            tokenizer=label,
            language=lang,
            include_parents=include_parents,
            context_header=context_header,
            header_reserve=header_reserve,
            include_metadata=include_metadata,
            include_prev_next_rel=include_prev_next_rel,
            callback_manager=callback_manager or CallbackManager([]),
            id_func=id_func or default_id_func,
            on_unsupported=on_unsupported,
        )
        self._tok = tok

    @classmethod
    def class_name(cls) -> str:
        """Name used in ``to_dict`` / ``from_dict``."""
        return "CodeNodeParser"

    @classmethod
    @checked_arguments
    def from_defaults(
        cls,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunk_overlap: int = 0,
        tokenizer: Any = None,
        language: Optional[str] = None,
        include_parents: bool = False,
        context_header: bool = False,
        include_metadata: bool = True,
        include_prev_next_rel: bool = True,
        callback_manager: Optional[CallbackManager] = None,
        id_func: Any = None,
        on_unsupported: str = "warn",
    ) -> CodeNodeParser:
        """The LlamaIndex-style factory; same arguments as the constructor."""
        return cls(
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            tokenizer=tokenizer,
            language=language,
            include_parents=include_parents,
            context_header=context_header,
            include_metadata=include_metadata,
            include_prev_next_rel=include_prev_next_rel,
            callback_manager=callback_manager,
            id_func=id_func,
            on_unsupported=on_unsupported,
        )

    # ------------------------------------------------------------------ settings
    @property
    def max_tokens(self) -> int:
        """Same as ``chunk_size``."""
        return self.chunk_size

    @property
    def resolved_tokenizer(self) -> Tokenizer:
        """The tokenizer that counts ``chunk_size``."""
        if self._tok is None:  # e.g. after unpickling without the private state
            self._tok = _tokenizer_setting(self.tokenizer)[1]
        return self._tok

    @property
    def chunker(self) -> ASTChunker:
        """The underlying :class:`~llmc_splitters.ASTChunker` at the budget of a document without metadata (built on
        first use); a document is cut at its own budget (see the class docstring)."""
        return self._chunker_at(chunk_budget(self.chunk_size, self.header_reserve, self.context_header))

    def _chunker_at(self, budget: int) -> ASTChunker:
        chunker = self._chunkers.get(budget)
        if chunker is None:  # overlap is added per document (with_overlap), in tokens of chunk_overlap
            chunker = self._chunkers[budget] = ASTChunker(max_tokens=budget, tokenizer=self.resolved_tokenizer,
                                                          overlap=0)
        return chunker

    def language_for(self, text: str, metadata: Mapping[str, Any] | None = None) -> str | None:
        """The language a document is parsed as (see the class docstring for the order of the rules); ``None`` for
        binary input, which is skipped."""
        return document_language(self.language, text, metadata, path_of(metadata or {}))

    # ------------------------------------------------------------------ parsing
    def get_nodes_from_documents(
        self,
        documents: Sequence[Document],
        show_progress: bool = False,
        **kwargs: Any,
    ) -> List[BaseNode]:
        """Parse documents into nodes, with exact offsets and relationships (no base-class post-processing)."""
        with self.callback_manager.event(
            CBEventType.NODE_PARSING, payload={EventPayload.DOCUMENTS: documents}
        ) as event:
            nodes = self._parse_nodes(documents, show_progress=show_progress, **kwargs)
            event.on_end({EventPayload.NODES: nodes})
        return nodes

    async def aget_nodes_from_documents(
        self,
        documents: Sequence[Document],
        show_progress: bool = False,
        **kwargs: Any,
    ) -> List[BaseNode]:
        """Async twin of :meth:`get_nodes_from_documents` (parsing is CPU-bound and runs inline)."""
        return self.get_nodes_from_documents(documents, show_progress=show_progress, **kwargs)

    def _parse_nodes(
        self,
        nodes: Sequence[BaseNode],
        show_progress: bool = False,
        **kwargs: Any,
    ) -> List[BaseNode]:
        intake = Intake(type(self).__name__, self.on_unsupported, "file_path", "SimpleDirectoryReader")
        all_nodes: List[BaseNode] = []
        for i, node in enumerate(get_tqdm_iterable(nodes, show_progress, "Parsing nodes")):
            all_nodes.extend(self._nodes_of(intake, i, node))
        intake.finish()
        return all_nodes

    def _nodes_of(self, intake: Intake, index: int, node: BaseNode) -> List[BaseNode]:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        metadata = dict(node.metadata or {})
        path = path_of(metadata)
        source = node.source_node if node.source_node is not None else related(node)
        nominal = chunk_budget(self.chunk_size, self.header_reserve, self.context_header)
        floor = min(nominal, max(1, self.chunk_size // 4))
        budget, crowded = nominal, False

        def chunker_for(language: str, text: str) -> ASTChunker:
            nonlocal budget, crowded
            reserve = 0
            if self.include_metadata:
                reserve = self._metadata_tokens(node, metadata, source, path, language, text)
            reserve += overlap_reserve(self.chunk_overlap, language)
            crowded = nominal - reserve < floor
            budget = max(floor, nominal - reserve)
            return self._chunker_at(budget)

        tree = intake.chunk(chunker_for, text, path=path, metadata=metadata, language=self.language, index=index)
        if tree is None:
            return []
        nodes, over = self._nodes_of_tree(self._overlapped(tree, budget), node, metadata, source)
        # A node whose own metadata lines (a long symbol, a cell's keys) push a view over chunk_size: cut the
        # document again, smaller by that much (once or twice: the names of a document are known after one cut).
        while over > 0 and budget > floor:
            budget = max(floor, budget - over)
            again = self._chunker_at(budget).chunk_tree(tree.root.text, language=tree.root.language, path=path)
            nodes, over = self._nodes_of_tree(self._overlapped(again, budget), node, metadata, source)
        if nodes and (over > 0 or crowded):
            intake.crowded.append(path or f"document {index}")
        return nodes

    def _overlapped(self, tree: SpanTree, budget: int) -> SpanTree:
        """``tree`` with ``chunk_overlap`` tokens of overlap on its split prose (see the class docstring)."""
        return with_overlap(tree, self.chunk_overlap, budget, self.resolved_tokenizer)

    def _metadata_tokens(self, node: BaseNode, metadata: Mapping[str, Any], source: RelatedNodeInfo,
                         path: Optional[str], language: str, text: str) -> int:
        """What the metadata lines of a leaf of this document take in its bigger view, estimated before the
        document is cut (on the document's last line, with a symbol of typical length)."""
        last = text.count("\n") + 1
        probe = Span(id="probe", path=path, language=language, kind="function", name=_TYPICAL_SYMBOL, text="",
                     start_byte=0, end_byte=0, start_char=0, end_char=0, start_line=last, end_line=last,
                     parent_id=None, token_count=0, metadata={})
        return self._view_tokens(text_node(probe, node, metadata, source, None, False, "probe", self.include_metadata)) + 1

    def _nodes_of_tree(self, tree: SpanTree, node: BaseNode, metadata: Mapping[str, Any], source: RelatedNodeInfo
                       ) -> tuple[List[BaseNode], int]:
        """The nodes of one chunked input, and by how many tokens its biggest leaf view is over ``chunk_size``
        (``<= 0``: every leaf fits)."""
        out: Dict[str, TextNode] = {}
        leaves: List[TextNode] = []
        over = -self.chunk_size
        for doc in document_trees(tree):  # a notebook: one document per cell
            doc_leaves = [s for s in doc.leaves if s.text.strip()]
            if not doc_leaves:
                continue
            emitted = self._emitted(doc, doc_leaves)
            leaf_ids = {s.id for s in doc_leaves}
            in_document = doc is tree  # a cell's text is not a slice of the notebook's text
            for span in emitted:
                parent_id = self._parent_node_id(doc, span, source, out)
                made = text_node(span, node, metadata, source, parent_id, in_document,
                                 self._node_id_of(len(out), span, node, source), self.include_metadata)
                if span.id in leaf_ids:
                    over = max(over, self._fit(made, span))
                out[span.id] = made
            if self.include_parents:
                for span in emitted:
                    kids = [out[c.id] for c in doc.children(span) if c.id in out]
                    if kids:
                        parent = out[span.id]
                        parent.relationships[NodeRelationship.CHILD] = [k.as_related_node_info() for k in kids]
                        info = parent.as_related_node_info()
                        for kid in kids:
                            kid.relationships[NodeRelationship.PARENT] = info
            leaves.extend(out[s.id] for s in doc_leaves)
        if self.include_prev_next_rel:
            for prev, nxt in zip(leaves, leaves[1:]):
                nxt.relationships[NodeRelationship.PREVIOUS] = prev.as_related_node_info()
                prev.relationships[NodeRelationship.NEXT] = nxt.as_related_node_info()
        return list(out.values()), over

    def _view_tokens(self, text_node: TextNode) -> int:
        """Tokens of the bigger of a node's two views (what an embedding model and an LLM are shown); without
        ``include_metadata``, of its text and what is added to it (context header, overlap)."""
        if not self.include_metadata:
            added = "".join(text_node.metadata.get(key, "") for key in ("context_header", "overlap"))
            return self.resolved_tokenizer.count(added + text_node.text)
        return max(self.resolved_tokenizer.count(text_node.get_content(metadata_mode=mode)) for mode in _VIEWS)

    def _fit(self, text_node: TextNode, span: Span) -> int:
        """Give a leaf node its context header and its overlap, as much of each as keeps both views within
        ``chunk_size`` (the overlap gives way first, then the header's lines from the last one up); return by how
        many tokens the views are over ``chunk_size`` without them (``<= 0``: they fit)."""
        over = self._view_tokens(text_node) - self.chunk_size
        if over > 0:
            return over
        if self.context_header:
            lines = context_header(span).splitlines(keepends=True)
            while lines and not self._fits_with(text_node, "context_header", "".join(lines)):
                lines.pop()
        overlap = span.metadata.get("overlap") if self.chunk_overlap else None
        if overlap:
            tail = fitting_tail(overlap, lambda t: self._fits_with(text_node, "overlap", t))
            if tail is not None:
                self._fits_with(text_node, "overlap", tail)
        return over

    def _fits_with(self, text_node: TextNode, key: str, value: str) -> bool:
        """Set ``metadata[key] = value`` if both views still fit ``chunk_size`` (else leave it unset)."""
        text_node.metadata[key] = framework_metadata({key: value})[key]
        if self._view_tokens(text_node) <= self.chunk_size:
            return True
        del text_node.metadata[key]
        return False

    def _parent_node_id(self, tree: SpanTree, span: Span, source: RelatedNodeInfo,
                        out: Mapping[str, TextNode]) -> Optional[str]:
        """The id of the node of ``span``'s enclosing span (see ``metadata["parent_id"]`` in the class docstring)."""
        enclosing = tree.parent(span)
        if enclosing is None:
            return None
        if enclosing.id in out:  # emitted (include_parents): parents come before their children
            return out[enclosing.id].node_id
        if self.id_func is default_id_func:
            return node_id(source.node_id, enclosing)
        return None

    def _emitted(self, tree: SpanTree, leaves: list[Span]) -> list[Span]:
        """Leaves, plus (with ``include_parents``) the structural spans, in pre-order (parents first)."""
        if not self.include_parents:
            return leaves
        keep = {s.id for s in leaves}
        return [s for s in tree.spans if s.id in keep or not tree.is_leaf(s)]

    def _node_id_of(self, i: int, span: Span, node: BaseNode, source: RelatedNodeInfo) -> str:
        if self.id_func is default_id_func:
            return node_id(source.node_id, span)
        return self.id_func(i, node)
