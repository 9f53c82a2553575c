"""Property tests (Hypothesis): lossless, within budget, offsets consistent, parents contain children."""

from __future__ import annotations

import pytest
from helpers import assert_valid_spans, assert_valid_tree
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmc_splitters import ASTChunker, UnsupportedInputError
from llmc_splitters.chunking.inputs import text_binary_reason

_FRAGMENTS = {
    "python": [
        "import os\n", "from typing import Any\n", "X = 1\n", "\n", "# comment\n", "@decorator\n",
        "def f(a, b):\n    return a + b\n", "class C(Base):\n    \"\"\"Doc.\"\"\"\n", "    def m(self):\n        pass\n",
        "    x = 'str'\n", "if x:\n    y = [1, 2,\n         3]\n", "\t\tpass\n", "def broken(:\n", "'''unterminated\n",
        "s = 'caf\u00e9 \u2615 \U0001f600'\n", "\r\n", "lambda: (yield)\n", "    " * 20 + "deep()\n",
    ],
    "javascript": [
        "import x from 'y';\n", "const f = (a) => {\n  return a;\n};\n", "class A {\n  m() { return 1; }\n}\n",
        "/** doc */\n", "function g() {\n", "}\n", "export default {};\n", "let s = `tpl ${x}`;\n", "// c\n",
        "if (a) { b(); } else { c(); }\n", "{{{{\n", "'\u00fcnicode';\n", "\n",
    ],
    "bash": [
        "#!/bin/bash\n", "f() {\n  echo hi\n}\n", "function g {\n  ls\n}\n", "cat <<EOF\nbody\nEOF\n", "x=1\n",
        "if [ -f a ]; then\n  echo a\nfi\n", "# comment\n", "\n", "case $1 in\n  a) echo ;;\nesac\n", "echo \"$((1+2))\n",
    ],
    "markdown": [
        "# Title\n", "## Sub\n", "Some prose here.\n", "\n", "```python\ndef f():\n    pass\n```\n", "| a | b |\n|---|---|\n| 1 | 2 |\n",
        "- item\n  - nested\n", "````\n```\ninner\n```\n````\n", "---\ntitle: x\n---\n", "> quote\n", "<div>\nhtml\n</div>\n",
    ],
}

budgets = st.sampled_from([1, 2, 3, 5, 8, 16, 32, 64, 128, 512, 2048])
counters = st.sampled_from([None, len, lambda t: len(t.split())])


@st.composite
def sources(draw):
    lang = draw(st.sampled_from(sorted(_FRAGMENTS)))
    parts = draw(st.lists(st.sampled_from(_FRAGMENTS[lang]), max_size=25))
    noise = draw(st.text(max_size=20))
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), noise)
    return lang, "".join(parts)


def _count(tokenizer, chunker):
    return chunker.tokenizer.count


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=sources(), budget=budgets, tokenizer=counters)
@example(src=("python", "\ufeffdef f():\r\n\treturn 1\r\n"), budget=1, tokenizer=None)
@example(src=("python", "x = '\udcff'\n"), budget=2, tokenizer=None)
@example(src=("markdown", "```\n" + "a\n" * 50 + "```\n"), budget=8, tokenizer=None)
@example(src=("bash", "\U000e0000"), budget=1, tokenizer=None)
def test_grammar_shaped_sources(src, budget, tokenizer):
    lang, text = src
    chunker = ASTChunker(max_tokens=budget, tokenizer=tokenizer)
    if text_binary_reason(text):  # the noise made it look like binary data handed over as text
        with pytest.raises(UnsupportedInputError):
            chunker.chunk_tree(text, language=lang)
        return
    tree = chunker.chunk_tree(text, language=lang)
    assert_valid_spans(text, tree.leaves, budget, chunker.tokenizer.count)
    if text:
        assert_valid_tree(text, tree)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=400), budget=budgets, lang=st.sampled_from(["python", "javascript", "bash", "text", "go"]))
def test_arbitrary_text(text, budget, lang):
    """Any ``str`` is chunked losslessly, unless it looks like binary data handed over as text (NUL characters,
    mostly control characters): that, and only that, is refused with our error."""
    chunker = ASTChunker(max_tokens=budget)
    if text_binary_reason(text):
        with pytest.raises(UnsupportedInputError):
            chunker.chunk(text, language=lang)
        return
    spans = chunker.chunk(text, language=lang)
    assert_valid_spans(text, spans, budget, chunker.tokenizer.count)
