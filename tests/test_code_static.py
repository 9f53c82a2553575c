"""code-static: the shipped static code embedding loads offline with numpy only, is the table its digest names, and
embeds whole texts deterministically (a normalised sum of its pieces' rows); its tokenizer cuts code as the lexical
index does."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmc_splitters.errors import ConfigurationError
from llmc_splitters.retrieval.embeddings import CodeStaticEmbedding, EmbeddingIdentity, resolve_embedding
from llmc_splitters.retrieval.embeddings.code_static import (
    DIMENSION,
    WEIGHTS_FILE,
    WEIGHTS_SHA256,
    CodeTokenizer,
    read_weights,
    words,
)
from llmc_splitters.retrieval.embeddings.resolve import recorded_spec
from llmc_splitters.retrieval.terms import split_identifier

CODE = {
    "net/headers.py": '''
        def parse_header(line):
            """Split an HTTP header line into its name and value."""
            name, _, value = line.partition(":")
            return name.strip().lower(), value.strip()
    ''',
    "store/cache.py": '''
        class LRUCache:
            """Keep the most recently used entries, evicting the oldest when full."""
            def __init__(self, capacity):
                self.capacity = capacity
                self.items = {}
            def get(self, key):
                value = self.items.pop(key)
                self.items[key] = value
                return value
    ''',
    "util/dates.js": '''
        /** Format a date as YYYY-MM-DD. */
        export function formatIsoDate(date) {
          const pad = (n) => String(n).padStart(2, "0");
          return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
        }
    ''',
    "scripts/backup.sh": '''
        # Copy the database dump to the backup directory, keeping seven days.
        backup_db() {
          pg_dump "$DB" > "$BACKUP_DIR/db-$(date +%F).sql"
          find "$BACKUP_DIR" -name 'db-*.sql' -mtime +7 -delete
        }
    ''',
}


@pytest.fixture(scope="module")
def emb() -> CodeStaticEmbedding:
    try:
        import pytest_socket
    except ImportError:
        return _loaded()
    pytest_socket.disable_socket(allow_unix_socket=True)  # the table loads with no network at all
    try:
        return _loaded()
    finally:
        pytest_socket.enable_socket()


def _loaded() -> CodeStaticEmbedding:
    e = CodeStaticEmbedding()
    e.embed_query("load")
    return e


def test_shipped_file_is_the_recorded_table() -> None:
    assert WEIGHTS_FILE.is_file()
    assert hashlib.sha256(WEIGHTS_FILE.read_bytes()).hexdigest() == WEIGHTS_SHA256
    table, vocab, recipe = read_weights(WEIGHTS_FILE)
    assert table.shape == (len(vocab), DIMENSION) and table.dtype == np.float32
    assert recipe["dimension"] == DIMENSION and recipe["vocabulary"] == len(vocab) == len(set(vocab))
    assert recipe["teacher"] == "minilm-onnx-int8-128:model" and len(recipe["corpus"]) == 64
    # A few MB, to ship in the wheel.
    assert WEIGHTS_FILE.stat().st_size < 8_000_000


def test_identity_names_the_digest(emb: CodeStaticEmbedding) -> None:
    name = f"code-static{DIMENSION}:{WEIGHTS_SHA256[:12]}"
    assert emb.identity == EmbeddingIdentity(name, DIMENSION, None)
    assert resolve_embedding("code-static").identity == emb.identity
    # An index that recorded the name reopens with the same table; a table of another digest is not this one.
    assert recorded_spec(name) == "code-static"
    assert resolve_embedding(name).identity == emb.identity
    assert recorded_spec(f"code-static{DIMENSION}:{'f' * 12}") is None
    with pytest.raises(ConfigurationError):
        resolve_embedding(f"code-static{DIMENSION}:{'f' * 12}")


def test_vectors_are_unit_deterministic_and_whole(emb: CodeStaticEmbedding) -> None:
    texts = [textwrap.dedent(t) for t in CODE.values()]
    batch = np.array(emb.embed_documents(texts))
    assert batch.shape == (len(texts), DIMENSION)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    one_by_one = np.array([emb.embed_query(t) for t in texts])
    assert np.array_equal(batch, one_by_one)  # a text's vector does not depend on its batch
    assert np.array_equal(batch, np.array(CodeStaticEmbedding().embed_documents(texts)))
    # No window: the end of a long text counts.
    long = texts[0] * 50
    assert emb.max_input_tokens is None
    assert not np.array_equal(emb.embed_query(long), emb.embed_query(long + "\n" + texts[1]))


def test_no_known_piece_gives_zeros(emb: CodeStaticEmbedding) -> None:
    vecs = emb.embed_documents(["", "(){}[];", "print(x)"])
    assert vecs[0] == [0.0] * DIMENSION and vecs[1] == [0.0] * DIMENSION
    assert abs(np.linalg.norm(vecs[2]) - 1.0) < 1e-5
    assert emb.embed_documents([]) == []


def test_queries_find_their_code(emb: CodeStaticEmbedding) -> None:
    paths = list(CODE)
    docs = np.array(emb.embed_documents([f"{p}\n{textwrap.dedent(t)}" for p, t in CODE.items()]))
    for query, want in (("parse http header name and value", "net/headers.py"),
                        ("least recently used cache eviction", "store/cache.py"),
                        ("format a date as year month day", "util/dates.js"),
                        ("back up the postgres database", "scripts/backup.sh")):
        scores = docs @ np.array(emb.embed_query(query))
        assert paths[int(scores.argmax())] == want, (query, dict(zip(paths, scores.round(3))))


def test_loads_with_numpy_only(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import json, sys
        from llmc_splitters.retrieval.embeddings import resolve_embedding
        e = resolve_embedding("code-static")
        v = e.embed_documents(["def read_config(path): return json.load(open(path))"])
        heavy = [m for m in ("torch", "onnxruntime", "model2vec", "transformers", "tokenizers", "sentence_transformers")
                 if m in sys.modules]
        print(json.dumps({"dim": len(v[0]), "heavy": heavy}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"dim": DIMENSION, "heavy": []}


def _tiny_weights(path: Path, vocab: list[str], table: np.ndarray) -> None:
    scale = (np.abs(table).max(axis=1) / 127).astype(np.float16)
    q = np.rint(table / scale.astype(np.float32)[:, None]).astype(np.int8)
    np.savez(path, vectors=q, scales=scale, vocabulary=np.frombuffer("\n".join(vocab).encode(), np.uint8),
             recipe=np.frombuffer(b'{"dimension": 2}', np.uint8))


def test_a_text_is_the_normalised_sum_of_its_pieces(tmp_path: Path) -> None:
    vocab = ["get", "http", "response", "gethttpresponse", "max", "retry", "42"]
    table = np.array([[127, 0], [0, 127], [127, 127], [-127, 0], [0, -127], [127, -127], [64, 64]], np.float32)
    path = tmp_path / "tiny.npz"
    _tiny_weights(path, vocab, table)
    e = CodeStaticEmbedding(path)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert e.identity == EmbeddingIdentity(f"code-static2:{sha[:12]}", 2, None)
    assert e.tokenize("x = getHTTPResponse(max_retry, 42, 7)") == [
        "gethttpresponse", "get", "http", "response", "max", "retry", "42"]
    got = np.array(e.embed_query("getHTTPResponse max_retry"))
    want = table[[3, 0, 1, 2, 4, 5]].sum(axis=0)
    assert np.allclose(got, want / np.linalg.norm(want), atol=1e-3)
    with pytest.raises(ConfigurationError, match="not a file"):
        CodeStaticEmbedding(tmp_path / "missing.npz")


def test_parts_outside_the_vocabulary_are_cut_into_known_pieces() -> None:
    tok = CodeTokenizer(["rate", "limit", "limiter", "er", "x"])
    assert tok.pieces("ratelimiter") == ["rate", "limiter"]
    assert tok.pieces("RateLimitQ") == ["rate", "limit"]  # 'q' starts no piece of two characters or more
    assert tok.pieces("123 x") == ["x"]  # unknown numbers are dropped
    with pytest.raises(ConfigurationError):
        CodeTokenizer(["a", "a"])


_WORDS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_TEXT = st.lists(st.one_of(_WORDS, st.sampled_from([" ", "\n", "(", ")", ".", "=", "  ", "42"])), max_size=30)


@settings(max_examples=200, deadline=None)
@given(a=_TEXT, b=_TEXT)
def test_tokenizing_is_additive_over_words(a: list[str], b: list[str]) -> None:
    tok = CodeTokenizer(["get", "http", "response", "max", "retries", "re", "tries", "a", "ab", "42", "data"])
    left, right = "".join(a), "".join(b)
    assert tok.ids(f"{left} {right}") == tok.ids(left) + tok.ids(right)
    ids = tok.ids(left)
    assert all(0 <= i < len(tok.vocabulary) for i in ids)
    # Every part of a word that is in the vocabulary is kept, in order, as the lexical index splits it.
    for word in words(left):
        parts = [word] if word[0].isdigit() else split_identifier(word)
        pieces = iter(tok.pieces(word))
        assert all(any(p == q for q in pieces) for p in parts if p in tok.index)
