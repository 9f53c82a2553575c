"""What decides a file's rows, and the names derived from a file: the chunking settings and their fingerprint,
git's blob SHA of the bytes, the path the index stores, and the version id every row of a file carries.

:func:`settings_fingerprint` changes whenever the spans could (a setting, the tokenizer, this library's or a
grammar's version, :data:`ROW_SCHEMA_VERSION`), so rows of different settings never mix in one index.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from ..chunking.inputs import ERRORS
from ..errors import ConfigurationError

ROW_SCHEMA_VERSION = 2
"""Bumped when the row layout or the id derivation changes (it is part of the fingerprint)."""


@dataclass(frozen=True)
class IngestSettings:
    """Chunking settings: everything that changes the spans, and nothing that cannot be pickled.

    Attributes:
        max_tokens: Leaf budget of the :class:`~llmc_splitters.ASTChunker`.
        tokenizer: A tiktoken encoding name, or ``None`` for cl100k (offline-safe). A name, not an object, so the
            settings pickle and fingerprint.
        errors: Decoding policy for bytes (``"fallback"`` or ``"strict"``, see :mod:`llmc_splitters.chunking.inputs`).
        overlap: Prose overlap ratio of the chunker.
        max_file_bytes: Files larger than this are split by lines, not parsed.
        summaries: Also emit file and class summary rows (searched in multi-stage retrieval).
    """

    max_tokens: int = 512
    tokenizer: str | None = None
    errors: str = "fallback"
    overlap: float = 0.15
    max_file_bytes: int = 16 * 1024 * 1024
    summaries: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            msg = f"max_tokens must be a positive integer, got {self.max_tokens!r}"
            raise ConfigurationError(msg)
        if self.tokenizer is not None and not isinstance(self.tokenizer, str):
            msg = (
                f"tokenizer must be a tiktoken encoding name (a str) or None so the settings can be pickled and "
                f"fingerprinted, got {type(self.tokenizer).__name__}"
            )
            raise ConfigurationError(msg)
        if self.errors not in ERRORS:
            msg = f"errors must be one of {ERRORS}, got {self.errors!r}"
            raise ConfigurationError(msg)

    @property
    def tokenizer_name(self) -> str:
        """The tokenizer's name as the chunker reports it (``tiktoken:cl100k_base``), without loading it."""
        return f"tiktoken:{(self.tokenizer or 'cl100k_base').removesuffix('_offline')}"


def _versions() -> dict[str, str]:
    from importlib import metadata

    from .. import __version__

    out = {"llmc_splitters": __version__, "rows": str(ROW_SCHEMA_VERSION)}
    for dist in ("tree-sitter", "tree-sitter-language-pack"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "none"
    return out


def settings_fingerprint(settings: IngestSettings | None = None) -> str:
    """A short, stable fingerprint of what determines the spans: settings, tokenizer, library and grammar versions.

    Changing any of them makes :class:`~llmc_splitters.ingest.manifest.ManifestState` re-chunk every file, so rows
    of different settings never mix in one index.

    Example:
        >>> settings_fingerprint(IngestSettings(max_tokens=256)) == settings_fingerprint(IngestSettings(256))
        True
        >>> settings_fingerprint(IngestSettings(256)) == settings_fingerprint(IngestSettings(512))
        False
    """
    s = settings or IngestSettings()
    payload = {
        "max_tokens": s.max_tokens,
        "tokenizer": s.tokenizer_name,
        "errors": s.errors,
        "overlap": s.overlap,
        "max_file_bytes": s.max_file_bytes,
        "summaries": s.summaries,
        **_versions(),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f"v{ROW_SCHEMA_VERSION}-{digest[:16]}"


def git_blob_sha(data: bytes) -> str:
    """git's blob SHA-1 of ``data`` (what ``git hash-object`` prints)."""
    h = hashlib.sha1(b"blob %d\0" % len(data))  # noqa: S324 - git's object id, not a security hash
    h.update(data)
    return h.hexdigest()


def display_path(repository: str, path: str) -> str:
    """The path stored and shown in results: ``path``, or ``repository/path`` when a repository is named."""
    return f"{repository}/{path}" if repository else path


def file_version(repository: str, path: str, blob_sha: str, fingerprint: str) -> str:
    """Identifies one version of one file under one set of settings (carried on every row of that file)."""
    h = hashlib.sha1(f"{repository}\x00{path}\x00{blob_sha}\x00{fingerprint}".encode("utf-8", "surrogateescape"))  # noqa: S324
    return h.hexdigest()


def settings_dict(settings: IngestSettings) -> dict[str, Any]:
    """The settings as a plain dict (for Spark closures or JSON config); :func:`chunk_batch` accepts it back."""
    return asdict(settings)
