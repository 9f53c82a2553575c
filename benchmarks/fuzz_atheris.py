"""Coverage-guided fuzzing of ``ASTChunker`` with atheris (libFuzzer). Not run in CI.

The Hypothesis suite (``tests/test_fuzz.py``) runs in CI with a fixed budget of examples; this harness is for long,
unattended runs that let libFuzzer's coverage feedback find inputs no strategy thought of. It checks the same
contract on every input: the chunker either raises one of our own errors, and only when justified (binary data;
non-UTF-8 under ``errors="strict"``), or returns leaves that tile the decoded text exactly within the budget, in a
consistent span tree, in less than ``WALL_LIMIT`` seconds. Anything else (another exception type, a lossy or
over-budget result, a slow input) raises, and libFuzzer saves the input as ``crash-*`` / ``timeout-*``.

Usage (``pip install atheris``; the script exits quietly when it is missing)::

    python benchmarks/fuzz_atheris.py -max_total_time=600 fuzz-corpus/
    python benchmarks/fuzz_atheris.py -atheris_runs=20000          # seeds only from tests/data + stdlib
    python benchmarks/fuzz_atheris.py crash-1234abcd                 # replay one saved input

Without a corpus directory the seeds (``tests/data`` and a few standard-library modules) are written to a temporary
one. The first input bytes pick the budget, the language and the decoding policy; the rest is the file.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

try:
    import atheris
except ImportError:  # pragma: no cover - optional tool
    print("atheris is not installed (pip install atheris); nothing to do", file=sys.stderr)
    sys.exit(0)

with atheris.instrument_imports(include=["llmc_splitters"]):
    from llmc_splitters import ASTChunker, UndecodableInputError, UnsupportedInputError
    from llmc_splitters.chunking.inputs import binary_reason, decode

ROOT = Path(__file__).resolve().parents[1]
WALL_LIMIT = 20.0
BUDGETS = [1, 2, 4, 16, 64, 256, 2048]
LANGUAGES = [None, "python", "javascript", "typescript", "tsx", "bash", "markdown", "html", "text", "json", "go"]
SUFFIX = {None: ".py", "python": ".py", "javascript": ".js", "typescript": ".ts", "tsx": ".tsx", "bash": ".sh",
          "markdown": ".md", "html": ".html", "text": ".txt", "json": ".json", "go": ".go"}
_CHUNKERS: dict[tuple[int, str], ASTChunker] = {}


def _chunker(budget: int, errors: str) -> ASTChunker:
    key = (budget, errors)
    if key not in _CHUNKERS:
        _CHUNKERS[key] = ASTChunker(max_tokens=budget, errors=errors)
    return _CHUNKERS[key]


def check(data: bytes, budget: int, language: str | None, errors: str) -> None:
    """Raise AssertionError when the chunker breaks its contract on ``data``."""
    chunker = _chunker(budget, errors)
    path = "fuzz" + SUFFIX[language]
    start = time.monotonic()
    try:
        tree = chunker.chunk_tree(data, language=language, path=path)
    except UndecodableInputError:
        body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            assert errors == "strict", "UndecodableInputError under errors='fallback'"
            return
        raise AssertionError("UndecodableInputError for valid UTF-8") from None
    except UnsupportedInputError as exc:
        assert binary_reason(data), f"rejected text that is not binary: {exc}"
        return
    elapsed = time.monotonic() - start
    assert elapsed < WALL_LIMIT, f"{elapsed:.1f}s for {len(data)} bytes"
    assert not binary_reason(data), "binary data was chunked"
    text = decode(data, errors).text
    leaves = tree.leaves
    assert "".join(s.text for s in leaves) == text, "leaves do not join back to the input"
    raw = text.encode("utf-8", "surrogatepass")
    pos_b = pos_c = 0
    for s in leaves:
        assert s.text and s.start_char == pos_c and s.start_byte == pos_b, "leaves are not contiguous"
        assert raw[s.start_byte : s.end_byte].decode("utf-8", "surrogatepass") == s.text, "byte offsets are wrong"
        assert s.token_count == chunker.count_tokens(s.text), "token_count is not exact"
        assert s.token_count <= budget or (s.metadata.get("oversize") and len(s.text) == 1), "over budget"
        pos_b, pos_c = s.end_byte, s.end_char
    ids = {s.id for s in tree.spans}
    assert len(ids) == len(tree.spans), "duplicate span ids"
    for s in tree.spans:
        if s.parent_id is not None:
            p = tree.get(s.parent_id)
            assert p is not None and p.start_byte <= s.start_byte and s.end_byte <= p.end_byte, "child outside parent"


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    budget = fdp.PickValueInList(BUDGETS)
    language = fdp.PickValueInList(LANGUAGES)
    errors = "strict" if fdp.ConsumeIntInRange(0, 7) == 0 else "fallback"
    payload = fdp.ConsumeBytes(fdp.remaining_bytes())
    if budget < 16:
        payload = payload[:4000]  # tiny budgets make a leaf per token: keep those inputs small
    check(payload, budget, language, errors)


def _seed_corpus() -> str:
    d = tempfile.mkdtemp(prefix="llmc-fuzz-corpus-")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    seeds = [p for p in (ROOT / "tests" / "data").rglob("*") if p.is_file() and p.suffix != ".ipynb"]
    seeds += [stdlib / rel for rel in ("textwrap.py", "shlex.py", "heapq.py", "json/decoder.py", "base64.py")]
    for i, p in enumerate(seeds):
        # The first bytes are consumed for the settings (budget, language, policy); the file follows them.
        Path(d, f"seed-{i:03d}").write_bytes(b"\x04\x01\x01" + p.read_bytes()[:30_000])
    return d


def main() -> None:
    argv = list(sys.argv)
    if not any(not a.startswith("-") for a in argv[1:]):
        argv.append(_seed_corpus())
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
