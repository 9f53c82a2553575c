"""GroupWriter: the first group is embedded while the stores open (when the model's runtime is imported), and
nothing is written before they are open."""

from __future__ import annotations

import threading

import pytest

from llmc_splitters.retrieval.group_writer import GroupWriter


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
    assert s.log[:2] == ["embed a", "opened (after the first embedding)"]
    assert s.log.index("write a") > 1 and s.log.index("write b") > s.log.index("write a")


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
        w.submit(["a"])
    w.abandon()
    assert s.log == ["embed a"]  # embedded while opening; never written
    assert not any(t.is_alive() for t in w._threads)
