"""The ranking rules between the engines' candidate lists and the hits: what decides which spans and files a
question reaches.

:func:`~llmc_splitters.retrieval.search.hits.search` takes up to ``candidates`` spans from each engine (BM25 over the
question's weighted terms, see :mod:`.question`; cosine similarity when the index is dense), reads them from the span
store, and :func:`rank` orders them:

1. **Fusion.** Lexical alone: the BM25 score. Lexical and dense: weighted reciprocal rank fusion,
   ``w / (rrf_k + rank_lexical) + (1 - w) / (rrf_k + rank_dense)``, where ``w`` follows the question's shape
   (``adaptive``: :attr:`Ranking.lexical_weight`; otherwise 0.5).
2. **Definition** (``definition``): in a question shaped like a symbol (``definition_shapes``), a span
   that defines a name the question mentions (``Session.send``, ``parse_headers``, a word in backticks, a
   traceback's function, a question of one word such as ``Session``; its own name, or a definition the chunker
   recorded inside it) gets ``definition_boost`` times its score. In other questions, the names the question gives
   (a question in words: ``how app.handle dispatches``; a report: the names of its title, ``cse() has strange
   behaviour for MatrixSymbol indexing``) lift their definitions by ``headline_boost``.
3. **Path** (``path``): a span whose file's name (or folder's) says what the question asks about (``lock.lua`` for
   "how the lockfile pins plugin commits", ``UpdateStatement.kt`` for "update statement builders") gains
   ``path_boost`` times the best candidate's score, times the share of the question's words its file's name meets,
   when that share is at least ``path_min``; a file the question names outside a stack frame ("Fix numberformat.py
   ...") counts as wholly met, and its best spans join the candidates. A file is named for what it holds; BM25
   sees its name as one more occurrence among a span's words. A bug report's words describe a symptom in the words
   of the code it passed through: only the files it names count.
4. **Noise** (``noise``): spans of tests, examples, fixtures, benchmarks, vendored code, compat shims, TypeScript
   declarations (``.d.ts`` files, ``interface`` and ``type``), and prose documents (Markdown, text,
   reStructuredText, HTML) get ``noise_factor`` times their score, unless the question asks for that kind ("the
   test for ...", "the docs of ..."; see :attr:`~llmc_splitters.retrieval.search.question.Question.asks_for`) or
   the span defines a name the question mentions (the definition rule fires: ``ZodType`` is answered by its
   ``interface``). Questions about code are answered by code; these files repeat the names the question uses and
   crowd it out.
5. **Tiny** (``tiny``): a piece of a split definition under ``tiny_tokens`` tokens that neither starts it nor
   defines anything itself (a lone closing brace, a trailing fragment; a short method of a split class is whole)
   gets ``tiny_factor`` times its score: it cannot stand alone, BM25's length normalisation favours it, and it
   carries its definition's name. The piece that starts the definition keeps its score: its context brings the
   definition's skeleton.
6. **Message** (``message``): a span that makes a message the question quotes (an exception's or a log line's
   text, a quoted sentence: :attr:`~llmc_splitters.retrieval.search.question.Question.messages`) from the literal
   runs of a string template (``f"Invalid fields for {self}: {invalid}"`` for ``ValueError: Invalid fields for
   <UserSchema(many=False)>: {'nmae'}``) gains ``message_boost`` times the best candidate's score after the rules
   above (1.2: a span that makes the whole message passes the best match of its words), times how much of the
   message it makes (:func:`.rules.message_shares`: at least three words in order, held by at most
   ``message_spans`` spans, ``message_evidence`` pairs of its own for full weight), times its own factor of the
   rules 2, 4 and 5 (a test that asserts the message is still a test), and joins the candidates: the lexical index
   holds each span's template words in pairs (:mod:`~llmc_splitters.retrieval.phrases`), searched apart from the
   terms, where the words of a message are as common as any ("invalid", "fields"). The lift is for a pasted
   message: it is scaled by the square of the share of the question's words the message holds
   (:attr:`~llmc_splitters.retrieval.search.question.Question.message_share`), and the rule does nothing when that
   share is under ``message_question`` (0.5): a question about a message ("it prints 'unknown option --cat, did you
   mean --count?': where are the close matches computed?") or a report that quotes one asks for other code than
   the line that prints it (on the tune set, 32 questions quote a message, each under a half of its words: at full
   lift the rule put the printing code over the answer in 4 and helped none). A question that quotes no message is
   ranked as without the rule.
7. **File stage** (``files``, lexical search): a file's score is its best span's plus ``file_depth`` times the sum
   of its next two (a file with several matching spans rises), and each of its spans gains ``file_weight`` times
   what its file gains over its best span (a notebook's cells count as one file). Hybrid search does without it:
   its fused RRF scores lie so close that a file of many matching spans passed a span first in both lists.
8. **Diversity** (``diversity``): in a question of at most ``diverse_words`` words, each span of a file after its
   first is worth ``decay`` times less per span of that file already on the page (:func:`.rules.saturate`): the
   first page covers the files that answer a short question ("exception hierarchy for HTTP and transfer errors")
   instead of ten pieces of one file, while a file whose spans outscore every other file's best keeps them. A
   longer question (a behaviour described in detail, a bug report) usually pinpoints definitions of one file: its
   spans decay by ``long_decay`` (0.95), which keeps that file's order and lets the best spans of the next files onto
   the page (SWE-bench dev: a gold file among the first 10 hits 0.722 -> 0.796, lexical). It orders a page of hits (``search``), not a reply's context (``retrieve``, the faces'
   documents, the MCP server's ``search_code``; :meth:`Ranking.for_reply`): a reply spends its budget on the best
   answers whole, and its ranked file list shows the breadth.

Every rule has a switch (``Ranking().without("noise")``, or ``Ranking.plain()`` for none), and the ranked list of
distinct files beside the hits (:class:`FileRank`) comes from the same scores. The rules and their values were
chosen on the public dev sets (Semble's code-search benchmark and SWE-bench Lite, dev repositories only) and checked
on the project's tune set and docstring benchmark: ``python -m benchmarks.ablate`` measures each rule on and off on
all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ...chunking.span import Span
from ...errors import ConfigurationError
from .question import Question
from .rules import file_of, noise_kinds, path_share, saturate

__all__ = ["Ranking", "FileRank", "Ranked", "noise_kinds", "rank"]

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

    RULES: ClassVar[tuple[str, ...]] = ("question", "definition", "path", "noise", "tiny", "message", "adaptive",
                                        "files", "diversity")

    question: bool = True
    definition: bool = True
    path: bool = True
    noise: bool = True
    tiny: bool = True
    message: bool = True
    adaptive: bool = True
    files: bool = True
    diversity: bool = True
    definition_boost: float = 3.0
    definition_shapes: frozenset[str] = frozenset({"symbol"})
    headline_boost: float = 1.5
    path_boost: float = 1.0
    path_min: float = 0.1
    message_boost: float = 1.2
    message_spans: int = 5
    message_evidence: float = 2.0
    message_question: float = 0.5
    noise_factor: float = 0.2
    tiny_tokens: int = 48
    tiny_factor: float = 0.25
    lexical_weight: Mapping[str, float] = field(default_factory=lambda: {"symbol": 0.8, "words": 0.55,
                                                                         "report": 0.7})
    rrf_k: int = 10
    file_depth: float = 0.3
    file_weight: float = 0.5
    decay: float = 0.3
    diverse_words: int = 10
    long_decay: float = 0.95

    def __post_init__(self) -> None:
        for name in ("definition_boost", "headline_boost", "path_boost", "path_min", "message_boost",
                     "message_evidence", "message_question", "noise_factor", "tiny_factor", "file_depth", "file_weight",
                     "decay", "long_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                msg = f"Ranking.{name} must be a number >= 0, got {value!r}"
                raise ConfigurationError(msg)
        for name in ("tiny_tokens", "rrf_k", "diverse_words", "message_spans"):
            value = getattr(self, name)
            least = 1 if name in ("rrf_k", "message_spans") else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
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

    def for_reply(self) -> Ranking:
        """These rules as a reply's context is ranked: without the diversity, which spreads a page of hits over
        files. A reply spends its budget on the best answers whole (every piece of a long function, the functions
        of one file a fix touches); its ranked file list shows the breadth."""
        return replace(self, diversity=False) if self.diversity else self

    @classmethod
    def plain(cls) -> Ranking:
        """Every rule off: BM25 over the question's raw terms, fused with the dense list by plain RRF."""
        return cls().without(*cls.RULES)


def _own_names(span: Span) -> set[str]:
    """The names a span defines, lowercased, whole and by their last part: its own, and those of the definitions
    inside it the chunker recorded (a small class inside a module: ``Rack.Response`` in the span ``Rack``)."""
    out: set[str] = set()
    for name in (span.name, *(sym.get("name") for sym in span.metadata.get("symbols") or ())):
        if isinstance(name, str) and name:
            low = name.lower()
            out.update((low, low.rsplit(".", 1)[-1]))
    return out


def _factor(span: Span, question: Question, ranking: Ranking, names: frozenset[str], boost: float) -> float:
    f = 1.0
    defines = ranking.definition and boost != 1.0 and names and _own_names(span) & names
    if defines:
        f *= boost
    # What the question names is what it asks for, wherever it is defined (a TypeScript type, a test helper).
    if ranking.noise and not defines and noise_kinds(span.path, span.language, span.kind) - question.asks_for:
        f *= ranking.noise_factor
    if (ranking.tiny and span.token_count < ranking.tiny_tokens and span.metadata.get("part", 1) > 1
            and "signature" not in span.metadata):
        f *= ranking.tiny_factor
    return f


def rank(lists: Mapping[str, Sequence[str]], scores: Mapping[str, Mapping[str, float]], spans: Mapping[str, Span],
         question: Question, ranking: Ranking, named: frozenset[str] = frozenset(),
         messages: Mapping[str, float] | None = None) -> tuple[list[Ranked], list[FileRank]]:
    """Order the candidates of ``lists`` (each engine's ids, best first, and ``scores``: each list's score of each
    id) and rank their files (see the module docstring). One list (lexical search, or an engine that fused BM25 and
    the vectors itself) is ordered by its scores; several are fused by weighted RRF. Every id must be in ``spans``.
    ``named``: the indexed files the question names (the path rule counts them as wholly matched); ``messages``:
    the spans that make a message the question quotes, with their share of it (the message rule; they join the
    candidates)."""
    names = [n for n in lists if lists[n]]
    positions = {n: {rid: pos for pos, rid in enumerate(lists[n], 1)} for n in names}
    messages = messages if ranking.message and messages else {}
    ids = list(dict.fromkeys([*(rid for n in names for rid in lists[n]), *messages]))
    if len(names) == 1:
        base = {rid: scores[names[0]].get(rid, 0.0) for rid in ids}
    else:
        w = ranking.fusion_weight(question.shape)
        weights = {n: (w if n.endswith("lexical") else 1.0 - w) for n in names}
        base = {rid: sum(weights[n] / (ranking.rrf_k + positions[n][rid]) for n in names if rid in positions[n])
                for rid in ids}
    if ranking.path and (question.topic or named) and ids:
        top = max(base.values())
        shares: dict[str, float] = {}
        for rid in ids:
            path = file_of(spans[rid].path)
            if path not in shares:
                shares[path] = 1.0 if path in named else path_share(question.topic, path)
            if shares[path] >= ranking.path_min:
                base[rid] += ranking.path_boost * top * shares[path]
    if question.shape in ranking.definition_shapes:
        wanted, boost = frozenset(question.names), ranking.definition_boost
    else:
        wanted, boost = frozenset(question.headline), ranking.headline_boost
    factor = {rid: _factor(spans[rid], question, ranking, wanted, boost) for rid in ids}
    score = {rid: base[rid] * factor[rid] for rid in ids}
    if messages:
        # Against the best score as the other rules left it: a test that asserts the message stays a test.
        best = max(score.values()) or 1.0
        for rid, share in messages.items():
            score[rid] += ranking.message_boost * best * share * factor[rid] * question.message_share ** 2
    by_file: dict[str, list[str]] = {}
    for rid in sorted(ids, key=lambda r: -score[r]):
        by_file.setdefault(file_of(spans[rid].path), []).append(rid)
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
    decay = ranking.decay if question.words <= ranking.diverse_words else ranking.long_decay
    if ranking.diversity and decay < 1.0:
        taken = saturate(order, score, spans, decay)
        order = [rid for rid, _ in taken]
        score = dict(taken)
    ranked = [Ranked(rid, score[rid], {n: positions[n][rid] for n in names if rid in positions[n]})
              for rid in order]
    files = []
    for f in sorted(by_file, key=lambda f: (-round(file_score[f], 12), f)):
        if not f:
            continue
        best = spans[by_file[f][0]]  # a notebook is listed by its best cell (nb.ipynb#cell3: lines are the cell's)
        files.append(FileRank(best.path or f, file_score[f], best.start_line, best.end_line, best.name))
    return ranked, files

