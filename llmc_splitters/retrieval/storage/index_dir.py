"""What an index directory holds and records: the files it keeps, and the embedding model its vectors come from."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from .span_store import SpanStore

__all__ = ["delete_index", "embedding_hint", "embedding_name", "recorded"]


def embedding_name(embedding: Any) -> str:
    """The name an embedding model's vectors are filed under (``"none"`` for lexical only): its identity's."""
    if embedding is None:
        return "none"
    from ..embeddings import identity_of

    return identity_of(embedding).name


def recorded(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What an existing index at ``path`` records (see :meth:`~llmc_splitters.retrieval.CodeIndex.recorded`)."""
    store = SpanStore(path, create=False)
    try:
        got = store._read("SELECT settings FROM files LIMIT 1")  # noqa: SLF001 - one cheap read
        vectors = store.get_meta("vectors")
        return {"embedding": store.get_meta("embedding") or "none",
                "vectors": json.loads(vectors) if vectors else None,
                "settings": got[0][0] if got else None}
    finally:
        store.close()


def embedding_hint(recorded: str) -> str:
    """What to pass as ``embedding=`` to open an index whose vectors come from ``recorded``."""
    from ..embeddings.resolve import recorded_spec

    spec = recorded_spec(recorded)
    if spec is not None:
        return f"embedding=resolve_embedding({spec!r}) (from llmc_splitters.retrieval.embeddings)"
    return (f"the embedding whose identity name is {recorded!r} (the object the index was built with, or "
            f"resolve_embedding({recorded!r}) when that is a module:factory spec)")


def delete_index(path: Path) -> None:
    """Remove what an index keeps in ``path`` (its SQLite file, lexical and embedded vector directories)."""
    for name in ("llmc.sqlite3", "llmc.sqlite3-wal", "llmc.sqlite3-shm"):
        (path / name).unlink(missing_ok=True)
    for sub in ("lexical", "chroma"):
        shutil.rmtree(path / sub, ignore_errors=True)
    if (path / "chroma.sqlite3").is_file():  # an index of 0.1, rebuilt in the current layout
        (path / "chroma.sqlite3").unlink()
        for child in path.iterdir():
            if child.is_dir() and len(child.name) == 36 and child.name.count("-") == 4:  # Chroma segment dirs
                shutil.rmtree(child, ignore_errors=True)
