"""CodeTextSplitter: the LangChain TextSplitter contract, exact metadata and losslessness on real files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("langchain_text_splitters")

from helpers import DATA, corpus_files  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_text_splitters import Language, TextSplitter  # noqa: E402

from llmc_splitters import ConfigurationError  # noqa: E402
from llmc_splitters.langchain import CodeTextSplitter  # noqa: E402

REQUIRED_KEYS = {"source", "language", "start_line", "end_line", "start_index", "kind", "symbol", "span_id", "parent_id",
                 "breadcrumb"}


def read(rel: str) -> str:
    return (DATA / rel).read_bytes().decode("utf-8")


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def assert_exact_documents(text: str, docs: list[Document], chunk_size: int, count) -> None:
    """Each document is the source verbatim at its offsets, its lines agree, it fits, and no text is lost."""
    pos = 0
    for d in docs:
        m = d.metadata
        start, end = m["start_index"], m["end_index"]
        assert text[start:end] == d.page_content
        assert text[pos:start].strip() == "", "non-blank text between two chunks was lost"
        assert m["start_line"] == line_of(text, start)
        assert m["end_line"] == line_of(text, end - 1)
        assert count(d.page_content) <= chunk_size
        assert m["token_count"] == count(d.page_content)
        pos = end
    assert text[pos:].strip() == ""


def test_is_a_langchain_text_splitter_with_token_chunk_size():
    splitter = CodeTextSplitter(chunk_size=100)
    assert isinstance(splitter, TextSplitter)
    assert splitter.chunk_size == splitter.max_tokens == 100
    # chunk_size < 200 works: the base class's default overlap of 200 is not used.
    assert CodeTextSplitter(chunk_size=16).chunk_size == 16
    assert CodeTextSplitter(max_tokens=300).chunk_size == 300
    assert CodeTextSplitter(max_tokens=300, chunk_size=300).chunk_size == 300


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 0}, "chunk_size must be a positive integer"),
        ({"chunk_size": 100, "max_tokens": 200}, "same setting"),
        ({"chunk_size": 100, "chunk_overlap": 50}, r"chunk_overlap must be an integer with 0 <= chunk_overlap < "),
        ({"chunk_size": 100, "chunk_overlap": -1}, r"chunk_overlap must be an integer with 0 <= chunk_overlap < "),
        ({"chunk_size": 50, "context_header": True, "header_reserve": 50}, "must exceed header_reserve"),
        ({"language": "klingon"}, "unknown language 'klingon'"),
        ({"tokenizer": len, "length_function": len}, "not both"),
        ({"header_reserve": -1}, "header_reserve must be"),
    ],
)
def test_settings_are_checked_at_construction(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        CodeTextSplitter(**kwargs)


def test_split_documents_metadata_and_input_metadata_preserved(cl100k):
    text = read("python/json_decoder.py")
    docs = CodeTextSplitter(chunk_size=256).split_documents(
        [Document(page_content=text, metadata={"source": "json/decoder.py", "repo": "cpython"})]
    )
    assert len(docs) > 5
    for d in docs:
        assert REQUIRED_KEYS <= d.metadata.keys()
        assert d.metadata["source"] == "json/decoder.py"
        assert d.metadata["repo"] == "cpython"
        assert d.metadata["language"] == "python"
        assert all(isinstance(v, (str, int, float, bool)) for v in d.metadata.values()), "not vector-store safe"
    assert_exact_documents(text, docs, 256, cl100k.count)
    raw = [d for d in docs if d.metadata.get("symbol") == "JSONDecoder.raw_decode"]
    assert len(raw) == 1
    assert raw[0].metadata["kind"] == "method"
    assert raw[0].metadata["breadcrumb"] == "JSONDecoder > raw_decode"
    assert raw[0].page_content.lstrip().startswith("def raw_decode(self, s, idx=0):")
    # The method's parent is the split class: parent_id is the span id of the class, not of the file.
    assert raw[0].metadata["parent_id"] != docs[0].metadata["parent_id"]


@pytest.mark.parametrize("path", [p for p in corpus_files() if p.stat().st_size], ids=lambda p: p.name)
@pytest.mark.parametrize("chunk_size", [32, 256])
def test_corpus_documents_are_exact_and_fit(path, chunk_size, cl100k):
    text = path.read_bytes().decode("utf-8")
    docs = CodeTextSplitter(chunk_size=chunk_size).create_documents([text], [{"source": str(path)}])
    if path.suffix != ".ipynb":
        assert_exact_documents(text, docs, chunk_size, cl100k.count)
        return
    # A notebook: chunks per cell, exact against the cell's source; the input's source is kept.
    cells = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in json.loads(text)["cells"]]
    assert {d.metadata["cell_index"] for d in docs} == {i for i, c in enumerate(cells) if c.strip()}
    assert all(d.metadata["source"] == str(path) for d in docs)
    for i, cell in enumerate(cells):
        assert_exact_documents(cell, [d for d in docs if d.metadata["cell_index"] == i], chunk_size, cl100k.count)


def test_split_text_and_transform_documents_agree_with_create_documents():
    text = read("typescript/router.ts")
    splitter = CodeTextSplitter(chunk_size=64, language="typescript")
    from_create = splitter.create_documents([text])
    assert splitter.split_text(text) == [d.page_content for d in from_create]
    transformed = splitter.transform_documents([Document(page_content=text, metadata={"source": "x"})])
    assert [d.page_content for d in transformed] == [d.page_content for d in from_create]


def test_language_detected_per_document_from_source_or_file_path():
    py = "def f(x):\n    return x\n"
    sh = "deploy() {\n  echo hi\n}\n"
    docs = CodeTextSplitter(chunk_size=64).split_documents(
        [
            Document(page_content=py, metadata={"source": "a/b.py"}),
            Document(page_content=sh, metadata={"file_path": "run.sh"}),
            Document(page_content="#!/usr/bin/env python3\nprint(1)\n", metadata={}),
            Document(page_content="just some words\n", metadata={"source": "notes"}),
        ]
    )
    langs = [d.metadata["language"] for d in docs]
    assert langs == ["python", "bash", "python", "text"]
    assert docs[1].metadata["source"] == "run.sh", "source falls back to file_path"
    assert "source" not in docs[2].metadata, "no path, no source key (no None values)"
    assert docs[3].metadata["symbol"] == "" and docs[3].metadata["breadcrumb"] == "", "present, empty for none"
    assert docs[0].metadata["kind"] == "function" and docs[0].metadata["symbol"] == "f"


def test_language_from_langchain_language_enum_and_from_language_factory():
    text = "def f(x):\n    return x\n"
    s = CodeTextSplitter.from_language(Language.PYTHON, chunk_size=64)
    assert s.language == "python"
    assert s.create_documents([text])[0].metadata["kind"] == "function"
    # A document tagged by LangChain's LanguageParser carries metadata["language"] as the enum.
    doc = CodeTextSplitter(chunk_size=64).split_documents(
        [Document(page_content=text, metadata={"source": "x.txt", "language": Language.PYTHON})]
    )[0]
    assert doc.metadata["language"] == "python" and doc.metadata["symbol"] == "f"


def test_add_start_index_is_honoured():
    text = "import os\n\n\ndef f():\n    return os.sep\n"
    on = CodeTextSplitter(chunk_size=64).create_documents([text], [{"source": "m.py"}])
    off = CodeTextSplitter(chunk_size=64, add_start_index=False).create_documents([text], [{"source": "m.py"}])
    assert [d.metadata["start_index"] for d in on] == [0, text.index("def f")]
    assert all("start_index" not in d.metadata and "end_index" not in d.metadata for d in off)
    assert [d.metadata["start_line"] for d in off] == [1, 4]


def test_strip_whitespace_moves_offsets_and_lines_with_the_text():
    text = "import os\n\n\ndef f():\n    return os.sep\n\n\n"
    docs = CodeTextSplitter(chunk_size=64, strip_whitespace=True).create_documents([text], [{"source": "m.py"}])
    for d in docs:
        m = d.metadata
        assert d.page_content == d.page_content.strip()
        assert text[m["start_index"] : m["end_index"]] == d.page_content
        assert m["start_line"] == line_of(text, m["start_index"])
        assert m["end_line"] == line_of(text, m["end_index"] - 1)
        assert text.encode()[m["start_byte"] : m["end_byte"]].decode() == d.page_content


def test_context_header_fits_chunk_size_and_source_follows_verbatim(cl100k):
    text = read("python/json_decoder.py")
    chunk_size = 96
    docs = CodeTextSplitter(chunk_size=chunk_size, context_header=True, header_reserve=32).create_documents(
        [text], [{"source": "json/decoder.py"}]
    )
    with_header = 0
    for d in docs:
        m = d.metadata
        source_text = text[m["start_index"] : m["end_index"]]
        assert d.page_content.endswith(source_text)
        header = d.page_content[: len(d.page_content) - len(source_text)]
        if header:
            with_header += 1
            assert header.startswith("# json/decoder.py")
            assert all(line.startswith("# ") for line in header.splitlines())
        assert cl100k.count(d.page_content) <= chunk_size
    assert with_header >= len(docs) - 1
    pieces = [d for d in docs if d.metadata.get("symbol", "").startswith("JSONDecoder.") and "class JSONDecoder" in
              d.page_content.split("\n", 2)[1]]
    assert pieces, "a piece of a split class names the enclosing class signature in its header"


def test_custom_tokenizer_and_length_function_count_chunk_size():
    text = read("javascript/events.js")
    words = lambda s: len(s.split())  # noqa: E731
    for splitter in (CodeTextSplitter(chunk_size=40, tokenizer=words),
                     CodeTextSplitter(chunk_size=40, length_function=words)):
        docs = splitter.create_documents([text], [{"source": "events.js"}])
        assert docs and all(words(d.page_content) <= 40 for d in docs)
        assert "".join(text[d.metadata["start_index"]:d.metadata["end_index"]] for d in docs).split() == text.split()


def test_from_tiktoken_encoder_uses_offline_cl100k(cl100k):
    splitter = CodeTextSplitter.from_tiktoken_encoder(chunk_size=50)
    assert splitter.tokenizer.name == "tiktoken:cl100k_base"
    text = read("python/textwrap.py")
    assert all(cl100k.count(t) <= 50 for t in splitter.split_text(text))


def test_empty_and_blank_inputs_give_no_documents():
    splitter = CodeTextSplitter(chunk_size=64)
    assert splitter.create_documents(["", "\n\n   \n"], [{"source": "a.py"}, {"source": "b.py"}]) == []
    assert splitter.split_documents([]) == []


def test_metadatas_length_mismatch_is_an_error():
    with pytest.raises(ConfigurationError, match="2 texts but 1 metadatas"):
        CodeTextSplitter().create_documents(["a", "b"], [{}])


def test_input_metadata_is_copied_not_shared():
    meta = {"source": "m.py", "tags": ["x"]}
    docs = CodeTextSplitter(chunk_size=8).create_documents(["a = 1\nb = 2\nc = 3\nd = 4\n" * 3], [meta])
    assert len(docs) > 1
    docs[0].metadata["tags"].append("y")
    assert meta["tags"] == ["x"] and docs[1].metadata["tags"] == ["x"]


def test_missing_langchain_raises_our_error_with_the_extra():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["langchain_text_splitters"] = None
        try:
            import llmc_splitters.langchain
        except ImportError as exc:
            from llmc_splitters import MissingDependencyError
            assert isinstance(exc, MissingDependencyError), type(exc)
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'llmc-splitters[langchain]'" in out


def test_pieces_of_one_file_from_generic_loader_get_one_warning_with_the_remedy(tmp_path):
    """LangChain's GenericLoader + LanguageParser splits a file into one Document per definition, all with the same
    source; their line numbers can only count from each piece. The splitter says so once, with the remedy."""
    pytest.importorskip("langchain_community")
    import warnings

    from langchain_community.document_loaders import TextLoader
    from langchain_community.document_loaders.generic import GenericLoader
    from langchain_community.document_loaders.parsers import LanguageParser

    from llmc_splitters import InputWarning

    (tmp_path / "json").mkdir()
    (tmp_path / "json/decoder.py").write_bytes((DATA / "python/json_decoder.py").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's own sunset notice
        pieces = GenericLoader.from_filesystem(str(tmp_path / "json"), glob="decoder.py",
                                               parser=LanguageParser(language="python", parser_threshold=0)).load()
        whole = TextLoader(str(tmp_path / "json/decoder.py"), encoding="utf-8").load()
    assert len(pieces) > 2 and len({d.metadata["source"] for d in pieces}) == 1
    splitter = CodeTextSplitter(chunk_size=256)
    with pytest.warns(InputWarning, match=r"different documents share the path .*decoder\.py.*Load whole files") as w:
        splitter.split_documents(pieces)
    assert len([x for x in w if issubclass(x.category, InputWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        docs = splitter.split_documents(whole)  # whole files: no warning, and the file's own line numbers
    assert any(d.metadata["symbol"] == "JSONDecoder.raw_decode" and d.metadata["start_line"] > 300 for d in docs)


def test_chunk_overlap_is_accepted_for_split_prose_as_the_node_parser_does(cl100k):
    """Issue 37: ``CodeTextSplitter(chunk_overlap=50)`` raised where ``CodeNodeParser`` accepts it. Both faces now
    take it through the same code: code never overlaps; each piece of split prose starts with the tail of the piece
    before it (LangChain: in ``page_content``, before the text that ``start_index`` locates; LlamaIndex: in
    ``metadata["overlap"]``, shown before the text), and the pieces are the same."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import Document as LIDocument

    from llmc_splitters.llama_index import CodeNodeParser

    prose, code = read("text/release-notes.txt"), read("python/textwrap.py")
    splitter = CodeTextSplitter(chunk_size=128, chunk_overlap=30)
    assert splitter.chunk_overlap == 30
    docs = splitter.split_documents([Document(page_content=prose, metadata={"source": "release-notes.txt"})])
    overlapped = 0
    for prev, doc in zip(docs, docs[1:]):
        m = doc.metadata
        body = prose[m["start_index"]:m["end_index"]]
        assert doc.page_content.endswith(body) and cl100k.count(doc.page_content) <= 128
        tail = doc.page_content[: len(doc.page_content) - len(body)]
        if tail:
            overlapped += 1
            assert prev.page_content.endswith(tail) and prose[: m["start_index"]].endswith(tail)
            assert 0 < cl100k.count(tail) <= 30
    assert overlapped >= len(docs) // 2
    # The same pieces and the same tails as the LlamaIndex face (its budget not shared with metadata lines).
    nodes = CodeNodeParser(chunk_size=128, chunk_overlap=30, include_metadata=False).get_nodes_from_documents(
        [LIDocument(text=prose, metadata={"file_path": "release-notes.txt"})])
    assert [d.page_content for d in docs] == [n.metadata.get("overlap", "") + n.text for n in nodes]
    # Code never overlaps: every chunk is the source verbatim at its offsets.
    code_docs = splitter.split_documents([Document(page_content=code, metadata={"source": "textwrap.py"})])
    assert_exact_documents(code, code_docs, 128, cl100k.count)
