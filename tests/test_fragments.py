"""No leaf of a few tokens that cannot stand alone (issue 22, item 9).

``CodeTextSplitter`` (and the chunker under it) emitted chunks such as ``class Typer:\\n``,
``class X(click.core.Option):\\n``, ``main()\\n``, ``r\\"\\"\\"`` and a lone ``}``: packing kept a definition alone
and imports apart from other statements, so the header of a split class before its first method, the closing
brace after the last one, a statement after the imports and the closing quotes of a split docstring were leaves of
their own. Such a fragment now joins its neighbour in the same scope unless the budget forbids it; the leaves still
reproduce the source exactly.
"""

from __future__ import annotations

import sysconfig
import textwrap
from pathlib import Path

import pytest

from helpers import assert_valid_spans
from llmc_splitters import ASTChunker
from llmc_splitters.chunking.tokens import resolve_tokenizer

STDLIB = Path(sysconfig.get_paths()["stdlib"])
TOK = resolve_tokenizer()


def _method(name: str, n: int) -> str:
    lines = "".join(f"        value_{i} = self._options.get({name!r}_{i}, default)\n" for i in range(n))
    return (f"    def {name}(self, key: str, default: object = None) -> dict:\n"
            f"        \"\"\"Look {name} up in the options.\"\"\"\n{lines}        return locals()\n\n")


TYPER_LIKE = (
    "import click\n\nfrom .core import TyperCommand\n\n\n"
    "class Typer:\n" + _method("command", 6) + _method("callback", 6) + _method("add_typer", 6)
    + "\n\nclass OptionInfo(click.core.Option):\n" + _method("resolve", 6) + _method("shell_complete", 6)
    + "\n\ndef main() -> None:\n    app = Typer()\n    app()\n\n\nmain()\n"
)

PARAM_DOC = (
    "class Parameter:\n"
    "    r\"\"\"A parameter to a command comes in two versions: they are either\n"
    + "".join(f"    :param option_{i}: what the option {i} of the parameter does, with its default and type.\n"
              for i in range(40))
    + "    \"\"\"\n\n    param_type_name = \"parameter\"\n\n" + _method("get_default", 6)
)

STORE_JS = textwrap.dedent(
    """\
    export class Store {
    """
) + "".join(
    f"  action{i}(payload, meta = {{}}) {{\n"
    + "".join(f"    this.state.field{i}_{j} = payload.value{j} ?? meta.fallback{j};\n" for j in range(5))
    + "    return this.state;\n  }\n\n"
    for i in range(4)
) + "}\n"


def _fragments(spans, budget: int) -> list[tuple[str, bool, bool]]:
    """Leaves of at most 10 tokens that are neither definitions nor imports, and whether joining each to its
    same-parent neighbour before / after would fit the budget."""
    out = []
    for i, s in enumerate(spans):
        if s.token_count > 10 or s.kind in ("imports", "comment", "function", "method", "class") \
                and "split" not in s.metadata or not s.text.strip():
            continue
        if all(line.lstrip().startswith(("#", "//")) for line in s.text.splitlines() if line.strip()):
            continue  # a comment (a section marker) stands alone
        prev = spans[i - 1] if i > 0 and spans[i - 1].parent_id == s.parent_id else None
        nxt = spans[i + 1] if i + 1 < len(spans) and spans[i + 1].parent_id == s.parent_id else None
        # Imports stay their own leaf; a whole definition takes only what trails it.
        fits_prev = prev is not None and prev.kind != "imports" and TOK.count(prev.text + s.text) <= budget
        fits_next = nxt is not None and nxt.kind not in ("imports", "function", "method", "class") \
            and TOK.count(s.text + nxt.text) <= budget
        out.append((s.text, fits_prev, fits_next))
    return out


@pytest.mark.parametrize("budget", [150, 256, 512])
@pytest.mark.parametrize(("path", "text"), [("typer_like.py", TYPER_LIKE), ("params.py", PARAM_DOC),
                                            ("store.js", STORE_JS)])
def test_no_fragment_stands_alone_when_its_neighbour_has_room(path, text, budget):
    spans = ASTChunker(max_tokens=budget).chunk(text, path=path)
    assert_valid_spans(text, spans, budget)  # lossless, in order, within the budget
    stuck = [(t, p, n) for t, p, n in _fragments(spans, budget) if p or n]
    assert stuck == []
    texts = [s.text.strip() for s in spans]
    for lone in ("class Typer:", "class OptionInfo(click.core.Option):", "main()", "}", '"""', 'r"""', "app()"):
        assert lone not in texts, (lone, budget)


def test_the_class_header_goes_with_its_first_member_and_the_brace_with_the_last():
    spans = ASTChunker(max_tokens=256).chunk(TYPER_LIKE, path="typer_like.py")
    first = next(s for s in spans if s.text.startswith("class Typer:"))
    assert "def command(self" in first.text and first.name == "Typer" and first.kind == "class"
    assert any(sym["name"] == "Typer.command" for sym in first.metadata["symbols"])
    js = ASTChunker(max_tokens=256).chunk(STORE_JS, path="store.js")
    assert js[-1].text.rstrip().endswith("return this.state;\n  }\n\n}") and "action3(" in js[-1].text


def test_the_splitter_emits_no_chunk_of_a_few_tokens_on_real_modules():
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document

    from llmc_splitters.langchain import CodeTextSplitter

    splitter = CodeTextSplitter(chunk_size=256)
    for rel in ("argparse.py", "json/decoder.py", "textwrap.py", "sched.py"):
        text = (STDLIB / rel).read_text()
        docs = splitter.split_documents([Document(page_content=text, metadata={"source": rel})])
        assert "".join(d.page_content for d in docs) == text
        spans = ASTChunker(max_tokens=256).chunk(text, path=rel)
        assert [(t, p, n) for t, p, n in _fragments(spans, 256) if p or n] == [], rel
        assert not [d.page_content for d in docs if d.page_content.strip() in ("}", '"""', 'r"""', "main()")]
