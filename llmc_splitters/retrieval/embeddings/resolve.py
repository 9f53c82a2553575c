"""From a CLI or config string to an embedding: ``none``, a backend name, a model directory, or ``module:factory``.

``module:factory`` names a callable (imported from the current directory or ``sys.path``) that returns a LangChain
``Embeddings`` or a LlamaIndex ``BaseEmbedding``: OpenAI, Voyage, Ollama, Bedrock and the rest come through their own
packages, with no provider code here. The object is wrapped in :class:`ForeignEmbedding`, which gives it our
protocol and an identity; its name is the spec itself, so an index that records it can be reopened from the record.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, LlmcError
from .base import EmbeddingIdentity
from .batching import BatchLimits

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "MINILM_BACKEND", "ForeignEmbedding", "recorded_spec",
           "resolve_embedding"]


def _torch() -> Any:
    from .minilm import MiniLMEmbedding

    return MiniLMEmbedding()


def _onnx() -> Any:
    from .onnx import OnnxMiniLMEmbedding

    return OnnxMiniLMEmbedding()


def _onnx_fp32() -> Any:
    from .onnx import OnnxMiniLMEmbedding

    return OnnxMiniLMEmbedding(quantize=False)


def _onnx_128() -> Any:
    from .onnx import OnnxMiniLMEmbedding

    return OnnxMiniLMEmbedding(max_seq_length=128)


def _static() -> Any:
    from .static import StaticMiniLMEmbedding

    return StaticMiniLMEmbedding()


def _code_static() -> Any:
    from .code_static import CodeStaticEmbedding

    return CodeStaticEmbedding()


def _hashing() -> Any:
    from .hashing import HashingEmbedding

    return HashingEmbedding()


#: Backend names accepted by :func:`resolve_embedding`, each with what it builds.
BACKENDS: dict[str, tuple[Callable[[], Any], str]] = {
    "minilm-torch": (_torch, "all-MiniLM-L6-v2 on torch (sentence-transformers)"),
    "minilm-onnx": (_onnx, "all-MiniLM-L6-v2 on ONNX Runtime, int8, exported locally at first use"),
    "minilm-onnx-fp32": (_onnx_fp32, "all-MiniLM-L6-v2 on ONNX Runtime, float32"),
    "minilm-onnx-128": (_onnx_128, "all-MiniLM-L6-v2 on ONNX Runtime, int8, 128-word-piece window (as trained)"),
    "minilm-static": (_static, "static embedding distilled from all-MiniLM-L6-v2 with model2vec (256 dims)"),
    "code-static": (_code_static, "static code embedding trained here from MiniLM, shipped in the package (numpy)"),
    "hashing": (_hashing, "feature hashing of code terms: no model (tests, stand-in)"),
}

#: The model a new hybrid index gets unless told otherwise (``llmc-splitters index --embedding auto``), chosen by
#: measurement (issue 39, benchmarks/results/code-static.md): the project's static code embedding, whose hybrid
#: NDCG@10 on the code-search dev split is within 0.01 of MiniLM's (0.855 against 0.861) at about 150 times its
#: texts per CPU-second, shipped in the package and run by numpy alone.
DEFAULT_BACKEND = "code-static"

#: What ``minilm`` means: all-MiniLM-L6-v2 as chosen by measurement (benchmarks/results/embeddings.md), the fastest
#: local option whose hybrid full-hit on the tune packages is within 0.02 of MiniLM on torch (about 5x its texts/s,
#: no torch at query time).
MINILM_BACKEND = "minilm-onnx-128"

# Names recorded by indexes (identity names) that map back to a backend.
_RECORDED = (
    (re.compile(r"minilm:model"), "minilm-torch"),
    (re.compile(r"minilm-onnx-int8:model"), "minilm-onnx"),
    (re.compile(r"minilm-onnx:model"), "minilm-onnx-fp32"),
    (re.compile(r"minilm-onnx-int8-128:model"), "minilm-onnx-128"),
    (re.compile(r"minilm-static256:model"), "minilm-static"),
    (re.compile(r"hashing:256"), "hashing"),
)


def _recorded_code_static(name: str) -> bool:
    """Whether ``name`` is the identity of the shipped code-static table (another table's vectors are not its)."""
    if not name.startswith("code-static"):
        return False
    from .code_static import DIMENSION, WEIGHTS_SHA256

    return name == f"code-static{DIMENSION}:{WEIGHTS_SHA256[:12]}"


_FACTORY = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?:#.*)?$")


class ForeignEmbedding:
    """A LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding`` seen through our protocol, with an identity.

    Nothing of either framework is imported: the object is used by its methods (``embed_documents`` /
    ``embed_query``, or ``get_text_embedding_batch`` / ``get_query_embedding``).

    Args:
        inner: The framework's embedding object.
        name: Identity name (default: the class name and, when the object has one, its model name).
        limits: Provider limits for batching (default: 64 texts a call, no token limits known).
        max_input_tokens: The provider's input limit per text, if the index should bound texts to it (then
            ``count_tokens`` should be given too; without it the index cannot bound).
        count_tokens: The provider's token counter, if known.

    Raises:
        ConfigurationError: ``inner`` has neither pair of methods.

    Example:
        >>> class Fake:                                   # a LangChain-style Embeddings
        ...     def embed_documents(self, texts): return [[float(len(t)), 1.0] for t in texts]
        ...     def embed_query(self, text): return [float(len(text)), 1.0]
        >>> emb = ForeignEmbedding(Fake(), name="fake")
        >>> emb.embed_documents(["ab"]), emb.identity.dimension
        ([[2.0, 1.0]], 2)
    """

    def __init__(self, inner: Any, *, name: str | None = None, limits: BatchLimits | None = None,
                 max_input_tokens: int | None = None, count_tokens: Callable[[str], int] | None = None) -> None:
        if hasattr(inner, "embed_documents") and hasattr(inner, "embed_query"):
            self.framework = "langchain"
        elif hasattr(inner, "get_text_embedding_batch") and hasattr(inner, "get_query_embedding"):
            self.framework = "llama_index"
        else:
            msg = (f"{type(inner).__name__} is not an embedding: expected a LangChain Embeddings "
                   "(embed_documents/embed_query) or a LlamaIndex BaseEmbedding "
                   "(get_text_embedding_batch/get_query_embedding)")
            raise ConfigurationError(msg)
        self.inner = inner
        model = next((getattr(inner, a) for a in ("model", "model_name", "model_id")
                      if isinstance(getattr(inner, a, None), str) and getattr(inner, a)), None)
        self.name = name or (f"{type(inner).__name__}:{model}" if model else type(inner).__name__)
        self.batch_limits = limits or BatchLimits()
        self.max_input_tokens = max_input_tokens if count_tokens is not None else None
        if count_tokens is not None:
            self.count_tokens = count_tokens
        self._dimension: int | None = None

    @property
    def identity(self) -> EmbeddingIdentity:
        """Name, dimension (known after the first call) and input limit."""
        return EmbeddingIdentity(self.name, self._dimension, self.max_input_tokens)

    def _seen(self, vecs: list[list[float]]) -> list[list[float]]:
        if vecs and self._dimension is None:
            self._dimension = len(vecs[0])
        return vecs

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, from the wrapped object."""
        if not texts:
            return []
        if self.framework == "langchain":
            raw = self.inner.embed_documents(list(texts))
        else:
            raw = self.inner.get_text_embedding_batch(list(texts))
        return self._seen([[float(x) for x in v] for v in raw])

    def embed_query(self, text: str) -> list[float]:
        """The query's vector, from the wrapped object."""
        raw = self.inner.embed_query(text) if self.framework == "langchain" else self.inner.get_query_embedding(text)
        return self._seen([[float(x) for x in raw]])[0]

    def __repr__(self) -> str:
        return f"ForeignEmbedding({self.name!r}, {self.framework})"


def _import_factory(module: str, attr: str, spec: str) -> Any:
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:  # as `python -m` and uvicorn do: the user's module sits in the working directory
        sys.path.insert(0, cwd)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        msg = (f"--embedding {spec!r}: cannot import module {module!r} ({exc}); run from the directory that holds "
               f"it, or put it on PYTHONPATH")
        raise ConfigurationError(msg) from exc
    finally:
        if added:
            sys.path.remove(cwd)
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            near = difflib.get_close_matches(part, names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            msg = f"--embedding {spec!r}: module {module!r} has no {attr!r}{hint}"
            raise ConfigurationError(msg)
        obj = getattr(obj, part)
    return obj


def _from_factory(module: str, attr: str, spec: str) -> Any:
    target = _import_factory(module, attr, spec)
    if isinstance(target, type) or not (hasattr(target, "embed_documents")
                                        or hasattr(target, "get_text_embedding_batch")):
        if not callable(target):
            msg = f"--embedding {spec!r}: {attr!r} is neither callable nor an embedding"
            raise ConfigurationError(msg)
        try:
            target = target()
        except LlmcError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's factory can raise anything; say whose it was
            msg = f"--embedding {spec!r}: the factory raised {type(exc).__name__}: {exc}"
            raise ConfigurationError(msg) from exc
    if isinstance(target, ForeignEmbedding):
        return target
    if hasattr(target, "identity") and hasattr(target, "embed_documents") and hasattr(target, "embed_query"):
        return target  # one of ours, or something that speaks our protocol with an identity
    return ForeignEmbedding(target, name=_factory_name(spec, target))


def _factory_name(spec: str, obj: Any) -> str:
    base = spec.split("#", 1)[0]
    model = next((getattr(obj, a) for a in ("model", "model_name", "model_id")
                  if isinstance(getattr(obj, a, None), str) and getattr(obj, a)), None)
    return f"{base}#{model}" if model else base


def _remedy() -> str:
    names = ", ".join(["none", "minilm", *BACKENDS])
    return (f"use one of: {names}; a local sentence-transformers model directory; or module:factory (an import "
            "path to a callable returning a LangChain Embeddings or a LlamaIndex BaseEmbedding)")


def recorded_spec(name: str) -> str | None:
    """The spec :func:`resolve_embedding` rebuilds an index's embedding from, given the name the index recorded: a
    backend name (``"minilm-onnx-int8-128:model"`` -> ``"minilm-onnx-128"``), or ``None`` when only the code that
    built the embedding object can make it again (a ``module:factory`` spec is recorded as itself).

    Example:
        >>> recorded_spec("minilm-onnx-int8-128:model"), recorded_spec("MyEmbeddings")
        ('minilm-onnx-128', None)
    """
    if _recorded_code_static(name):
        return "code-static"
    return next((backend for pattern, backend in _RECORDED if pattern.fullmatch(name)), None)


def resolve_embedding(spec: Any) -> Any:
    """Build the embedding a CLI flag or config value names.

    Args:
        spec: ``None``/``"none"`` (lexical only), ``"minilm"`` (MiniLM's local backend, :data:`MINILM_BACKEND`), a
            backend name of :data:`BACKENDS` (``"code-static"``, the default :data:`DEFAULT_BACKEND`;
            ``"minilm-torch"``, ``"minilm-onnx"``, ``"minilm-static"``, ...), a name an index
            recorded (``"minilm:model"``), a local sentence-transformers model directory, ``"module:factory"``
            (returning a LangChain ``Embeddings`` or a LlamaIndex ``BaseEmbedding``), or an embedding object
            (returned as is, a framework one wrapped).

    Returns:
        ``None`` or an object with ``embed_documents``, ``embed_query`` and ``identity``. Local backends load
        nothing until their first embed call.

    Raises:
        ConfigurationError: The spec names nothing usable; the message lists what is accepted.
        MissingDependencyError: The backend's packages are not installed (the message gives the extra).

    Example:
        >>> resolve_embedding("none") is None
        True
        >>> resolve_embedding("hashing").identity.dimension
        256
    """
    if spec is None:
        return None
    if not isinstance(spec, (str, os.PathLike)):
        if hasattr(spec, "identity") and hasattr(spec, "embed_documents"):
            return spec
        return ForeignEmbedding(spec)
    text = os.fspath(spec).strip()
    low = text.lower()
    if low in ("none", ""):
        return None
    if low == "minilm":
        return BACKENDS[MINILM_BACKEND][0]()
    if low in BACKENDS:
        return BACKENDS[low][0]()
    backend = recorded_spec(text)
    if backend is not None:
        return BACKENDS[backend][0]()
    path = Path(text).expanduser()
    if path.is_dir():
        from .minilm import SentenceTransformerEmbedding

        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            msg = f"--embedding {text!r}: the directory holds no sentence-transformers model (no modules.json)"
            raise ConfigurationError(msg)
        return SentenceTransformerEmbedding(path)
    m = _FACTORY.match(text)
    if m:
        return _from_factory(m.group(1), m.group(2), text)
    near = difflib.get_close_matches(low, ["none", "minilm", *BACKENDS], n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    looks_like_path = os.sep in text or text.startswith((".", "~"))
    what = "is not a directory" if looks_like_path else "is not a known embedding"
    msg = f"--embedding {text!r} {what}{hint}; {_remedy()}"
    raise ConfigurationError(msg)
