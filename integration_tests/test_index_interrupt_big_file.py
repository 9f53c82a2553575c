"""SIGINT and SIGTERM stop an indexing run while it is inside one big file, keeping the files finished before it
(issue 22, item 4).

The flag the signal handlers set was read between files only, so a generated 20 MB Python file ignored SIGINT for
75 s and SIGTERM for 25 s. Here a real subprocess indexes a tree of a few small modules and one generated 4 MB Python
file of small functions (tens of seconds of work); the driver notes when the big file's chunking, or its layout
(``build_file``), begins, and the test sends the signal then. The process must exit with the interruption (status
130), the small files must be in the index, read back by a fresh process, and the big file must not: had the
signal waited for the file to finish, it would be there. The exit is waited for with a generous timeout; speed is
measured in ``benchmarks/big_file.py``, not asserted here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks.big_file import generated_python

pytest.importorskip("tantivy")

pytestmark = pytest.mark.timeout(300)

SMALL = {
    "a_config.py": "import os\n\n\ndef home() -> str:\n    return os.environ.get('HOME', '/')\n",
    "b_text.py": "def shout(s: str) -> str:\n    \"\"\"Upper-case s.\"\"\"\n    return s.upper() + '!'\n",
    "c_math.py": "class Vector:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n"
                 "    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n",
}

DRIVER = textwrap.dedent(
    '''
    import json, sys
    from pathlib import Path
    from llmc_splitters import ASTChunker
    from llmc_splitters.retrieval import CodeIndex, IndexInterrupted
    from llmc_splitters.retrieval.indexing import indexer as indexing

    db, tree, phase, flag = sys.argv[1:5]
    name = "chunk" if phase == "chunk" else "build_file"
    original = getattr(indexing, name)

    def noted(*args, **kwargs):
        path = args[1] if phase == "chunk" else args[0]
        if path == "z_big.py":
            Path(flag).write_text(phase)
        return original(*args, **kwargs)

    setattr(indexing, name, noted)
    idx = CodeIndex(db, chunker=ASTChunker(max_tokens=512, analyze=True, max_file_bytes=64 << 20))
    try:
        idx.index_directory(tree)
    except IndexInterrupted as exc:
        print(json.dumps({"signal": exc.signal_name, "added": exc.report.added}))
        sys.exit(130)
    print(json.dumps({"signal": None}))
    '''
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for rel, text in SMALL.items():
        (root / rel).write_text(text)
    (root / "z_big.py").write_text(generated_python(4 << 20))  # sorted last: the small files are prepared first
    return root


@pytest.mark.parametrize("phase", ["chunk", "layout"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_inside_a_big_file_stops_the_run_and_keeps_the_finished_files(tree, tmp_path, phase, sig):
    db, flag, script = tmp_path / "db", tmp_path / "flag", tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(tree), phase, str(flag)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while not flag.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the driver never reached the big file"
            time.sleep(0.05)
        time.sleep(0.3)  # well inside the phase, which takes seconds
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["signal"] == sig.name
    assert sorted(result["added"]) == sorted(SMALL)
    # Read back by a fresh process: the finished files are stored whole, the big one not at all.
    check = subprocess.run(
        [sys.executable, "-c", "import json, sys\nfrom llmc_splitters.retrieval import CodeIndex\n"
         "idx = CodeIndex(sys.argv[1], create=False)\n"
         "print(json.dumps({p: ''.join(s.text for s in sorted(idx.spans(p), key=lambda s: s.start_char))"
         " for p in idx.paths}))", str(db)],
        capture_output=True, text=True, env=env, timeout=120, check=True)
    assert json.loads(check.stdout) == SMALL
