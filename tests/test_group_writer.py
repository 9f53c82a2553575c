"""GroupWriter: with the model's runtime imported, the model starts on the first group while the caller goes on
chunking, and the stores open once the writer holds an embedded group, or when the caller would otherwise wait for
the model, or at the end; nothing is written before they are open."""

from __future__ import annotations

import threading
import time

import pytest

from llmc_splitters.retrieval.indexing.group_writer import GroupWriter


class Stages:
    """Three stages that record what happened, in order; the stores open only once the first group is embedded
    (or after ``wait`` seconds, which the early writer never needs)."""

    def __init__(self, wait: float = 5.0) -> None:
        self.wait = wait
        self.log: list[str] = []
        self.embedded = threading.Event()
        self.lock = threading.Lock()

    def note(self, what: str) -> None:
        with self.lock:
            self.log.append(what)

    def open_engines(self) -> None:
        waited = self.embedded.wait(self.wait)
        self.note(f"opened ({'after' if waited else 'before'} the first embedding)")

    def embed(self, group) -> None:
        self.note(f"embed {group[0]}")
        self.embedded.set()

    def write(self, group) -> None:
        self.note(f"write {group[0]}")


def test_the_first_group_is_embedded_while_the_stores_open() -> None:
    s = Stages()
    w = GroupWriter(s.open_engines, s.embed, s.write, embed_while_opening=lambda: True)
    w.submit(["a"])
    w.submit(["b"])
    w.close()
    assert s.log[0] == "embed a" and "opened (after the first embedding)" in s.log
    opened = s.log.index("opened (after the first embedding)")
    assert s.log.index("write a") > opened and s.log.index("write b") > s.log.index("write a")


def test_the_stores_open_when_the_caller_would_wait_for_the_model() -> None:
    s = Stages()
    release = threading.Event()

    def embed(group) -> None:
        s.embed(group)
        release.wait(10.0)  # the model is busy: the groups submitted next wait in the queue

    w = GroupWriter(s.open_engines, embed, s.write, depth=2, embed_while_opening=lambda: True)
    w.submit(["a"])
    assert s.embedded.wait(5.0)  # a is in the model's hands
    w.submit(["b"])
    w.submit(["c"])  # b and c wait: the queue is full
    assert "opened (after the first embedding)" not in s.log  # the caller chunked on instead
    opener = threading.Thread(target=w.submit, args=(["d"],))
    opener.start()
    deadline = time.monotonic() + 5.0
    while "opened (after the first embedding)" not in s.log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert opener.is_alive() and s.log == ["embed a", "opened (after the first embedding)"]  # opened while it waits
    release.set()
    opener.join(5.0)
    w.close()
    assert [x for x in s.log if x.startswith("write")] == ["write a", "write b", "write c", "write d"]
    assert s.log.index("write a") > s.log.index("opened (after the first embedding)")


def test_with_nothing_to_embed_the_first_group_is_written_before_the_run_ends() -> None:
    s = Stages(wait=0.0)
    w = GroupWriter(s.open_engines, lambda group: None, s.write, embed_while_opening=lambda: True)
    w.submit(["a"])
    deadline = time.monotonic() + 5.0
    while not w._wanted.is_set() and time.monotonic() < deadline:  # the writer holds a and waits for the stores
        time.sleep(0.01)
    w.submit(["b"])  # queued, then the stores open
    while "write a" not in s.log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.log[:2] == ["opened (before the first embedding)", "write a"]  # written while the run goes on
    w.close()
    assert s.log[-1] == "write b"


def test_without_a_prepared_runtime_the_stores_open_first() -> None:
    s = Stages(wait=0.3)
    w = GroupWriter(s.open_engines, s.embed, s.write)
    w.submit(["a"])
    w.close()
    assert s.log == ["opened (before the first embedding)", "embed a", "write a"]


def test_stores_that_cannot_open_write_nothing_and_the_writer_stops() -> None:
    s = Stages()

    def broken() -> None:
        s.embedded.wait(5.0)
        raise OSError("no such server")

    w = GroupWriter(broken, s.embed, s.write, embed_while_opening=lambda: True)
    with pytest.raises(OSError, match="no such server"):
        try:
            w.submit(["a"])  # the stores open here if the writer already holds a, else at the end
        except OSError:
            w.abandon()  # what the index does when a submit fails
            raise
        w.close()
    assert s.log == ["embed a"]  # embedded while the caller went on; never written
    assert not any(t.is_alive() for t in w._threads)
