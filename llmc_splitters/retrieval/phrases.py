"""Message phrases: the literal text of the string templates code builds its messages from, as word pairs.

An error message is a template's literal runs with values between them: ``f"Invalid fields for {self}:
{invalid}"`` prints ``Invalid fields for <UserSchema(many=False)>: {'nmae'}``. A pasted message shares with the code
that made it the *order* of its words, which a bag of words loses ("invalid", "fields" and "for" are everywhere).
:func:`phrase_terms` turns the string literals of code into the pairs of consecutive words of their literal runs
(``invalid~fields``, ``fields~for``), which the lexical index holds in a field of their own; :func:`message_phrases`
turns a message into the same pairs, and a span holding a message's pairs is the code that made it.

One scanner for every language: the string literals (``"..."``, ``'...'``, ``` `...` ```), each cut at its
placeholders and escapes, which covers

* Python's f-strings and ``.format`` (``{self}``, ``{0!r}``, ``{:>5}``), Rust's ``format!``/``panic!`` (``{}``,
  ``{:?}``), C#'s and Zig's ``{0}``/``{s}``, Java's ``MessageFormat`` (``{0}``);
* ``printf`` formats in C, Go's ``fmt.Errorf`` (``%v``, ``%q``, ``%w``), Python's ``%`` (``%(name)s``), Bash's and
  Lua's ``printf``/``string.format`` (``%-10s``);
* template literals in JavaScript and TypeScript, Bash, Kotlin and Groovy (``${expr}``), Ruby's and Elixir's
  ``#{expr}``, ``$name`` in Bash, PHP, Perl and Kotlin, Swift's ``\\(expr)``.

Words are lowercased runs of letters, digits and ``_`` (``max_length`` stays one word), the same in code and in a
question, so a message meets its template word for word. Two words make a pair when a space stands between them: the
words of a path, a URL or a dotted name (``/etc/myapp.conf``, ``https://api.example.com``, ``os.path``) make none,
so the value a message printed, which code may hold as a literal elsewhere, does not pass for its template.
Triple-quoted strings are documentation (docstrings, usage texts, examples that repeat a message's values), and a
literal longer than :data:`MAX_LITERAL` characters is data: neither gives pairs.

Example:
    >>> phrase_terms('raise ValueError(f"Invalid fields for {self}: {invalid}")')
    ['invalid~fields', 'fields~for']
    >>> message_phrases("Invalid fields for <UserSchema(many=False)>: {'nmae'}.")[:2]
    ['invalid~fields', 'fields~for']
"""

from __future__ import annotations

import re

__all__ = ["JOIN", "PROSE_LANGUAGES", "literal_pairs", "message_phrases", "phrase_terms", "phrase_text",
           "quoted_literals"]

PROSE_LANGUAGES = frozenset({"markdown", "text", "rst", "html"})
"""Languages whose text is prose: it describes messages, it does not make them (no phrases are indexed of it)."""

JOIN = "~"
"""What joins the two words of a pair (a character no word holds)."""
MAX_LITERAL = 400
"""A literal longer than this (characters) is data (an embedded table, a template file), not a message: it gives
no pairs."""

_STRING = re.compile(
    r'(?P<tq>"""|\'\'\').*?(?P=tq)'  # triple-quoted: documentation, skipped whole (Python, Kotlin, Swift, Scala)
    r'|"(?P<dq>(?:[^"\\\n]|\\.)*)"'  # a prefix (f, r, b, L, $, @, s) stands outside the quote
    # An apostrophe inside a word (don't) opens nothing; a string prefix (f', rb') may stand before a quote.
    r"|(?:(?<![\w'])|(?<=(?<!\w)[fFrRbBuU])|(?<=(?<!\w)[fFrRbBuU]{2}))'(?P<sq>(?:[^'\\\n]|\\.)*)'"
    r"|`(?P<bq>(?:[^`\\]|\\.)*)`",  # template literals, Go's raw strings (several lines)
    re.S,
)
_NESTED = r"(?:[^{}\n]|\{[^{}\n]*\})*"
_PLACEHOLDER = re.compile(
    rf"[$#]?\{{{_NESTED}\}}"  # {expr} {} {0} {:?}, ${expr}, #{expr}
    r"|%(?:\([^)\n]*\))?[-+#0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh?|ll?|[Lqjzt])?[diouxXeEfFgGaAcsSrpnvTqwb%]"
    r"|\$\w+"  # $name
    r"|\\\([^)\n]*\)"  # Swift's \(expr)
    r"|\\(?:x[0-9a-fA-F]{1,2}|u\{?[0-9a-fA-F]{1,6}\}?|[0-7]{1,3}|.)",  # escapes: \n \t \" \x1b
    re.S,
)
_WORD = re.compile(r"[^\W_]\w*|_\w*[^\W_]\w*")
_SPACE = re.compile(r"\s")


def literal_pairs(literal: str) -> list[str]:
    """The word pairs of a string literal's content: its literal runs (cut at placeholders and escapes), each word
    with the next when a space stands between them, lowercased, in order.

    >>> literal_pairs("expected %d arguments, got {n} in /usr/lib/x.so: ${name} failed")
    ['arguments~got', 'in~usr']
    """
    out = []
    for run in _PLACEHOLDER.split(literal.lower()):
        prev, end = None, 0
        for m in _WORD.finditer(run):
            if prev is not None and _SPACE.search(run, end, m.start()):
                out.append(f"{prev}{JOIN}{m.group()}")
            prev, end = m.group(), m.end()
    return out


def quoted_literals(text: str, *, backticks: bool = True) -> list[str]:
    """The contents of the string literals of ``text`` (of at most :data:`MAX_LITERAL` characters), in order;
    without ``backticks``, not those in backticks (Markdown's code, in a question)."""
    out = []
    for m in _STRING.finditer(text):
        if m.group("tq"):
            continue
        content = next(g for g in (m.group("dq"), m.group("sq"), m.group("bq")) if g is not None)
        if content and len(content) <= MAX_LITERAL and (backticks or m.group("bq") is None):
            out.append(content)
    return out


def phrase_terms(code: str) -> list[str]:
    """The word pairs of ``code``'s string literals (:func:`literal_pairs`), in order (repeats kept)."""
    return [p for lit in quoted_literals(code) for p in literal_pairs(lit)]


def phrase_text(code: str) -> str:
    """:func:`phrase_terms` as the lexical index stores them (space-separated)."""
    return " ".join(phrase_terms(code))


def message_phrases(message: str) -> list[str]:
    """The word pairs of a message as printed (values and all), as :func:`literal_pairs` reads a template (cut
    where a placeholder or an escape could not be literal text: ``{...}``, ``%s``, ``\\n``), each pair once."""
    return list(dict.fromkeys(literal_pairs(message)))
