"""Prose overlap: only between pieces of one split section (or of a plain-text file), never on code, and never in
the leaf text; index_text puts header, overlap and text together within the budget."""

from __future__ import annotations

import math

import pytest
from helpers import DATA
from helpers import assert_valid_spans

from llmc_splitters import ASTChunker, ConfigurationError
from llmc_splitters.chunking.headers import context_header
from llmc_splitters.chunking.overlap import PROSE_KINDS, index_text, overlap_tail

DESIGN = (DATA / "markdown" / "sync-design.md").read_text(encoding="utf-8")
README = (DATA / "markdown" / "README.md").read_text(encoding="utf-8")
NOTES = (DATA / "text" / "release-notes.txt").read_text(encoding="utf-8")
PY = (DATA / "python" / "textwrap.py").read_text(encoding="utf-8")


def pairs(spans):
    return zip(spans, spans[1:])


def check_overlaps(text, spans, budget, ratio, tok):
    """Every overlap is a word-aligned suffix of the previous leaf, at most ratio * budget tokens, prose only."""
    target = int(ratio * budget)
    for prev, cur in pairs(spans):
        ov = cur.metadata.get("overlap")
        if ov is None:
            continue
        assert cur.kind in PROSE_KINDS and prev.kind in PROSE_KINDS, (prev.kind, cur.kind)
        assert cur.language in ("markdown", "text") and prev.language == cur.language
        assert cur.parent_id == prev.parent_id
        assert cur.metadata.get("breadcrumb") == prev.metadata.get("breadcrumb")
        assert ov and prev.text.endswith(ov), "overlap must be a tail of the previous leaf"
        # overlap + text is one contiguous slice of the source: what a reader would have seen.
        assert text[cur.start_char - len(ov) : cur.end_char] == ov + cur.text
        assert cur.metadata["overlap_tokens"] == tok.count(ov) <= target
        # Cut at a word (or sentence) boundary: it starts a word, right after whitespace or at the leaf start.
        cut = len(prev.text) - len(ov)
        assert not ov[0].isspace()
        assert prev.text[:cut].strip() == "" or prev.text[cut - 1].isspace()
        assert "```" not in ov and "~~~" not in ov and not ov.lstrip().startswith("|")


@pytest.mark.parametrize("budget", [24, 48, 96, 200])
def test_plain_text_pieces_all_get_overlap_of_about_15_percent(budget):
    chunker = ASTChunker(max_tokens=budget)
    spans = chunker.chunk(NOTES, path="NOTES.txt")
    tok = chunker.tokenizer
    assert_valid_spans(NOTES, spans, budget, tok.count)
    assert len(spans) >= 3
    check_overlaps(NOTES, spans, budget, 0.15, tok)
    target = int(0.15 * budget)
    # Every piece after the first continues the one before. With a tiny target (3 tokens at budget 24) a short
    # piece like "Version 1.3.2" may have no word boundary within it, so it gives none; otherwise all get one.
    missing = [s.start_line for s in spans[1:] if "overlap" not in s.metadata]
    if budget >= 48:
        assert not missing
    else:
        assert len(missing) <= len(spans) // 4, missing
    sizes = [s.metadata["overlap_tokens"] for s in spans[1:] if "overlap" in s.metadata]
    assert sum(sizes) / len(sizes) >= 0.5 * target, sizes


def test_overlap_prefers_a_sentence_start():
    chunker = ASTChunker(max_tokens=96)
    spans = chunker.chunk(NOTES, path="NOTES.txt")
    starts = 0
    for prev, cur in pairs(spans):
        ov = cur.metadata["overlap"]
        before = prev.text[: len(prev.text) - len(ov)].rstrip(" \t")
        if not before or before.endswith(("\n", ".", "!", "?")):
            starts += 1
    # The tail starts a sentence (or a line) whenever that keeps at least half of the target; here most do.
    assert starts >= len(spans) // 2


@pytest.mark.parametrize("budget", [32, 64, 96, 160])
def test_markdown_overlap_only_between_prose_pieces_of_one_section(budget):
    chunker = ASTChunker(max_tokens=budget)
    tree = chunker.chunk_tree(DESIGN, path="docs/sync-design.md")
    spans = list(tree.leaves)
    assert_valid_spans(DESIGN, spans, budget, chunker.tokenizer.count)
    check_overlaps(DESIGN, spans, budget, 0.15, chunker.tokenizer)
    for s in spans:
        if "overlap" not in s.metadata:
            continue
        # Only a piece of a section that had to be split: never a heading piece, never a whole (sub)section.
        parent = tree.parent(s)
        assert parent.kind == "section" and s.name == parent.name
        assert not s.text.lstrip().startswith("#")
    # The Goals section is four paragraphs: at 96 tokens it must be split, and its later pieces overlap.
    goals = [s for s in spans if s.metadata.get("breadcrumb") == "Sync design > Goals"]
    assert len(goals) >= 2
    assert "overlap" not in goals[0].metadata and all("overlap" in g.metadata for g in goals[1:])


def test_code_never_gets_overlap_and_never_donates():
    chunker = ASTChunker(max_tokens=48)
    # A long Python file, split deep inside functions: no overlap anywhere.
    assert not any("overlap" in s.metadata for s in chunker.chunk(PY, path="textwrap.py"))
    # In a README, code spans (fences chunked as Python, tables, lists) never carry overlap, and the piece after a
    # code span gets none from it.
    spans = chunker.chunk(README, path="README.md")
    for prev, cur in pairs(spans):
        if cur.language != "markdown" or cur.kind not in PROSE_KINDS:
            assert "overlap" not in cur.metadata, (cur.kind, cur.start_line)
        if prev.language != "markdown" or prev.kind not in PROSE_KINDS:
            assert "overlap" not in cur.metadata, (prev.kind, cur.start_line)


@pytest.mark.parametrize(("path", "text"), [("README.md", README), ("NOTES.txt", NOTES), ("d.md", DESIGN)])
def test_overlap_leaves_texts_offsets_and_ids_untouched(path, text):
    with_ov = ASTChunker(max_tokens=40).chunk_tree(text, path=path)
    without = ASTChunker(max_tokens=40, overlap=0).chunk_tree(text, path=path)
    assert [s.text for s in with_ov.leaves] == [s.text for s in without.leaves]
    assert [(s.id, s.start_byte, s.end_byte, s.kind, s.name, s.parent_id) for s in with_ov.spans] == [
        (s.id, s.start_byte, s.end_byte, s.kind, s.name, s.parent_id) for s in without.spans
    ]
    assert not any("overlap" in s.metadata for s in without.leaves)
    assert any("overlap" in s.metadata for s in with_ov.leaves)
    # The tree still resolves every leaf (the leaves were replaced, not orphaned).
    assert all(with_ov.get(s.id) is s for s in with_ov.leaves)


def test_ratio_sets_the_size():
    small = ASTChunker(max_tokens=100, overlap=0.1).chunk(NOTES, path="n.txt")
    large = ASTChunker(max_tokens=100, overlap=0.4).chunk(NOTES, path="n.txt")
    assert [s.text for s in small] == [s.text for s in large]
    assert max(s.metadata["overlap_tokens"] for s in small[1:]) <= 10
    assert max(s.metadata["overlap_tokens"] for s in large[1:]) <= 40
    assert sum(s.metadata["overlap_tokens"] for s in large[1:]) > 2 * sum(
        s.metadata["overlap_tokens"] for s in small[1:]
    )


@pytest.mark.parametrize("bad", [-0.1, 0.5, 1, 2.0, math.nan, True, "0.15", None])
def test_invalid_overlap_is_a_configuration_error_naming_the_value(bad):
    with pytest.raises(ConfigurationError, match="overlap") as info:
        ASTChunker(overlap=bad)
    assert repr(bad) in str(info.value)


def test_overlap_tail_boundaries(cl100k):
    text = "First sentence here. Second sentence is a little longer than the first one."
    # The longest tail within 13 tokens starts inside "First sentence here."; the sentence start keeps > half.
    assert cl100k.count(text) > 13
    assert overlap_tail(text, 13, cl100k) == "Second sentence is a little longer than the first one."
    # With 6 tokens a sentence start would keep too little of it: the tail starts at a word instead.
    tail = overlap_tail(text + " Third.", 6, cl100k)
    assert (text + " Third.").endswith(tail) and cl100k.count(tail) <= 6 and tail[0].islower()
    # Everything fits: the whole (stripped) text.
    assert overlap_tail("  short one.\n", 50, cl100k) == "short one.\n"
    # One long word and no boundary: no overlap rather than half a word.
    assert overlap_tail("x" * 400, 5, cl100k) == ""
    # Never the inside of a fence or a table.
    assert overlap_tail("Prose.\n\n```\ncode()\n```\n", 50, cl100k) == ""
    assert overlap_tail("| a | b |\n| 1 | 2 |\n", 50, cl100k) == ""
    assert overlap_tail("| a |\n\nAfter the table.\n", 50, cl100k) == "After the table.\n"


@pytest.mark.parametrize("index_budget", [40, 48, 64, 128])
def test_index_text_fits_and_drops_overlap_before_header(index_budget):
    chunker = ASTChunker(max_tokens=40)
    tok = chunker.tokenizer
    for path, text in (("docs/sync-design.md", DESIGN), ("NOTES.txt", NOTES), ("README.md", README)):
        for s in chunker.chunk(text, path=path):
            full = index_text(s, index_budget, tok)
            assert tok.count(full) <= index_budget
            assert full.endswith(s.text)
            prefix = full[: len(full) - len(s.text)]
            ov = s.metadata.get("overlap", "")
            header_part = prefix
            if ov and prefix:
                # Whatever overlap made it in is a word-aligned tail of the overlap, right before the text.
                words = [0] + [i for i in range(1, len(ov)) if ov[i - 1].isspace() and not ov[i].isspace()]
                kept = next((ov[i:] for i in words if prefix.endswith(ov[i:])), "")
                header_part = prefix[: len(prefix) - len(kept)]
            # The header part is whole header lines, from the first one: the path line comes first.
            if header_part:
                assert header_part.startswith(f"# {path}") and header_part.endswith("\n")
            assert index_text(s, index_budget, tok, header=False).endswith(s.text)
            assert not index_text(s, index_budget, tok, header=False).startswith(f"# {path}") or s.text.startswith(
                f"# {path}"
            )


def test_index_text_with_room_has_header_then_overlap_then_text():
    chunker = ASTChunker(max_tokens=48)
    tok = chunker.tokenizer
    spans = chunker.chunk(DESIGN, path="docs/sync-design.md")
    piece = next(s for s in spans if "overlap" in s.metadata)
    full = index_text(piece, 48 + 60, tok)
    header = context_header(piece)
    assert header.startswith(f"# docs/sync-design.md > {piece.metadata['breadcrumb']}\n")
    assert full == header + piece.metadata["overlap"] + piece.text
    # Less room: the overlap shrinks (or goes) before the header loses a line.
    tight = index_text(piece, tok.count(header + piece.text) + 1, tok)
    assert tight.startswith(header) and tight.endswith(piece.text)
    # No room at all: the text alone, still lossless.
    assert index_text(piece, piece.token_count, tok) == piece.text
