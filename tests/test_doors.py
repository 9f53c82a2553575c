"""Every file kind through every door: the same tree (tests/door_tree.py) through ``chunk``, ``chunk_tree``,
``CodeTextSplitter``, ``CodeNodeParser`` and the walker gets the same treatment; binary input is refused by the
chunker and skipped with our warning by the faces; nothing fails inside a third-party frame."""

from __future__ import annotations

import json
import traceback
import warnings

import pytest
from door_tree import NOTEBOOK_CELLS, build_door_tree
from helpers import assert_valid_spans, assert_valid_tree

from llmc_splitters import ASTChunker, InputWarning, UnsupportedInputError
from llmc_splitters.chunking.dispatch import classify, document_trees
from llmc_splitters.chunking.inputs import restore_surrogates
from llmc_splitters.ingest.walk import walk

BUDGET = 64
CELL_SOURCES = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in NOTEBOOK_CELLS]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return build_door_tree(tmp_path_factory.mktemp("doors"))


def ours(exc: BaseException) -> bool:
    """The exception was raised by llmc_splitters' own code, not deep in another package."""
    return "llmc_splitters" in traceback.extract_tb(exc.__traceback__)[-1].filename


def cell_of(metadata) -> int | None:
    return metadata.get("cell_index")


# ------------------------------------------------------------------------------------------------ chunk, chunk_tree
def chunk_summary(inp):
    """What the chunk door did: ``("refused", message)`` or the non-blank leaves as comparable rows."""
    try:
        spans = ASTChunker(max_tokens=BUDGET).chunk(inp.text, path=inp.path)
    except UnsupportedInputError as exc:
        assert ours(exc)
        return "refused", str(exc)
    return [(cell_of(s.metadata), s.start_line, s.end_line, s.language, s.kind, s.name or "")
            for s in spans if s.text.strip()]


def test_chunk_door(tree):
    chunker = ASTChunker(max_tokens=BUDGET)
    for inp in tree.inputs:
        if inp.expect == "binary":
            with pytest.raises(UnsupportedInputError, match="binary") as info:
                chunker.chunk(inp.text, path=inp.path)
            assert inp.path in str(info.value) and ours(info.value)
            continue
        spans = chunker.chunk(inp.text, path=inp.path)
        if inp.expect == "notebook":
            cells = {s.metadata["cell_index"] for s in spans}
            assert cells == {i for i, src in enumerate(CELL_SOURCES) if src}, "every non-empty cell, no output"
            for i in cells:
                mine = [s for s in spans if s.metadata["cell_index"] == i]
                assert_valid_spans(CELL_SOURCES[i], mine, BUDGET)  # lossless per cell, lines relative to the cell
                assert {s.path for s in mine} == {f"tides.ipynb#cell{i}"}
            by_cell = {s.metadata["cell_index"]: s for s in spans}
            assert (by_cell[1].kind, by_cell[1].name, by_cell[1].language) == ("function", "daily_range", "python")
            assert by_cell[4].language == "bash" and by_cell[4].metadata["cell_magic"] == "bash"
            assert by_cell[3].language == "text" and by_cell[3].metadata["cell_type"] == "raw"
            assert by_cell[6].metadata["breadcrumb"] == "Tide tools > Daily range"
            continue
        assert_valid_spans(inp.text, spans, BUDGET)
        assert {s.language for s in spans} == {inp.expect}
        names = {s.name for s in spans}
        expected = {"env-bash": {"log", "deploy_site"}, "bin-sh": {"install_tools"}, "surrogates": {"price"},
                    "no-path": {"mean_level", "label"}}[inp.name]
        assert expected <= names, (inp.name, names)
    # The surrogateescape'd file stays lossless, lone surrogates included.
    legacy = tree["surrogates"]
    assert "\udce9" in "".join(s.text for s in chunker.chunk(legacy.text, path=legacy.path))


def test_chunk_tree_door(tree):
    chunker = ASTChunker(max_tokens=BUDGET)
    for inp in tree.inputs:
        if inp.expect == "binary":
            with pytest.raises(UnsupportedInputError):
                chunker.chunk_tree(inp.text, path=inp.path)
            continue
        got = chunker.chunk_tree(inp.text, path=inp.path)
        assert list(got.leaves) == chunker.chunk(inp.text, path=inp.path)
        assert got.root.text == inp.text
        docs = document_trees(got)
        if inp.expect == "notebook":
            assert got.root.kind == "notebook" and got.root.language == "notebook"
            assert [d.root.path for d in docs] == [f"tides.ipynb#cell{i}" for i, s in enumerate(CELL_SOURCES) if s]
            assert [d.root.metadata["notebook_path"] for d in docs] == ["tides.ipynb"] * len(docs)
        else:
            assert docs == [got]
        for doc in docs:  # each document's leaves tile its root's text, and every link resolves inside it
            assert_valid_spans(doc.root.text, doc.leaves, BUDGET)
            assert_valid_tree(doc.root.text, doc)


def test_no_path_python_is_recognised_by_its_content(tree):
    t = classify(tree["no-path"].text)
    assert (t.kind, t.language, t.detected_by, t.guessed) == ("code", "python", "content", False)
    nb = classify(tree["notebook"].text)  # notebook JSON without its name
    assert (nb.kind, nb.detected_by) == ("notebook", "content")
    assert classify(tree["env-bash"].text).detected_by == "shebang"
    prose = classify("The gauge was moved in 1998; readings before that are offset by 4 cm.\n")
    assert (prose.language, prose.guessed) == ("text", True)


# ------------------------------------------------------------------------------------------------ the faces
def langchain_summary(tree, splitter=None):
    from langchain_core.documents import Document

    from llmc_splitters.langchain import CodeTextSplitter

    splitter = splitter or CodeTextSplitter(chunk_size=BUDGET)
    docs = [Document(page_content=i.text, metadata={"source": i.path} if i.path else {}) for i in tree.inputs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = splitter.split_documents(docs)
    return out, [w for w in caught if issubclass(w.category, InputWarning)]


def llama_index_nodes(tree, parser=None):
    from llama_index.core import Document

    from llmc_splitters.llama_index import CodeNodeParser

    # include_metadata=False: chunk_size counts the text alone, as the chunker's max_tokens does (by default it bounds
    # what the embedding model and the LLM are shown, the metadata lines included).
    parser = parser or CodeNodeParser(chunk_size=BUDGET, include_metadata=False)
    docs = [Document(text=i.text, metadata={"file_path": i.path} if i.path else {}) for i in tree.inputs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = parser.get_nodes_from_documents(docs)
    return docs, out, [w for w in caught if issubclass(w.category, InputWarning)]


def assert_one_skip_warning(caught, tree):
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    for inp in tree.inputs:
        if inp.expect == "binary":
            assert repr(inp.path) in message
    assert "PNG image" in message and "NUL characters" in message and "on_unsupported" in message


def test_code_text_splitter_door(tree):
    pytest.importorskip("langchain_text_splitters")
    docs, caught = langchain_summary(tree)
    assert_one_skip_warning(caught, tree)  # and no guessed-language warning: the no-path file was recognised
    for inp in tree.inputs:
        mine = [d for d in docs if d.metadata.get("source") == inp.path] if inp.path else \
            [d for d in docs if "source" not in d.metadata]
        rows = [(cell_of(d.metadata), d.metadata["start_line"], d.metadata["end_line"], d.metadata["language"],
                 d.metadata["kind"], d.metadata["symbol"]) for d in mine]
        summary = chunk_summary(inp)
        if inp.expect == "binary":
            assert rows == [] and summary[0] == "refused"
        else:
            assert rows == summary, inp.name  # the same treatment as the chunk door
    # Notebook chunks keep the loader's source and say which cell they are from.
    nb = [d for d in docs if d.metadata.get("source") == "tides.ipynb"]
    assert {d.metadata["cell_type"] for d in nb} == {"markdown", "code", "raw"}
    # Lone surrogates: an escaped form that serialises and encodes, with the record that restores the exact text.
    legacy = [d for d in docs if d.metadata.get("source") == "pkg/legacy.py"]
    spans = ASTChunker(max_tokens=BUDGET).chunk(tree["surrogates"].text, path="pkg/legacy.py")
    assert [restore_surrogates(d.page_content, d.metadata.get("surrogates", "")) for d in legacy] == \
        [s.text for s in spans if s.text.strip()]
    assert any("café" in d.page_content for d in legacy)
    for d in docs:
        d.page_content.encode("utf-8")
        json.dumps(d.metadata, ensure_ascii=False).encode("utf-8")
        d.model_dump_json()


def test_code_node_parser_door(tree):
    pytest.importorskip("llama_index.core")
    from llama_index.core.storage.docstore import SimpleDocumentStore

    docs, nodes, caught = llama_index_nodes(tree)
    assert_one_skip_warning(caught, tree)
    for inp, doc in zip(tree.inputs, docs):
        mine = [n for n in nodes if n.ref_doc_id == doc.doc_id]
        rows = [(cell_of(n.metadata), n.metadata["start_line"], n.metadata["end_line"], n.metadata["language"],
                 n.metadata["kind"], n.metadata["symbol"]) for n in mine]
        summary = chunk_summary(inp)
        if inp.expect == "binary":
            assert rows == [] and summary[0] == "refused"
        else:
            assert rows == summary, inp.name
    # LlamaIndex can hash, serialise and store every node, the surrogateescape'd file's included.
    store = SimpleDocumentStore()
    store.add_documents(nodes)
    for n in nodes:
        assert n.hash and json.loads(n.to_json())["id_"] == n.node_id
        assert store.get_document(n.node_id).get_content() == n.get_content()
    legacy = [n for n in nodes if n.metadata.get("source") == "pkg/legacy.py"]
    assert any(n.metadata.get("surrogates") for n in legacy)
    assert "".join(restore_surrogates(n.text, n.metadata.get("surrogates", "")) for n in legacy).strip() == \
        tree["surrogates"].text.strip()
    # Notebook nodes cite their cell and do not pretend to be slices of the notebook's JSON.
    nb = [n for n in nodes if str(n.metadata.get("source")).startswith("tides.ipynb#")]
    assert {n.metadata["source"] for n in nb} == {f"tides.ipynb#cell{i}" for i in (0, 1, 3, 4, 5, 6)}
    assert all(n.start_char_idx is None for n in nb)


def test_parents_resolve_in_a_docstore(tree):
    """A PARENT link always names an emitted node, and it is ``metadata["parent_id"]``: an AutoMerging-style
    docstore walk finds every parent."""
    pytest.importorskip("llama_index.core")
    from llmc_splitters.llama_index import CodeNodeParser

    for include_parents in (False, True):
        _, nodes, _ = llama_index_nodes(tree, CodeNodeParser(chunk_size=24, include_parents=include_parents))
        by_id = {n.node_id: n for n in nodes}
        linked = [n for n in nodes if n.parent_node is not None]
        assert bool(linked) == include_parents
        for n in linked:
            assert n.parent_node.node_id in by_id and n.parent_node.node_id == n.metadata["parent_id"]
            assert n.node_id in {c.node_id for c in by_id[n.parent_node.node_id].child_nodes}


def test_on_unsupported_raise_and_ignore(tree):
    pytest.importorskip("langchain_text_splitters")
    from llmc_splitters.langchain import CodeTextSplitter

    with pytest.raises(UnsupportedInputError, match="assets/logo.png"):
        langchain_summary(tree, CodeTextSplitter(chunk_size=BUDGET, on_unsupported="raise"))
    docs, caught = langchain_summary(tree, CodeTextSplitter(chunk_size=BUDGET, on_unsupported="ignore"))
    assert caught == [] and docs


def test_walker_door(tree):
    got = walk(tree.root)
    assert set(got.files) == {"tides.ipynb", "bin/deploy", "bin/bootstrap", "pkg/legacy.py", "pkg/util.py"}
    assert {s.path: s.kind for s in got.skipped} == {"assets/logo.png": "unsupported", "pkg/blob.py": "binary"}
    assert got.languages == {"tides.ipynb": "notebook", "bin/deploy": "bash", "bin/bootstrap": "bash",
                             "pkg/legacy.py": "python", "pkg/util.py": "python"}


# ------------------------------------------------------------------------------------------------- index doors
def index_rows(retriever) -> dict[str, list[tuple]]:
    """What an index holds per document: the non-blank leaves as the chunk door's rows."""
    out: dict[str, list[tuple]] = {}
    for path in retriever.index.paths:
        for doc in retriever.index.span_store.documents(path):
            out[doc] = [(cell_of(s.metadata), s.start_line, s.end_line, s.language, s.kind, s.name or "")
                        for s in retriever.index.spans(doc) if s.text.strip()]
    return out


def expected_rows(inp) -> dict[str, list[tuple]]:
    """The chunk door's rows of an input, grouped per document (a notebook: per cell)."""
    spans = ASTChunker(max_tokens=BUDGET).chunk(inp.text, path=inp.path)
    out: dict[str, list[tuple]] = {}
    for s in spans:
        if s.text.strip():
            out.setdefault(s.path, []).append((cell_of(s.metadata), s.start_line, s.end_line, s.language, s.kind,
                                               s.name or ""))
    return out


def test_index_directory_and_index_texts_doors(tree, tmp_path):
    pytest.importorskip("tantivy")
    from llmc_splitters.retrieval import CodeRetriever

    on_disk = CodeRetriever(path=tmp_path / "disk", max_tokens=BUDGET, k=1, max_context_tokens=300)
    report = on_disk.index_directory(tree.root)
    # Notebooks and extensionless #! scripts are selected; the NUL-byte file is refused with our reason.
    assert sorted(report.added) == ["bin/bootstrap", "bin/deploy", "pkg/legacy.py", "pkg/util.py", "tides.ipynb"]
    assert list(report.failed) == ["pkg/blob.py"] and "NUL" in report.failed["pkg/blob.py"]
    loaded = CodeRetriever(max_tokens=BUDGET)  # the texts as loaders hand them over
    got = loaded.index_texts({inp.path or inp.file: inp.text for inp in tree.inputs})
    assert sorted(got.failed) == ["assets/logo.png", "pkg/blob.py"]
    assert "PNG" in got.failed["assets/logo.png"] and "NUL" in got.failed["pkg/blob.py"]
    rows = index_rows(loaded)
    for inp in tree.inputs:
        if inp.expect == "binary":
            continue
        want = expected_rows(inp) if inp.path else {inp.file: [r for rs in expected_rows(inp).values() for r in rs]}
        assert {doc: rows[doc] for doc in want} == want, inp.name  # the chunk door's treatment
    # The surrogates survive the store losslessly.
    assert "".join(s.text for s in loaded.index.spans("pkg/legacy.py")) == tree["surrogates"].text
    # A notebook's function is found, and its marker cites the notebook and the cell.
    res = on_disk.retrieve("highest minus lowest water level of one day")
    assert res.hits[0].span.path == "tides.ipynb#cell1" and res.hits[0].span.name == "daily_range"
    assert "# tides.ipynb#cell1:4-6" in res.context or "# tides.ipynb#cell1:1-6" in res.context
    assert on_disk.get_lines("tides.ipynb#cell1", 4).text == "def daily_range(levels):\n"
    assert [h.span.path for h in on_disk.search("deploy_site rsync", k=1).hits] == ["bin/deploy"]


def test_retriever_faces_cite_the_notebook_cell(tree):
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    pytest.importorskip("tantivy")
    from llmc_splitters.langchain import CodeParentRetriever as LangChainRetriever
    from llmc_splitters.llama_index import CodeParentRetriever as LlamaIndexRetriever

    question = "highest minus lowest water level of one day"
    lc = LangChainRetriever.from_directory(tree.root, k=1, max_context_tokens=300)
    (doc,) = lc.invoke(question)
    assert doc.metadata["source"] == "tides.ipynb#cell1" and "# tides.ipynb#cell1:" in doc.page_content
    li = LlamaIndexRetriever.from_directory(tree.root, similarity_top_k=1, max_context_tokens=300)
    (node,) = li.retrieve(question)
    assert node.node.metadata["file_path"] == "tides.ipynb#cell1" or node.node.metadata.get("source") == \
        "tides.ipynb#cell1"
    assert "# tides.ipynb#cell1:" in node.node.get_content()
