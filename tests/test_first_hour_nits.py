"""The small things a new user met in the first hour, round two (issue 37, nits), on files the tests write.

* A mistyped flag printed the top-level usage; now the command's own usage and the option meant (``did you mean
  --k?``), as the Python API names the nearest argument; an unquoted question is told to be quoted.
* ``index_status`` called with an argument said ``(it takes: )``; now "it takes no arguments".
* ``interrupted after 1 of 1 files: 0 written`` read as done; now it says nothing of the run is in the index.
* Changing ``--max-tokens`` re-chunked everything silently; now one note says which setting changed.
* The version was 0.1.0 where the CHANGELOG and README speak of 0.2; now it is written once
  (``llmc_splitters.__version__``), and the package metadata and ``--version`` read it.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import llmc_splitters
from llmc_splitters.cli import main
from llmc_splitters.cli.index import _interrupted_note
from llmc_splitters.errors import ConfigurationError, unknown_argument
from llmc_splitters.retrieval import IndexReport

ROOT = Path(__file__).resolve().parents[1]
MODULE = textwrap.dedent('''
    """Retry a call with exponential backoff."""

    import time


    def retry(call, attempts=3, backoff=0.5):
        """Call ``call`` until it succeeds, waiting longer after each failure."""
        for attempt in range(attempts):
            try:
                return call()
            except OSError:
                if attempt == attempts - 1:
                    raise
                time.sleep(backoff * 2 ** attempt)
    ''')


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.mark.parametrize(("args", "said"), [
    (("query", "retry", "--kk", "3"), "unrecognized arguments: --kk 3; did you mean --k?"),
    (("query", "retry", "--top-k", "3"), "unrecognized arguments: --top-k 3; did you mean --k?"),
    (("index", ".", "--embeding", "none"), "unrecognized arguments: --embeding none; did you mean --embedding?"),
    (("stats", "--jsn"), "unrecognized arguments: --jsn; did you mean --json?"),
    (("query", "how", "are", "retries", "configured"),
     'unrecognized arguments: are retries configured; put the whole question in quotes: llmc-splitters query '
     '"how are retries configured"'),
])
def test_a_mistyped_flag_names_the_command_and_the_option_meant(capsys, args, said):
    code, out, err = _cli(capsys, *args)
    assert code == 2 and not out
    assert err.startswith(f"usage: llmc-splitters {args[0]} ")  # the command's usage, not the top-level one
    assert err.rstrip().endswith(f"llmc-splitters {args[0]}: error: {said}")


def test_a_mistyped_top_level_flag(capsys):
    code, _, err = _cli(capsys, "--verison")
    assert code == 2 and err.rstrip().endswith("llmc-splitters: error: unrecognized arguments: --verison; did you "
                                               "mean --version?")


def test_an_embedding_that_cannot_be_imported_is_named_once(capsys, tmp_path):
    code, _, err = _cli(capsys, "index", str(tmp_path), "--embedding", "no_such_module_here:make")
    assert code == 2 and err.count("--embedding 'no_such_module_here:make'") == 1
    assert err.startswith("error: --embedding 'no_such_module_here:make': cannot import module 'no_such_module_here'")


def test_a_tool_without_arguments_says_it_takes_none():
    err = unknown_argument("index_status", "verbose", [])
    assert isinstance(err, ConfigurationError)
    assert str(err) == "index_status got an unknown argument 'verbose': it takes no arguments"


def test_an_interruption_before_any_write_does_not_read_as_done():
    one = _interrupted_note("SIGINT", IndexReport(), 1)
    assert one.startswith("interrupted (SIGINT) before any file was written: nothing of this run is in the index "
                          "(1 file still to index)")
    report = IndexReport(added=["a.py", "b.py"], unchanged=["c.py"])
    some = _interrupted_note("SIGTERM", report, 10)
    assert some.startswith("interrupted (SIGTERM): 2 of 10 files were written in this run and are kept (7 files "
                           "still to index, 1 were up to date already)")
    assert "run the same command again to continue" in one and "run the same command again to continue" in some


def test_a_new_leaf_budget_says_once_why_every_file_is_chunked_again(tmp_path, capsys):
    tree = tmp_path / "src"
    tree.mkdir()
    for i in range(3):
        (tree / f"retry_{i}.py").write_text(MODULE)
    assert _cli(capsys, "index", str(tree), "--embedding", "none", "--max-tokens", "128", "-q")[0] == 0
    code, out, err = _cli(capsys, "index", str(tree), "--max-tokens", "256", "-q")
    assert code == 0 and "0 added, 3 updated, 0 unchanged" in out
    notes = [ln for ln in err.splitlines() if ln.startswith("note: ")]
    assert notes == ["note: the leaf budget changed from 128 to 256 tokens (--max-tokens): every file is chunked "
                     "again"]
    code, out, err = _cli(capsys, "index", str(tree), "--max-tokens", "256", "-q")
    assert "3 unchanged" in out and "note:" not in err


def test_the_version_is_written_once_and_read_everywhere(capsys):
    from setuptools.config.pyprojecttoml import read_configuration

    version = llmc_splitters.__version__
    assert re.fullmatch(r"0\.2\.\d+", version)  # the release the CHANGELOG and the README describe
    project = read_configuration(ROOT / "pyproject.toml", expand=True)["project"]
    assert "version" in read_configuration(ROOT / "pyproject.toml", expand=False)["project"]["dynamic"]
    assert project["version"] == version  # the package metadata is read from llmc_splitters.__version__
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"llmc-splitters {version}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## (\S+)", changelog, re.M).group(1) == version
