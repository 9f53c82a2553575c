"""Every language the README names indexes through ``CodeIndex.index_directory`` with the analysis pass on (issue 22,
item 5).

Kotlin and Swift failed on every file: the analysis pass compiled ``(call_expression function: (_) @call)`` and
these grammars have no ``function`` field (``Invalid field name at row 0, column 17: function``), while
``ASTChunker().chunk()`` alone worked. Each file below is a small, realistic source of its language with a named
definition; the index must take it, store spans for it, name the definition, and record the calls its analysis
found where the grammar has call expressions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tantivy")

from helpers import GO_PROGRAM  # noqa: E402
from llmc_splitters import ASTChunker  # noqa: E402
from llmc_splitters.chunking.analysis import references  # noqa: E402
from llmc_splitters.retrieval import CodeIndex  # noqa: E402

NOTEBOOK = json.dumps({
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Fetching\n", "How to fetch a page.\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
         "source": ["def fetch_page(url):\n", "    return url.upper()\n"]},
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3", "display_name": "Python 3"}},
    "nbformat": 4, "nbformat_minor": 5,
})

# path -> (source, a definition name the spans must carry, where the chunker names one in a file this small)
FILES: dict[str, tuple[str, str]] = {
    "py/client.py": ("import json\n\n\nclass Client:\n    def send(self, body):\n        return json.dumps(body)\n",
                     "Client"),
    "js/client.js": ("export function sendRequest(url) {\n  return fetch(url).then((r) => r.json());\n}\n",
                     "sendRequest"),
    "ts/client.ts": ("export class HttpClient {\n  async get(url: string): Promise<Response> {\n"
                     "    return fetch(url);\n  }\n}\n", "HttpClient"),
    "tsx/Button.tsx": ("export function Button({ label }: { label: string }) {\n"
                       "  return <button onClick={() => alert(label)}>{label}</button>;\n}\n", "Button"),
    "sh/deploy.sh": ("#!/usr/bin/env bash\nset -euo pipefail\n\ndeploy() {\n  rsync -a dist/ \"$1\"\n"
                     "  echo \"deployed to $1\"\n}\n\ndeploy \"$@\"\n", "deploy"),
    "docs/guide.md": ("# Guide\n\nSome words.\n\n## Install\n\nRun `pip install x`.\n", "Guide"),
    "nb/fetch.ipynb": (NOTEBOOK, "fetch_page"),
    "web/index.html": ("<!doctype html>\n<html><body>\n<script>\nfunction greet(name) {\n"
                       "  console.log('hi ' + name);\n}\n</script>\n</body></html>\n", None),
    "web/Counter.vue": ("<template>\n  <button @click=\"increment\">{{ count }}</button>\n</template>\n\n"
                        "<script>\nexport default {\n  data() { return { count: 0 }; },\n"
                        "  methods: { increment() { this.count += 1; } },\n};\n</script>\n", None),
    "web/Counter.svelte": ("<script>\n  let count = 0;\n  function increment() {\n    count += 1;\n  }\n"
                           "</script>\n\n<button on:click={increment}>{count}</button>\n", None),
    "go/client.go": ("package client\n\nimport \"net/http\"\n\nfunc Fetch(url string) (*http.Response, error) {\n"
                     "\treturn http.Get(url)\n}\n", "Fetch"),
    "rust/lib.rs": ("use std::fs;\n\npub fn read_config(path: &str) -> String {\n"
                    "    fs::read_to_string(path).unwrap_or_default()\n}\n", "read_config"),
    "java/Client.java": ("package io.x;\n\npublic class Client {\n    public String send(String body) {\n"
                         "        return body.trim();\n    }\n}\n", "Client"),
    "c/util.c": ("#include <string.h>\n\nint count_words(const char *s) {\n    int n = 0;\n"
                 "    while (*s) { if (*s++ == ' ') n++; }\n    return n + 1;\n}\n", None),
    "cpp/stack.cpp": ("#include <vector>\n\nclass Stack {\npublic:\n    void push(int v) { items.push_back(v); }\n"
                      "private:\n    std::vector<int> items;\n};\n", None),
    "cs/Client.cs": ("using System;\n\nnamespace Io.X {\n    public class Client {\n"
                     "        public string Send(string body) { return body.Trim(); }\n    }\n}\n", "Io.X"),
    "ruby/client.rb": ("class Client\n  def send_request(body)\n    body.strip\n  end\nend\n", "Client"),
    "php/client.php": ("<?php\nfunction send_request($body) {\n    return trim($body);\n}\n", "send_request"),
    "kotlin/Client.kt": ("package io.x\n\nimport java.net.URL\n\nclass Client(private val base: String) {\n"
                         "    fun send(path: String): String {\n        val url = URL(base + path)\n"
                         "        return url.readText().trim()\n    }\n}\n", "Client"),
    "swift/Client.swift": ("import Foundation\n\nclass Client {\n    let base: String\n\n"
                           "    init(base: String) { self.base = base }\n\n    func send(path: String) -> String {\n"
                           "        let url = URL(string: base + path)\n        return url.absoluteString\n    }\n"
                           "}\n", "Client"),
    "lua/init.lua": ("local M = {}\n\nfunction M.greet(name)\n  return string.format('hi %s', name)\nend\n\n"
                     "return M\n", "M.greet"),
    "notes/todo.txt": ("Things to do.\n\nWrite the release notes.\n", None),
}


def test_every_readme_language_indexes_with_analysis(tmp_path: Path) -> None:
    for rel, (text, _) in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    idx = CodeIndex(chunker=ASTChunker(max_tokens=256, analyze=True))
    report = idx.index_directory(tmp_path, include=["*"])
    assert report.failed == {}
    assert sorted(report.added) == sorted(FILES)
    for rel, (text, name) in FILES.items():
        # A notebook's spans carry their cell's path (nb/fetch.ipynb#cell1).
        spans = [s for s in idx.spans() if s.path == rel or (s.path or "").startswith(rel + "#")]
        assert spans, rel
        if not rel.endswith(".ipynb"):
            assert "".join(s.text for s in sorted(spans, key=lambda s: s.start_char)) == text, rel
        if name is not None:
            names = {s.name for s in spans}
            assert any(n == name or (n or "").endswith("." + name) or (n or "").startswith(name) for n in names), (
                rel, names)


@pytest.mark.parametrize(
    ("language", "source", "calls"),
    [
        ("kotlin", "fun f() {\n    client.send(x)\n    log(1)\n}\n", {"client.send", "log"}),
        ("swift", "func f() {\n    client.send(x)\n    log(1)\n}\n", {"client.send", "log"}),
        ("go", "package p\n\nfunc f() {\n\tclient.Send(x)\n\tlog(1)\n}\n", {"client.Send", "log"}),
    ],
)
def test_calls_are_found_in_grammars_with_and_without_a_function_field(language: str, source: str,
                                                                       calls: set[str]) -> None:
    import tree_sitter_language_pack as tlp

    data = source.encode()
    root = tlp.get_parser(language).parse(data).root_node
    assert references(root, data, 0, len(data), language=language) == calls


def test_a_go_method_is_found_by_its_receiver_qualified_name_and_by_its_own():
    """Issue 37: ``get_symbol`` finds ``Program.eventLoop`` (and ``eventLoop``, once), and a search lists it as a
    method."""
    idx = CodeIndex()
    idx.index_texts({"tea/tea.go": GO_PROGRAM})
    start = GO_PROGRAM[: GO_PROGRAM.index("// eventLoop")].count("\n") + 1
    [qualified] = idx.get_symbol("Program.eventLoop")
    [bare] = idx.get_symbol("eventLoop")
    assert qualified == bare and qualified.start_line == start
    assert qualified.text.startswith("// eventLoop is the central message loop.\nfunc (p *Program) eventLoop(")
    hit = idx.search("the central message loop", k=1).hits[0]
    assert (hit.span.name, hit.span.kind) == ("Program.eventLoop", "method")
