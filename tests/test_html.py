"""HTML (and Vue/Svelte components): <script> and <style> chunked as JavaScript and CSS in place, markup by elements."""

from __future__ import annotations

import pathlib
import re

import pytest
import tree_sitter_language_pack
from helpers import assert_valid_spans, assert_valid_tree

from llmc_splitters import ASTChunker, detect_language

DATA = pathlib.Path(__file__).parent / "data"
PAGE = (DATA / "html" / "dashboard.html").read_text(encoding="utf-8")
VUE = (DATA / "html" / "StationCard.vue").read_text(encoding="utf-8")
SVELTE = (DATA / "html" / "TideChart.svelte").read_text(encoding="utf-8")
FILES = {"dashboard.html": PAGE, "StationCard.vue": VUE, "TideChart.svelte": SVELTE}


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def nodes(text: str, grammar: str, types: tuple[str, ...]):
    """(type, start, end, sized_from, sized_end) of every node of ``types`` in ``text`` parsed with ``grammar``.

    ``[start, end)`` is the node's own text, trailing whitespace trimmed: what must stay in one leaf. Its size is
    measured generously over ``[sized_from, sized_end)``, from the start of its line (when only indentation
    precedes it) through the blank lines after it, because the chunker cuts at line starts (the stricter claim
    is pinned by test_markdown.py::test_block_that_fits_alone_but_not_with_its_blank_line).
    """
    data = text.encode("utf-8")
    out, stack = [], [tree_sitter_language_pack.get_parser(grammar).parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type in types:
            start, end = node.start_byte, node.end_byte
            while end > start and data[end - 1 : end] in (b" ", b"\t", b"\n", b"\r"):
                end -= 1  # a void element (<meta>) ends after the next line's indentation
            line_start = data.rfind(b"\n", 0, start) + 1
            sized_from = line_start if not data[line_start:start].strip() else start
            sized_end = re.compile(rb"[ \t]*(?:\n[ \t]*)*").match(data, end).end()
            out.append((node.type, start, end, sized_from, sized_end))
        stack.extend(node.children)
    return out


def element_range(text: str, tag: str) -> tuple[int, int]:
    start = text.index(f"<{tag}")
    return start, text.index(f"</{tag}>", start) + len(f"</{tag}>")


def covering(spans, start: int, end: int):
    return [s for s in spans if s.end_byte > start and s.start_byte < end]


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("budget", [8, 24, 64, 128, 300, 4096])
def test_lossless_within_budget_and_tree_valid(name, budget, cl100k):
    text = FILES[name]
    tree = ASTChunker(max_tokens=budget).chunk_tree(text, path=name)
    assert_valid_spans(text, tree.leaves, budget, cl100k.count)
    assert_valid_tree(text, tree)


def test_file_kinds_are_detected():
    assert detect_language("a/index.html") == "html" and detect_language("b.htm") == "html"
    assert detect_language("StationCard.vue") == "vue" and detect_language("TideChart.svelte") == "svelte"


@pytest.mark.parametrize("budget", [48, 64, 96])
def test_long_script_is_chunked_as_javascript_with_function_spans_and_page_lines(budget):
    tree = ASTChunker(max_tokens=budget).chunk_tree(PAGE, path="dashboard.html")
    start, end = element_range(PAGE, "script")
    inside = [s for s in tree.leaves if start <= s.start_byte and s.end_byte <= end + 1]
    assert len(inside) > 1 and {s.language for s in inside} == {"javascript"}
    for name in ("formatDuration", "renderRow", "refresh"):
        first = [s for s in tree.leaves if s.name == name][0]
        assert first.kind == "function" and first.language == "javascript"
        assert first.start_line == line_of(PAGE, f"function {name}(") or (
            name == "refresh" and first.start_line == line_of(PAGE, "async function refresh(")
        )
        assert first.text.lstrip().startswith(("function", "async function"))
    # The script is a `code` span (language javascript) under the page; its functions hang below it.
    fn = [s for s in tree.leaves if s.name == "renderRow"][0]
    code = next(a for a in tree.ancestors(fn) if a.kind == "code")
    assert code.metadata["code_language"] == "javascript" and code.text.lstrip().startswith("<script>")
    assert tree.ancestors(fn)[-1].kind == "document"


def test_long_style_is_chunked_as_css_rule_by_rule(cl100k):
    start, end = element_range(PAGE, "style")
    # The style element's lines, blanked outside it, parsed as CSS: rule offsets are the page's own.
    css = "".join(c if start <= i < end or c == "\n" else " " for i, c in enumerate(PAGE)).replace("<style>", "       ")
    css = css.replace("</style>", "        ")
    rules = [(a, b, f, g) for _, a, b, f, g in nodes(css, "css", ("rule_set", "media_statement"))]
    assert len(rules) >= 5
    data = PAGE.encode("utf-8")
    for budget in (24, 48, 64, 100):
        spans = ASTChunker(max_tokens=budget).chunk(PAGE, path="dashboard.html")
        inside = [s for s in spans if start <= s.start_char and s.end_char <= end + 1]
        assert len(inside) > 1 and {s.language for s in inside} == {"css"}
        for a, b, f, g in rules:
            if cl100k.count(data[f:g].decode("utf-8")) <= budget:
                assert len(covering(spans, a, b)) == 1, (budget, data[a:b][:40])


@pytest.mark.parametrize("budget", [250, 300, 1000])
def test_script_and_style_that_fit_are_never_split(budget, cl100k):
    spans = ASTChunker(max_tokens=budget).chunk(PAGE, path="dashboard.html")
    for tag in ("script", "style"):
        start, end = element_range(PAGE, tag)
        assert cl100k.count(PAGE[start:end]) <= budget
        (leaf,) = covering(spans, start, end)  # ASCII page: chars are bytes
        assert f"<{tag}>" in leaf.text and f"</{tag}>" in leaf.text


def test_script_that_stands_alone_is_a_javascript_code_span():
    spans = ASTChunker(max_tokens=251).chunk(PAGE, path="dashboard.html")
    start, end = element_range(PAGE, "script")
    (leaf,) = covering(spans, start, end)
    assert leaf.kind == "code" and leaf.metadata["code_language"] == "javascript"
    assert leaf.text.lstrip().startswith("<script>") and leaf.text.rstrip().endswith("</script>")


def test_script_followed_by_closing_tags_is_still_labeled_javascript():
    spans = ASTChunker(max_tokens=300).chunk(PAGE, path="dashboard.html")
    start, end = element_range(PAGE, "script")
    (leaf,) = covering(spans, start, end)
    assert leaf.metadata.get("code_language") == "javascript"


COUNTER = (
    "<!doctype html>\n<html>\n<body>\n"
    "<p>This page shows a counter. Each click on the button below adds one to it, and the new value is shown.</p>\n"
    "<script>\n"
    "function increment(counter) {\n  counter.value += 1;\n  return counter.value;\n}\n"
    "</script>\n"
    "<footer><p>Part of the widget gallery. Every widget is plain HTML with one small script.</p></footer>\n"
    "</body>\n</html>\n"
)


def test_script_with_one_function_is_named_after_it():
    spans = ASTChunker(max_tokens=40).chunk(COUNTER, path="counter.html")
    assert_valid_spans(COUNTER, spans, 40)
    (leaf,) = [s for s in spans if "increment" in s.text]
    assert leaf.kind == "function" and leaf.name == "increment"
    assert leaf.metadata["code_language"] == "javascript"
    assert leaf.start_line == line_of(COUNTER, "<script>") and leaf.text.startswith("<script>")
    (sym,) = [x for x in leaf.metadata["symbols"] if x["name"] == "increment"]
    def_line = line_of(COUNTER, "function increment")
    assert (sym["start_line"], sym["end_line"]) == (def_line, def_line + 3)


def test_function_of_an_over_budget_script_starts_on_its_own_line():
    spans = ASTChunker(max_tokens=20).chunk(COUNTER, path="counter.html")
    (leaf,) = [s for s in spans if s.name == "increment"]
    assert leaf.start_line == line_of(COUNTER, "function increment")


def test_markup_is_split_by_elements(cl100k):
    data = PAGE.encode("utf-8")
    sizes = {(a, b): cl100k.count(data[f:g].decode("utf-8")) for _, a, b, f, g in nodes(PAGE, "html", ("element",))}
    budgets = sorted({n + d for n in sizes.values() for d in (0, 1)} | {16, 32, 64})
    split = kept = 0
    for budget in budgets:
        spans = ASTChunker(max_tokens=budget).chunk(PAGE, path="dashboard.html")
        for (a, b), n in sizes.items():
            if n <= budget:
                assert len(covering(spans, a, b)) == 1, (budget, data[a:b][:50])
                kept += 1
            elif len(covering(spans, a, b)) > 1:
                split += 1
        # Markup leaves start between elements (at a tag or a line start), never inside a tag that fits.
        for s in spans:
            if s.language == "html" and s.start_byte and budget >= 48:
                assert PAGE[s.start_char - 1] == "\n" or s.text.lstrip().startswith("<"), (budget, s.text[:30])
    assert kept and split


@pytest.mark.parametrize(("name", "text"), [("StationCard.vue", VUE), ("TideChart.svelte", SVELTE)])
def test_components_chunk_script_as_javascript_and_style_as_css(name, text):
    tree = ASTChunker(max_tokens=48).chunk_tree(text, path=name)
    langs = {s.language for s in tree.leaves}
    assert {"javascript", "css"} <= langs and langs & {"vue", "svelte"}
    fn = "formatLevel" if name.endswith(".vue") else "points"
    first = [s for s in tree.leaves if s.name == fn][0]
    assert first.kind == "function" and first.language == "javascript"
    assert first.start_line == line_of(text, f"function {fn}(")
    style_start = text.index("<style")
    assert {s.language for s in tree.leaves if s.start_char >= style_start} == {"css"}


TS_COMPONENT = """<template>
  <div class="card">{{ label }}</div>
</template>

<script setup lang="ts">
import { computed } from "vue";

interface Reading {
  station: string;
  level: number;
}

const props = defineProps<{ reading: Reading }>();

function describe(r: Reading): string {
  const rounded: number = Math.round(r.level * 100) / 100;
  return `${r.station}: ${rounded} m above chart datum, measured ${new Date().toISOString()}`;
}

const label = computed<string>(() => describe(props.reading));
</script>

<style scoped lang="scss">
.card {
  .title { font-weight: bold; }
}
</style>
"""


@pytest.mark.parametrize("budget", [24, 48])
def test_lang_attribute_picks_the_embedded_language(budget, cl100k):
    # <script lang="ts"> is TypeScript (its interface is a definition of its own), <style lang="scss"> is SCSS.
    # Before the attribute was read, the script was parsed as JavaScript: no interface, syntax errors.
    tree = ASTChunker(max_tokens=budget).chunk_tree(TS_COMPONENT, path="Reading.vue")
    assert_valid_spans(TS_COMPONENT, tree.leaves, budget, cl100k.count)
    script = element_range(TS_COMPONENT, "script")
    style = element_range(TS_COMPONENT, "style")
    assert {s.language for s in covering(tree.leaves, *script)} == {"typescript"}
    # The style fits: one markup leaf that records the language of the code it holds.
    assert {s.metadata.get("code_language") for s in covering(tree.leaves, *style)} == {"scss"}
    interface = [s for s in tree.leaves if s.name == "Reading"]
    assert [s.kind for s in interface] == ["interface"]
    assert interface[0].start_line == line_of(TS_COMPONENT, "interface Reading")
    assert any(s.name == "describe" and s.kind == "function" for s in tree.spans)


def test_script_without_lang_stays_javascript():
    page = '<script type="module">\nexport function twice(n) {\n  return n * 2;\n}\n</script>\n'
    spans = ASTChunker(max_tokens=16).chunk(page, language="html")
    assert {s.language for s in spans if "twice" in s.text} == {"javascript"}
