"""A pasted error message finds the code that makes it (issue 37, item 8).

``ValueError: Invalid fields for <UserSchema(many=False)>: {'nmae'}.`` comes from ``f"Invalid fields for {self}:
{invalid_fields}."`` in one method; its words ("invalid", "fields", "for") are everywhere in a serialisation
library, so bag-of-words search ranked the method 40th (hybrid) or not at all (lexical). The lexical index now holds
the word pairs of each span's string templates (:mod:`llmc_splitters.retrieval.phrases`), a question's quoted
messages are read as pairs (:attr:`Question.messages`), and the spans that make a message rise (the ``message``
ranking rule).

One project (``tests/message_tree.py``) holds a template of each kind, each beside code that uses the message's
words more often: a Python f-string, ``.format`` and ``%`` format, a JavaScript template literal, a C ``printf``
format, Go's ``fmt.Errorf``, Rust's ``anyhow!``/``format!`` and a Bash ``echo`` with ``$var``. Each message is
pasted as a user would, and its line of code must be the first hit, lexical and hybrid (the hashing embedding and the
default ``code-static`` one), through ``CodeRetriever.search`` and the MCP service's ``search_code``; without the
rule the issue's f-string is not among the first ten, nor most of the others first.
"""

from __future__ import annotations

import shutil
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("tantivy")
pytest.importorskip("chromadb")

from llmc_splitters.errors import IndexWarning  # noqa: E402
from llmc_splitters.mcp import CodeService  # noqa: E402
from llmc_splitters.retrieval import CodeIndex, CodeRetriever, HashingEmbedding, Ranking  # noqa: E402
from llmc_splitters.retrieval.embeddings.code_static import CodeStaticEmbedding  # noqa: E402
from llmc_splitters.retrieval.phrases import message_phrases, phrase_terms  # noqa: E402
from llmc_splitters.retrieval.search.question import analyze_question  # noqa: E402
from llmc_splitters.retrieval.storage.lexical_tantivy import LexicalIndex, row_lexical_text  # noqa: E402

from message_tree import FILES, MESSAGES, write_tree  # noqa: E402

KINDS = sorted(MESSAGES)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return write_tree(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="module")
def lexical(tree) -> CodeIndex:
    idx = CodeIndex()
    idx.index_directory(tree)
    return idx


@pytest.fixture(scope="module")
def hybrid(tree, tmp_path_factory) -> CodeIndex:
    idx = CodeIndex(tmp_path_factory.mktemp("hybrid") / "index", embedding=HashingEmbedding(64))
    idx.index_directory(tree)
    return idx


@pytest.fixture(scope="module")
def static(tree, tmp_path_factory) -> CodeIndex:
    idx = CodeIndex(tmp_path_factory.mktemp("static") / "index", embedding=CodeStaticEmbedding())
    idx.index_directory(tree)
    return idx


def _rank(hits, kind: str) -> int | None:
    """The 1-based rank of the hit that holds the kind's line of code (None: not among the hits)."""
    _, path, line = MESSAGES[kind]
    return next((i for i, h in enumerate(hits, 1) if h.span.path == path and line in h.span.text), None)


# ------------------------------------------------------------------------------------------------- templates


@pytest.mark.parametrize(("code", "pairs"), [
    ('raise ValueError(f"Invalid fields for {self}: {invalid_fields}.")', ["invalid~fields", "fields~for"]),
    ('raise ValueError("Invalid fields for {0}: {1!r}".format(schema, names))', ["invalid~fields", "fields~for"]),
    ("msg = _('%(model)s with this %(field_label)s already exists.') % params", ["with~this", "already~exists"]),
    ("super(`Request failed with ${reason}: ${request.method} ${request.url}`);", ["request~failed", "failed~with"]),
    ("""fprintf(stderr, "%s: error: cannot open config file '%s': %s\\n", prog, path, strerror(errno));""",
     ["error~cannot", "cannot~open", "open~config", "config~file"]),
    ('return fmt.Errorf("unknown key binding %q for action %s: %w", key, action, err)',
     ["unknown~key", "key~binding", "for~action"]),
    ('anyhow!("failed to parse manifest at `{}`: missing field `{:?}`", path.display(), field)',
     ["failed~to", "to~parse", "parse~manifest", "manifest~at", "missing~field"]),
    ("""echo "Error: directory '$dir' is not a git repository" >&2""",
     ["error~directory", "is~not", "not~a", "a~git", "git~repository"]),
    ('raise "wrong number of arguments (given #{args.size}, expected 2)"',
     ["wrong~number", "number~of", "of~arguments", "arguments~given", "expected~2"]),
    ('throw new IllegalStateException(String.format("Cannot bind %s to port %d", host, port));',
     ["cannot~bind", "to~port"]),
], ids=["f-string", "format", "percent", "template literal", "printf", "go", "rust", "bash", "ruby", "java"])
def test_a_template_gives_the_pairs_of_its_literal_runs(code, pairs):
    assert phrase_terms(code) == pairs


def test_documentation_paths_and_words_give_no_pairs():
    # A docstring repeats a message's values (many=False); a path, a URL and an identifier are values too.
    code = ('def load(self):\n    """Load it: UserSchema(many=False).load(data) checks "every field here"."""\n'
            '    open("/etc/myapp.conf"); get("https://api.example.com/users"); key = "max_length"\n'
            "    # don't stop: it's 'fine' here\n")
    assert phrase_terms(code) == []


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(st.lists(st.sampled_from(["invalid", "fields", "for", "cannot", "open", "file", "x2", "a"]),
                              min_size=1, max_size=4), min_size=1, max_size=4),
       holes=st.lists(st.sampled_from(["{}", "{0!r}", "%s", "%-5d", "%(name)s", "${x.y}", "#{v}", "$var", "{:?}"]),
                      min_size=3, max_size=3),
       values=st.lists(st.text(st.sampled_from("ab9<>()=:,'./-_ "), max_size=12), min_size=3, max_size=3))
def test_a_message_holds_every_pair_of_its_template(runs, holes, values):
    """Whatever the placeholders hold, the message a template prints holds each pair of the template's literal
    runs (which is what the index matches)."""
    template = ""
    message = ""
    for i, run in enumerate(runs):
        literal = " ".join(run)
        template += f" {literal} " + (holes[i % 3] if i < len(runs) - 1 else "")
        message += f" {literal} " + (values[i % 3] if i < len(runs) - 1 else "")
    assert set(phrase_terms(f'raise Error("{template}")')) <= set(message_phrases(message))


# ------------------------------------------------------------------------------------------------ questions


@pytest.mark.parametrize(("question", "pair"), [
    ("ValueError: Invalid fields for <UserSchema(many=False)>: {'nmae'}.", "invalid~fields"),
    ("django.core.exceptions.ImproperlyConfigured: Requested setting DEBUG, but settings are not configured",
     "requested~setting"),
    ("Uncaught TypeError: Cannot read properties of undefined (reading 'id')", "cannot~read"),
    ('panic: unknown key binding "ctrl+q" for action quit', "unknown~key"),
    ("2024-05-01 12:00:01,123 [main] ERROR app - could not connect to the database", "could~not"),
    ("ERROR:root:could not connect to the database", "could~not"),
    ('Why does it print "could not connect to the database" when the server is up?', "could~not"),
    ("My tests fail with\n```\nE   AssertionError: expected a list of fields\n```", "expected~a"),
])
def test_a_quoted_message_is_read_as_pairs(question, pair):
    assert any(pair in m for m in analyze_question(question).messages)


@pytest.mark.parametrize("question", [
    "how are retries configured",
    "where is Flask.route defined",
    "Session.send",
    "what does the 'unknown' option do?",  # one quoted word: a name, not a message
    'How do I set "max_length" on a field?',
    "The error handler ignores the status code of a 404 response",  # 'error' with no message after it
    "Why is `Schema.load(data, many=False)` slow on a list of 10,000 items?",
    "Running `python manage.py migrate` after the upgrade takes forever",  # code in backticks
    'File "/home/me/venv/lib/python3.8/site-packages/django/core/management/__init__.py", line 12, in main',
])
def test_a_question_without_a_message_has_none(question):
    assert analyze_question(question).messages == ()


# -------------------------------------------------------------------------------------------------- search


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["lexical", "hybrid", "code-static"])
def test_the_span_that_makes_a_pasted_message_is_the_first_hit(kind, mode, lexical, hybrid, static):
    idx = {"lexical": lexical, "hybrid": hybrid, "code-static": static}[mode]
    question = MESSAGES[kind][0]
    assert _rank(CodeRetriever(index=idx).search(question, k=10).hits, kind) == 1


@pytest.mark.parametrize("mode", ["lexical", "hybrid", "code-static"])
def test_without_the_rule_bag_of_words_misses_them(mode, lexical, hybrid, static):
    """Bag of words alone ranks the code that uses the message's words more often first: the issue's f-string is
    not among the first ten, and most templates are not first."""
    idx = {"lexical": lexical, "hybrid": hybrid, "code-static": static}[mode]
    plain = Ranking().without("message")
    ranks = {kind: _rank(idx.search(MESSAGES[kind][0], k=10, ranking=plain).hits, kind) for kind in KINDS}
    assert ranks["python f-string"] is None
    assert sum(r != 1 for r in ranks.values()) >= len(KINDS) - 2, ranks


@pytest.mark.parametrize("kind", KINDS)
def test_the_mcp_service_shows_the_line_that_makes_the_message_first(kind, hybrid):
    question, path, line = MESSAGES[kind]
    reply = CodeService(lambda: CodeRetriever(index=hybrid), freshness="off").search_code(question, max_tokens=1500)
    first = reply.data["hits"][0]
    at = next(n for n, text in enumerate(FILES[path].splitlines(), 1) if line in text)
    assert first["path"] == path and first["start_line"] <= at <= first["end_line"] and first["in_context"]
    assert line in reply.text


def test_questions_without_a_message_are_ranked_as_without_the_rule(lexical, hybrid, static):
    questions = ["how are invalid fields reported", "load many users", "retry a request that failed",
                 "key binding for quit", "parse the manifest", "Schema._init_fields", "config file path",
                 "fields for the schema", "is not a git repository"]
    for idx in (lexical, hybrid, static):
        for q in questions:
            assert analyze_question(q).messages == ()
            got = idx.search(q, k=10)
            plain = idx.search(q, k=10, ranking=Ranking().without("message"))
            assert [(h.span.id, h.score) for h in got.hits] == [(h.span.id, h.score) for h in plain.hits]


def test_a_message_no_template_makes_changes_nothing(lexical):
    q = "KeyError: 'sessionid' is missing from the cookie jar"
    assert analyze_question(q).messages
    got = lexical.search(q, k=10)
    plain = lexical.search(q, k=10, ranking=Ranking().without("message"))
    assert [(h.span.id, h.score) for h in got.hits] == [(h.span.id, h.score) for h in plain.hits]


def test_a_message_every_span_says_lifts_none(tmp_path):
    """``is not`` and ``not a`` are in many templates: a message made of them pinpoints no span."""
    files = {f"checks/c{i}.py": f'def check_{i}(value):\n    if value is None:\n'
                                f'        raise ValueError(f"{{value}} is not a valid choice {i}")\n'
             for i in range(8)}
    idx = CodeIndex()
    idx.index_texts(files)
    q = "ValueError: 'x' is not a valid thing"
    assert [h.span.id for h in idx.search(q, k=8).hits] == \
        [h.span.id for h in idx.search(q, k=8, ranking=Ranking().without("message")).hits]


# ------------------------------------------------------------------------------------------- older indexes


def _downgrade(path) -> None:
    """Rewrite the lexical indexes at ``path`` as the previous layout held them (terms only, no phrases)."""
    import tantivy

    idx = CodeIndex(path)
    rows = {role: [r for p in idx.paths for r in idx.span_store.searched(p) if (r.role == "leaf") == (role == "leaves")]
            for role in ("leaves", "summaries")}
    idx.close()
    for role, got in rows.items():
        where = path / "lexical" / role
        shutil.rmtree(where)
        where.mkdir()
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        for name in ("file", "dirs", "language", "kind"):
            sb.add_text_field(name, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("terms", tokenizer_name="whitespace", index_option="freq")
        old = tantivy.Index(sb.build(), path=str(where))
        writer = old.writer(heap_size=15_000_000, num_threads=1)
        for r in got:
            doc = tantivy.Document()
            doc.add_text("id", r.span.id)
            doc.add_text("file", r.file)
            doc.add_text("language", r.span.language)
            doc.add_text("kind", r.span.kind)
            doc.add_text("terms", row_lexical_text(r.span, r.role))
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()


def test_an_index_of_the_older_layout_is_searched_then_rebuilt_by_the_next_write(tree, tmp_path):
    path = tmp_path / "index"
    CodeIndex(path).index_directory(tree)
    _downgrade(path)
    question = MESSAGES["python f-string"][0]

    old = CodeIndex(path)
    assert old.lexical("leaf").outdated and not old.lexical("leaf").has_phrases
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert old.search("how are invalid fields reported", k=5).hits  # no message: nothing to say
    with pytest.warns(IndexWarning, match="predates message matching"):
        found = old.search(question, k=10)
    assert _rank(found.hits, "python f-string") != 1  # searched by its words, as before
    old.close()

    again = CodeIndex(path)
    report = again.index_directory(tree)  # nothing changed on disk: nothing is chunked again
    assert not report.added and not report.updated
    lex = again.lexical("leaf")
    assert not lex.outdated and lex.has_phrases and not again.status()["pending"]
    assert LexicalIndex(path / "lexical" / "leaves").count() == again.leaf_count()
    assert _rank(again.search(question, k=10).hits, "python f-string") == 1


def test_the_query_command_on_an_index_of_the_older_layout_says_how_to_rebuild_it(tree, tmp_path, capsys):
    from llmc_splitters.cli import main

    path = tmp_path / "index"
    CodeIndex(path).index_directory(tree)
    _downgrade(path)
    capsys.readouterr()
    assert main(["query", MESSAGES["python f-string"][0], "--db", str(path), "--color", "never"]) == 0
    out, err = capsys.readouterr()
    assert "serial/schema.py" in out and "Traceback" not in err
    assert "predates message matching" in err and "llmc-splitters index PATH" in err
    assert main(["index", str(tree), "--db", str(path), "-q"]) == 0  # a write run rebuilds it
    capsys.readouterr()
    assert main(["query", MESSAGES["python f-string"][0], "--db", str(path), "--color", "never", "--k", "1"]) == 0
    out, err = capsys.readouterr()
    assert "predates" not in err and "1. serial/schema.py" in out


def test_removing_a_file_from_an_index_of_the_older_layout_rebuilds_it_first(tree, tmp_path):
    path = tmp_path / "index"
    CodeIndex(path).index_directory(tree)
    _downgrade(path)
    idx = CodeIndex(path)
    assert idx.remove_many(["tools/site.sh"]) == ["tools/site.sh"]
    lex = idx.lexical("leaf")
    assert not lex.outdated and not idx.status()["pending"]
    assert "tools/site.sh" not in idx.paths
    assert LexicalIndex(path / "lexical" / "leaves").count() == idx.leaf_count()
    assert _rank(idx.search(MESSAGES["python f-string"][0], k=10).hits, "python f-string") == 1


# ------------------------------------------------------------------------------------- pasted, or quoted in a question

TRACEBACK = '''Traceback (most recent call last):
  File "app.py", line 12, in <module>
    UserSchema(only=("nmae",))
  File "/venv/lib/python3.11/site-packages/serial/schema.py", line 64, in __init__
    self._init_fields()
    ^^^^^^^^^^^^^^^^^^^
ValueError: Invalid fields for <UserSchema(many=False)>: {'nmae'}.'''
ABOUT = ("My app logs 'Invalid fields for <UserSchema(many=False)>' on startup: where does the schema check which "
         "of the fields it was given are declared, and which options decide what is available?")
REPORT = '''Schema with only= and additional= rejects a declared field

When a schema declares some fields and adds others with the `additional` option, passing `only` with one of the
additional names fails although the field is available for dumping. I expected `only` to accept every field the
schema dumps, declared or additional, the same way `exclude` does; the check seems to look at the wrong set.

```
ValueError: Invalid fields for <UserSchema(many=False)>: {'nickname'}.
```

serial 3.2, Python 3.11'''


def test_the_share_of_the_question_a_message_holds():
    pasted = analyze_question(MESSAGES["python f-string"][0])
    assert pasted.message_share == 1.0
    assert analyze_question(TRACEBACK).message_share == 1.0  # the frames say where it passed: not counted
    assert 0 < analyze_question(ABOUT).message_share < 0.5
    assert 0 < analyze_question(REPORT).message_share < 0.5
    assert analyze_question("how are invalid fields reported").message_share == 0.0


@pytest.mark.parametrize("mode", ["lexical", "code-static"])
def test_a_pasted_traceback_finds_the_line_that_raised(mode, lexical, static):
    idx = lexical if mode == "lexical" else static
    assert _rank(idx.search(TRACEBACK, k=10).hits, "python f-string") == 1


@pytest.mark.parametrize("question", [ABOUT, REPORT], ids=["about a message", "report"])
def test_a_question_that_quotes_a_message_among_other_words_is_ranked_as_without_the_rule(question, lexical,
                                                                                          static):
    """A question about a message, or a report that quotes one, asks for more than the line that prints it: the
    rule lifts nothing under ``Ranking.message_question`` (and scales its lift by the square of the share)."""
    assert analyze_question(question).messages
    for idx in (lexical, static):
        got = idx.search(question, k=10)
        plain = idx.search(question, k=10, ranking=Ranking().without("message"))
        assert [(h.span.id, h.score) for h in got.hits] == [(h.span.id, h.score) for h in plain.hits]
        every = idx.search(question, k=10, ranking=Ranking(message_question=0.0))
        assert _rank(every.hits, "python f-string") is not None  # at no threshold the span joins the candidates
