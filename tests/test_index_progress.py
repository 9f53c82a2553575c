"""The ``index`` command shows the embedding as a phase of its own (issue 37, item 3).

The progress counted files handed to the chunker, which runs ahead of the model: a hybrid run sat at "90%, eta 0 s"
for 34 of its 42 s, and a single big file showed ``0/1`` until it was done. Here the real command runs in this
process on files the tests write, with a fake slow model (the hashing embedding, a short sleep per call, calls of
four texts), and the tests read what it prints on stderr (a pipe: lines, not bars): the lines, never durations.
A phase under way that does not move (a slow call to the model, one big file being chunked) still prints a line at
least every few seconds (here, with the period shortened, the same count twice).
"""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tantivy")
pytest.importorskip("chromadb")
pytest.importorskip("pathspec")

from llmc_splitters.cli import main, progress  # noqa: E402
from llmc_splitters.cli.progress import Progress  # noqa: E402
from llmc_splitters.retrieval.indexing import indexer  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, HashingEmbedding, IndexProgress  # noqa: E402

SLOW_MODEL = textwrap.dedent(
    '''
    import time

    from llmc_splitters.retrieval import HashingEmbedding


    class SlowHashing(HashingEmbedding):
        """A model that takes its time: calls of 4 texts, 20 ms each."""

        batch_size = 4

        def embed_documents(self, texts):
            time.sleep(0.02)
            return super().embed_documents(texts)


    def make():
        model = SlowHashing(64)
        model.name = "slow-hashing:64"
        return model


    class VerySlowHashing(SlowHashing):
        """A call of 4 texts takes 300 ms."""

        def embed_documents(self, texts):
            time.sleep(0.3)
            return super().embed_documents(texts)


    def make_very_slow():
        model = VerySlowHashing(64)
        model.name = "very-slow-hashing:64"
        return model
    '''
)

_LINE = re.compile(r"^(chunking|embedding|indexing): (\d+)/(~?)(\d+) (files|texts) \((\d+)%\)")


def _module(i: int) -> str:
    """A realistic module: a class with a few methods and two functions, names unique to module ``i``."""
    return textwrap.dedent(f'''
        """Accounts of ledger {i}: balances, transfers and statements."""

        from dataclasses import dataclass, field


        @dataclass
        class Ledger{i}:
            """The accounts of one branch."""

            name: str
            balances: dict[str, int] = field(default_factory=dict)

            def deposit_{i}(self, account: str, cents: int) -> int:
                """Add ``cents`` to ``account``; returns the new balance."""
                if cents <= 0:
                    raise ValueError(f"a deposit must be positive, got {{cents}}")
                self.balances[account] = self.balances.get(account, 0) + cents
                return self.balances[account]

            def withdraw_{i}(self, account: str, cents: int) -> int:
                """Take ``cents`` from ``account``; refuses to overdraw."""
                have = self.balances.get(account, 0)
                if cents > have:
                    raise ValueError(f"{{account}} holds {{have}}, cannot withdraw {{cents}}")
                self.balances[account] = have - cents
                return self.balances[account]


        def transfer_{i}(ledger: Ledger{i}, source: str, target: str, cents: int) -> None:
            """Move money between two accounts of one ledger."""
            ledger.withdraw_{i}(source, cents)
            ledger.deposit_{i}(target, cents)


        def statement_{i}(ledger: Ledger{i}) -> str:
            """One line per account, largest balance first."""
            rows = sorted(ledger.balances.items(), key=lambda kv: -kv[1])
            return "\\n".join(f"{{name:<20}} {{cents / 100:>12.2f}}" for name, cents in rows)
        ''')


@pytest.fixture
def slow_model(tmp_path, monkeypatch) -> str:
    (tmp_path / "slow_model.py").write_text(SLOW_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "slow_model:make"


def _index(capsys, tree: Path, *args: str) -> list[str]:
    assert main(["index", str(tree), "--db", str(tree.parent / "index"), *args]) == 0
    return capsys.readouterr().err.splitlines()


def _phase(lines: list[str], name: str) -> list[tuple[int, int, bool]]:
    """``(done, total, estimated)`` of each progress line of a phase."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m and m.group(1) == name:
            out.append((int(m.group(2)), int(m.group(4)), m.group(3) == "~"))
    return out


def test_a_hybrid_index_shows_chunking_then_embedding_with_counts_and_an_eta(tmp_path, capsys, slow_model):
    tree = tmp_path / "bank"
    tree.mkdir()
    for i in range(12):
        (tree / f"ledger_{i:02d}.py").write_text(_module(i))
    lines = _index(capsys, tree, "--embedding", slow_model)
    chunking, embedding = _phase(lines, "chunking"), _phase(lines, "embedding")
    assert chunking[0] == (0, 12, False) and chunking[-1] == (12, 12, False)
    # The chunking lines carry no time left: that is the model's, on the embedding lines.
    assert not any("eta" in ln for ln in lines if ln.startswith("chunking: "))
    # The embedding is counted in texts, moving through its tenths up to the exact total.
    done = [d for d, _, _ in embedding]
    total = embedding[-1][1]
    assert done == sorted(done) and embedding[-1] == (total, total, False) and total > 12
    assert len({10 * d // total for d in done}) >= 8, embedding
    # While files are still to chunk, the total is an estimate, and said to be one.
    assert any(est for _, _, est in embedding[:-1]) or chunking[-1] == (12, 12, False)
    # Every line before the last gives a rate and the time left, and how many files are written.
    middle = [ln for ln in lines if ln.startswith("embedding: ") and "(100%)" not in ln and not ln.startswith(
        "embedding: 0/")]
    assert middle and all(re.search(r"texts/s, [\d.]+ s, eta \d+ s; \d+/12 files written$", ln) for ln in middle)
    assert any(ln.startswith(f"embedding: {total}/{total} texts (100%)") and ln.endswith("; 12/12 files written")
               for ln in lines)


def test_one_big_file_moves_while_it_is_embedded(tmp_path, capsys, slow_model):
    tree = tmp_path / "one"
    tree.mkdir()
    (tree / "ledgers.py").write_text("\n".join(_module(i) for i in range(20)))
    lines = _index(capsys, tree, "--embedding", slow_model)
    assert _phase(lines, "chunking")[-1] == (1, 1, False)
    embedding = _phase(lines, "embedding")
    total = embedding[-1][1]
    inside = [d for d, t, _ in embedding if 0 < d < total]
    assert len(inside) >= 5, lines  # the one file's texts, counted as the model goes


def _repeated(lines: list[str], name: str) -> list[tuple[int, int, bool]]:
    """Counts a phase printed twice in a row: before the end, only the heartbeat prints them (a step prints when a
    count changes)."""
    counts = _phase(lines, name)
    return [a for a, b in zip(counts, counts[1:]) if a == b]


def test_a_slow_call_to_the_model_still_prints_lines(tmp_path, capsys, slow_model, monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0.05)
    tree = tmp_path / "bank"
    tree.mkdir()
    (tree / "ledger.py").write_text(_module(1))
    lines = _index(capsys, tree, "--embedding", "slow_model:make_very_slow", "--embed-workers", "1")
    assert any(done < total for done, total, _ in _repeated(lines, "embedding")), lines  # said while a call runs


def test_one_big_file_being_chunked_still_prints_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0.05)
    chunk = indexer.chunk

    def slow_chunk(*args, **kwargs):
        import time

        time.sleep(0.5)
        return chunk(*args, **kwargs)

    monkeypatch.setattr(indexer, "chunk", slow_chunk)
    tree = tmp_path / "one"
    tree.mkdir()
    (tree / "ledgers.py").write_text("\n".join(_module(i) for i in range(5)))
    lines = _index(capsys, tree, "--embedding", "none")
    assert (0, 1, False) in _repeated(lines, "indexing"), lines  # said while the file is chunked
    assert _phase(lines, "indexing")[-1] == (1, 1, False)


def test_a_lexical_index_keeps_one_phase_of_files(tmp_path, capsys):
    tree = tmp_path / "bank"
    tree.mkdir()
    for i in range(5):
        (tree / f"ledger_{i}.py").write_text(_module(i))
    lines = _index(capsys, tree, "--embedding", "none")
    assert _phase(lines, "indexing")[-1] == (5, 5, False)
    assert not _phase(lines, "embedding") and not _phase(lines, "chunking")
    assert any(ln.startswith("indexing: 5/5 files (100%)") and "files/s" in ln for ln in lines)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_each_phase_is_a_bar():
    pytest.importorskip("tqdm")
    out = _Terminal()
    progress = Progress(3, enabled=True, hybrid=True, stream=out)
    progress.update(IndexProgress(files=1, chunked=1, texts=10, path="a.py"))
    progress.update(IndexProgress(files=3, chunked=3, texts=30, embedded=12, written=1, path="c.py"))
    progress.finish()
    progress.close()
    shown = out.getvalue()
    assert "chunking: 100%" in shown and "3/3" in shown
    assert "embedding: 100%" in shown and "30/30" in shown and "text/s" in shown


def test_the_api_reports_each_phase_in_order(tmp_path):
    """``progress=`` gets every step: counts never go back, and end with every text embedded and file written."""
    seen: list[IndexProgress] = []
    idx = CodeIndex(tmp_path / "index", embedding=HashingEmbedding(32))
    files = {f"ledger_{i}.py": _module(i) for i in range(6)}
    report = idx.index_texts(files, progress=seen.append)
    assert seen, "no progress reported"
    for a, b in zip(seen, seen[1:]):
        assert all(getattr(b, k) >= getattr(a, k) for k in ("files", "chunked", "texts", "embedded", "written"))
    last = seen[-1]
    assert (last.files, last.chunked, last.written) == (6, 6, 6) == (6, 6, len(report.added))
    assert last.embedded == last.texts > 6
    again = []
    idx.index_texts(files, progress=again.append)
    assert again[-1] == IndexProgress(files=6)  # nothing to chunk, embed or write
