"""Framework-free code shared by the LangChain and LlamaIndex faces: checking their settings, reading a document's
path and language, collecting whole files, and building the core retriever they wrap."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from .errors import ConfigurationError
from .chunking.languages import detect_language, get_spec, normalize_language

DEFAULT_CHUNK_SIZE = 512
DEFAULT_HEADER_RESERVE = 64


def language_name(value: Any) -> str | None:
    """A language given as ``str`` or as a ``str`` enum (LangChain's ``Language.PYTHON``), normalised."""
    if isinstance(value, Enum):
        value = value.value
    if not isinstance(value, str) or not value.strip():
        return None
    return normalize_language(value)


def known_language(language: str | None) -> bool:
    """Whether the chunker has a grammar (or the plain-text path) for ``language``."""
    if language is None:
        return False
    try:
        get_spec(language)
    except ValueError:
        return False
    return True


def first_path(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first of ``keys`` in ``metadata`` that holds a non-empty value, as ``str``."""
    for key in keys:
        value = metadata.get(key)
        if value:
            return str(value)
    return None


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


def forced_language(language: Any) -> str | None:
    """The normalised ``language=`` setting (``None`` when not given); an unknown one is an error."""
    lang = language_name(language)
    if language is not None and (lang is None or not known_language(lang)):
        msg = f"unknown language {language!r}; pass a tree-sitter grammar name such as 'python', or 'text'"
        raise ConfigurationError(msg)
    return lang


def document_language(forced: str | None, text: str, metadata: Mapping[str, Any] | None,
                      path_keys: Sequence[str]) -> str:
    """The language a document is chunked as: the forced one, else ``metadata["language"]`` when known, else
    detected from its path (the first of ``path_keys``) or a shebang."""
    if forced is not None:
        return forced
    metadata = metadata or {}
    declared = language_name(metadata.get("language"))
    if declared is not None and known_language(declared):
        return declared
    return detect_language(first_path(metadata, path_keys), text)


def check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        msg = f"{name} must be a positive integer, got {value!r}"
        raise ConfigurationError(msg)


# ---------------------------------------------------------------------------------------------- retrievers
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
                   k: int, max_context_tokens: int) -> Any:
    """The :class:`~llmc_splitters.retrieval.CodeRetriever` a face wraps: ``code_retriever`` as given (then no
    store or embedding setting may be given too), or a new one on Chroma."""
    check_positive("k", k)
    check_positive("max_context_tokens", max_context_tokens)
    if code_retriever is not None:
        if any(x is not None for x in (embedding, path, host, client, collection_name)):
            msg = (
                f"code_retriever= already holds its store and embedding; do not also pass "
                f"{embedding_name}/path/host/client"
            )
            raise ConfigurationError(msg)
        return code_retriever
    from .retrieval import CodeRetriever

    if collection_name is None:
        # In-memory Chroma clients share one process-wide store: a fresh collection keeps retrievers apart.
        in_memory = path is None and host is None and client is None
        collection_name = f"llmc_{uuid.uuid4().hex}" if in_memory else "llmc_spans"
    return CodeRetriever(
        path=path, host=host, port=port, client=client, collection=collection_name, embedding=embedding,
        max_tokens=max_tokens, tokenizer=tokenizer, k=k, max_context_tokens=max_context_tokens,
    )
