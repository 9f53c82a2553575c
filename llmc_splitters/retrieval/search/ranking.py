"""The ranking rules between the engines' candidate lists and the hits: what decides which spans and files a
question reaches.

:func:`~llmc_splitters.retrieval.search.hits.search` takes up to ``candidates`` spans from each engine (BM25 over the
question's weighted terms, see :mod:`.question`; cosine similarity when the index is dense), reads them from the span
store, and :func:`rank` orders them:

1. **Fusion.** Lexical alone: the BM25 score. Lexical and dense: weighted reciprocal rank fusion,
   ``w / (rrf_k + rank_lexical) + (1 - w) / (rrf_k + rank_dense)``, where ``w`` follows the question's shape
   (``adaptive``: :attr:`Ranking.lexical_weight`; otherwise 0.5).
2. **Definition** (``definition``): in a question shaped like a symbol (``definition_shapes``), a span
   whose own name is a name the question mentions (``Session.send``, ``parse_headers``, a word in backticks, a
   traceback's function) gets ``definition_boost`` times its score.
3. **Noise** (``noise``): spans of tests, examples, fixtures, benchmarks, vendored code, compat shims, TypeScript
   declaration files (``.d.ts``) and declarations (``interface``/``type``), and prose documents (Markdown, text,
   reStructuredText, HTML) get ``noise_factor`` times their score, unless the question asks for that kind ("the test
   for ...", "the docs of ..."; see :attr:`~llmc_splitters.retrieval.search.question.Question.asks_for`). Questions about
   code are answered by code; these files repeat the names the question uses and crowd it out.
4. **Tiny** (``tiny``): a piece of a split definition under ``tiny_tokens`` tokens that neither starts it nor
   defines anything itself (a lone closing brace, a trailing fragment; a short method of a split class is whole) gets ``tiny_factor`` times its score: it cannot stand alone, BM25's length
   normalisation favours it, and it carries its definition's name. The piece that starts the definition keeps its
   score: its context brings the definition's skeleton.
5. **File stage** (``files``, lexical search): a file's score is its best span's plus ``file_depth`` times the sum of its next
   two (a file with several matching spans rises), and each of its spans gains ``file_weight`` times what its file
   gains over its best span (a notebook's cells count as one file). Hybrid search does without it: its fused
   RRF scores lie so close that a file of many matching spans passed a span first in both lists.
6. **Diversity** (``diversity``, off by default): the first page of hits takes at most ``per_file`` spans of one
   file before it takes from the next files.

Every rule has a switch (``Ranking().without("noise")``, or ``Ranking.plain()`` for none), and the ranked list of
distinct files beside the hits (:class:`FileRank`) comes from the same scores. The defaults were fitted on the
project's own tune set (``python -m benchmarks.ranking --ablate all``; see ``benchmarks/tuneset/README.md``): the
diversity is off because it lowered span NDCG@10 there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ...chunking.span import Span
from ...errors import ConfigurationError
from .question import Question

__all__ = ["Ranking", "FileRank", "Ranked", "noise_kinds", "rank"]

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


def noise_kinds(path: str | None, language: str, kind: str) -> frozenset[str]:
    """Which kinds of usually pushed-down code a span is (``test``, ``example``, ``fixture``, ``bench``,
    ``vendored``, ``compat``, ``declaration``, ``docs``); empty for ordinary code."""
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


@dataclass(frozen=True, slots=True)
class FileRank:
    """One file in a reply's ranked file list: its path, score (comparable within one query), and its best span's
    lines and symbol."""

    path: str
    score: float
    start_line: int
    end_line: int
    symbol: str | None = None


@dataclass(frozen=True, slots=True)
class Ranked:
    """A ranked candidate: its id, final score and the contributing lists' 1-based ranks."""

    id: str
    score: float
    ranks: Mapping[str, int]


@dataclass(frozen=True)
class Ranking:
    """The ranking rules and their parameters (see the module docstring). Immutable: :meth:`without` and
    :func:`dataclasses.replace` give variants.

    Example:
        >>> Ranking().without("noise").noise, Ranking.plain().rules()
        (False, ())
    """

    RULES: ClassVar[tuple[str, ...]] = ("question", "definition", "noise", "tiny", "adaptive", "files", "diversity")

    question: bool = True
    definition: bool = True
    noise: bool = True
    tiny: bool = True
    adaptive: bool = True
    files: bool = True
    diversity: bool = False
    definition_boost: float = 3.0
    definition_shapes: frozenset[str] = frozenset({"symbol"})
    noise_factor: float = 0.2
    tiny_tokens: int = 48
    tiny_factor: float = 0.25
    lexical_weight: Mapping[str, float] = field(default_factory=lambda: {"symbol": 0.8, "words": 0.6,
                                                                         "report": 0.7})
    rrf_k: int = 10
    file_depth: float = 0.3
    file_weight: float = 0.5
    per_file: int = 3
    page: int = 10

    def __post_init__(self) -> None:
        for name in ("definition_boost", "noise_factor", "tiny_factor", "file_depth", "file_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                msg = f"Ranking.{name} must be a number >= 0, got {value!r}"
                raise ConfigurationError(msg)
        for name in ("tiny_tokens", "rrf_k", "per_file", "page"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "tiny_tokens" else 1):
                msg = f"Ranking.{name} must be a positive integer, got {value!r}"
                raise ConfigurationError(msg)

    def fusion_weight(self, shape: str) -> float:
        """The lexical list's weight in the fusion for a question of ``shape`` (the dense list's is 1 minus it)."""
        return self.lexical_weight.get(shape, 0.5) if self.adaptive else 0.5

    def rules(self) -> tuple[str, ...]:
        """The rules that are on."""
        return tuple(r for r in self.RULES if getattr(self, r))

    def without(self, *rules: str) -> Ranking:
        """This ranking with ``rules`` off."""
        unknown = [r for r in rules if r not in self.RULES]
        if unknown:
            msg = f"unknown ranking rule {unknown[0]!r}; the rules are {', '.join(self.RULES)}"
            raise ConfigurationError(msg)
        return replace(self, **{r: False for r in rules})

    @classmethod
    def plain(cls) -> Ranking:
        """Every rule off: BM25 over the question's raw terms, fused with the dense list by plain RRF."""
        return cls().without(*cls.RULES)


def _own_names(span: Span) -> set[str]:
    name = span.name
    if not name:
        return set()
    low = name.lower()
    return {low, low.rsplit(".", 1)[-1]}


def _factor(span: Span, question: Question, ranking: Ranking, names: frozenset[str]) -> float:
    f = 1.0
    if ranking.definition and names and question.shape in ranking.definition_shapes and _own_names(span) & names:
        f *= ranking.definition_boost
    if ranking.noise and noise_kinds(span.path, span.language, span.kind) - question.asks_for:
        f *= ranking.noise_factor
    if (ranking.tiny and span.token_count < ranking.tiny_tokens and span.metadata.get("part", 1) > 1
            and "signature" not in span.metadata):
        f *= ranking.tiny_factor
    return f


def rank(lists: Mapping[str, Sequence[str]], scores: Mapping[str, Mapping[str, float]], spans: Mapping[str, Span],
         question: Question, ranking: Ranking) -> tuple[list[Ranked], list[FileRank]]:
    """Order the candidates of ``lists`` (each engine's ids, best first, and ``scores``: each list's score of each
    id) and rank their files (see the module docstring). One list (lexical search, or an engine that fused BM25 and
    the vectors itself) is ordered by its scores; several are fused by weighted RRF. Every id must be in ``spans``."""
    names = [n for n in lists if lists[n]]
    positions = {n: {rid: pos for pos, rid in enumerate(lists[n], 1)} for n in names}
    ids = list(dict.fromkeys(rid for n in names for rid in lists[n]))
    if len(names) == 1:
        base = {rid: scores[names[0]].get(rid, 0.0) for rid in ids}
    else:
        w = ranking.fusion_weight(question.shape)
        weights = {n: (w if n.endswith("lexical") else 1.0 - w) for n in names}
        base = {rid: sum(weights[n] / (ranking.rrf_k + positions[n][rid]) for n in names if rid in positions[n])
                for rid in ids}
    wanted = frozenset(question.names)
    score = {rid: base[rid] * _factor(spans[rid], question, ranking, wanted) for rid in ids}
    by_file: dict[str, list[str]] = {}
    for rid in sorted(ids, key=lambda r: -score[r]):
        by_file.setdefault(_file_of(spans[rid].path), []).append(rid)
    # The file stage works on BM25 scores; fused RRF scores lie too close together (a file of many matching spans
    # passed a span that was first in both lists), so hybrid search does without it.
    stage = ranking.files and names == ["lexical"]
    file_score = {f: score[r[0]] + (ranking.file_depth * sum(score[x] for x in r[1:3]) if stage else 0.0)
                  for f, r in by_file.items()}
    if stage:
        for f, members in by_file.items():
            lift = ranking.file_weight * (file_score[f] - score[members[0]])
            for rid in members:
                score[rid] += lift
    order = sorted(ids, key=lambda r: (-round(score[r], 12), spans[r].path or "", spans[r].start_byte, r))
    if ranking.diversity:
        order = _spread(order, spans, ranking.per_file, ranking.page)
    ranked = [Ranked(rid, score[rid], {n: positions[n][rid] for n in names if rid in positions[n]})
              for rid in order]
    files = []
    for f in sorted(by_file, key=lambda f: (-round(file_score[f], 12), f)):
        if not f:
            continue
        best = spans[by_file[f][0]]  # a notebook is listed by its best cell (nb.ipynb#cell3: lines are the cell's)
        files.append(FileRank(best.path or f, file_score[f], best.start_line, best.end_line, best.name))
    return ranked, files


def _file_of(path: str | None) -> str:
    """The file a span belongs to: a notebook cell's (``nb.ipynb#cell3``) is its notebook."""
    p = path or ""
    return p.split("#cell", 1)[0] if ".ipynb#cell" in p else p


def _spread(order: list[str], spans: Mapping[str, Span], per_file: int, page: int) -> list[str]:
    """The first ``page`` ids with at most ``per_file`` of one file while other files have candidates left."""
    head: list[str] = []
    held: dict[str, int] = {}
    rest: list[str] = []
    for rid in order:
        f = _file_of(spans[rid].path)
        if len(head) < page and held.get(f, 0) < per_file:
            head.append(rid)
            held[f] = held.get(f, 0) + 1
        else:
            rest.append(rid)
    return head + rest
