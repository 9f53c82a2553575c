"""The tokenizer sees each file about once: a file 10x longer costs about 10x (counted, never timed)."""

from __future__ import annotations

from helpers import DATA

from llmc_splitters import ASTChunker
from llmc_splitters.chunking.tokens import resolve_tokenizer


class CountingTokenizer:
    """Wraps the real cl100k tokenizer and counts the characters handed to it."""

    def __init__(self) -> None:
        self.inner = resolve_tokenizer()
        self.name = "counting"
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return self.inner.count(text)

    def cut(self, text: str, max_tokens: int) -> int:
        self.chars += min(len(text), max_tokens * 8)
        return self.inner.cut(text, max_tokens)


def cost(text: str, budget: int, language: str) -> int:
    tok = CountingTokenizer()
    ASTChunker(max_tokens=budget, tokenizer=tok).chunk(text, language=language)
    return tok.chars


def test_python_cost_grows_linearly():
    base = (DATA / "python" / "textwrap.py").read_text(encoding="utf-8")
    for budget in (64, 512):
        one = cost(base, budget, "python")
        ten = cost(base * 10, budget, "python")
        assert 8 * one <= ten <= 12 * one, (budget, one, ten)
        # Each character reaches the tokenizer a small, bounded number of times (near-budget nodes are counted
        # exactly at each level where the decision is close; everything else is decided from byte sizes).
        assert one <= 4 * len(base)


def test_deeply_nested_and_long_function_stay_linear():
    body = "".join(f"    x{i} = f(x{i - 1})\n" for i in range(1, 300))
    fn = f"def big(x0):\n{body}    return x299\n\n"
    one = cost(fn, 64, "python")
    ten = cost(fn * 10, 64, "python")
    assert 8 * one <= ten <= 12 * one
    assert one <= 4 * len(fn)
