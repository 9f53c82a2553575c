"""``code-static``: a static code embedding trained by this project, shipped inside the package (numpy only).

The model is a table of vectors, one per *piece* of a code-aware vocabulary; a text's vector is the sum of its
pieces' vectors, L2-normalised. Pieces are what the lexical index splits code into: identifiers
(``[A-Za-z_$][A-Za-z0-9_$]*``) cut at ``_``/``$`` and camelCase boundaries and lowercased
(:func:`~llmc_splitters.retrieval.terms.split_identifier`), plus the whole identifier when it is itself in the
vocabulary (``getattr``, ``innerhtml``), and numbers that are. A part outside the vocabulary is cut greedily into the
longest vocabulary pieces it starts with (``ratelimiter`` -> ``rate``, ``limiter``); what matches nothing is
dropped. Punctuation carries nothing.

The table was fitted to the packaged MiniLM (``minilm-onnx-128``) on the views the index embeds for a corpus of
package sources (``benchmarks/build_static.py`` builds it, reproducibly, offline; the recipe travels in the file).
Embedding is a dictionary lookup per word (cached) and one gather and sum in numpy per text: about twenty thousand
views of code a CPU-second. The weights are int8 with a scale per row, in one ``.npz`` file whose SHA-256 is recorded
here (:data:`WEIGHTS_SHA256`) and in the embedding's identity, so an index knows which table made its vectors.
No window: a span is embedded whole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError
from ..terms import split_identifier
from ._runtime import LazyModel
from .base import EmbeddingIdentity
from .minilm import require

__all__ = ["CodeStaticEmbedding", "CodeTokenizer", "WEIGHTS_FILE", "WEIGHTS_SHA256", "word_pieces"]

#: The shipped table (package data).
WEIGHTS_FILE = Path(__file__).with_name("data") / "code-static.npz"
#: SHA-256 of :data:`WEIGHTS_FILE`, written by ``benchmarks/build_static.py`` with the file.
WEIGHTS_SHA256 = "5ee29c44787e01cb2f3d075d86de6d56911b99306c674c5d25e0468147b4d27a"
#: Dimension of the shipped table, written by the build with :data:`WEIGHTS_SHA256`.
DIMENSION = 256

_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*|[0-9]+")
_MAX_PIECE = 24  # longest vocabulary piece the greedy cut tries
_CACHE_WORDS = 1 << 18  # words whose ids are kept (identifiers repeat; a cache that fills is cleared)


def words(text: str) -> list[str]:
    """Identifiers and numbers of ``text``, in order."""
    return _WORD.findall(text)


@functools.lru_cache(maxsize=1 << 16)
def word_pieces(word: str) -> tuple[str, tuple[str, ...]]:
    """``(whole, parts)`` of one identifier or number: lowercased, the parts cut as the lexical index cuts them.

    >>> word_pieces("parseHTTPHeader_v2")
    ('parsehttpheader_v2', ('parse', 'http', 'header', 'v2'))
    >>> word_pieces("42")
    ('42', ('42',))
    """
    whole = word.lower().strip("_$")
    if word[0].isdigit():
        return whole, (whole,)
    return whole, tuple(split_identifier(word))


class CodeTokenizer:
    """Text to vocabulary ids (see the module's docstring); thread-safe, words cached.

    Args:
        vocabulary: The pieces, in table order.

    Example:
        >>> tok = CodeTokenizer(["get", "http", "response", "gethttpresponse", "rate", "limit"])
        >>> tok.pieces("getHTTPResponse(ratelimit)")
        ['gethttpresponse', 'get', 'http', 'response', 'rate', 'limit']
    """

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.vocabulary = list(vocabulary)
        self.index = {p: i for i, p in enumerate(self.vocabulary)}
        if len(self.index) != len(self.vocabulary):
            msg = "the vocabulary holds a piece twice"
            raise ConfigurationError(msg)
        self._cache: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def word_ids(self, word: str) -> tuple[int, ...]:
        """The ids of one identifier or number."""
        index = self.index
        whole, parts = word_pieces(word)
        out: list[int] = []
        if len(parts) > 1 and whole in index:
            out.append(index[whole])
        numeric = word[0].isdigit()
        for part in parts:
            i = index.get(part)
            if i is not None:
                out.append(i)
            elif not numeric:
                out.extend(self._cut(part))
        return tuple(out)

    def _cut(self, part: str) -> list[int]:
        """Greedy longest-prefix cut of a part outside the vocabulary into vocabulary pieces (two characters or
        more); characters that start no piece are skipped."""
        index, out, i, n = self.index, [], 0, len(part)
        while i < n - 1:
            for j in range(min(n, i + _MAX_PIECE), i + 1, -1):
                k = index.get(part[i:j])
                if k is not None:
                    out.append(k)
                    i = j
                    break
            else:
                i += 1
        return out

    def ids(self, text: str) -> list[int]:
        """The ids of ``text``, in order."""
        found = _WORD.findall(text)
        got = list(map(self._cache.get, found))
        if None in got:
            for k, w in enumerate(found):
                if got[k] is None:
                    got[k] = self._remember(w)
        return list(chain.from_iterable(got))

    def _remember(self, word: str) -> tuple[int, ...]:
        ids = self.word_ids(word)
        cache = self._cache
        if len(cache) >= _CACHE_WORDS:
            with self._lock:
                cache.clear()
        cache[word] = ids
        return ids

    def pieces(self, text: str) -> list[str]:
        """The vocabulary pieces of ``text`` (for reading; :meth:`ids` is what embeds)."""
        return [self.vocabulary[i] for i in self.ids(text)]


def read_weights(path: Path) -> tuple[Any, list[str], dict[str, Any]]:
    """``(float32 table, vocabulary, recipe)`` from a weights file written by ``benchmarks/build_static.py``."""
    import numpy as np

    with np.load(path, allow_pickle=False) as npz:
        q, scale = npz["vectors"], npz["scales"]
        vocab = bytes(npz["vocabulary"]).decode("utf-8").split("\n")
        recipe = json.loads(bytes(npz["recipe"]).decode("utf-8"))
    table = q.astype(np.float32) * scale.astype(np.float32)[:, None]
    return table, vocab, recipe


def file_sha256(path: Path) -> str:
    """SHA-256 of one file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Loaded:
    __slots__ = ("table", "tokenizer", "recipe")

    def __init__(self, table: Any, tokenizer: CodeTokenizer, recipe: dict[str, Any]) -> None:
        self.table, self.tokenizer, self.recipe = table, tokenizer, recipe


class CodeStaticEmbedding(LazyModel):
    """The project's static code embedding, from the weights shipped in the package (or another file of the same
    format): numpy only, no window, nothing downloaded.

    Args:
        path: A weights file (default: the shipped one).
        name: Identity name (default ``"code-static<dimension>:<first 12 hex of the file's SHA-256>"``, from the
            recorded digest for the shipped file, so naming it reads nothing).

    Raises:
        ConfigurationError: ``path`` is not a file.
        MissingDependencyError: numpy is not installed.

    Example:
        >>> emb = CodeStaticEmbedding()
        >>> emb.identity.name == f"code-static{emb.dimension}:{WEIGHTS_SHA256[:12]}"
        True
    """

    # No ``parallelism``: batches run one at a time (BatchEmbedder's "auto" gives one worker). The tokenizer is
    # Python and holds the GIL; a second embedding thread would contend with the index's chunker, not add a core.
    max_input_tokens = None  # a sum of piece vectors has no window: the whole span is embedded
    light = True  # a table lookup per piece: the index chunks in worker processes while it embeds

    def __init__(self, path: str | Path | None = None, *, name: str | None = None) -> None:
        require("numpy", "static")
        self.path = Path(path) if path is not None else WEIGHTS_FILE
        if not self.path.is_file():
            msg = f"code-static weights {str(self.path)!r} are not a file"
            raise ConfigurationError(msg)
        shipped = path is None
        self._dimension = DIMENSION if shipped else None
        digest = WEIGHTS_SHA256 if shipped else file_sha256(self.path)
        self.name = name or f"code-static{self.dimension}:{digest[:12]}"

    @property
    def dimension(self) -> int:
        """Vector size."""
        if self._dimension is None:
            self._dimension = int(self._model().table.shape[1])
        return self._dimension

    @property
    def identity(self) -> EmbeddingIdentity:
        """Name (with the weights' digest), dimension, and no input limit."""
        return EmbeddingIdentity(self.name, self.dimension, None)

    @property
    def recipe(self) -> dict[str, Any]:
        """How the table was built (corpus, teacher, settings, digests), as the build recorded it."""
        return dict(self._model().recipe)

    runtime_modules = ("numpy",)

    def _share_key(self) -> tuple:
        return ("code-static", str(self.path.resolve()))

    def _load(self) -> _Loaded:
        table, vocab, recipe = read_weights(self.path)
        return _Loaded(table, CodeTokenizer(vocab), recipe)

    def tokenize(self, text: str) -> list[str]:
        """The vocabulary pieces of ``text`` (what its vector sums)."""
        return self._model().tokenizer.pieces(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One L2-normalised vector per text (zeros for a text with no known piece)."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The query's vector."""
        return self.embed_array([text])[0].tolist()

    def embed_array(self, texts: Iterable[str]) -> Any:
        """The vectors of ``texts`` as a float32 numpy array (one row per text)."""
        import numpy as np

        model = self._model()
        ids_of, table = model.tokenizer.ids, model.table
        texts = list(texts)
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = ids_of(text)
            if ids:  # a text with no piece keeps its zeros
                # One gather and sum per text: ten times faster than np.add.reduceat over a batch's rows.
                table.take(ids, axis=0).sum(axis=0, out=out[row])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def __repr__(self) -> str:
        return f"CodeStaticEmbedding({self.name!r}, loaded={self.loaded})"

