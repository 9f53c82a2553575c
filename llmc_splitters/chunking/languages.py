"""Languages as data: one :class:`LanguageSpec` row per language, plus detection from a path or a shebang.

A language the chunker knows carefully has a row here and a query file ``queries/<query>.scm`` with tags-style
captures (``@definition.<kind>`` + ``@name``, ``@wrapper`` + ``@inner``, ``@import``). Every other grammar in
tree-sitter-language-pack goes through :func:`generic_spec`, whose definitions are found from node kinds. The
engine never branches on a language name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import UnsupportedInputError


@dataclass(frozen=True)
class Injection:
    """Code of another language embedded in a node (a Markdown fence, an HTML ``<script>``).

    Attributes:
        content_type: Child node type holding the embedded code.
        language: Language of the content when nothing names another one (or ``None``).
        language_child: Child node type whose text names the language (a fence's info string).
        language_attribute: Attribute of the element's start tag that names the language, when present
            (``<script lang="ts">``); its value wins over ``language``.
    """

    content_type: str
    language: str | None = None
    language_child: str | None = None
    language_attribute: str | None = None


@dataclass(frozen=True)
class LanguageSpec:
    """How one language is chunked.

    Attributes:
        name: Our name for the language (``Span.language``).
        grammar: Name of the grammar in tree-sitter-language-pack, or ``None`` for plain text.
        extensions: File extensions, lower case, with the dot.
        query: Query file stem under ``queries/``, or ``None`` for the generic, node-kind driven path.
        attach_forward: Node types that belong to the definition right below them (comments, decorators).
        comment_types: Node types that are comments.
        docstring: ``"body_string"`` (Python: first string statement of the body) or ``"comment"`` (the comment
            block right above the definition).
        separator: Joins a qualified name (``Client.send``; Markdown uses `` > `` for heading paths).
        paragraph_groups: Group statements at blank and comment lines instead of filling the budget (Bash).
        glue_kinds: Kind given to a leaf made of one node of this type (``pipe_table`` -> ``table``).
        prose: A node over budget with no usable children is cut at paragraphs, lines, sentences, then words
            (code is cut at lines, then tokens).
        standalone_types: Node types that always form their own leaf, like definitions (front matter).
        injections: Node types whose content is code of another language.
        root_kind: Kind of the file span.
        glue_kind: Kind of leaves made of statements that are not definitions.
    """

    name: str
    grammar: str | None
    extensions: tuple[str, ...] = ()
    query: str | None = None
    attach_forward: frozenset[str] = frozenset({"comment"})
    comment_types: frozenset[str] = frozenset({"comment"})
    docstring: str = "comment"
    separator: str = "."
    paragraph_groups: bool = False
    glue_kinds: dict[str, str] = field(default_factory=dict)
    standalone_types: frozenset[str] = frozenset()
    injections: dict[str, Injection] = field(default_factory=dict)
    root_kind: str = "module"
    glue_kind: str = "block"
    filenames: tuple[str, ...] = ()
    prose: bool = False


_JS_LIKE = dict(
    attach_forward=frozenset({"comment", "decorator"}),
    comment_types=frozenset({"comment"}),
    docstring="comment",
)

SPECS: dict[str, LanguageSpec] = {
    "python": LanguageSpec(
        name="python",
        grammar="python",
        extensions=(".py", ".pyi", ".pyw"),
        query="python",
        attach_forward=frozenset({"comment"}),
        docstring="body_string",
    ),
    "javascript": LanguageSpec(
        name="javascript",
        grammar="javascript",
        extensions=(".js", ".mjs", ".cjs", ".jsx"),
        query="javascript",
        **_JS_LIKE,
    ),
    "typescript": LanguageSpec(
        name="typescript", grammar="typescript", extensions=(".ts", ".mts", ".cts"), query="typescript", **_JS_LIKE
    ),
    "tsx": LanguageSpec(name="tsx", grammar="tsx", extensions=(".tsx",), query="typescript", **_JS_LIKE),
    "bash": LanguageSpec(
        name="bash",
        grammar="bash",
        extensions=(".sh", ".bash", ".zsh", ".ksh", ".bats"),
        query="bash",
        paragraph_groups=True,
        filenames=(".bashrc", ".bash_profile", ".profile", ".zshrc"),
    ),
    "markdown": LanguageSpec(
        name="markdown",
        grammar="markdown",
        extensions=(".md", ".markdown", ".mdx", ".mkd"),
        query="markdown",
        attach_forward=frozenset(),
        comment_types=frozenset(),
        separator=" > ",
        glue_kinds={
            "fenced_code_block": "code",
            "indented_code_block": "code",
            "pipe_table": "table",
            "html_block": "html",
            "list": "list",
            "minus_metadata": "front_matter",
            "plus_metadata": "front_matter",
        },
        standalone_types=frozenset({"minus_metadata", "plus_metadata"}),
        injections={"fenced_code_block": Injection("code_fence_content", language_child="info_string")},
        root_kind="document",
        glue_kind="text",
        prose=True,
    ),
    "html": LanguageSpec(
        name="html",
        grammar="html",
        extensions=(".html", ".htm", ".xhtml"),
        attach_forward=frozenset({"comment"}),
        injections={
            "script_element": Injection("raw_text", language="javascript", language_attribute="lang"),
            "style_element": Injection("raw_text", language="css", language_attribute="lang"),
        },
        root_kind="document",
    ),
    # Single-file components: the same script/style elements as HTML.
    "vue": LanguageSpec(
        name="vue",
        grammar="vue",
        extensions=(".vue",),
        attach_forward=frozenset({"comment"}),
        injections={
            "script_element": Injection("raw_text", language="javascript", language_attribute="lang"),
            "style_element": Injection("raw_text", language="css", language_attribute="lang"),
        },
        root_kind="document",
    ),
    "svelte": LanguageSpec(
        name="svelte",
        grammar="svelte",
        extensions=(".svelte",),
        attach_forward=frozenset({"comment"}),
        injections={
            "script_element": Injection("raw_text", language="javascript", language_attribute="lang"),
            "style_element": Injection("raw_text", language="css", language_attribute="lang"),
        },
        root_kind="document",
    ),
    "text": LanguageSpec(
        name="text",
        grammar=None,
        extensions=(".txt", ".text", ".rst", ".log"),
        root_kind="document",
        glue_kind="text",
        prose=True,
    ),
}

# Extensions of other grammars in tree-sitter-language-pack (generic path).
_GENERIC_EXTENSIONS: dict[str, str] = {
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".php": "php", ".swift": "swift", ".lua": "lua", ".r": "r",
    ".jl": "julia", ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml",
    ".dart": "dart", ".zig": "zig", ".pl": "perl", ".pm": "perl", ".sql": "sql", ".css": "css", ".scss": "scss",
    ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".xml": "xml", ".vue": "vue",
    ".svelte": "svelte", ".tf": "hcl", ".hcl": "hcl", ".proto": "proto", ".elm": "elm", ".clj": "clojure",
    ".groovy": "groovy", ".m": "objc", ".mm": "objc", ".f90": "fortran", ".cmake": "cmake", ".nix": "nix",
    ".ps1": "powershell", ".fish": "fish", ".vim": "vim", ".sol": "solidity", ".graphql": "graphql",
}
_GENERIC_FILENAMES = {"Dockerfile": "dockerfile", "Makefile": "make", "makefile": "make", "CMakeLists.txt": "cmake"}

_SHEBANGS = {
    "python": "python", "python3": "python", "python2": "python", "node": "javascript", "nodejs": "javascript",
    "deno": "typescript", "ts-node": "typescript", "bash": "bash", "sh": "bash", "zsh": "bash", "ksh": "bash",
    "dash": "bash", "bats": "bash", "ruby": "ruby", "perl": "perl", "lua": "lua",
}

INDEXED_PATTERNS: tuple[str, ...] = (
    # Languages with their own query file.
    "*.py", "*.pyi", "*.pyw", "*.js", "*.mjs", "*.cjs", "*.jsx", "*.ts", "*.mts", "*.cts", "*.tsx",
    "*.sh", "*.bash", "*.zsh", "*.ksh", "*.bats",
    # Other programming languages (generic, node-kind driven chunking).
    "*.go", "*.rs", "*.java", "*.kt", "*.kts", "*.scala", "*.c", "*.h", "*.cc", "*.cpp", "*.cxx", "*.hpp", "*.hh",
    "*.cs", "*.rb", "*.php", "*.swift", "*.lua", "*.r", "*.R", "*.jl", "*.ex", "*.exs", "*.erl", "*.hs", "*.ml",
    "*.dart", "*.zig", "*.pl", "*.pm", "*.sql", "*.vue", "*.svelte", "*.proto", "*.elm", "*.clj", "*.groovy",
    "*.tf", "*.nix", "*.ps1", "*.sol", "*.graphql",
    # Documentation and notebooks.
    "*.md", "*.markdown", "*.mdx", "*.rst", "*.html", "*.htm", "*.ipynb",
)
"""The file kinds indexed by default, by every door that walks a tree (``llmc-splitters index``, the MCP server,
``CodeIndex.index_directory``, the retrievers' ``directory=``): the code and prose the chunker parses, as the
README's table lists them (extensionless ``#!`` scripts are selected by their first line). Data formats (JSON,
YAML, CSV, ...) and plain ``.txt`` are left out: they are parsed when asked for (``--include``)."""

ALIASES = {"py": "python", "js": "javascript", "ts": "typescript", "sh": "bash", "shell": "bash", "md": "markdown",
           "jsx": "javascript", "node": "javascript", "plaintext": "text", "txt": "text", "c++": "cpp",
           "golang": "go", "yml": "yaml", "c#": "csharp", "cs": "csharp", "zsh": "bash", "console": "bash",
           "mdx": "markdown", "htm": "html", "rb": "ruby", "rs": "rust", "kt": "kotlin", "python3": "python"}

_DEF_KIND = re.compile(
    r"^(?:(?P<class>class|struct|interface|trait|impl|enum|module|namespace|object|protocol|record|union)"
    r"|(?P<function>function|method|func|fn|constructor|procedure|subroutine|def|macro|lambda_def))"
    r"(?:_(?:definition|declaration|item|specifier|def|statement|spec))?$"
)
_DEF_SUFFIX = re.compile(r"_(?:definition|declaration|item)$")


def _ext_table() -> dict[str, str]:
    table = dict(_GENERIC_EXTENSIONS)
    for spec in SPECS.values():
        for ext in spec.extensions:
            table[ext] = spec.name
    return table


_EXTENSIONS = _ext_table()
_FILENAMES = {**_GENERIC_FILENAMES, **{f: s.name for s in SPECS.values() for f in s.filenames}}


def normalize_language(language: str) -> str:
    """Lower-case a language name and resolve common aliases (``py`` -> ``python``)."""
    lang = language.strip().lower()
    return ALIASES.get(lang, lang)


def detect_language(path: str | None = None, text: str | None = None) -> str:
    """Language of a file: from its file name or extension, else from a shebang line, else ``"text"``.

    A Jupyter notebook (``.ipynb``) is ``"notebook"``, which is not a grammar: the chunker reads it per cell. For
    the full decision (binary input, metadata, content sniffing), see :func:`llmc_splitters.chunking.dispatch.classify`.
    """
    if path:
        found = language_from_path(path)
        if found is not None:
            return found[0]
    return language_from_shebang(text) or "text"


def language_from_path(path: str) -> tuple[str, str] | None:
    """``(language, "filename")`` or ``(language, "extension")`` when the path decides, else ``None``."""
    base = os.path.basename(path)
    if base in _FILENAMES:
        return _FILENAMES[base], "filename"
    ext = os.path.splitext(base)[1].lower()
    if ext == ".ipynb":
        return "notebook", "extension"
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext], "extension"
    return None


def language_from_shebang(text: str | None) -> str | None:
    """The language of the interpreter a ``#!`` first line names, when we parse it (``None`` otherwise)."""
    if not text or not text.startswith("#!"):
        return None
    first = text.split("\n", 1)[0]
    words = first[2:].strip().split()
    if not words:
        return None
    prog = os.path.basename(words[0])
    if prog == "env" and len(words) > 1:
        # `#!/usr/bin/env -S bash -e`: the first word that is not an option names the interpreter.
        prog = os.path.basename(next((w for w in words[1:] if not w.startswith("-")), prog))
    prog = re.sub(r"[\d.]+$", "", prog) or prog
    return _SHEBANGS.get(prog)


def get_spec(language: str) -> LanguageSpec:
    """The spec of ``language``: a table row, or a generic spec for any other grammar.

    Raises:
        UnsupportedInputError: tree-sitter-language-pack has no grammar of that name.
    """
    lang = normalize_language(language)
    if lang in SPECS:
        return SPECS[lang]
    from ._grammar import has_grammar

    if not has_grammar(lang):
        msg = (
            f"unknown language {language!r}: no tree-sitter grammar of that name. Pass language='text' for a "
            "plain-text split, or one of the names in tree_sitter_language_pack (e.g. 'python', 'go', 'rust')."
        )
        raise UnsupportedInputError(msg)
    return generic_spec(lang)


_generic_cache: dict[str, LanguageSpec] = {}


def generic_spec(grammar: str) -> LanguageSpec:
    """A spec for a grammar without a table row: comments attach forward, definitions found by node kind."""
    spec = _generic_cache.get(grammar)
    if spec is None:
        spec = LanguageSpec(
            name=grammar,
            grammar=grammar,
            attach_forward=frozenset({"comment", "line_comment", "block_comment", "doc_comment", "annotation",
                                      "attribute_item", "decorator", "marker_annotation"}),
            comment_types=frozenset({"comment", "line_comment", "block_comment", "doc_comment"}),
        )
        _generic_cache[grammar] = spec
    return spec


def generic_definition_kind(node_type: str) -> str | None:
    """``"class"``/``"function"`` for node kinds that look like definitions in any grammar, else ``None``."""
    m = _DEF_KIND.match(node_type)
    if m is None:
        return None
    if not _DEF_SUFFIX.search(node_type) and node_type not in {"function", "method", "class", "module"}:
        # A bare keyword-like kind (``fn``, ``impl``) without a definition suffix is usually a token, not a node.
        return None
    return "class" if m.group("class") else "function"
