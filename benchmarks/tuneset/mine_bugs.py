#!/usr/bin/env python3
"""Mine bug-report questions (kind "bug") from repository history.

    python benchmarks/tuneset/mine_bugs.py            # all repos -> benchmarks/tuneset/bugs/*.jsonl
    ... [--repo owner/name ...] [--per-repo 30] [--dry-run] [--log FILE]

Deterministic: it reads only the bare mirrors ($LLMC_TUNE_MIRRORS, default /work/.mirror, <owner>+<name>/repo, HEAD = pin of repos.json) and the
pinned snapshots ($LLMC_TUNE_SOURCES, default /work/tunerepos); same inputs -> byte-identical output.

Units (newest first along `git rev-list --first-parent <pin>`):
  * a plain first-parent commit (GitHub squash merges: PR title + branch-commit bullets);
  * a PR merge commit ("Merge pull request #N from ..." with the PR title as body, or a pallets-style merge whose
    subject is the PR title): one unit, diff = first parent..merge, message rebuilt the way GitHub builds a squash
    message (title, then the body of the branch commit that repeats the title, then one bullet per branch commit);
  * a textless merge ("Merge branch 'stable'"): descended into -- each commit of the side branch's first-parent
    chain is a unit (that is where pallets' stable-branch fixes live), two levels deep;
  * an octopus merge (tqdm "bump version, merge pull requests #a, #b"): each side branch is a PR unit.
  Bot authors (dependabot, pre-commit-ci, ...) are skipped.

Message cleaning (question text stays as written otherwise): trailers (Signed-off-by, Co-authored-by, ...), "Merge
pull request/branch" lines, HTML comments, PR-template checklists, pre-commit.ci noise, the "-----" squash separator,
and bookkeeping bullets of squash messages ("* Lint", "* Add news fragment", "* Update src/x.py", "* Add tests", a
bullet repeating the title) are removed.  If the message is short (< MIN_WORDS) but has >= MIN_SUBJECT_WORDS words,
the changelog entry the same change adds (CHANGES.rst / CHANGELOG.md / changelog.d fragment; only the entry naming
this PR when several are added) is appended and the unit is marked question_source="message+changelog".

Filters, in order:
  1. subject is not noise: typo/spelling/grammar, bump/version/release, changelog, revert, lint/format tools, static
     typing (type hints, annotations, mypy/pyright), docs/docstrings/readme/examples, CI/tox/coverage, tests-only
     subjects, deprecations, comments, packaging/build/imports/exports/dependencies, refactor/cleanup/redundant,
     performance-only, vendoring; conventional-commit types other than fix (feat:, chore:, docs:, ...) unless the
     subject says fix/bug/crash/...;  messages mentioning type hints/annotations/mypy anywhere are dropped too;
  2. bug signal: a strong word (fix, bug, crash, regression, incorrect, wrong, broken, "does not work", infinite loop,
     hang, leak, ...) in the subject/description, a weak one (error, doesn't, fails, missing, ignored, raise,
     correctly, instead of, ...) in the subject, or a closing reference ("fixes #123", "closes <issue url>");
     subjects opening with add/implement/support/allow/expose/enable and no bug word are features: dropped;
  3. substance: >= MIN_WORDS words (MIN_WORDS_STRONG when the subject has a strong word), <= MAX_QUESTION_CHARS;
  4. 1..MAX_IMPL_FILES implementation files touched (per-repo source prefixes; no tests, docs, examples, benchmarks,
     scripts, changelogs, .pyi/.d.ts stubs, CI); no implementation file renamed or deleted;
  5. hunks (git diff -U0 -w --ignore-blank-lines; comment-only lines and Python docstring lines ignored) mapped with
     tree-sitter onto the innermost definition (function/method, or class for class-body edits) in the file before
     (deleted lines) and after (added lines) the change; Python nested functions fold into their outer function; JS/TS
     covers function/class declarations, methods, class fields and `const f = () => ...`, `obj.f = function`, object
     literal methods; 1..MAX_GOLD edited definitions required, module-level-only changes dropped;
  6. the subject must not be just the name of an edited function;
  7. pinned snapshot: each edited definition is looked up by path + qualified name; found ones become gold with their
     line range at the pin (decorators included; typing.overload stubs skipped; getter+setter both kept); class-body
     edits of classes longer than MAX_CLASS_GOLD_LINES are recorded in class_body_edits, not gold; a unit is kept when
     at least one definition survives and no more than half are missing (missing ones listed in missing_at_pin);
  8. de-duplication by normalised subject and by gold set (cherry-picks, backports); at most --per-repo per
     repository (newest first); JS/TS repositories are trimmed round-robin to MAX_JS_SHARE of the whole set.

Output line: {"id", "repo", "kind": "bug", "commit", "question", "question_source", "gold": [{"path", "start_line",
"end_line", "symbol"}], "gold_files", "date", "source" (commit|merge|octopus-side), "edited", "missing_at_pin",
"class_body_edits"}.  A decision log (one line per unit with the reason) goes to --log.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import textwrap
import subprocess
import sys
from pathlib import Path

from tree_sitter_language_pack import get_parser

MIRRORS = Path(os.environ.get("LLMC_TUNE_MIRRORS", "/work/.mirror"))
PINNED = Path(os.environ.get("LLMC_TUNE_SOURCES", "/work/tunerepos"))
TUNE = Path(__file__).resolve().parent
OUT = TUNE / "bugs"

# repo -> (short id, language family, implementation path prefixes)
REPOS = {
    "pallets/flask": ("flask", "py", ["src/flask/"]),
    "encode/httpx": ("httpx", "py", ["httpx/"]),
    "tqdm/tqdm": ("tqdm", "py", ["tqdm/"]),
    "python-attrs/attrs": ("attrs", "py", ["src/attr/", "src/attrs/"]),
    "psf/requests": ("requests", "py", ["src/requests/"]),
    "Textualize/rich": ("rich", "py", ["rich/"]),
    "pallets/click": ("click", "py", ["src/click/"]),
    "expressjs/express": ("express", "js", ["lib/", "index.js"]),
    "koajs/koa": ("koa", "js", ["lib/"]),
    "axios/axios": ("axios", "js", ["lib/", "index.js"]),
    "honojs/hono": ("hono", "js", ["src/"]),
    "colinhacks/zod": ("zod", "js", ["packages/zod/src/", "src/"]),
    "sindresorhus/ky": ("ky", "js", ["source/"]),
}
PY_REPOS = [r for r, v in REPOS.items() if v[1] == "py"]
JS_REPOS = [r for r, v in REPOS.items() if v[1] == "js"]

MAX_JS_SHARE = 0.20          # JS/TS questions at most this share of the whole set
MIN_WORDS = 15               # subject + body after cleaning
MIN_WORDS_STRONG = 10        # ... when the subject itself states a fix/bug/crash/regression
MAX_IMPL_FILES = 4
MAX_GOLD = 6                 # more edited definitions than this: too spread out to be a localisation question
MAX_CLASS_GOLD_LINES = 120   # a class is gold (for edits in its body outside methods) only if it is this small
MAX_QUESTION_CHARS = 2500
MIN_SUBJECT_WORDS = 5        # a shorter message is not completed from the changelog

# ---------------------------------------------------------------- git helpers


def git(repo: str, *args: str, check: bool = True) -> str:
    r = subprocess.run(["git", "-C", str(MIRRORS / repo.replace("/", "+") / "repo"), *args],
                       capture_output=True, check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode("utf-8", errors="replace")


def show(repo: str, rev: str, path: str) -> bytes | None:
    r = subprocess.run(["git", "-C", str(MIRRORS / repo.replace("/", "+") / "repo"), "show", f"{rev}:{path}"],
                       capture_output=True, check=False)
    return r.stdout if r.returncode == 0 else None


def commit_info(repo: str, sha: str) -> dict:
    out = git(repo, "log", "-n1", "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%B", sha)
    h, parents, an, ae, date, body = out.split("\x00", 5)
    return {"sha": h, "parents": parents.split(), "author": an, "email": ae, "date": date, "message": body}


# ---------------------------------------------------------------- file classification

EXCLUDE_PATH = re.compile(
    r"(^|/)(tests?|testing|__tests__|__mocks__|spec|specs|docs?|examples?|benchmarks?|bench|scripts|"
    r"\.github|fixtures|typing_tests|perf-measures|runtime-tests|sandbox|dist|build)(/|$)"
    r"|(^|/)(test_[^/]*|[^/]*_test\.py|conftest\.py|setup\.py|noxfile\.py)$"
    r"|\.(test|spec|bench)\.[cm]?[jt]sx?$|\.d\.[cm]?ts$|\.pyi$|(^|/)CHANGE|(^|/)HISTORY|(^|/)History")
PY_EXT = (".py",)
JS_EXT = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx")


def is_impl(repo: str, path: str) -> bool:
    _, fam, prefixes = REPOS[repo]
    if not any(path == p or path.startswith(p) for p in prefixes):
        return False
    if not path.endswith(PY_EXT if fam == "py" else JS_EXT):
        return False
    if EXCLUDE_PATH.search(path):
        return False
    if fam == "py" and "/_vendor/" in path:
        return False
    return True


# ---------------------------------------------------------------- definitions via tree-sitter

_PARSERS: dict[str, object] = {}


def parser_for(path: str):
    if path.endswith(".py"):
        lang = "python"
    elif path.endswith(".tsx"):
        lang = "tsx"
    elif path.endswith((".ts", ".mts", ".cts")):
        lang = "typescript"
    else:
        lang = "javascript"
    if lang not in _PARSERS:
        _PARSERS[lang] = get_parser(lang)
    return _PARSERS[lang]


class Def:
    __slots__ = ("qual", "kind", "start", "end", "body_start", "overload")

    def __init__(self, qual, kind, start, end, body_start, overload=False):
        self.qual, self.kind, self.start, self.end, self.body_start = qual, kind, start, end, body_start
        self.overload = overload

    def __repr__(self):
        return f"{self.kind}:{self.qual}@{self.start}-{self.end}"


def _name(node, src: bytes) -> str | None:
    n = node.child_by_field_name("name")
    if n is None:
        return None
    return src[n.start_byte:n.end_byte].decode("utf-8", errors="replace")


def _text(node, src: bytes) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", errors="replace")


def py_defs(src: bytes) -> list[Def]:
    """Classes and functions/methods. Nested functions inside functions are folded into the outer function."""
    tree = parser_for("x.py").parse(src)
    defs: list[Def] = []

    def walk(node, scope: list[str], in_func: bool):
        for ch in node.children:
            target, outer = ch, ch
            if ch.type == "decorated_definition":
                target = ch.child_by_field_name("definition") or ch
            if target.type in ("function_definition", "class_definition"):
                nm = _name(target, src)
                if nm is None:
                    continue
                kind = "class" if target.type == "class_definition" else "function"
                if not in_func:
                    body = target.child_by_field_name("body")
                    ovl = outer is not target and any(
                        d.type == "decorator" and re.search(r"\boverload\b", _text(d, src)) for d in outer.children)
                    defs.append(Def(".".join(scope + [nm]), kind, outer.start_point[0] + 1,
                                    outer.end_point[0] + 1,
                                    (body.start_point[0] + 1) if body is not None else outer.start_point[0] + 1, ovl))
                body = target.child_by_field_name("body")
                if body is not None and kind == "class" and not in_func:
                    walk(body, scope + [nm], False)
                # functions: nested defs are not separate gold
            elif ch.type in ("if_statement", "try_statement", "else_clause", "elif_clause", "except_clause",
                             "finally_clause", "block", "with_statement"):
                if not in_func:
                    walk(ch, scope, in_func)

    walk(tree.root_node, [], False)
    return defs


def py_docstring_lines(src: bytes | None) -> set[int]:
    """Lines of module/class/function docstrings: editing only those is not a behaviour change."""
    if src is None:
        return set()
    tree = parser_for("x.py").parse(src)
    lines: set[int] = set()

    def visit(node):
        body = node if node.type == "module" else node.child_by_field_name("body")
        if body is not None:
            stmts = [c for c in body.children if c.is_named and c.type != "comment"]
            if stmts and (stmts[0].type in ("string", "concatenated_string") or (
                    stmts[0].type == "expression_statement" and stmts[0].named_children and
                    stmts[0].named_children[0].type in ("string", "concatenated_string"))):
                lines.update(range(stmts[0].start_point[0] + 1, stmts[0].end_point[0] + 2))
        for c in node.children:
            if c.type in ("function_definition", "class_definition", "decorated_definition", "block",
                          "if_statement", "else_clause", "try_statement", "with_statement"):
                visit(c.child_by_field_name("definition") if c.type == "decorated_definition" else c)

    visit(tree.root_node)
    return lines


JS_FUNC_VALUES = ("arrow_function", "function_expression", "function", "generator_function")


def js_defs(src: bytes, path: str) -> list[Def]:
    tree = parser_for(path).parse(src)
    defs: list[Def] = []

    def add(qual, kind, outer, inner=None):
        inner = inner or outer
        body = inner.child_by_field_name("body")
        defs.append(Def(qual, kind, outer.start_point[0] + 1, outer.end_point[0] + 1,
                        (body.start_point[0] + 1) if body is not None else outer.start_point[0] + 1))

    def walk(node, scope: list[str]):
        for ch in node.children:
            t = ch.type
            outer = ch
            if t in ("export_statement",):
                walk(ch, scope)
                continue
            if t in ("class_declaration", "class", "abstract_class_declaration"):
                nm = _name(ch, src)
                if nm:
                    add(".".join(scope + [nm]), "class", ch)
                    body = ch.child_by_field_name("body")
                    if body is not None:
                        walk(body, scope + [nm])
                continue
            if t in ("function_declaration", "generator_function_declaration"):
                nm = _name(ch, src)
                if nm:
                    add(".".join(scope + [nm]), "function", ch)
                continue
            if t == "method_definition":
                nm = _name(ch, src)
                if nm:
                    add(".".join(scope + [nm]), "function", ch)
                continue
            if t in ("public_field_definition", "field_definition"):
                val = ch.child_by_field_name("value")
                nm = ch.child_by_field_name("name") or ch.child_by_field_name("property")
                if val is not None and val.type in JS_FUNC_VALUES and nm is not None:
                    add(".".join(scope + [_text(nm, src)]), "function", ch, val)
                continue
            if t in ("lexical_declaration", "variable_declaration"):
                for d in ch.children:
                    if d.type != "variable_declarator":
                        continue
                    val = d.child_by_field_name("value")
                    nm = d.child_by_field_name("name")
                    if val is None or nm is None or nm.type != "identifier":
                        continue
                    # unwrap `const f = wrap(() => ...)` is not done: only direct functions / classes
                    if val.type in JS_FUNC_VALUES:
                        add(".".join(scope + [_text(nm, src)]), "function", ch, val)
                    elif val.type == "class":
                        add(".".join(scope + [_text(nm, src)]), "class", ch)
                        body = val.child_by_field_name("body")
                        if body is not None:
                            walk(body, scope + [_text(nm, src)])
                    elif val.type == "object":
                        walk_object(val, scope + [_text(nm, src)])
                continue
            if t == "expression_statement":
                e = ch.children[0] if ch.children else None
                if e is not None and e.type == "assignment_expression":
                    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
                    if left is None or right is None:
                        continue
                    lname = _text(left, src)
                    if not re.fullmatch(r"[\w$.]+", lname):
                        continue
                    if lname.startswith("module.exports.") or lname.startswith("exports."):
                        lname = lname.split(".", 2)[-1] if lname.startswith("module.") else lname.split(".", 1)[1]
                    if right.type in JS_FUNC_VALUES:
                        add(".".join(scope + [lname]), "function", ch, right)
                    elif right.type == "object":
                        base = [] if lname in ("module.exports", "exports") else [lname]
                        walk_object(right, scope + base)
                    elif right.type == "class":
                        add(".".join(scope + [lname]), "class", ch)
                continue

    def walk_object(obj, scope: list[str]):
        for p in obj.children:
            if p.type == "method_definition":
                nm = _name(p, src)
                if nm:
                    add(".".join(scope + [nm]), "function", p)
            elif p.type == "pair":
                k, v = p.child_by_field_name("key"), p.child_by_field_name("value")
                if k is not None and v is not None and v.type in JS_FUNC_VALUES:
                    add(".".join(scope + [_text(k, src).strip("'\"")]), "function", p, v)

    walk(tree.root_node, [])
    return defs


def defs_of(path: str, src: bytes | None) -> list[Def]:
    if src is None:
        return []
    return py_defs(src) if path.endswith(".py") else js_defs(src, path)


def innermost(defs: list[Def], line: int) -> Def | None:
    """Innermost definition containing line (functions beat classes: they are nested inside them)."""
    best = None
    for d in defs:
        if d.start <= line <= d.end and (best is None or d.end - d.start < best.end - best.start):
            best = d
    return best


# ---------------------------------------------------------------- message handling

TRAILER = re.compile(r"^\s*(Signed-off-by|Co-authored-by|Reviewed-by|Acked-by|Tested-by|Reported-by|Suggested-by|"
                     r"Helped-by|Cc|Change-Id|Approved-by|Reviewed-on|Closes-bug)\s*:.*$", re.I | re.M)
MERGE_LINE = re.compile(r"^\s*Merge (pull request|remote-tracking branch|branch|tag|commit)\b.*$", re.I | re.M)
TEXTLESS_MERGE = re.compile(r"^\s*(Merge (remote-tracking branch|branch|tag|commit) .*|Merge \w+ into \w+\.?"
                            r"(\s*\(#\d+\))?|Merge [\w./-]+)\s*$", re.I)
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)

# strong words count anywhere in the message; weak ones only in the subject (PR title)
BUG_STRONG = re.compile(
    r"\b(fix(e[sd])?|fixing|bug(s|fix)?|crash(es|ed|ing)?|regressions?|incorrect(ly)?|wrong(ly)?|broken|"
    r"(does ?not|doesn'?t|did ?not|didn'?t|no longer) work\w*|not working|infinite loop|hangs?|hanging|leak(s|ed|ing)?|"
    r"mistaken(ly)?|misbehav\w*|erroneous(ly)?)\b", re.I)
BUG_WEAK = re.compile(
    r"\b(errors?|does ?not|doesn'?t|don'?t|didn'?t|isn'?t|wasn'?t|aren'?t|can'?t|cannot|fail(s|ed|ing|ure|ures)?|"
    r"no longer|unexpected(ly)?|instead of|raises?|handle[sd]?|properly|correct(ly)?|respect(s|ed)?|"
    r"missing|ignored?|ignores|preserved?|empty|none)\b", re.I)
CLOSING_REF = re.compile(r"\b(fix(e[sd])?|close[sd]?|resolve[sd]?)[:\s]+(#|https://github\.com/\S+/issues/)\d+", re.I)

NOISE_SUBJECT = [re.compile(p, re.I) for p in [
    r"\btypos?\b", r"\bspelling\b", r"\bmisspell", r"\bgrammar\b", r"^\W*bump\b", r"\bbump(ed)? (the )?(version|deps|"
    r"dependenc)", r"^\W*(release|prepare|preparing)\b", r"^\W*v?\d+\.\d+(\.\d+)?\W*$", r"\bchangelog\b",
    r"\bchanges\.(rst|md)\b", r"^\W*revert\b", r"\blint(s|ing|er)?\b", r"\b(flake8|pylint|ruff|black|isort|prettier|"
    r"eslint|biome|pre-commit|precommit|mypy|pyright|pyrefly|codespell|tslint|dprint)\b", r"\bre-?format(ting|ted)?\b",
    r"\bcode ?style\b", r"\bdependabot\b", r"\b(typing|type ?hints?|type annotations?|annotations?|typings?|"
    r"typecheck\w*|type[- ]check\w*)\b", r"^\W*(fix|improve|update|correct|tweak)\w* (the )?(\w+ )?(types?|generics?)\b", r"\bdocs?\b", r"\bdocstrings?\b", r"\bdocumentation\b", r"\breadme\b",
    r"\b(ci|workflows?|github actions?|tox|nox|travis|appveyor|codecov)\b", r"\bcoverage\b",
    r"^\W*(fix(es|ed|ing)?\s+)?(the\s+)?(flaky\s+|broken\s+|failing\s+)?(unit\s+)?tests?\b", r"\bdeprecat\w*",
    r"\bcomments?\b", r"\bexamples?\b", r"\bwip\b", r"\bbenchmarks?\b", r"\bpackaging\b",
    r"^\W*(improve|increase|boost)\w* (the )?(performance|speed)", r"^\W*(add|added|adding|more|improve|extend|expand)\w* (more |some |new |additional |missing )?(unit |regression )?"
    r"tests?\b", r"\bdependenc(y|ies)\b", r"\bsetup\.py\b", r"\bpyproject\b", r"\bpackage\.json\b", r"\bbuild\b", r"\bbundl\w+\b", r"\bexports?\b",
    r"\bimports?\b", r"\bpython ?[23]\.?\d*\b support", r"\bsupport python\b", r"\bdrop (support|python)\b",
    r"\brefactor\w*\b", r"\bredundant\b|\bdead code\b|\bduplicated? (code|statements?)\b", r"\bcleanup\b|\bclean up\b", r"\bremove unused\b", r"^\W*(speed ?up|optimi[sz]\w*|perf)\b", r"\bvendor\w*\b", r"^\W*document\w*\b",
]]
# anywhere in the message: the change is about static types, not behaviour
TYPES_ONLY = re.compile(r"\btype[- ]?hint(s|ing)?\b|\b(fix|correct|relax|improve|update)\w* (the )?(type )?annotations?\b|"
                        r"\bannotations? for\b|\bfix(es|ed)? the type of\b|\bmatch(es)? the type\b|\bmypy\b|\btypeshed\b|\bpyright\b|\btype[: ]+ignores?\b|\btype alias\b|\btype annotations?\b|\bfix(es|ed)? (the )?types?\b|\btype errors? "
                        r"(reported|from|in) (mypy|pyright)", re.I)
BOT_AUTHOR = re.compile(r"\[bot\]|dependabot|pre-commit-ci|renovate|github-actions", re.I)
BULLET_NOISE = re.compile(
    r"^\W*(merge\b|wip\b|\W*$|\[?pre-commit|auto fixes from pre-commit|"
    r"(add|added|adding|update|updated|fix|fixed|improve|move|moved|restore)?\s*(a |the |new |more |some )?"
    r"(news ?fragments?|changelog( entry| entries)?|changes( entry)?|change ?log|history|(unit |regression )?tests?( case)?s?|"
    r"docs?|documentation|docstrings?|contributors?|authors?|type ?hints?|typing|types?|annotations?|comments?|"
    r"versionchanged|versionadded|readme|examples?)\b|"
    r"update [\w./-]+\.(py|md|rst|txt|toml|cfg|ini|ts|js|json|ya?ml)\b|"
    r"(lint|linting|linter|format|formatting|reformat\w*|black|blacked|ruff|isort|mypy|pyright|flake8?|typos?|"
    r"whitespace|tweaks?|cleanup|clean ?up|review|code review|address(ed)? (review|comments|feedback)|"
    r"apply(ing)? suggestions?|revert|version bump|bump|coverage|pragma|simplify|rename\w*|remove (debug|comments?|"
    r"unused)|flip|style|name change|no need|refinements?|more defensive|make (the )?tests? pass|red test|"
    r"failing test|empty commit|trigger ci|retrigger|ci\b|nit|nits|oops|undo|wording|change wording|polish)\b)",
    re.I)
BULLET_NOISE_ANY = re.compile(r"^\W*(chore|test|tests|docs|style|ci|build|refactor|feat\(test[^)]*)(\([^)]*\))?!?:|"
                              r"\b(semicolons?|lint(s|ing|er)?|flake8|mypy|pyright|pre-commit|typos?|changelog|news ?fragments?|"
                              r"coverage|comments?|docstrings?|(add|added|adding|red|failing) tests?)\b", re.I)
BULLET_START = re.compile(r"^\* ")
NOISE_LINE = re.compile(r"^\s*(for more information, see https://pre-commit\.ci|This reverts commit [0-9a-f]+\.?|"
                        r"[-*]\s*\[pre-commit\.ci[^\]]*\].*)\s*$", re.I | re.M)


def clean_message(msg: str) -> str:
    msg = HTML_COMMENT.sub("", msg)
    msg = TRAILER.sub("", msg)
    msg = MERGE_LINE.sub("", msg)
    msg = NOISE_LINE.sub("", msg)
    lines = drop_checklists([ln.rstrip() for ln in msg.replace("\r\n", "\n").split("\n")])
    # GitHub's squash separator before the co-author trailers
    lines = [ln for ln in lines if not re.fullmatch(r"\s*-{5,}\s*", ln)]
    text = "\n".join(lines).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return drop_noise_bullets(text)


def drop_checklists(lines: list[str]) -> list[str]:
    """PR-template boilerplate: '## Checklist' sections and '- [x] ...' items (with their wrapped lines)."""
    out, in_section, in_item = [], False, False
    for ln in lines:
        if re.match(r"\s*#+\s", ln):
            in_section = bool(re.search(r"checklist", ln, re.I))
            in_item = False
            if in_section:
                continue
        if in_section:
            continue
        if re.match(r"\s*[-*]\s*\[[ xX]\]", ln):
            in_item = True
            continue
        if in_item and ln.strip() and not re.match(r"\s*[-*]\s", ln):
            continue
        in_item = False
        out.append(ln)
    return out


def drop_noise_bullets(text: str) -> str:
    """GitHub squash messages list every branch commit as '* subject' (+ indented/plain body paragraphs).
    Bullets that are bookkeeping ('* Lint', '* Add news fragment', '* Update src/x.py') go, with their bodies."""
    paras = re.split(r"\n\s*\n", text)
    title = set(norm_subject(paras[0].split("\n", 1)[0]).split())
    out, skipping = [], False
    for i, para in enumerate(paras):
        first = para.lstrip("\n").split("\n", 1)[0]
        if i > 0 and BULLET_START.match(first):
            item = first[2:].strip()
            skipping = bool(BULLET_NOISE.search(item) or BULLET_NOISE_ANY.search(item)) or words(item) <= 2 or \
                bool(re.search(r"\btest(s|ing|ed)?\b|\bxfail", item, re.I) and not BUG_STRONG.search(item)) or \
                any(p.search(item) for p in NOISE_SUBJECT)
            if skipping:
                continue
            toks = set(norm_subject(item).split())
            if toks and title and len(toks & title) / len(toks | title) >= 0.7:
                # the branch's main commit repeating the PR title: keep only its body
                rest = para.lstrip("\n").split("\n", 1)[1:] if "\n" in para.strip("\n") else []
                if rest and rest[0].strip():
                    out.append(textwrap.dedent(rest[0]).strip("\n"))
                continue
        elif skipping and i > 0:
            continue  # body paragraph of a dropped bullet
        out.append(para)
    return "\n\n".join(out).strip()


def description_of(text: str) -> str:
    """Body text that is not one of the squash bullets (the PR/commit description proper)."""
    paras = re.split(r"\n\s*\n", text)[1:]
    out = []
    for para in paras:
        if BULLET_START.match(para.lstrip()):
            break
        out.append(para)
    return "\n\n".join(out)


def subject_of(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def words(text: str) -> int:
    return len(re.findall(r"[A-Za-z][A-Za-z0-9_'`.-]*", text))


def side_commits(repo: str, main_parent: str, side: str) -> list[dict]:
    shas = git(repo, "rev-list", "--first-parent", side, f"^{main_parent}").split()
    return [commit_info(repo, s) for s in shas]


def norm_subject(s: str) -> str:
    s = re.sub(r"\s*\(#\d+\)\s*$", "", s).lower()
    return re.sub(r"[^a-z0-9]+", " ", s).strip()


def squash_message(title_text: str, commits: list[dict]) -> str:
    """PR title (+ description if the merge carried one), then one bullet per branch commit, oldest first."""
    seen = {norm_subject(subject_of(title_text))}
    bullets, description = [], []
    for c in reversed(commits):
        if len(c["parents"]) > 1 or BOT_AUTHOR.search(c["author"] + c["email"]):
            continue
        m = clean_message(c["message"])
        if not m:
            continue
        subj = subject_of(m)
        key = norm_subject(subj)
        body = m[len(subj):].strip()
        if key in seen and body and key == norm_subject(subject_of(title_text)) and not description:
            # the branch commit repeating the PR title: its body is the PR's description
            description.append(body)
            continue
        if key in seen or BULLET_NOISE.search(subj) or BULLET_NOISE_ANY.search(subj) or words(subj) <= 2 or \
                any(p.search(subj) for p in NOISE_SUBJECT):
            continue
        seen.add(key)
        bullets.append("* " + subj + (("\n\n  " + body.replace("\n", "\n  ")) if body else ""))
    text = title_text.strip()
    if description:
        text += "\n\n" + description[0]
    if bullets:
        text += "\n\n" + "\n\n".join(bullets)
    return drop_noise_bullets(text)


CHANGELOG_PATH = re.compile(r"(^|/)(CHANGES|CHANGELOG|HISTORY|History|NEWS)(\.\w+)?$|^changelog\.d/[^/]+\.md$", re.I)


def changelog_entry(repo: str, base: str, head: str, pr: str | None) -> str | None:
    """The changelog entry the change adds (pallets, attrs and rich describe each fix there), as one paragraph.
    When it adds several entries, only those naming this PR/issue number are taken."""
    names = [p for p in git(repo, "diff", "--name-only", base, head).split("\n") if CHANGELOG_PATH.search(p)]
    if not names:
        return None
    out = git(repo, "diff", "--no-color", "-U0", base, head, "--", *names)
    entries: list[list[str]] = []
    fragment_file = None
    for ln in out.split("\n"):
        if ln.startswith("+++ "):
            fragment_file = ln[6:] if ln.startswith("+++ b/changelog.d/") else None
            if fragment_file:
                entries.append([])
            continue
        if not ln.startswith("+"):
            continue
        s = ln[1:].strip()
        if not s:
            continue
        if re.fullmatch(r"[-=~^#*]{3,}", s) or re.match(r"(#+ |Version |Unreleased|Released)", s):
            return None  # a release section, not one entry
        if fragment_file:
            entries[-1].append(s)
        elif re.match(r"[-*]\s+", s) or not entries:
            entries.append([re.sub(r"^[-*]\s+", "", s)])
        else:
            entries[-1].append(s)
    entries = [e for e in entries if e]
    if not entries:
        return None
    if len(entries) > 1:
        if not pr:
            return None
        mine = [e for e in entries if re.search(rf"(#|/pull/|/issues/|`){pr}\b", " ".join(e))]
        if not mine:
            return None
        entries = mine
    text = "\n".join(" ".join(e) for e in entries)
    return text if len(text) <= 800 else None


# ---------------------------------------------------------------- units


def units(repo: str, pin: str):
    """Yield (unit dict) newest first: {'sha', 'base', 'head', 'message', 'date', 'author', 'via'}."""
    fp = git(repo, "rev-list", "--first-parent", pin).split()
    for sha in fp:
        c = commit_info(repo, sha)
        yield from expand(repo, c, depth=0)


def expand(repo: str, c: dict, depth: int):
    parents = c["parents"]
    if BOT_AUTHOR.search(c["author"] + c["email"]):
        return
    if len(parents) <= 1:
        if not parents:
            return
        yield {"sha": c["sha"], "base": parents[0], "head": c["sha"], "message": clean_message(c["message"]),
               "date": c["date"], "via": "commit", "raw_subject": subject_of(c["message"])}
        return
    raw_subject = subject_of(c["message"])
    text = clean_message(c["message"])
    m = re.match(r"\s*Merge pull request #(\d+) from (\S+)", c["message"])
    branch = m.group(2) if m else ""
    if len(parents) == 2 and (m or (text and not TEXTLESS_MERGE.match(raw_subject))):
        # PR merge: one unit, diff against the mainline parent
        if not text:
            return
        sides = side_commits(repo, parents[0], parents[1])
        yield {"sha": c["sha"], "base": parents[0], "head": c["sha"], "message": squash_message(text, sides),
               "date": c["date"], "via": "merge", "raw_subject": raw_subject, "branch": branch}
        return
    if len(parents) > 2:
        # octopus (tqdm "bump version, merge pull requests #a, #b"): each side branch is a PR unit
        for p in parents[1:]:
            if depth > 1:
                break
            base = git(repo, "merge-base", parents[0], p).strip()
            sides = side_commits(repo, parents[0], p)
            plain = [s for s in sides if len(s["parents"]) == 1 and not BOT_AUTHOR.search(s["author"] + s["email"])]
            if not plain:
                continue
            title = clean_message(plain[-1]["message"])  # oldest commit states the intent
            title_subj = subject_of(title)
            msg = squash_message(title, plain[:-1])
            yield {"sha": p, "base": base, "head": p, "message": msg, "date": c["date"], "via": "octopus-side",
                   "raw_subject": title_subj, "merge": c["sha"]}
        return
    # textless 2-parent merge ("Merge branch 'stable'"): descend into what it brings in
    if depth >= 2:
        return
    for s in side_commits(repo, parents[0], parents[1]):
        for u in expand(repo, s, depth + 1):
            u.setdefault("merged_by", c["sha"])
            yield u


# ---------------------------------------------------------------- diff -> edited definitions

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def changed_lines(repo: str, base: str, head: str, path: str, old_path: str,
                  old_src: bytes | None = None, new_src: bytes | None = None) -> tuple[set[int], set[int]]:
    out = git(repo, "diff", "--no-color", "--no-ext-diff", "-U0", "-w", "--ignore-blank-lines", "--no-renames",
              base, head, "--", *sorted({path, old_path}))
    old, new = set(), set()
    lines = out.split("\n")
    i = 0
    while i < len(lines):
        m = HUNK.match(lines[i])
        if not m:
            i += 1
            continue
        o, oc = int(m.group(1)), int(m.group(2) or 1)
        n, nc = int(m.group(3)), int(m.group(4) or 1)
        # only count lines whose content is more than a comment or blank
        i += 1
        ol, nl = o, n
        while i < len(lines) and not lines[i].startswith("@@") and not lines[i].startswith("diff --git"):
            ln = lines[i]
            if ln.startswith("-") and not ln.startswith("---"):
                if not trivial(ln[1:], path):
                    old.add(ol)
                ol += 1
            elif ln.startswith("+") and not ln.startswith("+++"):
                if not trivial(ln[1:], path):
                    new.add(nl)
                nl += 1
            i += 1
    if path.endswith(".py"):
        old -= py_docstring_lines(old_src)
        new -= py_docstring_lines(new_src)
    return old, new


def trivial(line: str, path: str) -> bool:
    s = line.strip()
    if path.endswith(".py"):
        return not s or s.startswith("#")
    return not s or s.startswith(("//", "/*", "*"))


def edited_defs(repo: str, base: str, head: str, path: str, old_path: str) -> list[tuple[str, str, str]]:
    """[(qualname, kind, where)] where in {'both','old','new'}; module-level edits are reported as ('<module>', ...)."""
    old_src, new_src = show(repo, base, old_path), show(repo, head, path)
    old_lines, new_lines = changed_lines(repo, base, head, path, old_path, old_src, new_src)
    old_defs = defs_of(old_path, old_src)
    new_defs = defs_of(path, new_src)
    hit: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for lines, defs, tag in ((old_lines, old_defs, "old"), (new_lines, new_defs, "new")):
        for ln in sorted(lines):
            d = innermost(defs, ln)
            if d is None:
                hit.setdefault("<module>", tag)
                kinds["<module>"] = "module"
                continue
            q = d.qual  # for a class: an edit in its body outside any method (attributes, bases, decorators)
            kinds[q] = d.kind
            hit[q] = "both" if hit.get(q, tag) != tag else tag
    new_names = {d.qual for d in new_defs}
    old_names = {d.qual for d in old_defs}
    res = []
    for q, tag in hit.items():
        where = "both" if (q in new_names and q in old_names) else ("new" if q in new_names else "old")
        res.append((q, kinds[q], where if q != "<module>" else "module"))
    return sorted(res)


# ---------------------------------------------------------------- pinned snapshot

_PIN_CACHE: dict[tuple[str, str], list[Def] | None] = {}


def pin_defs(repo: str, path: str) -> list[Def] | None:
    key = (repo, path)
    if key not in _PIN_CACHE:
        p = PINNED / repo.replace("/", "+") / path
        _PIN_CACHE[key] = defs_of(path, p.read_bytes()) if p.is_file() else None
    return _PIN_CACHE[key]


def at_pin(repo: str, path: str, qual: str) -> list[Def]:
    defs = pin_defs(repo, path)
    if not defs:
        return []
    same = [d for d in defs if d.qual == qual]
    # typing.overload stubs are not where behaviour lives: keep the implementation
    if any(not d.overload for d in same):
        same = [d for d in same if not d.overload]
    # several definitions left (property getter + setter, TS overload signatures): all of them are gold
    return same


# ---------------------------------------------------------------- per unit


def noise_subject(subj: str) -> str | None:
    s = re.sub(r"\s*\(#\d+\)\s*$", "", subj)
    for p in NOISE_SUBJECT:
        if p.search(s):
            return p.pattern
    return None


def pr_number(u: dict) -> str | None:
    m = re.search(r"\(#(\d+)\)\s*$", u.get("raw_subject", "")) or \
        re.search(r"\(#(\d+)\)\s*$", subject_of(u["message"])) or re.search(r"pull request #(\d+)", u.get("raw_subject", ""))
    return m.group(1) if m else None


def evaluate(repo: str, u: dict) -> tuple[dict | None, str]:
    msg = u["message"]
    if not msg:
        return None, "empty message"
    subj = subject_of(msg)
    reason = noise_subject(subj)
    if reason:
        return None, f"noise subject {reason}"
    if TYPES_ONLY.search(msg):
        return None, "static typing change"
    branch = u.get("branch", "").replace("-", " ").replace("/", " ").replace("_", " ")
    cc = re.match(r"\W*(feat|chore|docs|refactor|test|tests|ci|build|perf|style|types|deps|release)(\([^)]*\))?!?:", subj,
                  re.I)
    if cc and not BUG_STRONG.search(subj):
        return None, f"conventional-commit type {cc.group(1)}"
    desc = description_of(msg)
    if not (BUG_STRONG.search(subj + "\n" + desc + "\n" + branch) or BUG_WEAK.search(subj)
            or CLOSING_REF.search(msg)):
        return None, "no bug words"
    if re.match(r"\W*(add(s|ed)?|adding|implement\w*|introduc\w*|support(s)?|new|allow\w*|expose\w*|enable\w*)\b", subj, re.I) \
            and not (BUG_STRONG.search(subj) or BUG_WEAK.search(subj)):
        return None, "feature subject"
    source = "message"
    if words(msg) < (MIN_WORDS_STRONG if BUG_STRONG.search(subj) else MIN_WORDS):
        entry = changelog_entry(repo, u["base"], u["head"], pr_number(u))
        if entry and words(msg) >= MIN_SUBJECT_WORDS and words(msg + " " + entry) >= MIN_WORDS:
            msg = msg + "\n\n" + entry
            source = "message+changelog"
            if TYPES_ONLY.search(entry):
                return None, "static typing change"
        else:
            return None, "too few words"
    status = git(repo, "diff", "--name-status", "-M", u["base"], u["head"])
    impl = []
    for line in status.splitlines():
        parts = line.split("\t")
        st, paths = parts[0], parts[1:]
        if any(is_impl(repo, p) for p in paths):
            if st.startswith("R") or st.startswith("C"):
                return None, "renames implementation file"
            if st.startswith("D"):
                return None, "deletes implementation file"
            impl.append((st, paths[-1]))
    if not impl:
        return None, "no implementation file"
    if len(impl) > MAX_IMPL_FILES:
        return None, f"{len(impl)} implementation files"
    if len(msg) > MAX_QUESTION_CHARS:
        return None, "message too long"
    edited = []
    for st, path in impl:
        for q, kind, where in edited_defs(repo, u["base"], u["head"], path, path):
            edited.append({"path": path, "symbol": q, "kind": kind, "where": where})
    defs_edited = [e for e in edited if e["kind"] != "module"]
    if not defs_edited:
        return None, "only module-level edits"
    if len(defs_edited) > MAX_GOLD:
        return None, f"{len(defs_edited)} edited definitions"
    # drop subjects that are just the name of the edited function
    bare = re.sub(r"\s*\(#\d+\)\s*$", "", subj).strip("`'\" .()")
    if any(bare == e["symbol"] or bare == e["symbol"].split(".")[-1] for e in defs_edited):
        return None, "subject is the function name"
    gold, missing, unlocated = [], [], []
    for e in defs_edited:
        found = at_pin(repo, e["path"], e["symbol"])
        if e["kind"] == "class" and found:
            small = [d for d in found if d.end - d.start + 1 <= MAX_CLASS_GOLD_LINES]
            if not small:
                # edit in the body of a big class outside its methods (attributes, bases): no useful span
                unlocated.append(f"{e['path']}:{e['symbol']}")
                continue
            found = small
        if not found:
            missing.append(e)
            continue
        for d in found:
            gold.append({"path": e["path"], "start_line": d.start, "end_line": d.end, "symbol": d.qual})
    if not gold:
        return None, "no edited definition survives at the pin"
    if missing and len(missing) * 2 > len(defs_edited):
        return None, "most edited definitions gone at the pin"
    return {"question": msg, "question_source": source, "gold": gold, "edited": edited, "unlocated": unlocated, "missing_at_pin": [f"{m['path']}:{m['symbol']}" for m in missing],
            "impl_files": [p for _, p in impl]}, "ok"


def mine_repo(repo: str, pin: str, cap: int, log=None) -> list[dict]:
    short = REPOS[repo][0]
    out, seen_subjects, seen_gold = [], set(), set()
    for u in units(repo, pin):
        res, why = evaluate(repo, u)
        if log is not None:
            log.write(f"{repo}\t{u['sha'][:10]}\t{u['via']}\t{why}\t{subject_of(u['message'])[:90]}\n")
        if res is None:
            continue
        subj_key = re.sub(r"\s*\(#\d+\)\s*$", "", subject_of(u["message"])).lower()
        gold_key = tuple(sorted((g["path"], g["symbol"]) for g in res["gold"]))
        if subj_key in seen_subjects or gold_key in seen_gold:
            continue  # cherry-picks / the same fix landing twice
        seen_subjects.add(subj_key)
        seen_gold.add(gold_key)
        out.append({
            "id": f"{short}-bug-{len(out) + 1:03d}",
            "repo": repo,
            "kind": "bug",
            "commit": u["sha"],
            "question": res["question"],
            "question_source": res["question_source"],
            "gold": res["gold"],
            "gold_files": sorted({g["path"] for g in res["gold"]}),
            "date": u["date"][:10],
            "source": u["via"],
            "edited": [f"{e['path']}:{e['symbol']}" for e in res["edited"] if e["kind"] != "module"],
            "missing_at_pin": res["missing_at_pin"],
            "class_body_edits": res["unlocated"],
        })
        if len(out) >= cap:
            break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", help="only these repos (owner/name)")
    ap.add_argument("--per-repo", type=int, default=30)
    ap.add_argument("--dry-run", action="store_true", help="do not write files")
    ap.add_argument("--log", default=str(TUNE / "mine_bugs.log"), help="per-unit decision log (one line per unit)")
    a = ap.parse_args()
    pins = {r["repo"]: r["commit"] for r in json.loads((TUNE / "repos.json").read_text())}
    wanted = a.repo or (PY_REPOS + JS_REPOS)
    OUT.mkdir(parents=True, exist_ok=True)
    log = open(a.log, "w") if not a.dry_run else None
    results: dict[str, list[dict]] = {}
    for repo in [r for r in PY_REPOS + JS_REPOS if r in wanted]:
        head = git(repo, "rev-parse", "HEAD").strip()
        if head != pins[repo]:
            sys.exit(f"{repo}: mirror HEAD {head} != pin {pins[repo]}")
        results[repo] = mine_repo(repo, pins[repo], a.per_repo, log)
        print(f"{repo}: {len(results[repo])} candidates", file=sys.stderr)
    # JS/TS share cap: round-robin over JS repos, newest first, until the share would pass MAX_JS_SHARE
    n_py = sum(len(v) for r, v in results.items() if r in PY_REPOS)
    js_budget = int(n_py * MAX_JS_SHARE / (1 - MAX_JS_SHARE))
    js = [r for r in JS_REPOS if r in results]
    kept = {r: 0 for r in js}
    budget = js_budget
    progress = True
    while budget > 0 and progress:
        progress = False
        for r in js:
            if budget > 0 and kept[r] < len(results[r]):
                kept[r] += 1
                budget -= 1
                progress = True
    for r in js:
        results[r] = results[r][:kept[r]]
    for repo, rows in results.items():
        print(f"{repo}: {len(rows)}")
        if a.dry_run:
            continue
        path = OUT / (repo.replace("/", "+") + ".jsonl")
        if rows:
            path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in rows))
        elif path.exists():
            path.unlink()
    print(f"total: {sum(len(v) for v in results.values())}")


if __name__ == "__main__":
    main()
