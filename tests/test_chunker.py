"""Behaviour of ASTChunker on real code in each carefully handled language."""

from __future__ import annotations

import json

import pytest
from helpers import DATA, GO_PROGRAM, corpus_files
from helpers import assert_valid_spans, assert_valid_tree

from llmc_splitters import ASTChunker, ConfigurationError, UnsupportedInputError, detect_language
from llmc_splitters.chunking.dispatch import document_trees


def read(rel: str) -> str:
    return (DATA / rel).read_bytes().decode("utf-8")


def by_name(spans, name):
    return [s for s in spans if s.name == name]


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
@pytest.mark.parametrize("budget", [16, 64, 256, 1024])
def test_corpus_lossless_and_within_budget(path, budget, cl100k):
    text = path.read_bytes().decode("utf-8")
    tree = ASTChunker(max_tokens=budget).chunk_tree(text, path=str(path))
    docs = document_trees(tree)
    if path.suffix == ".ipynb":  # lossless per cell: each cell is a document of its own
        cells = json.loads(text)["cells"]
        assert [d.root.path for d in docs] == [f"{path}#cell{i}" for i, c in enumerate(cells) if c["source"]]
        assert tree.root.text == text and tree.root.kind == "notebook"
    else:
        assert docs == [tree] and tree.root.text == text
    for doc in docs:
        assert_valid_spans(doc.root.text, doc.leaves, budget, cl100k.count)
        assert_valid_tree(doc.root.text, doc)


def test_python_definitions_are_atomic_spans():
    text = read("python/json_decoder.py")
    spans = ASTChunker(max_tokens=1024).chunk(text, path="json/decoder.py")
    kinds = {(s.kind, s.name) for s in spans}
    assert ("function", "_decode_uXXXX") in kinds
    assert ("class", "JSONDecodeError") in kinds
    # Imports (with the module docstring above them) form their own span at the top.
    assert spans[0].kind == "imports" and spans[0].text.startswith('"""Implementation of JSONDecoder')
    assert "import re" in spans[0].text
    # No span holds two top-level functions: definitions are never packed together.
    for s in spans:
        tops = [sym for sym in s.metadata.get("symbols", []) if "." not in sym["name"]]
        assert len(tops) <= 1, (s.name, tops)


def test_oversize_class_splits_into_methods_with_parent_links():
    text = read("python/json_decoder.py")
    tree = ASTChunker(max_tokens=256).chunk_tree(text, path="json/decoder.py")
    cls = [s for s in tree.spans if s.kind == "class" and s.name == "JSONDecoder" and not tree.is_leaf(s)]
    assert len(cls) == 1, "the JSONDecoder class is too big for 256 tokens and must be a structural span"
    children = tree.children(cls[0])
    names = {c.name for c in children}
    assert {"JSONDecoder.__init__", "JSONDecoder.decode", "JSONDecoder.raw_decode"} <= names
    raw = by_name(tree.leaves, "JSONDecoder.raw_decode")
    assert len(raw) == 1 and raw[0].kind == "method"
    assert raw[0].text.lstrip().startswith("def raw_decode(self, s, idx=0):")
    assert raw[0].metadata["docstring"].startswith('"""Decode a JSON document from ``s``')
    assert raw[0].metadata["context"] == "class JSONDecoder(object):"
    assert raw[0].metadata["breadcrumb"] == "JSONDecoder > raw_decode"
    assert tree.parent(raw[0]).id == cls[0].id
    assert tree.parent(cls[0]).kind == "module"
    # The class header piece carries the class name and the class docstring.
    header = next(c for c in children if c.start_byte == cls[0].start_byte)
    assert header.kind == "class" and "Simple JSON" in header.text


def test_oversize_function_split_along_statements_and_keeps_signature_context():
    body = "\n".join(f"    value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 80))
    text = f"def long_function(value_0):\n    \"\"\"Long.\"\"\"\n{body}\n    return value_79\n"
    tree = ASTChunker(max_tokens=128).chunk_tree(text, path="m.py")
    leaves = tree.leaves
    assert len(leaves) > 3
    assert_valid_spans(text, leaves, 128)
    assert leaves[0].kind == "function" and leaves[0].text.startswith("def long_function(value_0):")
    for piece in leaves[1:]:
        assert piece.name == "long_function" and piece.metadata["split"]
        assert piece.metadata["context"] == "def long_function(value_0):"
        # Pieces are cut at statement (line) boundaries, never inside a line.
        assert piece.text.startswith("    ") and piece.start_char > 0 and text[piece.start_char - 1] == "\n"
    assert [p.metadata["part"] for p in leaves] == list(range(1, len(leaves) + 1))


def test_decorators_and_comments_stay_with_their_definition():
    text = "import functools\n\n\n# Cache the answer.\n@functools.cache\ndef answer():\n    return 42\n"
    spans = ASTChunker(max_tokens=64).chunk(text, path="m.py")
    fn = by_name(spans, "answer")[0]
    assert fn.text.startswith("# Cache the answer.\n@functools.cache\ndef answer():")
    assert fn.metadata["decorators"] == ["@functools.cache"]
    assert fn.start_line == 4 and fn.end_line == 7


def test_javascript_functions_classes_and_arrow_functions():
    text = read("javascript/events.js")
    spans = ASTChunker(max_tokens=512).chunk(text, path="events.js")
    retry = by_name(spans, "retry")[0]
    assert retry.kind == "function" and retry.text.startswith("/**\n * Retry an async operation")
    assert "export async function retry" in retry.text
    assert retry.metadata["docstring"].startswith("/**")
    bus = by_name(spans, "Bus")[0]
    assert bus.kind == "class"
    assert {s["name"] for s in bus.metadata["symbols"]} >= {"Bus.on", "Bus.emitAll", "Bus.resolve"}
    assert spans[0].kind == "imports"
    small = ASTChunker(max_tokens=64).chunk(text, path="events.js")
    on = by_name(small, "Bus.on")[0]
    assert on.kind == "method" and on.text.lstrip().startswith("/** Register a handler")
    resolve = by_name(small, "Bus.resolve")[0]
    assert resolve.kind == "method" and "path.join" in resolve.text


def test_typescript_interfaces_enums_namespaces_and_decorated_class():
    text = read("typescript/router.ts")
    spans = ASTChunker(max_tokens=512).chunk(text, path="router.ts")
    kinds = {s.name: s.kind for s in spans}
    assert kinds["Route"] == "interface"
    assert kinds["Middleware"] == "type"
    assert kinds["Method"] == "enum"
    assert kinds["Router"] == "class"
    assert kinds["Routes"] == "module"
    router = by_name(spans, "Router")[0]
    assert router.text.startswith("@sealed\nexport class Router")
    small = ASTChunker(max_tokens=80).chunk(text, path="router.ts")
    handle = by_name(small, "Router.handle")
    assert handle and handle[0].kind == "method"


def test_tsx_components():
    text = read("typescript/panel.tsx")
    spans = ASTChunker(max_tokens=256).chunk(text, path="panel.tsx")
    assert by_name(spans, "Panel")[0].kind == "function"
    assert by_name(spans, "Empty")[0].kind == "function"
    assert spans[0].language == "tsx"


def test_bash_functions_both_syntaxes_and_heredoc_kept_whole():
    text = read("bash/deploy.sh")
    spans = ASTChunker(max_tokens=512).chunk(text, path="deploy.sh")
    assert by_name(spans, "log")[0].kind == "function"
    assert by_name(spans, "build_release")[0].text.startswith("function build_release {")
    upload = by_name(spans, "upload")[0]
    assert upload.text.startswith("# Copy the release") and "REMOTE\n}" in upload.text
    for budget in (24, 48, 96):
        leaves = ASTChunker(max_tokens=budget).chunk(text, path="deploy.sh")
        assert_valid_spans(text, leaves, budget)
        heredoc = [s for s in leaves if "<<REMOTE" in s.text]
        if ASTChunker(max_tokens=budget).count_tokens(text[text.index("ssh "):text.index("REMOTE\n}") + 7]) <= budget:
            assert heredoc and "tar -xzf" in heredoc[0].text, "a heredoc that fits must not be cut"
    # `case` and `for` blocks are grouped whole.
    leaves = ASTChunker(max_tokens=64).chunk(text, path="deploy.sh")
    case = [s for s in leaves if 'case "${1:-}" in' in s.text][0]
    assert "esac" in case.text


def test_syntax_errors_never_crash_and_stay_lossless():
    text = read("python/broken.py")
    for budget in (4, 16, 64):
        spans = ASTChunker(max_tokens=budget).chunk(text, path="broken.py")
        assert_valid_spans(text, spans, budget)


def test_crlf_tabs_non_ascii_lines_and_offsets():
    text = read("python/crlf_tabs.py")
    assert "\r\n" in text and "\t" in text
    spans = ASTChunker(max_tokens=8).chunk(text, path="x.py")
    assert_valid_spans(text, spans, 8)
    assert any("café ☕" in s.text for s in spans)
    last = spans[-1]
    assert last.end_byte == len(text.encode()) and last.end_char == len(text)


def test_giant_literal_is_cut_by_lines_then_tokens_and_flagged():
    lines = "\n".join("    'item-%d-with-some-padding'," % i for i in range(400))
    text = f"DATA = [\n{lines}\n]\nBLOB = '{'x' * 20000}'\n"
    spans = ASTChunker(max_tokens=100).chunk(text, path="d.py")
    assert_valid_spans(text, spans, 100)
    assert any(s.metadata.get("fallback") == "tokens" for s in spans), "the one-line blob must be cut by tokens"


def test_empty_and_whitespace_only():
    assert ASTChunker().chunk("", path="e.py") == []
    text = "\n\n   \n"
    spans = ASTChunker(max_tokens=4).chunk(text, path="e.py")
    assert_valid_spans(text, spans, 4)


def test_tokenizer_variants(counter):
    spec, count = counter
    text = read("javascript/events.js")
    spans = ASTChunker(max_tokens=60, tokenizer=spec).chunk(text, path="events.js")
    assert_valid_spans(text, spans, 60, count)


def test_huggingface_style_tokenizer_object():
    class FakeHF:  # the shape of a transformers tokenizer: encode(text, add_special_tokens=False) -> ids
        name_or_path = "fake"

        def encode(self, text, add_special_tokens=False):
            return list(text.encode())[::3]

        def decode(self, ids):
            return ""

    text = read("python/textwrap.py")
    chunker = ASTChunker(max_tokens=100, tokenizer=FakeHF())
    spans = chunker.chunk(text, path="textwrap.py")
    assert_valid_spans(text, spans, 100, lambda t: len(t.encode()[::3]))


def test_language_detection_and_errors():
    assert detect_language("a/b.py") == "python"
    assert detect_language("x.tsx") == "tsx"
    assert detect_language("run", "#!/usr/bin/env bash\necho hi\n") == "bash"
    assert detect_language("tool", "#!/usr/bin/python3\n") == "python"
    assert detect_language("notes.unknownext") == "text"
    spans = ASTChunker(max_tokens=32).chunk("#!/bin/sh\nf() { echo hi; }\n", path="script")
    assert spans[-1].language == "bash" and spans[-1].kind == "function"
    with pytest.raises(UnsupportedInputError, match="unknown language"):
        ASTChunker().chunk("x", language="no-such-language")
    with pytest.raises(ConfigurationError, match="max_tokens must be a positive integer, got 0"):
        ASTChunker(max_tokens=0)
    with pytest.raises(ConfigurationError):
        ASTChunker(tokenizer=object()).chunk("x = 1\n", path="a.py")


def test_generic_language_path_finds_definitions():
    go = "package main\n\nimport \"fmt\"\n\n// Greet says hi.\nfunc Greet(name string) string {\n\treturn fmt.Sprintf(\"hi %s\", name)\n}\n\ntype Server struct {\n\tPort int\n}\n\nfunc (s *Server) Start() error {\n\treturn nil\n}\n"
    spans = ASTChunker(max_tokens=64).chunk(go, path="main.go")
    assert_valid_spans(go, spans, 64)
    greet = by_name(spans, "Greet")[0]
    assert greet.kind == "function" and greet.text.startswith("// Greet says hi.")
    assert any(s.name == "Server.Start" and s.kind == "method" for s in spans)
    rust = "use std::fmt;\n\npub struct P { x: i32 }\n\nimpl P {\n    pub fn new() -> Self { P { x: 0 } }\n}\n\nfn main() {\n    println!(\"{}\", 1);\n}\n"
    spans = ASTChunker(max_tokens=64).chunk(rust, path="main.rs")
    assert_valid_spans(rust, spans, 64)
    assert by_name(spans, "main")[0].kind == "function"

@pytest.mark.parametrize("budget", [40, 512])
def test_go_methods_are_named_by_their_receiver_type(budget):
    """Issue 37: Go methods were listed as ``eventLoop (function)``; a receiver makes them ``Program.eventLoop``
    methods, pointer, value and generic receivers alike, and a split method's pieces say so in their breadcrumb."""
    tree = ASTChunker(max_tokens=budget).chunk_tree(GO_PROGRAM, path="tea/tea.go")
    assert_valid_spans(GO_PROGRAM, tree.leaves, budget)
    kinds: dict[str, str] = {}
    for s in tree.spans:  # a split method first, then its pieces
        if s.name:
            kinds.setdefault(s.name, s.kind)
    assert kinds["Program.eventLoop"] == kinds["Program.Send"] == kinds["List.Len"] == "method"
    assert kinds["NewProgram"] == "function"
    assert "eventLoop" not in kinds
    if budget == 40:  # eventLoop is split: every piece is placed under Program.eventLoop
        pieces = [s for s in tree.leaves if s.name == "Program.eventLoop"]
        assert len(pieces) > 1 and all(s.metadata["breadcrumb"] == "Program.eventLoop" for s in pieces)


def test_plain_text_paragraphs():
    text = "\n\n".join(f"Paragraph {i}. " + "Some words here. " * 20 for i in range(10))
    spans = ASTChunker(max_tokens=120).chunk(text, path="notes.txt")
    assert_valid_spans(text, spans, 120)
    assert all(s.language == "text" for s in spans)
    # Cuts fall between paragraphs when a paragraph fits.
    for s in spans[:-1]:
        assert s.text.endswith("\n\n")


def test_span_ids_are_deterministic_and_unique():
    text = read("python/textwrap.py")
    a = ASTChunker(max_tokens=128).chunk_tree(text, path="textwrap.py")
    b = ASTChunker(max_tokens=128).chunk_tree(text, path="textwrap.py")
    assert [s.id for s in a.spans] == [s.id for s in b.spans]
    assert len({s.id for s in a.spans}) == len(a.spans)
    c = ASTChunker(max_tokens=128).chunk_tree(text, path="other.py")
    assert not {s.id for s in a.spans} & {s.id for s in c.spans}


def test_symbol_and_line_lookup():
    text = read("python/json_decoder.py")
    tree = ASTChunker(max_tokens=256).chunk_tree(text, path="json/decoder.py")
    hit = tree.find_symbol("JSONDecoder.decode")
    assert hit and hit[0].text.lstrip().startswith("def decode(self, s")
    line = hit[0].start_line + 1
    assert tree.at_line(line).id == hit[0].id


@pytest.mark.parametrize("budget", [8, 16, 40, 400])
def test_a_namespace_that_is_the_whole_text_is_not_its_own_parent(budget: int) -> None:
    # The zoom into a hit chunks the hit's text alone: a TS namespace is then a module as wide as the file's
    # module. The two got one id, the namespace was its own parent and walking its ancestors never ended.
    text = ('export namespace Routes {\n  export function health(): Route {\n    return { method: "GET", '
            'pattern: "/health", handle: async () => ({ status: 200, body: "ok" }) };\n  }\n}')
    tree = ASTChunker(max_tokens=budget, analyze=True).chunk_tree(text, language="typescript", path="r.ts")
    assert_valid_tree(text, tree)
    ns = next(s for s in tree.spans if s.name == "Routes" and s.kind == "module" and s is not tree.root)
    assert ns.parent_id == tree.root.id != ns.id
    assert all(len(tree.ancestors(leaf)) <= len(tree.spans) for leaf in tree.leaves)
