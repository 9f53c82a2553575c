"""``CodeTextSplitter``: the chunker as a LangChain ``TextSplitter``.

Importing this module imports ``langchain_core`` and ``langchain_text_splitters``; that import is the opt-in to the
LangChain face. ``import llmc_splitters`` alone never loads them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from .._faces import (
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
    framework_text,
    overlap_reserve,
    resolve_size,
    with_overlap,
)
from ..errors import ConfigurationError, checked_arguments, missing_dependency

try:
    from langchain_core.documents import Document
    from langchain_text_splitters import TextSplitter
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by tests/test_langchain_splitter.py
    raise missing_dependency(exc.name or "langchain-text-splitters", "langchain") from exc

from ..chunking.chunker import ASTChunker
from ..chunking.headers import with_header
from ..chunking.span import Span, SpanTree
from ..chunking.tokens import Tokenizer, resolve_tokenizer

__all__ = ["PATH_KEYS", "CodeTextSplitter"]

PATH_KEYS = ("source", "file_path", "path", "file_name", "filename")
"""Metadata keys read, in this order, for a document's path (LangChain loaders set ``source``)."""


def path_of(metadata: Mapping[str, Any]) -> str | None:
    """The document's path: the first of :data:`PATH_KEYS` that holds a non-empty value, as ``str``."""
    return first_path(metadata, PATH_KEYS)


class CodeTextSplitter(TextSplitter):
    """Split code and docs into lossless, syntax-aligned chunks whose size is counted in tokens.

    A drop-in for ``RecursiveCharacterTextSplitter.from_language(...)``: every function, class or method that fits
    ``chunk_size`` tokens is one chunk; a bigger one is split only along its own statements, never in the middle of
    a line unless one line alone is too big. Chunks never lose text, and code never overlaps: with the default
    settings ``page_content`` is the source verbatim and ``metadata["start_index"]`` locates it exactly.

    Each document is treated as at every other door (:func:`~llmc_splitters.chunking.dispatch.classify`): the
    language is ``language=`` when given, otherwise detected from ``metadata["language"]`` (as LangChain's
    ``LanguageParser`` sets it), then from the path in ``metadata["source"]`` / ``["file_path"]`` (what
    ``TextLoader``, ``DirectoryLoader`` and ``GenericLoader`` set), then from a shebang, then, for a document
    without a path, from its content (notebook JSON, HTML, Python/JavaScript/TypeScript that parses cleanly with
    definitions or imports, Markdown headings); anything else is split as plain text, and documents that had
    nothing to go on get one :class:`~llmc_splitters.errors.InputWarning` per call naming the remedy.

    Special inputs:

    * A Jupyter notebook (``.ipynb``) gives chunks per cell: ``start_line``/``end_line`` and the offsets count in
      the cell, ``metadata["cell_index"]`` and ``["cell_type"]`` say which, and a ``source`` this splitter fills in
      is the cell's path (``nb.ipynb#cell3``).
    * Binary input (a PNG or a file of NUL bytes a loader decoded into ``page_content``) and malformed notebooks are
      skipped, with one :class:`~llmc_splitters.errors.InputWarning` per call naming each document and the reason
      (``on_unsupported``).
    * Lone surrogates (text read with ``errors="surrogateescape"``) are escaped in ``page_content`` and metadata, one
      character for one (see :func:`~llmc_splitters.chunking.inputs.escape_surrogates`), so that stores and
      embedding APIs accept them; ``metadata["surrogates"]`` then holds what
      :func:`~llmc_splitters.chunking.inputs.restore_surrogates` needs to give the exact text back.
    * Documents that share one ``source`` with different texts (the pieces ``GenericLoader`` + ``LanguageParser``
      make) get one warning: their line numbers count from each piece. Load whole files instead.

    Each ``Document``'s metadata is the input metadata (copied) plus: ``source``, ``language``, ``kind``
    (``function``, ``class``, ``method``, ``imports``, ``block``, ...), ``symbol`` (qualified name of the
    definition the chunk is or belongs to), ``start_line``/``end_line`` (1-based, inclusive), ``start_index``/
    ``end_index`` (``str`` offsets of the source text; only with ``add_start_index``), ``start_byte``/``end_byte``,
    ``span_id`` (deterministic UUID), ``parent_id`` (the enclosing split class/function or the file),
    ``token_count`` (tokens of the source text) and ``breadcrumb`` (``Client > send``). ``symbol`` and
    ``breadcrumb`` are ``""`` for a chunk outside any named definition (imports, module statements); ``source`` is
    absent only when the input has no path. No value is ``None``, so every value suits vector stores such as Chroma.
    Chunks made only of whitespace are skipped.

    Args:
        chunk_size: Token budget per chunk (LangChain's name). With ``context_header=True`` it bounds the whole
            ``page_content``, header included.
        chunk_overlap: Tokens (default 0), as for :class:`~llmc_splitters.llama_index.CodeNodeParser`: code never
            overlaps (a piece of a split definition is located by its ``symbol``, ``breadcrumb`` and context header
            instead). Where prose had to be split (the pieces of a long Markdown section, plain text), each piece's
            ``page_content`` starts with the tail of the piece before it, about ``chunk_overlap`` tokens cut at a
            sentence or word (after the context header, if any); ``start_index``/``start_line`` locate the source
            text that follows it. Prose documents are cut ``chunk_overlap`` tokens smaller so that it fits
            ``chunk_size`` (a tail that still does not fit is shortened at a word, then dropped). At most
            ``chunk_size / 2``.
        max_tokens: The same setting as ``chunk_size`` under the chunker's name; give one or the other.
        tokenizer: ``None`` (tiktoken cl100k, works offline), an encoding name, a ``tiktoken.Encoding``, a
            HuggingFace tokenizer, or any ``Callable[[str], int]``.
        length_function: LangChain's name for a ``Callable[[str], int]`` token counter (used when ``tokenizer`` is
            not given, so ``from_huggingface_tokenizer`` works).
        language: Force one language for every document (``"python"``, ``Language.PYTHON``, ...).
        context_header: Prefix each ``page_content`` with a short comment header (path, breadcrumb and, for a piece
            of a split definition, the enclosing signatures). Off by default so that ``page_content`` is exactly
            the source text, as with every LangChain splitter; turn it on to give embeddings more context. With it
            on, chunks are cut at ``chunk_size - header_reserve`` tokens, the header is shortened (then dropped)
            when it does not fit, and ``start_index``/``start_line`` locate the source text that follows it.
        header_reserve: Tokens kept free for the header when ``context_header`` is on.
        add_start_index: Add ``start_index``/``end_index`` (on by default; the offsets are exact, never searched).
        strip_whitespace: Strip leading/trailing whitespace of each chunk (off by default to stay lossless); the
            offsets and lines then describe the stripped text.
        keep_separator: Accepted for LangChain compatibility and ignored: no text is ever dropped.
        on_unsupported: Input that cannot be chunked is skipped with one warning per call (``"warn"``), raises
            :class:`~llmc_splitters.UnsupportedInputError` (``"raise"``), or is skipped silently (``"ignore"``).

    Raises:
        ConfigurationError: An invalid setting (the message names it and the value), or an unknown argument (the
            message names the nearest valid one).

    Example:
        >>> from langchain_core.documents import Document
        >>> splitter = CodeTextSplitter(chunk_size=64)
        >>> docs = splitter.split_documents(
        ...     [Document(page_content="import os\\n\\ndef f():\\n    return os.sep\\n", metadata={"source": "m.py"})]
        ... )
        >>> [(d.metadata["kind"], d.metadata.get("symbol"), d.metadata["start_line"]) for d in docs]
        [('imports', None, 1), ('function', 'f', 3)]
    """

    @checked_arguments
    def __init__(
        self,
        chunk_size: int | None = None,
        chunk_overlap: int = 0,
        *,
        max_tokens: int | None = None,
        tokenizer: Any = None,
        length_function: Any = None,
        language: Any = None,
        context_header: bool = False,
        header_reserve: int = DEFAULT_HEADER_RESERVE,
        add_start_index: bool = True,
        strip_whitespace: bool = False,
        keep_separator: Any = False,
        on_unsupported: str = "warn",
    ) -> None:
        size = resolve_size(chunk_size, max_tokens)
        self._on_unsupported = check_on_unsupported(on_unsupported)
        check_overlap(chunk_overlap, size)
        if tokenizer is not None and length_function is not None:
            msg = "give tokenizer= or length_function=, not both"
            raise ConfigurationError(msg)
        budget = chunk_budget(size, header_reserve, context_header)
        lang = forced_language(language)
        tok: Tokenizer = resolve_tokenizer(tokenizer if tokenizer is not None else length_function)
        super().__init__(
            chunk_size=size,
            chunk_overlap=chunk_overlap,
            length_function=tok.count,
            keep_separator=keep_separator,
            add_start_index=add_start_index,
            strip_whitespace=strip_whitespace,
        )
        self._tokenizer = tok
        self._language = lang
        self._context_header = bool(context_header)
        self._header_reserve = header_reserve
        self._budget = budget
        # Overlap is added per document (with_overlap), in tokens of chunk_overlap; prose is cut smaller for it.
        self._chunkers = {budget: ASTChunker(max_tokens=budget, tokenizer=tok, overlap=0)}

    # ------------------------------------------------------------------ settings
    @property
    def chunk_size(self) -> int:
        """Token budget per chunk (header included when ``context_header`` is on)."""
        return self._chunk_size

    @property
    def max_tokens(self) -> int:
        """Same as :attr:`chunk_size`."""
        return self._chunk_size

    @property
    def language(self) -> str | None:
        """The forced language, or ``None`` when it is detected per document."""
        return self._language

    @property
    def context_header(self) -> bool:
        """Whether ``page_content`` starts with a context header."""
        return self._context_header

    @property
    def tokenizer(self) -> Tokenizer:
        """The resolved tokenizer that counts ``chunk_size``."""
        return self._tokenizer

    @property
    def chunk_overlap(self) -> int:
        """Tokens of the piece before repeated at the start of a piece of split prose (code never overlaps)."""
        return self._chunk_overlap

    @property
    def chunker(self) -> ASTChunker:
        """The underlying :class:`~llmc_splitters.ASTChunker` (of code; prose is cut ``chunk_overlap`` tokens
        smaller)."""
        return self._chunkers[self._budget]

    def _chunker_for(self, language: str, text: str) -> ASTChunker:
        """The chunker of a document in ``language``: smaller by the overlap for prose."""
        del text
        budget = max(1, self._budget - overlap_reserve(self._chunk_overlap, language))
        chunker = self._chunkers.get(budget)
        if chunker is None:
            chunker = self._chunkers[budget] = ASTChunker(max_tokens=budget, tokenizer=self._tokenizer, overlap=0)
        return chunker

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(chunk_size={self._chunk_size}, tokenizer={self._tokenizer.name!r}, "
            f"language={self._language!r}, context_header={self._context_header})"
        )

    # ------------------------------------------------------------------ factories
    @classmethod
    def from_language(cls, language: Any, **kwargs: Any) -> CodeTextSplitter:
        """Same call shape as ``RecursiveCharacterTextSplitter.from_language``; ``chunk_size`` counts tokens."""
        return cls(language=language, **kwargs)

    @classmethod
    def from_tiktoken_encoder(  # type: ignore[override]
        cls,
        encoding_name: str = "cl100k_base",
        model_name: str | None = None,
        allowed_special: Any = None,
        disallowed_special: Any = "all",
        **kwargs: Any,
    ) -> CodeTextSplitter:
        """Count tokens with a tiktoken encoding (cl100k by default; its offline copy is preferred).

        ``allowed_special``/``disallowed_special`` are accepted for compatibility: special tokens are counted as
        plain text, so source code that contains them never raises.
        """
        del allowed_special, disallowed_special
        if model_name is not None:
            import tiktoken

            return cls(tokenizer=tiktoken.encoding_for_model(model_name), **kwargs)
        return cls(tokenizer=encoding_name, **kwargs)

    # ------------------------------------------------------------------ splitting
    def split_text(self, text: str) -> list[str]:
        """Split one text (language as configured, else detected from a shebang, else plain text)."""
        return [doc.page_content for doc in self.create_documents([text])]

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """One ``Document`` per non-blank leaf span of each text, in file order.

        ``split_documents`` and ``transform_documents`` (the base class's) go through this method, so the warnings
        of one call (inputs skipped, languages guessed, files given in pieces) come once per call.
        """
        metadatas_ = list(metadatas) if metadatas is not None else [{}] * len(texts)
        if len(metadatas_) != len(texts):
            msg = f"got {len(texts)} texts but {len(metadatas_)} metadatas"
            raise ConfigurationError(msg)
        intake = Intake(type(self).__name__, self._on_unsupported, "source",
                        "TextLoader, DirectoryLoader, or GenericLoader with TextParser")
        documents: list[Document] = []
        for i, (text, metadata) in enumerate(zip(texts, metadatas_)):
            documents.extend(self._documents(intake, i, text, metadata or {}))
        intake.finish()
        return documents

    def language_for(self, text: str, metadata: Mapping[str, Any] | None = None) -> str | None:
        """The language a document is chunked as (see the class docstring for the order of the rules); ``None``
        for binary input, which is skipped."""
        return document_language(self._language, text, metadata, path_of(metadata or {}))

    def _documents(self, intake: Intake, index: int, text: str, metadata: Mapping[str, Any]) -> Iterable[Document]:
        path = path_of(metadata)
        tree = intake.chunk(self._chunker_for, text, path=path, metadata=metadata, language=self._language,
                            index=index)
        if tree is None:
            return
        for span in self._overlapped(tree).leaves:
            rendered = self._render(span)
            if rendered is None:
                continue
            content, span_meta = rendered
            meta = copy.deepcopy(dict(metadata))
            if "source" in meta:
                span_meta.pop("source", None)  # the input's own value (a URL, a Path...) is kept as is
            meta.update(span_meta)
            content, restore = framework_text(content)
            meta.update(restore)
            yield Document(page_content=content, metadata=framework_metadata(meta))

    def _overlapped(self, tree: SpanTree) -> SpanTree:
        """``tree`` with ``chunk_overlap`` tokens of overlap on its split prose (see ``chunk_overlap``)."""
        if not self._chunk_overlap:
            return tree
        budget = max(1, self._budget - overlap_reserve(self._chunk_overlap, tree.root.language))
        return with_overlap(tree, self._chunk_overlap, budget, self._tokenizer)

    def _render(self, span: Span) -> tuple[str, dict[str, Any]] | None:
        """``page_content`` and metadata of one leaf, or ``None`` for a whitespace-only leaf."""
        body = span.text
        if not body.strip():
            return None
        meta = _span_metadata(span)
        stripped_any = False
        if self._strip_whitespace:
            lead = len(body) - len(body.lstrip())
            stripped = body.strip()
            before = body[:lead]
            meta["start_line"] = span.start_line + before.count("\n")
            meta["end_line"] = meta["start_line"] + stripped.count("\n")
            meta["start_index"] = span.start_char + lead
            meta["end_index"] = meta["start_index"] + len(stripped)
            meta["start_byte"] = span.start_byte + len(before.encode("utf-8", "surrogatepass"))
            meta["end_byte"] = meta["start_byte"] + len(stripped.encode("utf-8", "surrogatepass"))
            if stripped != body:
                stripped_any = True
                meta["token_count"] = self._tokenizer.count(stripped)
            body = stripped
        content = body
        if self._context_header:
            full = with_header(span, self._chunk_size, self._tokenizer)
            header = full[: len(full) - len(span.text)]
            if header:
                candidate = header + body
                # Stripping can change the tokens at the join; keep the header only if the total still fits.
                if not stripped_any or self._tokenizer.count(candidate) <= self._chunk_size:
                    content = candidate
        overlap = span.metadata.get("overlap") if self._chunk_overlap else None
        if overlap:
            at = len(content) - len(body)  # after the header, if any
            tail = fitting_tail(overlap, lambda t: self._tokenizer.count(content[:at] + t + body) <= self._chunk_size)
            if tail:
                content = content[:at] + tail + body
        if not self._add_start_index:
            meta.pop("start_index", None)
            meta.pop("end_index", None)
        return content, meta


def _span_metadata(span: Span) -> dict[str, Any]:
    """``span.to_metadata()`` with ``symbol`` and ``breadcrumb`` always present (``""`` for none: stores reject None),
    and the cell of a notebook span."""
    meta = span.to_metadata()
    meta.setdefault("symbol", "")
    meta.setdefault("breadcrumb", "")
    for key in ("cell_index", "cell_type"):
        if key in span.metadata:
            meta[key] = span.metadata[key]
    return meta
