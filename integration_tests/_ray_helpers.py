"""Helpers the Ray workers import by name (this directory is on their PYTHONPATH): a counting embedding whose calls
are recorded in a file (actors run in other processes), and a picklable LangChain vector store factory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from llmc_splitters.retrieval import HashingEmbedding


class CountingEmbedding(HashingEmbedding):
    """A deterministic embedding that appends every text it embeds to ``log_path`` (one JSON line per call).

    Args:
        log_path: The file to append to (``O_APPEND``: lines from several processes never interleave).
        dim: Vector size.
        delay: Seconds to sleep per call (to kill a run part-way).
    """

    def __init__(self, log_path: str, dim: int = 32, delay: float = 0.0) -> None:
        super().__init__(dim=dim)
        self.log_path = log_path
        self.delay = delay
        self.name = f"counting:{dim}"

    def embed_documents(self, texts):
        if self.delay:
            time.sleep(self.delay)
        line = json.dumps({"pid": os.getpid(), "texts": list(texts)}) + "\n"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        return super().embed_documents(texts)


def embedded_texts(log_path: str) -> list[str]:
    """Every text recorded by :class:`CountingEmbedding` in ``log_path``."""
    if not os.path.exists(log_path):
        return []
    out: list[str] = []
    with open(log_path, encoding="utf-8") as fh:
        for line in fh:
            out.extend(json.loads(line)["texts"])
    return out


def chroma_vectorstore(host: str, port: int, collection: str, dim: int = 32):
    """A LangChain ``Chroma`` vector store on a Chroma server (built inside each Ray worker)."""
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    client = chromadb.HttpClient(host=host, port=port, settings=Settings(anonymized_telemetry=False))
    return Chroma(collection_name=collection, client=client, embedding_function=HashingEmbedding(dim),
                  collection_metadata={"hnsw:space": "cosine"})


def kill_at_first_write(cmd: list[str]) -> None:
    """Run a driver process and SIGKILL it as soon as it prints a line starting ``WRITE`` (some files written);
    fails the test when it ends before that."""
    import pytest

    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=os.environ.copy())
    assert driver.stdout is not None
    lines = []
    try:
        for line in driver.stdout:
            lines.append(line)
            if line.startswith("WRITE"):
                break
        else:
            pytest.fail("the driver ended before writing:\n" + "".join(lines[-50:]))
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    assert driver.returncode == -signal.SIGKILL
    time.sleep(3)  # let Ray reap the dead job's workers
