"""Notebooks as a corpus (issue 22, item 13): a notebook hit comes with the cells that belong with it, as a method
comes with its class, and every cell span has a name a hit list can show.

The notebook is the kind a data-analysis repository holds: markdown cells that say what the next cell does, one of
them ("Here is the equivalent using pivot_table") a sentence that means nothing without the code after it.
"""

from __future__ import annotations

import json

import pytest

from llmc_splitters import ASTChunker
from llmc_splitters.chunking.notebook import NAME_CHARS, chunk_notebook, first_line_name, split_cell_path

PIVOT_LINE = "pivot = orders.pivot_table(index='region', columns='month', values='total', aggfunc='sum',\n"
CELLS = [
    ("markdown", "# Monthly sales by region\n\nThe raw export has one row per order, with its region and total.\n"),
    ("code", "import pandas as pd\n\norders = pd.read_csv('orders.csv', parse_dates=['date'])\n"
             "orders['month'] = orders['date'].dt.to_period('M')\n"),
    ("markdown", "## Group and unstack\n\nSum the order totals per region and month, then turn the months into "
                 "columns.\n"),
    ("code", "monthly = orders.groupby(['region', 'month'])['total'].sum().unstack('month', fill_value=0)\n"
             "monthly.head()\n"),
    ("markdown", "Here is the equivalent using `pivot_table`, which also adds the row and column totals:\n"),
    ("code", PIVOT_LINE + "                           fill_value=0, margins=True)\npivot.head()\n"),
    ("raw", "Exported with pandas 2.2.\n"),
    ("code", "%%time\npivot.drop(index='All').T.plot(figsize=(10, 4))\n"),
    ("code", "def share(frame):\n    return frame.div(frame.sum(axis=1), axis=0)\n\n\n"
             "def top(frame, n=3):\n    return frame.sum(axis=1).nlargest(n)\n"),
]


def notebook(cells=CELLS) -> str:
    out = []
    for kind, source in cells:
        cell = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        out.append(cell)
    meta = {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": meta, "cells": out}, indent=1)


def markers(context: str) -> list[str]:
    return [line.split(":")[0][2:] for line in context.splitlines() if line.startswith("# sales.ipynb#cell")]


@pytest.fixture(scope="module")
def retriever():
    pytest.importorskip("tantivy")
    from llmc_splitters.retrieval import CodeRetriever

    r = CodeRetriever(embedding=None)
    r.index_texts({"sales.ipynb": notebook()})
    return r


# --------------------------------------------------------------------------------------------- names
def test_every_code_and_markdown_span_of_a_cell_has_a_name():
    spans = chunk_notebook(notebook(), ASTChunker(max_tokens=256), path="sales.ipynb")
    names = {s.path: s.name for s in spans}
    assert names["sales.ipynb#cell1"] == "import pandas as pd"
    assert names["sales.ipynb#cell3"] == "monthly = orders.groupby(['region'…"  # cut at a word
    assert names["sales.ipynb#cell4"] == "Here is the equivalent using `pivot_table`, which also…"
    assert names["sales.ipynb#cell7"] == "pivot.drop(index='All').T.plot(figsize=(10, 4))"  # the magic skipped
    assert names["sales.ipynb#cell8"] == "share, top"  # a cell of several definitions: after them
    assert names["sales.ipynb#cell2"] == "Monthly sales by region > Group and unstack"  # a heading, as before
    assert names["sales.ipynb#cell6"] is None  # a raw cell is plain text
    assert all(len(n) <= NAME_CHARS for n in names.values() if n)
    assert first_line_name("@dataclass\nclass Reading:\n    level: float\n") == "class Reading:"
    assert first_line_name("\n\n") is None
    assert split_cell_path("sales.ipynb#cell12") == ("sales.ipynb", 12)
    assert split_cell_path("sales.ipynb#cell1/out0") is None and split_cell_path("sales.py") is None


def test_the_hit_list_names_code_cells(tmp_path, capsys):
    pytest.importorskip("tantivy")
    from llmc_splitters import cli

    (tmp_path / "sales.ipynb").write_text(notebook(), encoding="utf-8")
    assert cli.main(["index", str(tmp_path), "--embedding", "none", "--quiet"]) == 0
    capsys.readouterr()
    assert cli.main(["query", "groupby unstack fill_value", "--db", str(tmp_path / ".llmc"), "--color", "never"]) == 0
    out = capsys.readouterr().out
    hit = next(line for line in out.splitlines() if "sales.ipynb#cell3:" in line)
    assert "monthly = orders.groupby(['region'… (block)" in hit
    assert "- (block)" not in out


# --------------------------------------------------------------------------------------------- neighbours
def test_a_markdown_hit_comes_with_the_code_cell_it_introduces(retriever, cl100k):
    query = "the equivalent using pivot_table"
    found = retriever.search(query, 3)
    assert found.hits[0].span.path == "sales.ipynb#cell4"
    result = retriever.retrieve(query, k=1, max_context_tokens=300)
    assert markers(result.context) == ["sales.ipynb#cell4", "sales.ipynb#cell5"]
    assert PIVOT_LINE in result.context and result.token_count <= 300
    assert [p.kind for p in result.pieces] == ["hit", "cell"]
    # Filling the budget: the same two cells first, the code cell not repeated as a hit of its own.
    filled = retriever.retrieve(query, max_context_tokens=300)
    assert markers(filled.context)[:2] == ["sales.ipynb#cell4", "sales.ipynb#cell5"]
    assert markers(filled.context).count("sales.ipynb#cell5") == 1
    assert cl100k.count(filled.context) <= 300


def test_a_code_hit_comes_after_the_markdown_cell_that_explains_it(retriever):
    query = "groupby unstack fill_value"
    assert retriever.search(query, 1).hits[0].span.path == "sales.ipynb#cell3"
    result = retriever.retrieve(query, k=1, max_context_tokens=300)
    # In notebook order: the explanation, then the code.
    assert markers(result.context) == ["sales.ipynb#cell2", "sales.ipynb#cell3"]
    assert result.context.index("## Group and unstack") < result.context.index("monthly = orders.groupby")


def test_the_framework_faces_give_each_hit_its_cells(retriever, cl100k):
    _, packed = retriever.retrieve_per_hit("the equivalent using pivot_table", max_context_tokens=400)
    first_hit, first = packed[0]
    assert first_hit.span.path == "sales.ipynb#cell4"
    assert markers(first.context) == ["sales.ipynb#cell4", "sales.ipynb#cell5"]
    # The code cell shown with the first hit is not returned again as a document of its own.
    assert "sales.ipynb#cell5" not in [hit.span.path for hit, _ in packed[1:]]
    assert sum(cl100k.count(exp.context) for _, exp in packed) <= 400


def test_the_budget_holds_the_hit_before_its_cells(retriever, cl100k):
    query = "the equivalent using pivot_table"
    alone = retriever.retrieve(query, k=1, max_context_tokens=300, expand_context=False)
    with_cell = retriever.retrieve(query, k=1, max_context_tokens=300)
    # A budget between the two: the hit comes back, its cell gives way.
    budget = (alone.token_count + with_cell.token_count) // 2
    tight = retriever.retrieve(query, max_context_tokens=budget)
    assert markers(tight.context) == ["sales.ipynb#cell4"] and tight.token_count <= budget


def test_which_cells_are_neighbours(retriever):
    from llmc_splitters.retrieval.context.lookup import notebook_neighbours

    store = retriever.index.span_store

    def neighbours(path: str) -> list[str]:
        (leaf,) = store.spans(path)
        return [s.path for s in notebook_neighbours(store, leaf)]

    assert neighbours("sales.ipynb#cell1") == ["sales.ipynb#cell0"]  # code: the markdown above
    assert neighbours("sales.ipynb#cell2") == ["sales.ipynb#cell3"]  # markdown: the code below
    assert neighbours("sales.ipynb#cell5") == ["sales.ipynb#cell4"]
    assert neighbours("sales.ipynb#cell0") == ["sales.ipynb#cell1"]
    assert neighbours("sales.ipynb#cell7") == []  # below a raw cell
    assert neighbours("sales.ipynb#cell8") == []  # below another code cell
    assert neighbours("sales.ipynb#cell6") == []  # a raw cell


def test_only_the_end_of_a_long_markdown_cell_introduces_the_code_below():
    pytest.importorskip("tantivy")
    from llmc_splitters.retrieval import CodeRetriever
    from llmc_splitters.retrieval.context.lookup import notebook_neighbours

    long_intro = "".join(f"## Step {i}\n\nStep {i} cleans the orders of region {i} before they are summed.\n\n"
                         for i in range(1, 9))
    cells = [("markdown", long_intro), ("code", "clean = orders.dropna(subset=['region', 'total'])\n")]
    r = CodeRetriever(embedding=None, max_tokens=48)
    r.index_texts({"clean.ipynb": notebook(cells)})
    store = r.index.span_store
    parts = [s for s in store.spans("clean.ipynb#cell0") if s.text.strip()]
    assert len(parts) > 2
    assert [s.path for s in notebook_neighbours(store, parts[-1])] == ["clean.ipynb#cell1"]
    assert all(notebook_neighbours(store, s) == () for s in parts[:-1])
    # The code cell gets the part of the markdown cell right above it, not the whole cell.
    (code,) = store.spans("clean.ipynb#cell1")
    (above,) = notebook_neighbours(store, code)
    assert above.text == parts[-1].text and "Step 8" in above.text
