"""Question analysis: a question becomes weighted search terms, the names and paths it mentions, and its shape.

Every face searches through :func:`~llmc_splitters.retrieval.search.hits.search`, which calls :func:`analyze_question`,
so a question is read the same way by the CLI, the MCP server and both frameworks. What it finds:

* **Stack frames**: Python (``File "pkg/app.py", line 12, in handle``; IPython's ``pkg/app.py in handle(x)``), JavaScript (``at handle
  (src/app.js:12:5)``, ``at src/app.js:12:5``) and Bash (``./run.sh: line 12: x: command not found``). The frame
  nearest the error weighs most (the last of a Python traceback, the first of a JavaScript one, every Bash line
  alike): its function's and file's terms get ``1 + FRAME_WEIGHT / (1 + distance)`` times their weight.
* **Code**: fenced blocks (```` ``` ````) and inline code (`` `x` ``), searched as code.
* **Identifiers**: ``snake_case``, ``camelCase``, ``PascalCase``, dotted (``Flask.route``, ``os.path``) and any
  word in code; and **paths** (``src/routing/params.ts``, ``flask/app.py``).
* **Dumps** are dropped: runs of three or more lines that read like ``pip list``/``pip freeze`` output or
  ``key: value`` environment reports, which name packages, not code.
* **The prose**: the words left.

Each term's weight is ``1 + ln(n)`` for ``n`` occurrences (a term said ten times is not ten times as important),
times its frame weight. :func:`weigh` then drops, from a long question (a report), the words that most of the index
holds: they rank nothing and cost postings.

The **shape** decides how lexical and dense results are fused (see
:class:`~llmc_splitters.retrieval.search.ranking.Ranking`): ``symbol`` (one to three words, at least one an identifier:
``ObjectMapper``, ``where is Flask.route defined``: one word, or up to six with an identifier), ``report`` (a bug report: several lines, a
traceback, code or more than 40 words) or ``words`` (a question in words).

Example:
    >>> q = analyze_question('Why does `Session.send` fail?\\n  File "requests/adapters.py", line 9, in send')
    >>> q.shape, q.names, q.paths
    ('report', ('session.send', 'send'), ('requests/adapters.py',))
    >>> sorted(q.terms)  # the frame's boilerplate ("File", "line 9") is not searched
    ['adapter', 'fail', 'request', 'send', 'session']
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..phrases import message_phrases, quoted_literals
from ..terms import code_terms

__all__ = ["Frame", "Question", "analyze_question", "weigh", "FRAME_WEIGHT", "COMMON_SHARE"]

FRAME_WEIGHT = 1.0
"""Extra weight of the terms of the frame nearest the error (halved for the next frame, a third for the next...)."""
SATURATE = True
COMMON_SHARE = 0.2
"""In a report, a term held by more than this share of the index's documents is dropped."""

_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in ([\w.<>$]+))?')
# IPython's frames: ``~/lib/sympy/printing/latex.py in _print_Pow(self, expr)`` (before 8) and
# ``File ~/lib/sympy/printing/latex.py:651, in LatexPrinter._print_Pow(self, expr)``.
_IPY_FRAME = re.compile(r"^[ \t]*(?:File )?(\S+\.py)(?::(\d+),)? in ([\w.<>$]+)\(", re.M)
_JS_FRAME = re.compile(r"\bat (?:(?:async )?([\w.$<>\[\] ]+?) \()?(?:file://)?([^\s():]+):(\d+)(?::\d+)?\)?")
_SH_FRAME = re.compile(r"^\s*([\w./~-]+): line (\d+): ", re.M)
_PATH = re.compile(r"(?<![\w/.])((?:[\w.-]+/)*[\w-]+\.(?:pyi?|m?[jt]sx?|cjs|mts|sh|bash|bats|zsh|rb|go|rs|java|kt|"
                   r"swift|c|h|cc|cpp|hpp|cs|php|lua|scala|md|rst|toml|json|ya?ml|ipynb|html|css))\b"
                   r"|(?<![\w/.])((?:[\w.-]+/)+[\w.-]+)")
_DOTTED = re.compile(r"\b[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+\b")
# Namespace-qualified names other languages write: Rack::Response (Ruby, C++, Rust), Foo\Bar (PHP), $a->b (PHP).
_QUALIFIED = re.compile(r"\b[A-Za-z_$][\w$]*(?:(?:::|\\|->)[A-Za-z_$][\w$]*)+\b")
_QUALIFIER = re.compile(r"::|\\|->")
# A name written as a call in prose: "partitions() reusing...", "cse() has strange behaviour".
_CALL = re.compile(r"(?<![\w.$])([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\(\)")
# A word with a case change inside (maxRetries, HTTPServer, ZodType): written as code, not as prose. An acronym
# (TCP, JSON, URLs) is written in capitals in prose too.
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
# An interpreter's banner pasted with a session (Python's, IPython's): it names the interpreter, not the code.
_BANNER = re.compile(r"^\s*(?:Python \d+\.\d+\S*\s*[|(]|Type ['\"](?:copyright|help)\b|IPython \d+\.\d+\S*\s*--|"
                     r"\[(?:GCC|Clang|MSC)\b)")
_DUMP_LINE = re.compile(r"^\s*(?:[\w.\-\[\]]+\s*(?:==|>=|<=|~=|\s{2,}|\t)\s*v?\d[\w.+\-]*\s*|"
                        r"[\w .\-/()]{1,40}:\s+\S.{0,80})$")
# Messages a question quotes: what an exception, a warning or a logger printed, after its label (``ValueError: ...``,
# ``app.core.exceptions.ImproperlyConfigured: ...``, ``OrderConflictWarning: ...``, ``Error: ...``, ``panic:
# ...``, ``ERROR:root:...``), or after a log line's level (``2024-05-01 12:00:01,123 [main] ERROR ...``).
_EXCEPTION = r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning|Failure|Fault)"
_LEVEL = r"ERROR|WARN(?:ING)?|FATAL|CRITICAL|SEVERE|PANIC"
_LABELLED = re.compile(
    rf"(?:(?<![\w.])(?:{_EXCEPTION}|[Ee]rror|[Ww]arning|[Ff]atal|[Pp]anic|{_LEVEL})"
    r"|^[ \t>|E]*(?:[a-z_]\w*\.)+[A-Z]\w*)"  # a traceback's last line names its exception by its dotted name
    r"(?::[\w.]+)?(?:\s*\[[^\]\n]*\])?:[ \t]*(?P<msg>\S[^\n]*)", re.M)
_LOG_LINE = re.compile(rf"^\W*(?:\d{{4}}-\d\d-\d\d[T ][\d:.,]+\S*\s+(?:\S+\s+){{0,2}}?)?\[?(?:{_LEVEL})\]?"
                       r"[\s:-]+(?P<msg>\S[^\n]*)", re.M)
_TRACE_NOISE = re.compile(r"^\s*(?:[\^~]+\s*|Traceback \(most recent call last\):\s*)$")
_QUOTES = (("'", "'"), ('"', '"'), ("`", "`"), ("“", "”"), ("‘", "’"))
QUOTED_PAIRS = 2
"""A quoted string (in prose or code) is a message when it holds at least this many word pairs (three words in a
row, spaced: ``"not a valid app"``; not ``'x'``, ``"utf-8"``, ``"/etc/app.conf"``)."""
_ASKS = {
    "test": ("test", "tests", "tested", "testing", "spec", "specs", "unittest", "pytest", "conftest", "bats"),
    "example": ("example", "examples", "demo", "demos", "sample", "samples", "tutorial"),
    "fixture": ("fixture", "fixtures", "mock", "mocks", "testdata"),
    "bench": ("benchmark", "benchmarks", "bench"),
    "docs": ("doc", "docs", "documentation", "documented", "readme", "changelog", "guide", "markdown", "docstring"),
    "declaration": ("declaration", "declarations", "typings", "interface", "interfaces", "type", "types"),
    "compat": ("compat", "compatibility", "shim", "polyfill", "backport"),
    "vendored": ("vendor", "vendored", "third_party", "bundled"),
}


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame named in a question: its file, line, function (when the frame names one) and distance from
    the error (0 = the frame that raised)."""

    path: str
    line: int
    function: str | None
    distance: int


@dataclass(frozen=True, slots=True)
class Question:
    """A question as the ranking reads it (see the module docstring).

    Attributes:
        text: The question as asked.
        shape: ``symbol``, ``words`` or ``report``.
        terms: Search term -> weight (see :func:`weigh` for the index-aware step).
        names: Identifiers the question names, lowercased, whole (``session.send``) and last part (``send``).
        paths: File and module paths it names.
        frames: Its stack frames, nearest the error first.
        asks_for: Which kinds of usually pushed-down files it asks for (``test``, ``example``, ``docs``...); none
            for a report, which asks for the code to fix even when it tells of a test.
        words: How many words its prose holds (code blocks not counted).
        topic: The terms that say what it is about, which a file's name may say too: all its terms, none for a
            report (see :mod:`.ranking`, the path rule).
        named: The files it names outside its stack frames (``numberformat.py``, ``src/client.ts``).
        headline: The names its first line gives (a report's title names its subject: ``cse() has strange
            behaviour``), for a report; else its names.
        messages: The messages it quotes, each as its word pairs (see :mod:`~llmc_splitters.retrieval.phrases`):
            what an exception, a warning or a log line printed after its label (``ValueError: Invalid fields for
            ...``), and quoted strings, in prose or code, of at least :data:`QUOTED_PAIRS` word pairs.
        message_share: The share of its words (prose and code) its longest message holds, with its label: about 1
            for a pasted message, less for a question about one or a report that quotes one (see :mod:`.ranking`).
    """

    text: str
    shape: str
    terms: Mapping[str, float]
    names: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    frames: tuple[Frame, ...] = ()
    asks_for: frozenset[str] = field(default_factory=frozenset)
    words: int = 0
    topic: frozenset[str] = field(default_factory=frozenset)
    named: tuple[str, ...] = ()
    headline: tuple[str, ...] = ()
    messages: tuple[tuple[str, ...], ...] = ()
    message_share: float = 0.0


def _drop_dumps(text: str) -> str:
    """``text`` without runs of three or more lines that read like a package list or an environment report, and
    without an interpreter's banner lines."""
    lines = [line for line in text.splitlines() if not _BANNER.match(line)]
    keep = [True] * len(lines)
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].strip() and _DUMP_LINE.match(lines[j]) and not _PY_FRAME.search(lines[j]):
            j += 1
        if j - i >= 3:
            keep[i:j] = [False] * (j - i)
            i = j
        else:
            i += 1
    return "\n".join(line for line, k in zip(lines, keep) if k)


def _messages(text: str) -> tuple[tuple[tuple[str, ...], ...], float]:
    """The word pairs of each message ``text`` quotes (see :attr:`Question.messages`), each message once, and the
    share of ``text``'s words its longest message holds, with its label (:attr:`Question.message_share`)."""
    found = []
    for m in (*_LABELLED.finditer(text), *_LOG_LINE.finditer(text)):
        msg = m.group("msg")
        # A message quoted in a sentence ("... throws 'ValueError: embedded null byte' when ...") ends at its quote.
        before = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        for opening, closing in _QUOTES:
            opened = len(re.findall(rf"(?<!\w){opening}|{opening}(?!\w)", before)) if opening == closing else \
                before.count(opening) - before.count(closing)
            if opened % 2 if opening == closing else opened > 0:
                msg = msg.split(closing, 1)[0]
        found.append((msg, text[m.start():m.start("msg")] + msg))
    out: dict[tuple[str, ...], int] = {}
    for msg, said in found:
        pairs = tuple(message_phrases(msg))
        if pairs:
            out[pairs] = max(out.get(pairs, 0), len(_WORD.findall(said)))
    for q in quoted_literals(text, backticks=False):
        pairs = tuple(message_phrases(q))
        if len(pairs) >= QUOTED_PAIRS:
            out[pairs] = max(out.get(pairs, 0), len(_WORD.findall(q)))
    total = len(_WORD.findall(_without_frames(text)))
    return tuple(out), min(1.0, max(out.values(), default=0) / total) if total else 0.0


def _without_frames(text: str) -> str:
    """``text`` without the lines of its stack traces (a frame, the source line under a Python frame, the carets,
    ``Traceback (most recent call last):``): a pasted traceback is its message, the frames say where it passed."""
    out, after_frame = [], False
    for line in text.splitlines():
        frame = bool(_PY_FRAME.search(line))
        if not (frame or after_frame and line[:1].isspace() or _IPY_FRAME.match(line) or _JS_FRAME.search(line)
                or _SH_FRAME.match(line) or _TRACE_NOISE.match(line)):
            out.append(line)
        after_frame = frame
    return "\n".join(out)


def _frames(text: str) -> list[Frame]:
    found = [(m.start(), m.group(1), int(m.group(2)), m.group(3)) for m in _PY_FRAME.finditer(text)]
    found += [(m.start(), m.group(1), int(m.group(2) or 0), m.group(3)) for m in _IPY_FRAME.finditer(text)]
    py = [(p, n, f) for _, p, n, f in sorted(found)]
    js = [(m.group(2), int(m.group(3)), (m.group(1) or "").strip() or None) for m in _JS_FRAME.finditer(text)
          if not m.group(2).startswith(("node:", "internal/"))]
    sh = [(m.group(1), int(m.group(2)), None) for m in _SH_FRAME.finditer(text)]
    out = [Frame(p, n, f if f and not f.startswith("<") else None, d) for d, (p, n, f) in enumerate(reversed(py))]
    out += [Frame(p, n, f, d) for d, (p, n, f) in enumerate(js)]
    out += [Frame(p, n, None, 0) for p, n, _ in sh]
    return sorted(out, key=lambda fr: fr.distance)


def _is_identifier(word: str) -> bool:
    """Whether a word of prose is written as code: ``snake_case``, ``camelCase``, ``PascalCase`` with two humps,
    ``HTTPServer``, a name with digits (``utf8``); not a capitalised word or an acronym (``Session``, ``TCP``)."""
    if "_" in word.strip("_") or any(c.isdigit() for c in word):
        return True
    return not word[:-1].isupper() and _CAMEL.search(word) is not None


def _asks_for(words: Iterable[str], text: str) -> frozenset[str]:
    low = {w.lower() for w in words}
    out = {kind for kind, cues in _ASKS.items() if low.intersection(cues)}
    if ".d.ts" in text:
        out.add("declaration")
    return frozenset(out)


def _names(prose: str, code: Sequence[str], words: Sequence[str], frames: Sequence[Frame]) -> list[str]:
    """The identifiers a question names, lowercased, whole and by their last part (see the module docstring)."""
    names: list[str] = []

    def add_name(n: str) -> None:
        for v in (n.lower(), n.rsplit(".", 1)[-1].lower()):
            if v and v not in names:
                names.append(v)

    inside_dotted: set[str] = set()
    for n in _QUALIFIED.findall(" ".join([prose, *code])):
        dotted = _QUALIFIER.sub(".", n)
        add_name(dotted)
        inside_dotted.update(dotted.split(".")[:-1])
    for n in _DOTTED.findall(" ".join([prose, *code])):
        if not _PATH.fullmatch(n) or n.split(".")[-1][0].isupper():
            add_name(n)
            inside_dotted.update(n.split(".")[:-1])
    for w in [*words, *(w for c in code for w in _WORD.findall(c))]:
        if _is_identifier(w) and w not in inside_dotted:  # Session of Session.send names the owner, not the target
            add_name(w)
    for c in code:
        if _WORD.fullmatch(c.strip()):
            add_name(c.strip())
    for m in _CALL.finditer(prose):  # written as a call in prose: partitions(), cse()
        add_name(m.group(1))
    for fr in frames:
        if fr.function:
            add_name(fr.function)
    return names


def analyze_question(text: str) -> Question:
    """Read a question (see the module docstring)."""
    cleaned = _drop_dumps(text)
    code = [m.group(1) for m in _FENCE.finditer(cleaned)]
    prose = _FENCE.sub(" ", cleaned)
    code += [m.group(1) for m in _INLINE.finditer(prose)]
    frames = _frames(cleaned)
    paths: list[str] = []
    files: list[str] = []  # paths with a file kind's extension (not "1/2", "w/o")
    for m in _PATH.finditer(cleaned):
        p = (m.group(1) or m.group(2)).strip("./")
        if p and "://" not in cleaned[max(0, m.start() - 8):m.end()] and p not in paths:
            paths.append(p)
            if m.group(1):
                files.append(p)
    words = _WORD.findall(prose)
    names = _names(prose, code, words, frames)
    n_words = len(words)
    if len(_WORD.findall(_QUALIFIER.sub(".", prose).replace(".", " "))) == 1 and not frames and not code:
        names.append(words[0].lower())  # a question of one word is a name, whatever its case (Session, view)
    multiline = cleaned.count("\n") >= 2
    if frames or code and multiline or n_words > 40 or (multiline and n_words > 15):
        shape = "report"
    elif n_words == 1 or n_words <= 6 and names:
        shape = "symbol"
    else:
        shape = "words"
    searched = _JS_FRAME.sub(" ", _IPY_FRAME.sub(" ", _PY_FRAME.sub(" ", _SH_FRAME.sub(" ", cleaned))))
    frame_text = " ".join(f"{fr.path.rsplit('.', 1)[0]} {fr.function or ''}" for fr in frames)
    counts = Counter(t for t in code_terms(f"{searched}\n{frame_text}") if not (frames and t.isdigit()))
    terms = {t: 1.0 + math.log(n) if SATURATE else float(n) for t, n in counts.items()}
    for fr in frames:
        bonus = 1.0 + FRAME_WEIGHT / (1 + fr.distance)
        stem = fr.path.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        for t in set(code_terms(f"{fr.function or ''} {stem}")):
            if t in terms:
                terms[t] = max(terms[t], (1.0 + math.log(counts[t])) * bonus)
    # A report describes what went wrong, often in the words of a test ("in the test client"); it asks for the code.
    asks = frozenset() if shape == "report" else _asks_for(words + [w for c in code for w in _WORD.findall(c)], text)
    # A report's words describe a symptom, in the words of the code it passed through: they name no file.
    topic = frozenset() if shape == "report" else frozenset(terms)
    # The files a traceback passed through are its frames' (weighed above), not files the report names.
    framed = [fr.path.replace("\\", "/") for fr in frames]
    named = tuple(p for p in files if not any(p in f for f in framed))
    headline = names
    if shape == "report":
        title = next((line for line in prose.splitlines() if line.strip()), "")
        headline = _names(title, [m.group(1) for m in _INLINE.finditer(title)], _WORD.findall(title), [])
    messages, message_share = _messages(cleaned)
    return Question(text, shape, terms, tuple(names), tuple(paths), tuple(frames), asks, n_words, topic, named,
                    tuple(headline), messages, message_share)


def weigh(question: Question, n_docs: int, df: Mapping[str, int]) -> dict[str, float]:
    """The question's terms as searched: in a report, the terms more than :data:`COMMON_SHARE` of the index's
    ``n_docs`` documents hold are dropped (unless that would drop every term); other questions keep every term."""
    if question.shape != "report" or n_docs <= 0:
        return dict(question.terms)
    kept = {t: w for t, w in question.terms.items() if df.get(t, 0) <= COMMON_SHARE * n_docs}
    return kept or dict(question.terms)
