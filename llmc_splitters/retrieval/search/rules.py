"""What the ranking rules read of a span and its file: the kinds of code a question rarely asks for, the words of a
file's name, how much of a quoted message a span makes, and a first page spread over files (see :mod:`.ranking`
for the rules themselves).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

from ...chunking.span import Span
from ..phrases import PROSE_LANGUAGES, phrase_terms
from ..terms import code_terms

__all__ = ["file_of", "message_shares", "name_words", "noise_kinds", "path_share", "saturate"]

DECLARATION_KINDS = frozenset({"interface", "type"})
_TS = frozenset({"typescript", "tsx"})
_SEGMENTS = {
    "test": frozenset({"test", "tests", "__tests__", "testing", "spec", "specs", "t", "unittests", "e2e"}),
    "example": frozenset({"example", "examples", "demo", "demos", "sample", "samples", "tutorial", "docs_src"}),
    "fixture": frozenset({"fixture", "fixtures", "__fixtures__", "testdata", "__mocks__", "mocks", "snapshots",
                          "__snapshots__"}),
    "bench": frozenset({"bench", "benches", "benchmark", "benchmarks"}),
    "vendored": frozenset({"vendor", "vendored", "third_party", "thirdparty", "external", "extern"}),
    "compat": frozenset({"compat", "_compat", "shims", "polyfills", "backports"}),
    "docs": frozenset({"doc", "docs", "documentation", "website"}),
}
_TEST_FILE = re.compile(r"(?:^test_.*|.*_tests?\.\w+|.*\.(?:test|spec)\.\w+|conftest\.py|.*\.bats)$")
_COMPAT_FILE = re.compile(r"^_?(?:compat|py3?compat|shims?|polyfills?)\.\w+$")
# A file named for its folder: its folder's name says what it holds (axum's middleware/mod.rs, a package's
# __init__.py, a module's index.ts).
_FOLDER_FILES = frozenset({"mod", "index", "__init__", "init", "main", "lib"})
MIN_WORD = 3
"""Words shorter than this neither name a file nor match one."""


def noise_kinds(path: str | None, language: str, kind: str) -> frozenset[str]:
    """Which kinds of usually pushed-down code a span is (``test``, ``example``, ``fixture``, ``bench``,
    ``vendored``, ``compat``, ``declaration``, ``docs``); empty for ordinary code.

    ``declaration`` is a TypeScript declaration file (``.d.ts``), or an ``interface`` or ``type`` declaration:
    shapes that repeat the names of the code they describe (a question that names one is answered by it all the
    same: the definition rule lifts it above the noise, see :mod:`.ranking`).
    """
    out: set[str] = set()
    parts = (path or "").replace("\\", "/").lower().split("/")
    dirs, name = parts[:-1], parts[-1]
    for label, names in _SEGMENTS.items():
        if names.intersection(dirs):
            out.add(label)
    if _TEST_FILE.match(name):
        out.add("test")
    if _COMPAT_FILE.match(name):
        out.add("compat")
    if name.endswith((".d.ts", ".d.mts", ".d.cts")) or (language in _TS and kind in DECLARATION_KINDS):
        out.add("declaration")
    if language in PROSE_LANGUAGES and ".ipynb#" not in (path or ""):  # a notebook's own prose is not docs
        out.add("docs")
    return frozenset(out)


def file_of(path: str | None) -> str:
    """The file a span belongs to: a notebook cell's (``nb.ipynb#cell3``) is its notebook."""
    p = path or ""
    return p.split("#cell", 1)[0] if ".ipynb#cell" in p else p


@lru_cache(maxsize=1 << 16)
def name_words(path: str) -> frozenset[str]:
    """The words a file's name says, as the lexical index's terms (``lock.lua``: ``lock``; ``UpdateStatement.kt``:
    ``updatestatement``, ``update``, ``statement``), with its folder's (``manage/checker.lua``: ``checker`` and
    ``manage``), of at least :data:`MIN_WORD` letters."""
    parts = file_of(path).replace("\\", "/").split("/")
    stem = parts[-1].split(".", 1)[0]
    words = set(code_terms(stem))
    if len(parts) > 1:
        words.update(code_terms(parts[-2]))
    return frozenset(w for w in words if len(w) >= MIN_WORD and w.isalpha() and w not in _FOLDER_FILES)


def _meets(word: str, name_word: str) -> bool:
    """A question's word meets a word of a file's name when one starts the other (``lock``/``lockfile``,
    ``float``/``floating``, ``check``/``checker``)."""
    short, long = (word, name_word) if len(word) <= len(name_word) else (name_word, word)
    return long.startswith(short)


def path_share(words: Iterable[str], path: str | None) -> float:
    """The share of a question's ``words`` (terms of :data:`MIN_WORD` letters or more) that its file's name meets
    (see :func:`name_words`)."""
    asked = [w for w in words if len(w) >= MIN_WORD and w.isalpha()]
    named = name_words(path or "")
    if not asked or not named:
        return 0.0
    return sum(1 for w in asked if w in named or any(_meets(w, n) for n in named)) / len(asked)


def message_shares(messages: Sequence[Sequence[str]], texts: Mapping[str, str], n_docs: int,
                   df: Mapping[str, int], holding: Callable[[frozenset[str]], int], *, max_spans: int,
                   evidence: float) -> dict[str, float]:
    """How much of a quoted message each span of ``texts`` (id -> text) makes, in [0, 1]: its best message's.

    A message is its word pairs (:func:`~llmc_splitters.retrieval.phrases.message_phrases`); the pairs no indexed
    span holds are the values it printed (``<UserSchema(many=False)>``, ``'nmae'``), which no template holds either.
    Each other pair weighs its IDF, ``ln(1 + (N - n + 0.5) / (n + 0.5))`` over the ``n_docs`` documents and ``df``
    (the documents holding it). A span that holds at least two of them (three words in order) makes the message
    when at most ``max_spans`` spans hold them all (``holding``: how many do): the code that raises it and a test or
    two that check it; a piece of English every other message says (``is not``, ``index out of range``) pinpoints
    nothing. Its share is the square of the weight it holds over the message's (a span that makes half of what the
    message says is a weak match, one that makes all of it a strong one), times ``min(1, held / (evidence * w1))``
    where ``w1`` is the weight of a pair only one span holds: two common pairs are weaker evidence than ``evidence``
    pairs of their own.
    """
    out: dict[str, float] = {}
    if n_docs <= 0 or not texts:
        return out
    scale = evidence * math.log(1 + (n_docs - 0.5) / 1.5)
    pairs = {sid: frozenset(phrase_terms(text)) for sid, text in texts.items()}
    counted: dict[frozenset[str], int] = {}
    for message in messages:
        idf = {p: math.log(1 + (n_docs - df[p] + 0.5) / (df[p] + 0.5)) for p in message if df.get(p, 0) > 0}
        mass = sum(idf.values())
        for sid, have in pairs.items():
            held = have.intersection(idf)
            if len(held) < 2:
                continue
            weight = sum(idf[p] for p in held)
            share = (weight / mass) ** 2 * min(1.0, weight / scale)
            if share <= out.get(sid, 0.0):
                continue
            key = frozenset(held)
            if key not in counted:
                counted[key] = holding(key)
            if counted[key] <= max_spans:
                out[sid] = share
    return out


def saturate(order: Sequence[str], score: Mapping[str, float], spans: Mapping[str, Span],
             decay: float) -> list[tuple[str, float]]:
    """``order`` (best first) with each span of a file after its first worth ``decay`` times less per span of that
    file already taken, so that a page of hits covers several files unless one file's spans outscore the others'
    best (greedy, as the first page is read). Each id comes with the score it was taken at (non-increasing)."""
    per_file: dict[str, list[str]] = {}
    for rid in order:
        per_file.setdefault(file_of(spans[rid].path), []).append(rid)
    heap = [(-score[ids[0]], n, 0, f) for n, (f, ids) in enumerate(per_file.items())]
    heapq.heapify(heap)
    out: list[tuple[str, float]] = []
    while heap:
        worth, n, i, f = heapq.heappop(heap)
        ids = per_file[f]
        out.append((ids[i], -worth))
        if i + 1 < len(ids):
            heapq.heappush(heap, (-score[ids[i + 1]] * decay ** (i + 1), n, i + 1, f))
    return out
