"""The benchmark corpus: real third-party code fetched by exact version, and CodeSearchNet-style queries.

Nothing here is committed but this code: packages are fetched at run time into ``benchmarks/.cache/`` with the
ordinary registry clients (``pip download`` for Python sdists, ``npm pack`` for JavaScript/TypeScript, ``apt-get
download`` + ``dpkg-deb -x`` for Debian packages that ship shell scripts).

Queries follow CodeSearchNet: for a documented function, the first sentence of its docstring / JSDoc / comment
block is the query; that doc is removed from the file (the file is re-parsed and must have no more syntax errors
than before); the whole function, decorators included, is the gold span, located in the *modified* file.
"""

from __future__ import annotations

import fnmatch
import io
import random
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

CACHE_DIR = Path(__file__).resolve().parent / ".cache"

LANGUAGES = ("python", "javascript", "typescript", "bash")


@dataclass(frozen=True)
class PackageSpec:
    """One published package at an exact version, and which of its files are source."""

    language: str
    registry: str  # "pypi" | "npm" | "debian"
    name: str
    version: str
    split: str  # "tune" | "heldout"
    include: tuple[str, ...]  # fnmatch globs on the path inside the package
    exclude: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name}=={self.version}"


_PY_EXCLUDE = ("*/tests/*", "*/test/*", "*/docs/*", "*/examples/*", "*/benchmarks/*", "*/setup.py", "*/conftest.py")
_JS_EXCLUDE = ("*.min.js", "*/dist/*", "*/test/*", "*/tests/*", "*/__tests__/*", "*.test.*", "*.spec.*")
_TS_EXCLUDE = ("*.d.ts", "*.test.ts", "*.spec.ts", "*/__tests__/*", "*/tests/*", "*/test/*")

# Tune packages are the only ones looked at while choosing settings (chunk budget, query filters); held-out
# packages are reported separately and are the basis of the headline numbers.
PACKAGES: tuple[PackageSpec, ...] = (
    # Python: sdists from PyPI.
    PackageSpec("python", "pypi", "requests", "2.32.3", "tune", ("*/src/requests/*.py",), _PY_EXCLUDE),
    PackageSpec("python", "pypi", "click", "8.1.7", "tune", ("*/src/click/*.py",), _PY_EXCLUDE),
    PackageSpec("python", "pypi", "boltons", "24.1.0", "heldout", ("*/boltons/*.py",), _PY_EXCLUDE),
    PackageSpec("python", "pypi", "toolz", "1.0.0", "heldout", ("*/toolz/*.py", "*/toolz/*/*.py"), _PY_EXCLUDE),
    # JavaScript: npm tarballs, JSDoc-commented sources.
    PackageSpec("javascript", "npm", "lodash-es", "4.17.21", "tune", ("package/*.js",), _JS_EXCLUDE),
    PackageSpec("javascript", "npm", "express", "4.21.2", "tune", ("package/lib/*.js", "package/lib/*/*.js"),
                _JS_EXCLUDE),
    PackageSpec("javascript", "npm", "axios", "1.7.9", "heldout", ("package/lib/*.js", "package/lib/*/*.js",
                                                                    "package/lib/*/*/*.js"), _JS_EXCLUDE),
    PackageSpec("javascript", "npm", "async", "3.2.6", "heldout", ("package/*.js", "package/internal/*.js"),
                _JS_EXCLUDE),
    # TypeScript: npm packages that ship their .ts sources.
    PackageSpec("typescript", "npm", "rxjs", "7.8.1", "tune", ("package/src/internal/*.ts",
                                                               "package/src/internal/*/*.ts"), _TS_EXCLUDE),
    PackageSpec("typescript", "npm", "immer", "10.1.1", "tune", ("package/src/*.ts", "package/src/*/*.ts"),
                _TS_EXCLUDE),
    PackageSpec("typescript", "npm", "mobx", "6.13.5", "heldout", ("package/src/*.ts", "package/src/*/*.ts"),
                _TS_EXCLUDE),
    PackageSpec("typescript", "npm", "@tanstack/query-core", "5.62.0", "heldout", ("package/src/*.ts",),
                _TS_EXCLUDE),
    # Bash: Debian packages whose payload is shell scripts.
    PackageSpec("bash", "debian", "bash-completion", "1:2.11-6", "tune",
                ("usr/share/bash-completion/bash_completion", "usr/share/bash-completion/completions/*")),
    PackageSpec("bash", "debian", "libtool", "2.4.7-7~deb12u1", "tune",
                ("usr/share/libtool/build-aux/ltmain.sh", "usr/bin/libtoolize")),
    PackageSpec("bash", "debian", "dracut-core", "059-4", "heldout",
                ("usr/lib/dracut/*.sh", "usr/lib/dracut/modules.d/*/*.sh", "usr/bin/dracut", "usr/bin/lsinitrd")),
    PackageSpec("bash", "debian", "git", "1:2.39.5-0+deb12u3", "heldout",
                ("usr/share/bash-completion/completions/git", "usr/lib/git-core/git-sh-setup",
                 "usr/lib/git-core/git-sh-i18n", "usr/lib/git-core/git-submodule", "usr/lib/git-core/git-*--*",
                 "usr/lib/git-core/mergetools/*", "usr/share/git-core/contrib/completion/*.sh",
                 "usr/lib/git-core/git-mergetool", "usr/lib/git-core/git-bisect", "usr/lib/git-core/git-web--browse",
                 "usr/lib/git-core/git-quiltimport", "usr/lib/git-core/git-request-pull",
                 "usr/lib/git-core/git-filter-branch", "usr/lib/git-core/git-difftool--helper")),
)


# --------------------------------------------------------------------------------------------------------------
# Fetching
# --------------------------------------------------------------------------------------------------------------


def _run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        msg = f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        raise RuntimeError(msg)
    return proc.stdout


def _safe_name(spec: PackageSpec) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{spec.registry}-{spec.name}-{spec.version}")


def fetch(spec: PackageSpec, cache_dir: Path = CACHE_DIR) -> tuple[Path, str]:
    """Download and unpack one package (once); return (unpacked root, version actually fetched)."""
    root = cache_dir / _safe_name(spec)
    done = root / ".done"
    if done.exists():
        return root / "x", done.read_text().strip() or spec.version
    if root.exists():
        shutil.rmtree(root)
    dl = root / "dl"
    dl.mkdir(parents=True)
    out = root / "x"
    out.mkdir()
    version = spec.version
    if spec.registry == "pypi":
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
              "-q", "-d", str(dl), f"{spec.name}=={spec.version}"], cwd=dl)
        archive = next(p for p in dl.iterdir() if p.is_file())
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(out)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(out, filter="data")
    elif spec.registry == "npm":
        name = _run(["npm", "pack", "--silent", f"{spec.name}@{spec.version}"], cwd=dl).strip().splitlines()[-1]
        with tarfile.open(dl / name) as tf:
            tf.extractall(out, filter="data")
    elif spec.registry == "debian":
        try:
            _run(["apt-get", "download", f"{spec.name}={spec.version}"], cwd=dl)
        except RuntimeError:
            # Debian point releases replace versions; fall back to the current candidate and record it.
            try:
                _run(["apt-get", "download", spec.name], cwd=dl)
            except RuntimeError:
                _run(["apt-get", "update", "-qq"], cwd=dl)
                _run(["apt-get", "download", spec.name], cwd=dl)
        deb = next(p for p in dl.iterdir() if p.suffix == ".deb")
        version = _run(["dpkg-deb", "-f", str(deb), "Version"], cwd=dl).strip()
        _run(["dpkg-deb", "-x", str(deb), str(out)], cwd=dl)
    else:
        msg = f"unknown registry {spec.registry!r}"
        raise ValueError(msg)
    shutil.rmtree(dl, ignore_errors=True)
    done.write_text(version)
    return out, version


def package_files(spec: PackageSpec, root: Path) -> list[tuple[str, str]]:
    """(relative path, text) of the package's source files, sorted by path."""
    files: list[tuple[str, str]] = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        rel = p.relative_to(root).as_posix()
        if not any(fnmatch.fnmatch(rel, g) for g in spec.include):
            continue
        if any(fnmatch.fnmatch("/" + rel, g) or fnmatch.fnmatch(rel, g) for g in spec.exclude):
            continue
        try:
            text = p.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        if spec.language == "bash" and not _looks_like_shell(rel, text):
            continue
        if not text.strip():
            continue
        files.append((rel, text))
    return files


def _looks_like_shell(rel: str, text: str) -> bool:
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        return bool(re.search(r"\b(ba|da|k)?sh\b", first))
    return "bash-completion" in rel or rel.endswith((".sh", ".bash")) or "mergetools" in rel


# --------------------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------------------


@dataclass
class SourceFile:
    """One corpus file, after doc removal."""

    package: str
    language: str
    path: str
    text: str
    line_starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.line_starts:
            self.line_starts = line_starts(self.text)

    def line_of(self, char: int) -> int:
        """1-based line of the character at ``char``."""
        import bisect

        return bisect.bisect_right(self.line_starts, char)

    def line_range(self, line: int) -> tuple[int, int]:
        """Char range [start, end) of a 1-based line, newline included."""
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        return start, end


@dataclass
class Query:
    """One CodeSearchNet-style query and its gold function."""

    qid: str
    package: str
    language: str
    path: str
    text: str
    name: str
    gold_start: int  # char offsets in the modified file, half-open
    gold_end: int
    start_line: int
    end_line: int
    is_method: bool = False
    class_line: int | None = None  # line of the enclosing class's name
    import_lines: list[int] = field(default_factory=list)  # lines that must be present (import bindings used)

    @property
    def needs_context(self) -> bool:
        return self.is_method or bool(self.import_lines)


@dataclass
class Package:
    spec: PackageSpec
    version: str
    files: list[SourceFile]
    queries: list[Query]
    total_bytes: int  # of the kept files
    all_files: int  # files in the package before the size cap


@dataclass
class Corpus:
    packages: list[Package]

    def files(self, language: str | None = None) -> list[SourceFile]:
        return [f for p in self.packages for f in p.files if language in (None, p.spec.language)]

    def queries(self, language: str | None = None) -> list[Query]:
        return [q for p in self.packages for q in p.queries if language in (None, p.spec.language)]


def line_starts(text: str) -> list[int]:
    starts = [0]
    i = text.find("\n")
    while i != -1:
        if i + 1 < len(text):
            starts.append(i + 1)
        i = text.find("\n", i + 1)
    return starts


# --------------------------------------------------------------------------------------------------------------
# Query extraction
# --------------------------------------------------------------------------------------------------------------

_PARSERS: dict[str, object] = {}


def get_parser(language: str):  # noqa: ANN201
    if language not in _PARSERS:
        from tree_sitter_language_pack import get_parser as _gp

        _PARSERS[language] = _gp(language)
    return _PARSERS[language]


class _ByteChar:
    """Map UTF-8 byte offsets to str offsets."""

    def __init__(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self.identity = len(data) == len(text)
        if not self.identity:
            table = [0] * (len(data) + 1)
            b = 0
            for i, ch in enumerate(text):
                n = len(ch.encode("utf-8", "surrogatepass"))
                for k in range(n):
                    table[b + k] = i
                b += n
            table[len(data)] = len(text)
            self.table = table

    def __call__(self, byte: int) -> int:
        return byte if self.identity else self.table[byte]


def _error_count(root) -> int:  # noqa: ANN001
    n = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            n += 1
        if node.has_error:
            stack.extend(node.children)
    return n


def first_sentence(doc: str) -> str:
    """The first sentence of a doc text (CodeSearchNet's query)."""
    doc = doc.strip()
    para = re.split(r"\n\s*\n", doc, maxsplit=1)[0]
    para = " ".join(line.strip() for line in para.splitlines())
    para = re.sub(r"\{@link\s+([^}|\s]+)[^}]*\}", r"\1", para)
    para = re.sub(r"<[^>]+>", "", para)
    m = re.search(r"(?<=[.!?])\s", para)
    sent = para[: m.start()] if m else para
    return sent.strip()


def _clean_python_docstring(raw: str) -> str:
    s = raw.strip()
    m = re.match(r"^[rRuUbBfF]*('''|\"\"\"|'|\")", s)
    if not m:
        return ""
    q = m.group(1)
    s = s[m.end():]
    if s.endswith(q):
        s = s[: -len(q)]
    return s


def _clean_jsdoc(raw: str) -> str:
    s = raw.strip()
    if not s.startswith("/**") or s.startswith("/***"):
        return ""
    s = s[3:]
    if s.endswith("*/"):
        s = s[:-2]
    lines = [re.sub(r"^\s*\*\s?", "", ln) for ln in s.splitlines()]
    out = []
    for ln in lines:
        if ln.strip().startswith("@"):
            break
        out.append(ln)
    return "\n".join(out)


def _clean_shell_comment(lines: list[str]) -> str:
    out = []
    for ln in lines:
        t = ln.strip()
        if t.startswith("#!"):
            continue
        t = t.lstrip("#").strip()
        if re.fullmatch(r"[-=#*_~ ]*", t):
            out.append("")
            continue
        out.append(t)
    return "\n".join(out)


def _usable_query(q: str) -> bool:
    words = q.split()
    if len(words) < 3 or len(words) > 60:
        return False
    return not re.match(r"(?i)^(todo|fixme|xxx|copyright|license|deprecated|usage:|@|\$)", q)


def _whole_lines(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Extend [start, end) to whole lines, if only whitespace lies beside it on its first and last line."""
    ls = text.rfind("\n", 0, start) + 1
    le = text.find("\n", end)
    le = len(text) if le == -1 else le + 1
    if text[ls:start].strip() or text[end:le].strip():
        return None
    return ls, le


@dataclass
class _Candidate:
    name: str
    doc: str
    remove: tuple[int, int]  # char range to delete
    gold: tuple[int, int]  # char range in the original file
    is_method: bool
    class_name_char: int | None
    names_used: set[str]


def _identifiers(node, bc: _ByteChar, text: str, kinds: tuple[str, ...]) -> set[str]:  # noqa: ANN001
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in kinds:
            out.add(text[bc(n.start_byte): bc(n.end_byte)])
        stack.extend(n.children)
    return out


def _python_candidates(root, text: str, bc: _ByteChar) -> list[_Candidate]:  # noqa: ANN001
    out: list[_Candidate] = []

    def visit(node, in_class, class_name_char: int | None) -> None:  # noqa: ANN001
        for child in node.children:
            target = child
            if child.type == "decorated_definition":
                target = child.child_by_field_name("definition")
            if target is None:
                continue
            if target.type == "class_definition":
                name = target.child_by_field_name("name")
                body = target.child_by_field_name("body")
                if body is not None:
                    visit(body, True, bc(name.start_byte) if name else bc(target.start_byte))
            elif target.type == "function_definition":
                cand = _python_function(child, target, text, bc, in_class, class_name_char)
                if cand:
                    out.append(cand)
            elif child.type in ("if_statement", "try_statement", "block", "else_clause", "elif_clause"):
                if not in_class:
                    visit(child, in_class, class_name_char)

    visit(root, False, None)
    return out


def _python_function(outer, fn, text, bc, in_class, class_name_char):  # noqa: ANN001, ANN202
    body = fn.child_by_field_name("body")
    if body is None or body.named_child_count < 2:
        return None
    first = body.named_children[0]
    if first.type in ("string", "concatenated_string"):
        s = first
    elif first.type == "expression_statement" and first.named_child_count == 1:
        s = first.named_children[0]
    else:
        return None
    if s.type not in ("string", "concatenated_string"):
        return None
    raw = text[bc(s.start_byte): bc(s.end_byte)]
    doc = _clean_python_docstring(raw)
    if not doc:
        return None
    rng = _whole_lines(text, bc(first.start_byte), bc(first.end_byte))
    if rng is None:
        return None
    name_node = fn.child_by_field_name("name")
    name = text[bc(name_node.start_byte): bc(name_node.end_byte)] if name_node else "?"
    used = _identifiers(body, bc, text, ("identifier",))
    return _Candidate(name, doc, rng, (bc(outer.start_byte), bc(outer.end_byte)), in_class, class_name_char, used)


_JS_FUNC_VALUES = ("arrow_function", "function_expression", "function", "generator_function")


def _js_candidates(root, text: str, bc: _ByteChar) -> list[_Candidate]:  # noqa: ANN001
    out: list[_Candidate] = []

    def doc_before(stmt):  # noqa: ANN001, ANN202
        """The /** */ comment directly before ``stmt`` (skipping decorators), and the first node of the gold."""
        first = stmt
        prev = stmt.prev_sibling
        while prev is not None and prev.type == "decorator":
            first = prev
            prev = prev.prev_sibling
        if prev is None or prev.type != "comment":
            return None, first
        between = text[bc(prev.end_byte): bc(first.start_byte)]
        if between.strip() or between.count("\n") > 1:
            return None, first
        return prev, first

    def consider(stmt, fn, name: str, is_method: bool, class_name_char, anchor=None) -> None:  # noqa: ANN001
        if fn.child_by_field_name("body") is None:
            return
        comment, first = doc_before(anchor if anchor is not None else stmt)
        if comment is None:
            return
        raw = text[bc(comment.start_byte): bc(comment.end_byte)]
        doc = _clean_jsdoc(raw)
        if not doc.strip():
            return
        rng = _whole_lines(text, bc(comment.start_byte), bc(comment.end_byte))
        if rng is None:
            return
        used = _identifiers(fn, bc, text, ("identifier", "type_identifier", "shorthand_property_identifier"))
        out.append(_Candidate(name, doc, rng, (bc(first.start_byte), bc(stmt.end_byte)), is_method,
                              class_name_char, used))

    def node_text(n) -> str:  # noqa: ANN001
        return text[bc(n.start_byte): bc(n.end_byte)] if n is not None else "?"

    def visit(node, depth: int) -> None:  # noqa: ANN001
        for child in node.children:
            stmt = child
            inner = child
            if child.type == "export_statement":
                decl = child.child_by_field_name("declaration")
                if decl is None:
                    continue
                inner = decl
            t = inner.type
            if t in ("function_declaration", "generator_function_declaration"):
                name = node_text(inner.child_by_field_name("name"))
                # TypeScript overloads: the doc sits above the first signature; the gold spans all of them.
                anchor, prev = stmt, stmt.prev_sibling
                while prev is not None:
                    sig = prev.child_by_field_name("declaration") if prev.type == "export_statement" else prev
                    if sig is None or sig.type != "function_signature" or \
                            node_text(sig.child_by_field_name("name")) != name:
                        break
                    anchor, prev = prev, prev.prev_sibling
                consider(stmt, inner, name, False, None, anchor)
            elif t in ("lexical_declaration", "variable_declaration"):
                decls = [c for c in inner.named_children if c.type == "variable_declarator"]
                if len(decls) == 1:
                    val = decls[0].child_by_field_name("value")
                    if val is not None and val.type in _JS_FUNC_VALUES:
                        consider(stmt, val, node_text(decls[0].child_by_field_name("name")), False, None)
            elif t == "expression_statement" and inner.named_child_count == 1:
                asg = inner.named_children[0]
                if asg.type == "assignment_expression":
                    val = asg.child_by_field_name("right")
                    if val is not None and val.type in _JS_FUNC_VALUES:
                        consider(stmt, val, node_text(asg.child_by_field_name("left")), False, None)
            elif t in ("class_declaration", "abstract_class_declaration", "class"):
                name = inner.child_by_field_name("name")
                body = inner.child_by_field_name("body")
                if body is None:
                    continue
                cchar = bc(name.start_byte) if name is not None else bc(inner.start_byte)
                for m in body.children:
                    if m.type == "method_definition":
                        consider(m, m, node_text(name) + "." + node_text(m.child_by_field_name("name")), True,
                                 cchar)

    visit(root, 0)
    return out


def _bash_candidates(root, text: str, bc: _ByteChar) -> list[_Candidate]:  # noqa: ANN001
    out: list[_Candidate] = []
    for child in root.children:
        if child.type != "function_definition":
            continue
        comments = []
        prev = child.prev_sibling
        cur_start = bc(child.start_byte)
        while prev is not None and prev.type == "comment":
            between = text[bc(prev.end_byte): cur_start]
            if between.strip() or between.count("\n") != 1:
                break
            comments.append(prev)
            cur_start = bc(prev.start_byte)
            prev = prev.prev_sibling
        if not comments:
            continue
        comments.reverse()
        lines = [text[bc(c.start_byte): bc(c.end_byte)] for c in comments]
        if lines[0].startswith("#!"):
            continue
        name_node = child.child_by_field_name("name")
        name = text[bc(name_node.start_byte): bc(name_node.end_byte)] if name_node else "?"
        # Drop a leading usage line ("# func_quote MODEs ARGs...") as CodeSearchNet drops signatures.
        while lines and re.match(rf"^#+\s*{re.escape(name)}\b", lines[0]):
            lines = lines[1:]
        doc = _clean_shell_comment(lines)
        rng = _whole_lines(text, bc(comments[0].start_byte), bc(comments[-1].end_byte))
        if rng is None or not doc.strip():
            continue
        out.append(_Candidate(name, doc, rng, (bc(child.start_byte), bc(child.end_byte)), False, None, set()))
    return out


def _python_imports(root, text: str, bc: _ByteChar) -> dict[str, list[tuple[int, int]]]:  # noqa: ANN001
    """name -> [(statement start char, binding char)] for module-level imports."""
    out: dict[str, list[tuple[int, int]]] = {}

    def add(name_node, stmt) -> None:  # noqa: ANN001
        out.setdefault(text[bc(name_node.start_byte): bc(name_node.end_byte)], []).append(
            (bc(stmt.start_byte), bc(name_node.start_byte)))

    def visit(node) -> None:  # noqa: ANN001
        for st in node.children:
            if st.type == "import_statement":
                for n in st.named_children:
                    if n.type == "dotted_name" and n.named_child_count:
                        add(n.named_children[0], st)
                    elif n.type == "aliased_import":
                        alias = n.child_by_field_name("alias")
                        if alias is not None:
                            add(alias, st)
            elif st.type == "import_from_statement":
                module = st.child_by_field_name("module_name")
                for n in st.named_children:
                    if n == module:
                        continue
                    if n.type == "dotted_name" and n.named_child_count:
                        add(n.named_children[-1], st)
                    elif n.type == "aliased_import":
                        alias = n.child_by_field_name("alias")
                        if alias is not None:
                            add(alias, st)
            elif st.type in ("if_statement", "try_statement", "block", "else_clause", "except_clause",
                             "elif_clause"):
                visit(st)

    visit(root)
    return out


def _js_imports(root, text: str, bc: _ByteChar) -> dict[str, list[tuple[int, int]]]:  # noqa: ANN001
    out: dict[str, list[tuple[int, int]]] = {}

    def add(name_node, stmt) -> None:  # noqa: ANN001
        out.setdefault(text[bc(name_node.start_byte): bc(name_node.end_byte)], []).append(
            (bc(stmt.start_byte), bc(name_node.start_byte)))

    for st in root.children:
        if st.type == "import_statement":
            for clause in st.named_children:
                if clause.type != "import_clause":
                    continue
                for n in clause.named_children:
                    if n.type == "identifier":
                        add(n, st)
                    elif n.type == "namespace_import":
                        for k in n.named_children:
                            if k.type == "identifier":
                                add(k, st)
                    elif n.type == "named_imports":
                        for spec in n.named_children:
                            if spec.type != "import_specifier":
                                continue
                            alias = spec.child_by_field_name("alias") or spec.child_by_field_name("name")
                            if alias is not None:
                                add(alias, st)
        elif st.type in ("lexical_declaration", "variable_declaration"):
            for d in st.named_children:
                if d.type != "variable_declarator":
                    continue
                val = d.child_by_field_name("value")
                if val is None or val.type != "call_expression":
                    continue
                fn = val.child_by_field_name("function")
                if fn is None or text[bc(fn.start_byte): bc(fn.end_byte)] != "require":
                    continue
                name = d.child_by_field_name("name")
                if name is None:
                    continue
                if name.type == "identifier":
                    add(name, st)
                elif name.type == "object_pattern":
                    for p in name.named_children:
                        if p.type == "shorthand_property_identifier_pattern":
                            add(p, st)
                        elif p.type == "pair_pattern":
                            v = p.child_by_field_name("value")
                            if v is not None and v.type == "identifier":
                                add(v, st)
    return out


_EXTRACTORS = {"python": _python_candidates, "javascript": _js_candidates, "typescript": _js_candidates,
               "bash": _bash_candidates}
_IMPORTS = {"python": _python_imports, "javascript": _js_imports, "typescript": _js_imports}


def parser_language(language: str, path: str = "") -> str:
    if language == "typescript" and path.endswith(".tsx"):
        return "tsx"
    return language


def extract_queries(package: str, language: str, path: str, text: str, max_queries: int | None = None,
                    seed: str = "") -> tuple[str, list[Query]]:
    """Remove the docs of (up to ``max_queries``) documented functions; return the new text and the queries."""
    parser = get_parser(parser_language(language, path))
    data = text.encode("utf-8", "surrogatepass")
    tree = parser.parse(data)
    bc = _ByteChar(text)
    cands = []
    seen_queries: set[str] = set()
    for c in _EXTRACTORS[language](tree.root_node, text, bc):
        q = first_sentence(c.doc)
        if not _usable_query(q) or q.lower() in seen_queries:
            continue
        seen_queries.add(q.lower())
        cands.append((c, q))
    if not cands:
        return text, []
    if max_queries is not None and len(cands) > max_queries:
        rng = random.Random(f"{seed}:{path}")
        cands = sorted(rng.sample(cands, max_queries), key=lambda cq: cq[0].gold[0])
    imports = _IMPORTS.get(language, lambda *_: {})(tree.root_node, text, bc)
    removals = sorted(c.remove for c, _ in cands)
    # Removed ranges never overlap (each is a distinct doc).
    pieces, pos = [], 0
    for s, e in removals:
        pieces.append(text[pos:s])
        pos = e
    pieces.append(text[pos:])
    new_text = "".join(pieces)

    def shift(p: int) -> int:
        return p - sum(e - s for s, e in removals if e <= p)

    new_tree = parser.parse(new_text.encode("utf-8", "surrogatepass"))
    if _error_count(new_tree.root_node) > _error_count(tree.root_node):
        return text, []
    sf = SourceFile(package, language, path, new_text)
    queries: list[Query] = []
    for c, q in cands:
        gs, ge = shift(c.gold[0]), shift(c.gold[1])
        # Trailing newline is not part of a node; the gold span is the node's chars.
        start_line, end_line = sf.line_of(gs), sf.line_of(max(gs, ge - 1))
        if end_line - start_line + 1 < 3:
            continue
        class_line = sf.line_of(shift(c.class_name_char)) if c.class_name_char is not None else None
        import_lines: set[int] = set()
        for name in sorted(c.names_used):
            for stmt_char, bind_char in imports.get(name, []):
                import_lines.add(sf.line_of(shift(stmt_char)))
                import_lines.add(sf.line_of(shift(bind_char)))
        queries.append(Query(
            qid=f"{package}:{path}:{start_line}", package=package, language=language, path=path, text=q,
            name=c.name, gold_start=gs, gold_end=ge, start_line=start_line, end_line=end_line,
            is_method=c.is_method, class_line=class_line, import_lines=sorted(import_lines)))
    return new_text, queries


# --------------------------------------------------------------------------------------------------------------
# Building the corpus
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusConfig:
    max_bytes_per_package: int = 48_000
    max_queries_per_package: int = 40
    max_queries_per_file: int = 6
    splits: tuple[str, ...] = ("tune", "heldout")
    packages_per_split: int | None = None  # per language; None = all


QUICK = CorpusConfig(max_bytes_per_package=20_000, max_queries_per_package=12, max_queries_per_file=4,
                     packages_per_split=1)
FULL = CorpusConfig()


def _truncate(language: str, path: str, text: str, max_bytes: int) -> str:
    """Keep the longest prefix of whole top-level statements that fits ``max_bytes`` (for one huge file)."""
    tree = get_parser(parser_language(language, path)).parse(text.encode("utf-8", "surrogatepass"))
    bc = _ByteChar(text)
    end = 0
    for child in tree.root_node.children:
        if child.end_byte > max_bytes:
            break
        end = bc(child.end_byte)
    nl = text.find("\n", end)
    return text[: (nl + 1) if nl != -1 else len(text)]


def build_package(spec: PackageSpec, files: list[tuple[str, str]], config: CorpusConfig, version: str) -> Package:
    """Remove docs and collect queries, then cap the package's size with a seeded sample of its files.

    Files that yield queries are sampled first, then the others, until ``max_bytes_per_package``; a single file
    over the cap is cut after its last whole top-level statement that fits.
    """
    processed = []
    for path, text in files:
        if len(text.encode("utf-8", "surrogatepass")) > config.max_bytes_per_package:
            text = _truncate(spec.language, path, text, config.max_bytes_per_package)
        new_text, qs = extract_queries(spec.name, spec.language, path, text, config.max_queries_per_file,
                                       seed=spec.key)
        processed.append((path, new_text, qs))
    rng = random.Random(spec.key)
    with_q = [i for i, f in enumerate(processed) if f[2]]
    without = [i for i, f in enumerate(processed) if not f[2]]
    rng.shuffle(with_q)
    rng.shuffle(without)
    kept, total = [], 0
    for i in with_q + without:
        size = len(processed[i][1].encode("utf-8", "surrogatepass"))
        if total + size > config.max_bytes_per_package:
            continue
        kept.append(i)
        total += size
    kept.sort(key=lambda i: processed[i][0])
    out_files = [SourceFile(spec.name, spec.language, processed[i][0], processed[i][1]) for i in kept]
    queries = [q for i in kept for q in processed[i][2]]
    # A query text that occurs twice in a package (e.g. "Module dependency requirements.") has no single gold.
    counts: dict[str, int] = {}
    for q in queries:
        counts[q.text.lower()] = counts.get(q.text.lower(), 0) + 1
    queries = [q for q in queries if counts[q.text.lower()] == 1]
    if len(queries) > config.max_queries_per_package:
        queries = sorted(random.Random(spec.key + "q").sample(queries, config.max_queries_per_package),
                         key=lambda q: (q.path, q.gold_start))
    return Package(spec, version, out_files, queries, total, len(files))


def select_specs(config: CorpusConfig, languages: tuple[str, ...] = LANGUAGES) -> list[PackageSpec]:
    out = []
    for lang in languages:
        for split in config.splits:
            specs = [s for s in PACKAGES if s.language == lang and s.split == split]
            if config.packages_per_split is not None:
                specs = specs[: config.packages_per_split]
            out.extend(specs)
    return out


def build_corpus(config: CorpusConfig = FULL, cache_dir: Path = CACHE_DIR,
                 languages: tuple[str, ...] = LANGUAGES, log=print) -> Corpus:  # noqa: ANN001
    """Fetch (cached) and build every selected package."""
    packages = []
    for spec in select_specs(config, languages):
        root, version = fetch(spec, cache_dir)
        files = package_files(spec, root)
        if not files:
            msg = f"{spec.key}: no source files matched {spec.include}"
            raise RuntimeError(msg)
        pkg = build_package(spec, files, config, version)
        log(f"  {spec.language:10s} {spec.split:7s} {spec.key:32s} files {len(pkg.files):4d}/{pkg.all_files:<4d} "
            f"{pkg.total_bytes / 1000:7.1f} kB  queries {len(pkg.queries)}")
        packages.append(pkg)
    return Corpus(packages)


def corpus_from_dir(root: Path, config: CorpusConfig = FULL) -> Corpus:
    """A corpus from a local folder laid out as ``<language>/<package>/<files>`` (used by the tests)."""
    ext = {"python": ("*.py",), "javascript": ("*.js",), "typescript": ("*.ts",), "bash": ("*.sh",)}
    packages = []
    for lang_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        lang = lang_dir.name
        for pkg_dir in sorted(p for p in lang_dir.iterdir() if p.is_dir()):
            split = "heldout" if pkg_dir.name.startswith("heldout") else "tune"
            spec = PackageSpec(lang, "local", pkg_dir.name, "0", split, tuple(f"*{e[1:]}" for e in ext[lang]))
            files = []
            for p in sorted(pkg_dir.rglob("*")):
                if p.is_file():
                    files.append((p.relative_to(pkg_dir).as_posix(), p.read_text(encoding="utf-8")))
            packages.append(build_package(spec, files, config, "0"))
    return Corpus(packages)


if __name__ == "__main__":  # pragma: no cover - manual inspection
    corpus = build_corpus(FULL if "--quick" not in sys.argv else QUICK)
    for q in corpus.queries()[:: max(1, len(corpus.queries()) // 40)]:
        print(f"{q.language:10s} {q.name[:30]:30s} {q.text[:90]}")
    _ = io
