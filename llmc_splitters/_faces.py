"""Framework-free code shared by the LangChain and LlamaIndex faces: checking their settings, taking documents in
through the one dispatch (skipping binary input with one warning, warning about guessed languages and pre-split
files), the overlap of split prose (``chunk_overlap``), escaping lone surrogates for the frameworks, making paths
relative, and building the core retriever they wrap."""

from __future__ import annotations

import hashlib
import os
import re
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from .chunking.dispatch import classify, resolve_language
from .chunking.inputs import escape_surrogates
from .chunking.overlap import PROSE_LANGUAGES, add_overlap
from .chunking.span import SpanTree
from .errors import ConfigurationError, InputWarning, UnsupportedInputError, caller_stacklevel, check_positive

DEFAULT_CHUNK_SIZE = 512
DEFAULT_HEADER_RESERVE = 64
ON_UNSUPPORTED = ("warn", "raise", "ignore")
"""What a splitter does with input it cannot chunk (binary, a malformed notebook): skip it with one warning per
call naming each input and the reason (``"warn"``), raise our :class:`~llmc_splitters.UnsupportedInputError`
(``"raise"``), or skip it silently (``"ignore"``)."""

_LISTED = 5  # inputs named in one warning; the rest are counted
# Where a tail of the overlap may start: after whitespace, at a word.
_WORD_START = re.compile(r"[ \t\n]+(?=\S)")


def first_path(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first of ``keys`` in ``metadata`` that holds a non-empty value, as ``str``."""
    for key in keys:
        value = metadata.get(key)
        if value:
            return str(value)
    return None


# ---------------------------------------------------------------------------------------------- intake
class Intake:
    """The inputs of one splitter call, taken through :func:`~llmc_splitters.chunking.dispatch.classify`.

    :meth:`chunk` returns each input's span tree, or ``None`` for input that cannot be chunked (recorded, or
    raised with ``on_unsupported="raise"``); :meth:`finish` then emits at most one :class:`InputWarning` for each
    of: inputs skipped, inputs whose language had to be guessed (no path, no language, content that does not
    tell), and paths shared by several different inputs (pieces of one file, as LangChain's ``LanguageParser``
    makes them, whose line numbers are relative to each piece).

    Args:
        owner: The face's class name, for messages.
        on_unsupported: One of :data:`ON_UNSUPPORTED`.
        path_key: The metadata key that names a document's file, for the remedy.
        whole_file_loaders: What loads whole files in that framework, for the remedy.
    """

    def __init__(self, owner: str, on_unsupported: str, path_key: str, whole_file_loaders: str) -> None:
        self.owner = owner
        self.on_unsupported = on_unsupported
        self.path_key = path_key
        self.whole_file_loaders = whole_file_loaders
        self.skipped: list[tuple[str, str]] = []
        self.guessed = 0
        self.crowded: list[str] = []  # inputs whose metadata leaves too little of chunk_size (the caller says which)
        self._texts: dict[str, set[str]] = {}

    def chunk(self, chunker: Any, text: str, *, path: str | None, metadata: Mapping[str, Any] | None,
              language: str | None, index: int) -> SpanTree | None:
        """The span tree of one input (``index``: its position in the call, to name it when it has no path).
        ``chunker`` is a chunker, or ``chunker(language, text)`` returning the one for this input."""
        label = path or f"document {index}"
        if path:
            self._texts.setdefault(path, set()).add(hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest())
        treatment = classify(text, path=path, language=language, metadata=metadata)
        if treatment.refused:
            return self._unsupported(label, f"input {treatment.reason}", treatment.error())
        if treatment.guessed and text.strip():
            self.guessed += 1
        if not hasattr(chunker, "chunk_tree"):
            chunker = chunker(treatment.language, treatment.text)
        try:
            return chunker.chunk_tree(treatment.text, language=treatment.language, path=path)
        except UnsupportedInputError as exc:  # a malformed notebook
            return self._unsupported(label, str(exc), exc)

    def _unsupported(self, label: str, reason: str, exc: UnsupportedInputError) -> None:
        if self.on_unsupported == "raise":
            raise exc
        self.skipped.append((label, reason))
        return None

    def finish(self) -> None:
        """Emit the warnings of this call (see the class docstring), attributed to the caller's code."""
        stacklevel = caller_stacklevel()
        if self.skipped and self.on_unsupported == "warn":
            named = "; ".join(f"{label!r}: {reason}" for label, reason in self.skipped[:_LISTED])
            more = f"; and {len(self.skipped) - _LISTED} more" if len(self.skipped) > _LISTED else ""
            warnings.warn(
                f"{self.owner} skipped {len(self.skipped)} input(s) it cannot chunk: {named}{more}. Pass "
                "on_unsupported='raise' to get an error instead, or 'ignore' to skip them silently.",
                InputWarning, stacklevel=stacklevel,
            )
        if self.guessed:
            warnings.warn(
                f"{self.owner}: {self.guessed} document(s) had no path and no language, and their content did not "
                f"show one; they were chunked as plain text. Give the splitter a language (language='python'), or "
                f"each document a {self.path_key!r} metadata key naming its file (its extension decides).",
                InputWarning, stacklevel=stacklevel,
            )
        if self.crowded:
            named = ", ".join(map(repr, self.crowded[:_LISTED]))
            more = f" and {len(self.crowded) - _LISTED} more" if len(self.crowded) > _LISTED else ""
            warnings.warn(
                f"{self.owner}: the metadata of {len(self.crowded)} document(s) ({named}{more}) leaves less than a "
                "quarter of chunk_size for the text in the embedding or LLM view; their text was cut at a quarter of "
                "chunk_size and some views exceed it. Exclude keys from the views (the documents' "
                "excluded_embed_metadata_keys / excluded_llm_metadata_keys) or raise chunk_size.",
                InputWarning, stacklevel=stacklevel,
            )
        shared = sorted(p for p, texts in self._texts.items() if len(texts) > 1)
        if shared:
            others = f" (and {len(shared) - 1} other path(s))" if len(shared) > 1 else ""
            warnings.warn(
                f"{self.owner}: {len(self._texts[shared[0]])} different documents share the path {shared[0]!r}"
                f"{others}: they look like pieces of one file (as LangChain's GenericLoader with LanguageParser "
                "makes them), so start_line/end_line count from the start of each piece, not of the file. Load "
                f"whole files ({self.whole_file_loaders}) to get the file's line numbers and syntax-aligned chunks.",
                InputWarning, stacklevel=stacklevel,
            )


def check_on_unsupported(value: Any) -> str:
    """``on_unsupported`` checked (see :data:`ON_UNSUPPORTED`)."""
    if value not in ON_UNSUPPORTED:
        msg = f"on_unsupported must be one of {', '.join(map(repr, ON_UNSUPPORTED))}, got {value!r}"
        raise ConfigurationError(msg)
    return value


# ---------------------------------------------------------------------------------------------- framework values
def framework_text(text: str) -> tuple[str, dict[str, Any]]:
    """The text a framework object gets (lone surrogates escaped, see
    :func:`~llmc_splitters.chunking.inputs.escape_surrogates`) and the metadata that restores it
    (``{"surrogates": record}``, or nothing)."""
    clean, record = escape_surrogates(text)
    return clean, ({"surrogates": record} if record else {})


def framework_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with lone surrogates escaped in its strings (paths of undecodable file names, names and
    breadcrumbs cut from undecodable text), so that frameworks can hash and serialise it."""
    return {key: _clean(value) for key, value in metadata.items()}


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return escape_surrogates(value)[0]
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------- settings
def resolve_size(chunk_size: int | None, max_tokens: int | None) -> int:
    """The token budget from ``chunk_size`` (the frameworks' name) or ``max_tokens`` (the chunker's)."""
    if chunk_size is not None and max_tokens is not None and chunk_size != max_tokens:
        msg = f"chunk_size ({chunk_size}) and max_tokens ({max_tokens}) are the same setting; give one"
        raise ConfigurationError(msg)
    size = chunk_size if chunk_size is not None else max_tokens if max_tokens is not None else DEFAULT_CHUNK_SIZE
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        msg = f"chunk_size must be a positive integer (tokens), got {size!r}"
        raise ConfigurationError(msg)
    return size


def chunk_budget(size: int, header_reserve: Any, context_header: bool) -> int:
    """The chunker's budget: ``size``, less ``header_reserve`` when a context header shares it."""
    if isinstance(header_reserve, bool) or not isinstance(header_reserve, int) or header_reserve < 0:
        msg = f"header_reserve must be an integer >= 0, got {header_reserve!r}"
        raise ConfigurationError(msg)
    budget = size - header_reserve if context_header else size
    if budget < 1:
        msg = (
            f"chunk_size ({size}) must exceed header_reserve ({header_reserve}) when context_header=True; "
            "raise chunk_size or lower header_reserve"
        )
        raise ConfigurationError(msg)
    return budget


def check_overlap(chunk_overlap: Any, size: int) -> int:
    """``chunk_overlap`` checked: an integer with ``0 <= chunk_overlap < size / 2`` (tokens)."""
    if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int) or not 0 <= 2 * chunk_overlap < size:
        msg = (
            f"chunk_overlap must be an integer with 0 <= chunk_overlap < chunk_size / 2 ({size / 2:g}), got "
            f"{chunk_overlap!r}; code never overlaps, only split prose does"
        )
        raise ConfigurationError(msg)
    return chunk_overlap


def overlap_reserve(chunk_overlap: int, language: str | None) -> int:
    """The tokens a document is cut smaller by so that the overlap fits beside each piece: ``chunk_overlap`` for
    prose (Markdown, plain text, and notebooks for their markdown cells), 0 for code, which never overlaps."""
    return chunk_overlap if chunk_overlap and language in (*PROSE_LANGUAGES, "notebook") else 0


def with_overlap(tree: SpanTree, chunk_overlap: int, budget: int, tokenizer: Any) -> SpanTree:
    """``tree`` whose pieces of split prose carry, in ``metadata["overlap"]``, the tail of the piece before them:
    about ``chunk_overlap`` tokens cut at a sentence or word (:func:`~llmc_splitters.chunking.overlap.add_overlap`;
    code never gets any)."""
    return add_overlap(tree, chunk_overlap / budget, budget, tokenizer) if chunk_overlap else tree


def fitting_tail(overlap: str, fits: Any) -> str | None:
    """The longest tail of ``overlap`` that starts at a word and ``fits(tail)``, or ``None`` (bisected over word
    starts: a later start is a shorter tail)."""
    starts = [0, *(m.end() for m in _WORD_START.finditer(overlap))]
    lo, hi = -1, len(starts)  # starts[hi:] fit; starts[:lo + 1] do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(overlap[starts[mid]:]):
            hi = mid
        else:
            lo = mid
    return overlap[starts[hi]:] if hi < len(starts) else None


def forced_language(language: Any) -> str | None:
    """The normalised ``language=`` setting (``None`` when not given); an unknown one is an error. ``"notebook"``
    (or ``"ipynb"``) forces notebook treatment."""
    if language is None:
        return None
    try:
        return resolve_language(language)
    except UnsupportedInputError as exc:
        msg = f"unknown language {language!r}; pass a tree-sitter grammar name such as 'python', 'text' or 'notebook'"
        raise ConfigurationError(msg) from exc


def document_language(forced: str | None, text: str, metadata: Mapping[str, Any] | None, path: str | None) -> str:
    """The language a document is chunked as, by :func:`~llmc_splitters.chunking.dispatch.classify`'s rules
    (``None`` for binary input, which is not chunked)."""
    return classify(text, path=path, language=forced, metadata=metadata).language


# ---------------------------------------------------------------------------------------------- retrievers
def relative_paths(paths: Sequence[str | None], root: Any) -> list[str | None]:
    """``paths`` made relative to ``root`` (POSIX separators), so that stored and cited paths do not carry the
    machine's directory layout.

    ``root=None``: the common directory of the paths when every one of them is absolute (a single file keeps its
    name), else the paths as given. ``root=False``: the paths as given. A path given: every path must lie under it
    (relative paths are taken from the current directory).

    Raises:
        ConfigurationError: A path is not under ``root``.
    """
    if root is False:
        return list(paths)
    given = [p for p in paths if p]
    if root is None:
        if not given or not all(os.path.isabs(p) for p in given):
            return list(paths)
        base = os.path.commonpath([os.path.dirname(p) for p in given])
    else:
        if isinstance(root, bool) or not isinstance(root, (str, os.PathLike)):
            msg = f"root must be a directory path, None (the common directory) or False (paths as given), got {root!r}"
            raise ConfigurationError(msg)
        base = os.path.abspath(os.fspath(root))
    out: list[str | None] = []
    for p in paths:
        if not p:
            out.append(p)
            continue
        rel = os.path.relpath(os.path.abspath(p), base)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            msg = (f"the document path {p!r} is not under root={os.fspath(root)!r}; give a root that holds every "
                   "document")
            raise ConfigurationError(msg)
        out.append(PurePosixPath(*PurePath(rel).parts).as_posix())
    return out


def resolve_top_k(k: int | None, similarity_top_k: int | None, search_kwargs: Mapping[str, Any] | None
                  ) -> int | None:
    """The number of hits from ``k`` or a framework's spelling of it: LlamaIndex ``similarity_top_k``, LangChain
    ``search_kwargs={"k": ...}``; ``None`` when none is given (fill the budget, as the core retriever does). Two
    different values are an error, and so is a ``search_kwargs`` key we cannot honour (a vector-store filter, a
    score threshold)."""
    given: dict[str, Any] = {}
    if k is not None:
        given["k"] = k
    if similarity_top_k is not None:
        given["similarity_top_k"] = similarity_top_k
    if search_kwargs is not None:
        if not isinstance(search_kwargs, Mapping):
            msg = f"search_kwargs must be a dict such as {{'k': 4}}, got {type(search_kwargs).__name__}"
            raise ConfigurationError(msg)
        other = sorted(set(search_kwargs) - {"k"})
        if other:
            msg = (
                f"search_kwargs supports only 'k' (this retriever ranks by BM25 and embeddings itself and has no "
                f"vector-store filters or thresholds); got {', '.join(map(repr, other))}"
            )
            raise ConfigurationError(msg)
        if "k" in search_kwargs:
            given["search_kwargs['k']"] = search_kwargs["k"]
    values = set(map(repr, given.values()))
    if len(values) > 1:
        msg = f"{' and '.join(f'{name}={value!r}' for name, value in given.items())} are the same setting; give one"
        raise ConfigurationError(msg)
    if not given:
        return None
    name, value = next(iter(given.items()))
    check_positive(name, value)
    return value


def index_directory(code_retriever: Any, directory: str | os.PathLike[str], *, include: Sequence[str],
                    exclude: Sequence[str], root: Any) -> Any:
    """Index the files under ``directory`` that ``llmc-splitters index`` would select
    (:func:`llmc_splitters.ingest.walk.walk`), stored relative to ``root`` (``None``: ``directory``; ``False``:
    absolute paths). Files already indexed and no longer present are kept (nothing is pruned)."""
    from .ingest.walk import WalkOptions, walk

    if not os.path.isdir(directory):
        msg = f"directory must be a directory, got {os.fspath(directory)!r}"
        raise ConfigurationError(msg)
    walked = walk(directory, WalkOptions(include=tuple(include), exclude=tuple(exclude)))
    paths = [str(p) for p in walked.paths]
    if root is False:
        return code_retriever.index_files(paths)
    base = walked.root if root is None else Path(os.fspath(root)).resolve()
    relative_paths(paths, base)  # every file must lie under root
    return code_retriever.index_files(paths, root=base)


def whole_files(entries: Iterable[tuple[str | None, str]], taken: Mapping[str, str], loaders: str
                ) -> tuple[dict[str, str], list[str]]:
    """Files keyed by path from whole-file documents given as ``(path, text)`` (``document-<i>`` when a document
    has no path), and each entry's key. Two different texts under one path are an error: the documents are
    chunks, not files (``loaders`` names what returns whole files, for the message)."""
    files: dict[str, str] = {}
    keys: list[str] = []
    for i, (path, text) in enumerate(entries):
        key = path or f"document-{i}"
        if files.get(key, text) != text or taken.get(key, text) != text:
            msg = (
                f"two different documents have the path {key!r}; pass one Document per file (whole files, as "
                f"{loaders} return them), not chunks"
            )
            raise ConfigurationError(msg)
        files[key] = text
        keys.append(key)
    return files, keys


def core_retriever(code_retriever: Any, *, embedding: Any, embedding_name: str, path: Any, host: str | None,
                   port: int | None, client: Any, collection_name: str | None, max_tokens: int, tokenizer: Any,
                   k: int | None, max_context_tokens: int, store: Any = None) -> Any:
    """The :class:`~llmc_splitters.retrieval.CodeRetriever` a face wraps: ``code_retriever`` as given (then no
    store or embedding setting may be given too), or a new one on Chroma (or on ``store``: a
    :class:`~llmc_splitters.retrieval.MilvusStore` holds the whole index)."""
    if k is not None:
        check_positive("k", k)
    check_positive("max_context_tokens", max_context_tokens)
    if code_retriever is not None:
        if any(x is not None for x in (embedding, path, host, client, collection_name, store)):
            msg = (
                f"code_retriever= already holds its store and embedding; do not also pass "
                f"{embedding_name}/path/host/client/store"
            )
            raise ConfigurationError(msg)
        return code_retriever
    from .retrieval import CodeRetriever

    if store is not None:
        return CodeRetriever(path=path, store=store, embedding=embedding, max_tokens=max_tokens, tokenizer=tokenizer,
                             k=k, max_context_tokens=max_context_tokens)
    if collection_name is None:
        # In-memory Chroma clients share one process-wide store: a fresh collection keeps retrievers apart.
        in_memory = path is None and host is None and client is None
        collection_name = f"llmc_{uuid.uuid4().hex}" if in_memory else "llmc_spans"
    return CodeRetriever(
        path=path, host=host, port=port, client=client, collection=collection_name, embedding=embedding,
        max_tokens=max_tokens, tokenizer=tokenizer, k=k, max_context_tokens=max_context_tokens,
    )


def cite_core(meta: dict[str, Any], hit: Any, exp: Any) -> None:
    """Point a framework document's ``start_line``/``end_line`` at what it shows of its hit: the hit, or the part of
    it that fit (then ``zoomed`` is set and ``hit_start_line``/``hit_end_line`` keep the whole hit's lines)."""
    core = next((c for c in exp.cores if c[0] == 0), None)
    if core is None or not core[3]:
        return
    meta.update(zoomed=True, hit_start_line=meta.get("start_line"), hit_end_line=meta.get("end_line"),
                start_line=core[1], end_line=core[2])


def ranked_files(found: Any) -> list[dict[str, Any]]:
    """A search result's ranked distinct files as framework metadata (``ranked_files``): path, score, the best
    span's lines and symbol, best first, beyond what the budget holds."""
    return [{"path": f.path, "score": float(f.score), "start_line": f.start_line, "end_line": f.end_line,
             "symbol": f.symbol or ""} for f in getattr(found, "files", ())]
