"""A static embedding distilled locally from a sentence-transformers model with ``model2vec``, cached.

Distillation (once, about a minute on 2 cores for MiniLM; needs torch then) passes every word piece of the model's
vocabulary through the model, reduces the vectors with PCA and weighs them by estimated frequency. Embedding a text
is then a lookup and a mean over its word pieces: no network, no torch, thousands of texts per second. Static
vectors have no input window, so texts are embedded whole (no bounded view).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, LlmcError
from ._runtime import cached_build, dist_version, files_digest, no_tqdm, offline_hub, quiet
from .minilm import SentenceModelDir, _DirBackend, bundled_minilm_path, clean_text, require

__all__ = ["StaticEmbedding", "StaticMiniLMEmbedding", "distill_static"]

_RECIPE = 1


def distill_static(files: SentenceModelDir, out_dir: Path, *, dimension: int) -> None:
    """Distill ``files`` into a model2vec static model saved in ``out_dir``.

    Raises:
        MissingDependencyError: torch, transformers, model2vec or skeletoken (model2vec's distiller) is missing.
    """
    for module in ("torch", "transformers", "skeletoken"):
        require(module, "embeddings", "needed once, to distill the static model")
    offline_hub()
    with quiet():
        import model2vec.distill.inference as m2v_inference
        from model2vec.distill import distill

        with no_tqdm(m2v_inference):
            model = distill(str(files.path), pca_dims=dimension, device="cpu")
        model.save_pretrained(str(out_dir))


class StaticEmbedding(_DirBackend):
    """A model2vec static embedding distilled from a local sentence-transformers directory at first use.

    Args:
        model_path: The sentence-transformers model directory to distill.
        dimension: Vector size after PCA (at most the model's own dimension).
        normalize: L2-normalise vectors.
        name: Identity name (default ``"static<dimension>:<directory name>"``).

    Raises:
        ConfigurationError: ``dimension`` is not positive or exceeds the model's.
        MissingDependencyError: ``model2vec`` is not installed.

    Example:
        >>> emb = StaticEmbedding("/models/my-st-model", dimension=128)     # doctest: +SKIP
        >>> emb.dimension, emb.max_input_tokens                              # doctest: +SKIP
        (128, None)
    """

    _prefix = "static"
    parallelism = "thread"  # measured: 2 threads beat 1 and 2 processes (the tokenizer and numpy release the GIL)

    def __init__(self, model_path: str | os.PathLike[str], *, dimension: int = 256, normalize: bool = True,
                 name: str | None = None) -> None:
        self.files = SentenceModelDir(model_path)
        own = self.files.dimension
        if dimension <= 0 or (own is not None and dimension > own):
            msg = f"dimension must be in 1..{own or 'the model dimension'}, got {dimension}"
            raise ConfigurationError(msg)
        require("model2vec", "embeddings")
        self.model_path = str(self.files.path)
        self._dimension = dimension
        self.normalize = normalize
        self.name = name or f"{self._prefix}{dimension}:{self.files.path.name}"

    @property
    def dimension(self) -> int | None:
        return self._dimension

    @property
    def max_input_tokens(self) -> int | None:
        # A mean of word-piece vectors has no window: the whole span is embedded.
        return None

    def _share_key(self) -> tuple:
        return ("static", self.model_path, self._dimension)

    def cache_key(self) -> dict[str, Any]:
        """What the distilled model depends on (its cache directory is named by this)."""
        return {"source": files_digest(self.files.path), "recipe": _RECIPE, "dimension": self._dimension,
                "model2vec": dist_version("model2vec"), "torch": dist_version("torch"),
                "transformers": dist_version("transformers")}

    def model_dir(self) -> Path:
        """The distilled model's directory, made at first call and cached."""
        what = f"the embedding model {self.name} (a static model distilled with model2vec)"
        return cached_build("minilm-static", self.cache_key(), self._distill, what=what, expect="2-4 minutes")

    def _distill(self, out_dir: Path) -> None:
        try:
            distill_static(self.files, out_dir, dimension=self._dimension)
        except LlmcError:
            raise
        except Exception as exc:  # noqa: BLE001 - model2vec and transformers raise many types
            msg = (f"cannot distill a static model from {self.files.path} ({type(exc).__name__}: {exc}); use the "
                   "torch backend (SentenceTransformerEmbedding) for this model")
            raise ConfigurationError(msg) from exc

    runtime_modules = ("json", "numpy", "numpy.typing", "model2vec", "safetensors.numpy", "tokenizers")

    def _prepare_files(self) -> None:
        self.model_dir()

    def _load(self) -> Any:
        import json

        from model2vec import StaticModel
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        # Read the files directly: model2vec's from_pretrained goes through its hub layer, which imports
        # transformers (half a second, and nothing to fetch here).
        d = self.model_dir()
        tensors = load_file(str(d / "model.safetensors"))
        config = json.loads((d / "config.json").read_text())
        for key in ("normalize", "max_length"):  # set below; a differing value in the config is logged as a warning
            config.pop(key, None)
        return StaticModel(tensors["embeddings"], Tokenizer.from_file(str(d / "tokenizer.json")), config=config,
                           normalize=self.normalize, weights=tensors.get("weights"),
                           token_mapping=tensors.get("mapping"), max_length=None)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts whole (a mean over their word pieces)."""
        if not texts:
            return []
        vecs = self._model().encode([clean_text(t) for t in texts], max_length=None, show_progress_bar=False,
                                    use_multiprocessing=False)
        return vecs.astype("float32").tolist()


class StaticMiniLMEmbedding(StaticEmbedding):
    """A static embedding distilled from the bundled ``all-MiniLM-L6-v2`` (256 dimensions by default).

    The fastest local option by far (a lookup and a mean per text); see ``benchmarks/results/embeddings.md`` for
    what it costs in retrieval quality. At query time it needs ``model2vec`` (numpy, tokenizers, safetensors), not
    torch.

    Args:
        dimension: Vector size after PCA (at most 384).
        normalize: L2-normalise vectors.

    Example:
        >>> emb = StaticMiniLMEmbedding()        # doctest: +SKIP
        >>> emb.name, emb.dimension              # doctest: +SKIP
        ('minilm-static256:model', 256)
    """

    _prefix = "minilm-static"

    def __init__(self, *, dimension: int = 256, normalize: bool = True) -> None:
        super().__init__(bundled_minilm_path(), dimension=dimension, normalize=normalize)
