"""Context headers: a few lines put in front of a span's text when it is handed to an index.

A header says where the span comes from (path, breadcrumb) and, for a piece of a split definition, the signatures
of the definitions it sits in, so that the piece can be understood alone. The header never enters the lossless
leaf ``text``; it lives only in the text given to an embedding model or a lexical index, and the header plus the
span always fit the token budget: a header that does not fit loses its context lines first, then is dropped.

Chunk at ``budget - reserve`` tokens so that spans leave room for a header. The reserve costs chunk size: every
definition between ``budget - reserve`` and ``budget`` tokens is split. In the repository's benchmark (256-token
chunks) a reserve of 16 gave the same BM25 gains as 32 and fewer split definitions for dense retrieval; the path line
alone usually fits 16 tokens, and a piece that leaves more room also gets its enclosing signatures.
"""

from __future__ import annotations

from .span import Span
from .tokens import Tokenizer


def context_header(span: Span) -> str:
    """The full header of ``span`` (empty when there is nothing to say), ending with a newline.

    Example: ``"# pkg/client.py > Client > send\\n# class Client:\\n"``.
    """
    first = span.path or ""
    crumb = span.metadata.get("breadcrumb")
    if crumb:
        first = f"{first} > {crumb}" if first else crumb
    lines = [f"# {first}"] if first else []
    context = span.metadata.get("context")
    if context:
        # Markdown headings are already marked; code signatures get a comment-like marker.
        lines.extend(
            line.strip() if line.lstrip().startswith("#") else f"# {line.strip()}"
            for line in str(context).splitlines()
            if line.strip()
        )
    return "".join(f"{line}\n" for line in lines)


def fit_header(header: str, span_tokens: int, budget: int, tokenizer: Tokenizer) -> str:
    """The longest prefix of ``header``'s lines that fits next to a span of ``span_tokens`` tokens."""
    if not header:
        return ""
    room = budget - span_tokens
    lines = header.splitlines(keepends=True)
    while lines:
        candidate = "".join(lines)
        # A join of header and text can merge the boundary tokens, never add more than one.
        if tokenizer.count(candidate) + 1 <= room:
            return candidate
        lines.pop()
    return ""


def with_header(span: Span, budget: int, tokenizer: Tokenizer) -> str:
    """``span.text`` with as much of its context header as fits ``budget`` tokens in total."""
    header = fit_header(context_header(span), span.token_count, budget, tokenizer)
    if not header:
        return span.text
    text = header + span.text
    # Exactness over cleverness: check the joined text and fall back to the bare span if BPE surprised us.
    return text if tokenizer.count(text) <= budget else span.text
