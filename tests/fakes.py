"""Test doubles and fixtures' plumbing shared by several test modules (import from here, never from conftest)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from llmc_splitters.retrieval import HashingEmbedding


class CountingEmbedding(HashingEmbedding):
    """A deterministic embedding (no model) that records every text it embeds, in ``calls``."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim=dim)
        self.calls: list[str] = []

    def embed_documents(self, texts):
        self.calls.extend(texts)
        return super().embed_documents(texts)


def git(root: Path, *args: str) -> None:
    """Run ``git -C root ...`` with a throwaway identity."""
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
                   capture_output=True)


def commit(root: Path, msg: str) -> None:
    """Stage everything under ``root`` and commit it."""
    git(root, "add", "-A")
    git(root, "commit", "-qm", msg)


def stored_rows(index) -> set[tuple[str, str, str, str | None]]:
    """Every row an index's span store holds, as ``(id, role, path, text)``, read with plain SQL from its file."""
    import sqlite3

    conn = sqlite3.connect(index.span_store.file)
    try:
        return set(conn.execute("SELECT id, role, path, text FROM spans"))
    finally:
        conn.close()
