"""Batches sized by tokens: provider limits respected, failures retried, split, isolated and reported."""

from __future__ import annotations

import inspect
import json.decoder
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmc_splitters.errors import ConfigurationError
from llmc_splitters.retrieval.embeddings import (
    BatchEmbedder,
    BatchLimits,
    HashingEmbedding,
    embed_texts,
    plan_batches,
)


def _words(text: str) -> int:
    return len(text.split())


class Provider:
    """A provider-like fake: rejects a call over ``max_tokens`` words (as hosted APIs reject over-long batches),
    and any call holding a poisoned text; records every call it accepts or rejects."""

    def __init__(self, max_tokens: int | None = None, poison: str | None = None, flaky: int = 0) -> None:
        self.inner = HashingEmbedding(dim=16)
        self.max_tokens = max_tokens
        self.poison = poison
        self.flaky = flaky  # the first `flaky` calls fail whatever they hold (a rate limit)
        self.calls: list[list[str]] = []
        self.rejected: list[list[str]] = []
        self.count_tokens = _words

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.flaky > 0:
            self.flaky -= 1
            self.rejected.append(list(texts))
            raise RuntimeError("429 Too Many Requests")
        total = sum(_words(t) for t in texts)
        if self.max_tokens is not None and total > self.max_tokens:
            self.rejected.append(list(texts))
            raise ValueError(f"400 this batch has {total} tokens; the maximum is {self.max_tokens}")
        if self.poison is not None and any(self.poison in t for t in texts):
            self.rejected.append(list(texts))
            raise ValueError("400 invalid input")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Real code: the functions and paragraphs of two stdlib modules, split at blank lines."""
    src = inspect.getsource(textwrap) + inspect.getsource(json.decoder)
    return [p for p in src.split("\n\n") if p.strip()]


def test_a_provider_that_rejects_big_batches_only_gets_batches_that_fit(texts: list[str]) -> None:
    provider = Provider(max_tokens=120)
    res = embed_texts(provider, texts, limits=BatchLimits(max_items=16, max_batch_tokens=120, retries=0))
    assert provider.rejected == []
    assert all(sum(_words(t) for t in call) <= 120 and len(call) <= 16 for call in provider.calls)
    long = [i for i, t in enumerate(texts) if _words(t) > 120]
    assert res.failed == set(long)  # only what can never fit, and without a call
    assert all(texts[f.index] not in sum(provider.calls, []) for f in res.failures)
    assert all("over the limit of 120 tokens" in f.reason for f in res.failures)
    ref = HashingEmbedding(dim=16)
    for i, t in enumerate(texts):
        if i not in res.failed:
            assert res.vectors[i] == ref.embed_query(t)  # in input order, whatever the batch order was
    assert res.calls == res.batches == len(provider.calls)


def test_without_limits_the_same_provider_fails_and_splitting_recovers(texts: list[str]) -> None:
    provider = Provider(max_tokens=120)
    short = [t for t in texts if _words(t) <= 120]
    sleeps: list[float] = []
    res = embed_texts(provider, short, limits=BatchLimits(max_items=64, retries=1, backoff=0.25),
                      sleep=sleeps.append)
    assert res.failures == []  # halves of halves fit in the end
    assert provider.rejected and all(v is not None for v in res.vectors)
    assert sleeps and set(sleeps) == {0.25}


def test_a_text_that_always_fails_is_isolated_and_reported(texts: list[str]) -> None:
    bad = next(i for i, t in enumerate(texts) if "def dedent" in t)
    provider = Provider(poison="def dedent")
    sleeps: list[float] = []
    limits = BatchLimits(max_items=32, retries=2, backoff=1.0, max_backoff=1.5)
    res = embed_texts(provider, texts, limits=limits, sleep=sleeps.append)
    assert [f.index for f in res.failures] == [bad]
    assert "ValueError: 400 invalid input" in res.failures[0].reason
    assert res.vectors[bad] is None
    assert sum(v is not None for v in res.vectors) == len(texts) - 1
    # Bounded: every batch on the poisoned path is tried retries + 1 times, and waits are capped.
    poisoned_calls = [c for c in provider.calls if any("def dedent" in t for t in c)]
    depth = len(poisoned_calls) // (limits.retries + 1)
    assert len(poisoned_calls) == depth * (limits.retries + 1)
    assert 32 >= 2 ** (depth - 1)
    assert sleeps == [1.0, 1.5] * depth
    assert res.calls == len(provider.calls)


def test_a_transient_failure_is_retried_with_backoff_not_split(texts: list[str]) -> None:
    provider = Provider(flaky=2)
    sleeps: list[float] = []
    res = embed_texts(provider, texts[:10], limits=BatchLimits(max_items=10, retries=3, backoff=0.5),
                      sleep=sleeps.append)
    assert res.failures == [] and res.batches == 1 and res.calls == 3
    assert sleeps == [0.5, 1.0]
    assert len(provider.calls[-1]) == 10  # the whole batch went through on the third try


@pytest.mark.parametrize(("limits", "measure"), [
    (BatchLimits(max_items=8, max_batch_tokens=10**6), _words),  # token limits: sorted by the model's tokens
    (BatchLimits(max_items=8), len),  # none: sorted by characters, no tokenizer pass
])
def test_batches_hold_similar_lengths_longest_first(texts: list[str], limits: BatchLimits, measure) -> None:
    provider = Provider()
    counted: list[str] = []
    embed_texts(provider, texts, limits=limits, count_tokens=lambda t: counted.append(t) or _words(t))
    lengths = [[measure(t) for t in call] for call in provider.calls]
    assert all(ls == sorted(ls, reverse=True) for ls in lengths)
    assert all(min(a) >= max(b) for a, b in zip(lengths, lengths[1:]))
    assert len(counted) == (len(texts) if measure is _words else 0)


def test_a_model_that_returns_too_few_vectors_is_a_failed_call() -> None:
    class Short(HashingEmbedding):
        def embed_documents(self, texts):
            return super().embed_documents(texts)[:-1] if len(texts) > 1 else super().embed_documents(texts)

    res = embed_texts(Short(dim=8), ["a b", "c", "d e f"], limits=BatchLimits(retries=0), count_tokens=_words)
    assert res.failures == [] and all(v is not None for v in res.vectors)
    assert res.calls > res.batches  # the short answer was rejected and the batch split


def test_threads_and_processes_give_the_same_vectors(texts: list[str]) -> None:
    emb = HashingEmbedding(dim=32)
    one = embed_texts(emb, texts, limits=BatchLimits(max_items=8), count_tokens=_words)
    with BatchEmbedder(emb, limits=BatchLimits(max_items=8), workers=2, kind="thread", count_tokens=_words) as be:
        threads = be.embed(texts)
        again = be.embed(texts[:5])
    assert threads.vectors == one.vectors and again.vectors == one.vectors[:5]
    procs = embed_texts(emb, texts[:40], limits=BatchLimits(max_items=8), workers=2, kind="process",
                        count_tokens=_words)
    assert procs.vectors == one.vectors[:40]


class _LocalModel(HashingEmbedding):
    """A model that runs batches side by side on threads, as the package's local backends do."""

    parallelism = "thread"

    def __init__(self, dim: int, threads: int | None = None) -> None:
        super().__init__(dim=dim)
        self.threads = threads

    def for_workers(self, threads: int) -> "_LocalModel":
        return _LocalModel(self.dim, threads)


@pytest.mark.parametrize(("cores", "workers", "threads"), [(1, 1, None), (2, 2, 1), (8, 4, 2), (64, 4, 16)])
def test_auto_workers_run_a_local_model_on_every_core(monkeypatch: pytest.MonkeyPatch, texts: list[str], cores: int,
                                                      workers: int, threads: int | None) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    local = BatchEmbedder(_LocalModel(32), workers="auto", limits=BatchLimits(max_items=8), count_tokens=_words)
    assert local.workers == workers
    assert local.embedding.threads == threads  # each call gets its share of the cores
    hosted = BatchEmbedder(HashingEmbedding(dim=32), workers="auto")  # no parallelism: nothing known of its limits
    assert hosted.workers == 1
    with local:
        assert local.embed(texts).vectors == embed_texts(HashingEmbedding(dim=32), texts, count_tokens=_words).vectors


@pytest.mark.parametrize(("n", "workers", "calls"), [(20, 2, 2), (700, 2, 12), (128, 2, 2), (129, 2, 4),
                                                     (3, 4, 3), (700, 1, 11)])
def test_calls_are_spread_evenly_over_the_workers(n: int, workers: int, calls: int) -> None:
    texts = [f"text number {i} " + "word " * (i % 17) for i in range(n)]
    emb = HashingEmbedding(dim=16)
    with BatchEmbedder(emb, workers=workers, kind="thread", count_tokens=_words) as be:
        got = be.embed(texts)
    assert got.batches == calls  # a multiple of the workers (when there are texts enough), of even sizes
    assert got.vectors == embed_texts(emb, texts, count_tokens=_words).vectors


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_items must be > 0"):
        BatchLimits(max_items=0)
    with pytest.raises(ConfigurationError, match="embed workers must be a positive integer or 'auto', got 0"):
        BatchEmbedder(HashingEmbedding(), workers=0)
    with pytest.raises(ConfigurationError, match="got 'many'"):
        BatchEmbedder(HashingEmbedding(), workers="many")
    with pytest.raises(ConfigurationError, match="kind must be"):
        BatchEmbedder(HashingEmbedding(), kind="fibers")


def test_the_index_refuses_the_same_worker_settings(tmp_path) -> None:  # noqa: ANN001
    from llmc_splitters.retrieval import CodeIndex

    for bad in (0, True, "Auto"):
        with pytest.raises(ConfigurationError, match=f"embed_workers must be a positive integer or 'auto', got {bad!r}"):
            CodeIndex(tmp_path / "idx", embed_workers=bad)
    assert CodeIndex(tmp_path / "idx", embed_workers="auto").embed_workers == "auto"


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 300), max_size=60), max_items=st.integers(1, 20),
       max_batch=st.one_of(st.none(), st.integers(1, 600)), max_text=st.one_of(st.none(), st.integers(1, 400)))
def test_plan_covers_every_text_once_within_limits(lengths, max_items, max_batch, max_text) -> None:
    limits = BatchLimits(max_items=max_items, max_batch_tokens=max_batch, max_text_tokens=max_text)
    batches, failures = plan_batches(lengths, limits)
    seen = [i for b in batches for i in b] + [f.index for f in failures]
    assert sorted(seen) == list(range(len(lengths)))
    for b in batches:
        assert 1 <= len(b) <= max_items
        assert max_batch is None or sum(lengths[i] for i in b) <= max_batch
        assert max_text is None or all(lengths[i] <= max_text for i in b)
        assert [lengths[i] for i in b] == sorted((lengths[i] for i in b), reverse=True)
    for f in failures:
        assert (max_batch is not None and lengths[f.index] > max_batch) or (
            max_text is not None and lengths[f.index] > max_text)
