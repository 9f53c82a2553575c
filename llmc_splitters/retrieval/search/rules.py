"""What the ranking rules read of a span and its file: the kinds of code a question rarely asks for, the words of a
file's name, and a first page spread over files (see :mod:`.ranking` for the rules themselves).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from ...chunking.span import Span
from ..terms import code_terms

__all__ = ["file_of", "name_words", "noise_kinds", "path_share", "saturate"]

PROSE_LANGUAGES = frozenset({"markdown", "text", "rst", "html"})
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
