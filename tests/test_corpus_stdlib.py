"""The whole source of real installed packages (stdlib json, email, asyncio) at three budgets.

100% lossless, 100% within budget, and no leaf starts or ends inside a function or class whose whole text fits.
"""

from __future__ import annotations

import asyncio
import email
import json
import pathlib

import pytest
import tree_sitter_language_pack as tslp
from helpers import assert_valid_spans, assert_valid_tree

from llmc_splitters import ASTChunker

FILES = sorted(
    f for mod in (json, email, asyncio) for f in pathlib.Path(mod.__file__).parent.rglob("*.py")
)
DEF_TYPES = ("function_definition", "class_definition", "decorated_definition")


def definitions(data: bytes):
    stack = [tslp.get_parser("python").parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type in DEF_TYPES:
            yield node
        stack.extend(node.children)


@pytest.mark.parametrize("budget", [64, 256, 1024])
def test_stdlib_packages(budget, cl100k):
    assert len(FILES) > 50
    chunker = ASTChunker(max_tokens=budget)
    cut_inside = []
    leaves_total = 0
    for f in FILES:
        text = f.read_text(encoding="utf-8")
        tree = chunker.chunk_tree(text, path=str(f))
        # token_count re-checked by encoding every leaf on its own (the chunker reads most counts off one
        # encoding of the whole file).
        assert_valid_spans(text, tree.leaves, budget, cl100k.count)
        assert_valid_tree(text, tree)
        leaves_total += len(tree.leaves)
        data = text.encode()
        bounds = {s.start_byte for s in tree.leaves} | {s.end_byte for s in tree.leaves}
        for node in definitions(data):
            if node.end_byte - node.start_byte > budget * 40:
                continue
            if cl100k.count(data[node.start_byte : node.end_byte].decode()) > budget:
                continue
            if any(node.start_byte < b < node.end_byte for b in bounds):
                cut_inside.append((f.name, node.start_point))
    assert leaves_total > len(FILES)
    assert cut_inside == []
