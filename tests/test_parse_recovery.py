"""A syntax error that swallows the rest of a file (issue 37, item 2).

tree-sitter-bash (tree-sitter-language-pack 0.13) cannot read a quoted ``/`` in the pattern of a substitution,
``${theme/ '[GTK2/3]'}`` (valid Bash: it removes `` [GTK2/3]``), and reads the whole rest of the file as the shreds
of one ERROR node: no function after it is a ``function_definition``. The chunker parses again from the next
top-level definition, so every function after the error keeps its name, and says where the errors are
(``metadata["parse_errors"]``, ``["parse_resumed"]``, the index's report and the ``index`` summary).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmc_splitters import ASTChunker
from llmc_splitters.chunking._engine import parse
from tests.helpers import assert_valid_spans

BROKEN = "theme=\"${theme/ '[GTK2/3]'}\""

# A system-information script in the style of the real ones (neofetch-like): helpers, the function that trips the
# grammar, then the argument parser, a long table and the entry point.
SCRIPT = f"""#!/usr/bin/env bash
# sysinfo - print a short summary of this machine.
#
# Usage: sysinfo [--theme NAME] [--font NAME] [--no-color]

version=1.4.2
color=on

trim() {{
    set -f
    # shellcheck disable=2086
    set -- $*
    printf '%s\\n' "${{*//[[:space:]]/}}"
    set +f
}}

get_style() {{
    # Read the GTK2/GTK3 theme names, then shorten them.
    unset gtk2_theme gtk3_theme theme
    gtk2_theme="$(trim "$(grep -s gtk-theme-name ~/.gtkrc-2.0)")"
    gtk3_theme="$(trim "$(grep -s gtk-theme-name ~/.config/gtk-3.0/settings.ini)")"
    theme="${{gtk2_theme}} [GTK2], ${{gtk3_theme}} [GTK3]"
    if [[ "$gtk2_theme" == "$gtk3_theme" ]]; then
        {BROKEN}
        theme="${{theme/ '[GTK3]'}}"
    fi
}}

get_theme() {{
    name="gtk-theme-name"
    gsettings="gtk-theme"
    get_style
}}

get_font() {{
    name="gtk-font-name"
    gsettings="font-name"
    get_style
    font="$theme"
}}

# Parse the command line; unknown options are an error.
get_args() {{
    while [[ "$1" ]]; do
        case $1 in
            --theme) theme="$2"; shift ;;
            --font) font="$2"; shift ;;
            --no-color) color=off ;;
            --version) printf 'sysinfo %s\\n' "$version"; exit 0 ;;
            *) printf 'sysinfo: unknown option %s\\n' "$1" >&2; exit 2 ;;
        esac
        shift
    done
}}

get_distro_ascii() {{
    case $(uname -s) in
        Linux)
            read -r -d '' ascii_data <<'EOF'
   .--.
  |o_o |
  |:_/ |
 //   \\ \\
(|     | )
EOF
            ;;
        Darwin)
            read -r -d '' ascii_data <<'EOF'
     .:'
 __ :'__
.'`__`-'__``.
EOF
            ;;
        *) ascii_data="?" ;;
    esac
}}

print_info() {{
    [[ $color == on ]] && printf '\\e[1m'
    printf 'theme: %s\\nfont: %s\\n' "$theme" "$font"
    printf '%s\\n' "$ascii_data"
}}

main() {{
    get_args "$@"
    get_theme
    get_font
    get_distro_ascii
    print_info
}}

main "$@"
"""

AFTER = ["get_theme", "get_font", "get_args", "get_distro_ascii", "print_info", "main"]


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def _named(tree) -> dict[str, tuple[int, int]]:
    """Every definition the chunker named: its name -> (start line, end line)."""
    out = {}
    for span in tree.spans:
        for sym in span.metadata.get("symbols", []):
            out[sym["name"]] = (sym["start_line"], sym["end_line"])
        if span.kind == "function" and span.name and span.metadata.get("split") is None:
            out.setdefault(span.name, (span.start_line, span.end_line))
    return out


def test_the_grammar_really_loses_the_functions_after_the_construct():
    """The premise: parsed whole, the four functions after ``get_style`` are no function_definition (the parser
    finds its feet again, by chance, where the quotes pair up again)."""
    data = SCRIPT.encode()
    root = parse(data, "bash").root_node
    assert root.has_error
    found = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            found.add(data[node.child_by_field_name("name").start_byte:node.child_by_field_name("name").end_byte])
        stack.extend(node.children)
    assert not found & {name.encode() for name in AFTER[:4]}
    # The same script without that one line parses clean.
    assert not parse(SCRIPT.replace(BROKEN, "").encode(), "bash").root_node.has_error


@pytest.mark.parametrize("budget", [64, 200, 1024])
def test_every_function_after_the_error_keeps_its_name_and_the_spans_say_where_it_is(budget):
    tree = ASTChunker(max_tokens=budget).chunk_tree(SCRIPT, path="bin/sysinfo")
    assert_valid_spans(SCRIPT, tree.leaves, budget)
    named = _named(tree)
    for name in ["trim", *AFTER]:
        start = _line(SCRIPT, f"\n{name}() {{") + 1
        # A definition split into pieces starts with the comment right above it (get_args has one).
        assert name in named and start - 1 <= named[name][0] <= start, name
    error_line = _line(SCRIPT, BROKEN)
    md = tree.root.metadata
    assert md["parse_errors"][0] == error_line
    # The parse restarted at get_theme, the first definition after the error.
    assert md["parse_resumed"] == [_line(SCRIPT, "\nget_theme() {") + 1]
    # The leaf that holds the error says so; no other leaf does.
    flagged = [s for s in tree.leaves if "parse_errors" in s.metadata]
    assert flagged and all(s.start_line <= s.metadata["parse_errors"][0] <= s.end_line for s in flagged)
    assert any(error_line in s.metadata["parse_errors"] for s in flagged)
    assert all(s.end_line < _line(SCRIPT, "\nget_theme() {") + 1 for s in flagged)


def test_a_clean_file_says_nothing():
    tree = ASTChunker(max_tokens=128).chunk_tree(SCRIPT.replace(BROKEN, ""), path="sysinfo.sh")
    assert "parse_errors" not in tree.root.metadata and "parse_resumed" not in tree.root.metadata
    assert not any("parse_errors" in s.metadata for s in tree.leaves)


def test_the_same_recovery_serves_python():
    """The mechanism is the chunker's, not Bash's: an unclosed call at the top of a Python module."""
    funcs = "".join(f"def handler_{i}(request):\n    return respond(request, {i})\n\n\n" for i in range(12))
    text = "import os\n\nCONFIG = load(os.environ['APP_CONFIG'],\n\n\n" + funcs
    assert parse(text.encode(), "python").root_node.has_error
    tree = ASTChunker(max_tokens=64).chunk_tree(text, path="app/handlers.py")
    assert_valid_spans(text, tree.leaves, 64)
    named = _named(tree)
    assert all(f"handler_{i}" in named for i in range(12))
    assert tree.root.metadata["parse_errors"] == [3]


_NAME = st.from_regex(r"[a-z][a-z_]{2,10}", fullmatch=True)
_STATEMENT = st.sampled_from([
    'echo "$1"', "local count=0", "count=$((count + 1))", '[[ -f "$file" ]] && source "$file"',
    "printf '%s\\n' \"${list[@]}\"", 'for f in "$dir"/*; do\n        echo "$f"\n    done',
    'case $1 in\n        -h) usage ;;\n        *) run "$@" ;;\n    esac',
])


@settings(max_examples=60, deadline=None)
@given(names=st.lists(_NAME, min_size=2, max_size=8, unique=True), broken=st.integers(min_value=0),
       bodies=st.lists(st.lists(_STATEMENT, min_size=1, max_size=5), min_size=8, max_size=8),
       budget=st.sampled_from([24, 64, 512]))
def test_lossless_and_every_function_but_the_broken_one_is_named(names, broken, bodies, budget):
    broken %= len(names)
    parts = ["#!/bin/bash\nset -eu\n\n"]
    for i, name in enumerate(names):
        body = list(bodies[i])
        if i == broken:
            body.insert(len(body) // 2, BROKEN)
        parts.append(f"{name}() {{\n" + "".join(f"    {s}\n" for s in body) + "}\n\n")
    text = "".join(parts) + f'{names[0]} "$@"\n'
    tree = ASTChunker(max_tokens=budget).chunk_tree(text, path="gen.sh")
    assert "".join(s.text for s in tree.leaves) == text
    assert_valid_spans(text, tree.leaves, budget)
    named = _named(tree)
    for i, name in enumerate(names):
        if i != broken:
            assert name in named, (name, names, broken)
    assert tree.root.metadata["parse_errors"]


# ------------------------------------------------------------------------------------ the index and its doors


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    pytest.importorskip("tantivy")
    from llmc_splitters.retrieval import CodeRetriever

    root = tmp_path_factory.mktemp("repo")
    (root / "bin").mkdir()
    (root / "bin" / "sysinfo.sh").write_text(SCRIPT)
    (root / "bin" / "clean.sh").write_text(SCRIPT.replace(BROKEN, ""))
    r = CodeRetriever()
    report = r.index_directory(root)
    return r, report


def test_the_index_report_names_the_file_with_syntax_errors(indexed):
    _, report = indexed
    assert list(report.parse_errors) == ["bin/sysinfo.sh"]
    note = report.parse_errors["bin/sysinfo.sh"]
    assert re.match(rf"syntax errors? at lines? {_line(SCRIPT, BROKEN)}\b", note)
    assert f"parsed again from line {_line(SCRIPT, chr(10) + 'get_theme() {') + 1}," in note


def test_get_symbol_finds_a_function_after_the_error(indexed):
    r, _ = indexed
    [snippet] = r.get_symbol("get_args", "bin/sysinfo.sh")
    assert snippet.text.startswith("# Parse the command line; unknown options are an error.\nget_args() {\n")
    assert snippet.text.rstrip().endswith("done\n}")
    assert "--no-color) color=off ;;" in snippet.text


def test_the_mcp_get_symbol_finds_it_too(indexed):
    from llmc_splitters.mcp import CodeService, ServiceSettings

    r, _ = indexed
    service = CodeService(lambda: r, freshness="off", settings=ServiceSettings(max_tokens=2000, hard_cap=4000))
    reply = service.get_symbol("get_distro_ascii", "bin/sysinfo.sh")
    [got] = reply.data["slices"]
    assert got["path"] == "bin/sysinfo.sh"
    assert got["start_line"] == _line(SCRIPT, "\nget_distro_ascii() {") + 1
    assert "read -r -d '' ascii_data <<'EOF'" in reply.text


def test_the_index_command_says_which_files_parsed_with_errors(tmp_path, capsys):
    pytest.importorskip("tantivy")
    from llmc_splitters.cli import main

    (tmp_path / "sysinfo.sh").write_text(SCRIPT)
    (tmp_path / "clean.sh").write_text(SCRIPT.replace(BROKEN, ""))
    assert main(["index", str(tmp_path), "--db", str(tmp_path / "idx")]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if ln.lstrip().startswith("syntax")]
    assert re.match(rf"\s+syntax\s+sysinfo\.sh: syntax errors? at lines? {_line(SCRIPT, BROKEN)}\b", line)
    last = json.loads((tmp_path / "idx" / "last-index.json").read_text())
    assert list(last["parse_errors"]) == ["sysinfo.sh"]
