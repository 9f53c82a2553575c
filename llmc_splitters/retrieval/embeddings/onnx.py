"""A sentence-transformers model on ONNX Runtime, exported locally from its own weights, int8 by default.

At first use the model directory is exported with ``torch.onnx`` (TorchScript exporter, eager attention, dynamic
batch and sequence axes), then quantized with onnxruntime's dynamic int8 quantization (weights of the MatMul nodes,
per output channel: that keeps cosine similarity to the torch vectors above 0.99 on code, where per-tensor
quantization drops to about 0.94). Activations are quantized per call (a dynamic scale per batch), so a text's
vector moves slightly with the texts it is batched with (cosine about 0.99); the same batch gives the same vectors.
The result is cached under :func:`~._runtime.cache_root` keyed by the source
files' digest and the exporter's versions. Later runs need only ``onnxruntime``, ``tokenizers`` and ``numpy``:
no torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, LlmcError, missing_dependency
from ._runtime import (
    cache_root,
    cached_build,
    dist_version,
    files_digest,
    offline_hub,
    quiet,
    root_logging_off,
)
from .minilm import SentenceModelDir, _DirBackend, bundled_minilm_path, clean_text, require

__all__ = ["OnnxEmbedding", "OnnxMiniLMEmbedding", "export_onnx"]

# Bump when the export or quantization recipe changes: it is part of the cache key.
_RECIPE = 1
_OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_WEIGHTS = "model.onnx.data"


def export_onnx(files: SentenceModelDir, out_dir: Path, *, quantize: bool) -> Path:
    """Export the transformer of ``files`` to ``out_dir/model.onnx`` (int8 when ``quantize``); return the file.

    Needs torch and transformers (once); the exported graph maps token ids to the last hidden state, and pooling
    happens in numpy.

    Raises:
        MissingDependencyError: torch, transformers or onnx is not installed.
    """
    for module in ("torch", "transformers", "onnx"):
        require(module, "embeddings", "needed once, to export the model to ONNX")
    offline_hub()
    with quiet():
        import torch
        from transformers import AutoModel

        model = AutoModel.from_pretrained(str(files.path), attn_implementation="eager")
        model.eval()

        class _Hidden(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state

        # Two texts of different lengths: the traced graph sees padding and a real attention mask.
        ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
        mask = (ids != 0).long()
        fp32 = out_dir / "model-fp32.onnx"
        axes = {name: {0: "batch", 1: "sequence"} for name in (*_INPUTS, "last_hidden_state")}
        with torch.no_grad():
            torch.onnx.export(_Hidden(model), (ids, mask, torch.zeros_like(ids)), str(fp32),
                              input_names=list(_INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                              opset_version=_OPSET, dynamo=False)
    if not quantize:
        final = out_dir / "model.onnx"
        fp32.rename(final)
        return final
    from onnxruntime.quantization import QuantType, quantize_dynamic

    final = out_dir / "model.onnx"
    with quiet(), root_logging_off():
        quantize_dynamic(str(fp32), str(final), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
    fp32.unlink()
    return final


def mapped_model(model: Path) -> Path:
    """``model`` with its weights in a file beside the graph (ONNX external data), made once next to it.

    ONNX Runtime maps external weights into memory instead of reading and parsing the whole protobuf: a session
    of the bundled MiniLM then costs ~30 MB and 0.15-0.25 s instead of ~110 MB and 0.35-0.45 s (benchmarks/
    query_path.py), with the same outputs. Without the ``onnx`` package, or with a cache that cannot be written,
    ``model`` itself is returned (it loads the same, only heavier).
    """
    out = model.parent / "mapped"
    if (out / "model.onnx").is_file() and (out / _WEIGHTS).is_file():
        return out / "model.onnx"
    try:
        import onnx
    except ImportError:
        return model
    import shutil
    import tempfile

    try:
        tmp = Path(tempfile.mkdtemp(prefix=".mapped-", dir=model.parent))
    except OSError:
        return model
    try:
        onnx.save_model(onnx.load(str(model)), str(tmp / "model.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=_WEIGHTS, size_threshold=1024)
        os.rename(tmp, out)
    except OSError:
        if not (out / "model.onnx").is_file():
            return model
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "model.onnx"


class OnnxEmbedding(_DirBackend):
    """A sentence-transformers model directory (mean pooling) on ONNX Runtime, exported locally and cached.

    Args:
        model_path: A sentence-transformers model directory whose transformer torch can export (BERT-like).
        quantize: Int8 dynamic quantization (default) or float32.
        batch_size: Texts per ONNX Runtime call (texts are sorted by length first, so a batch pads little). 16
            runs as fast as 32 on 2 cores and keeps the peak RSS near 350 MB instead of 550-650 MB (attention
            activations of 32 texts of 256 word pieces).
        threads: ONNX Runtime intra-op threads (default: every core).
        normalize: L2-normalise vectors.
        max_seq_length: Read at most this many word pieces (default: the model's window). A shorter window runs
            faster (attention is quadratic in it); the index then bounds inputs to it.
        name: Identity name (default ``"onnx-int8:<directory name>"`` or ``"onnx:<directory name>"``, with
            ``-<max_seq_length>`` when it is not the model's).

    Raises:
        ConfigurationError: The directory is not a mean-pooling sentence-transformers model.
        MissingDependencyError: ``onnxruntime`` or ``tokenizers`` is not installed.

    Example:
        >>> emb = OnnxEmbedding("/models/my-bert-st")                      # doctest: +SKIP
        >>> emb.loaded                                                       # doctest: +SKIP
        False
    """

    _prefix = "onnx"
    runtime_modules = ("numpy", "numpy.typing", "onnxruntime", "tokenizers")
    parallelism = "thread"  # measured: 2 threads of 1 intra-op thread each beat 1 of 2 and 2 processes

    def __init__(self, model_path: str | os.PathLike[str], *, quantize: bool = True, batch_size: int = 16,
                 threads: int | None = None, normalize: bool = True, max_seq_length: int | None = None,
                 name: str | None = None) -> None:
        if batch_size <= 0:
            msg = f"batch_size must be > 0, got {batch_size}"
            raise ConfigurationError(msg)
        if threads is not None and threads <= 0:
            msg = f"threads must be > 0 (or None for every core), got {threads}"
            raise ConfigurationError(msg)
        self.files = SentenceModelDir(model_path)
        self.files.keep_ids = True  # embed_documents takes the word pieces the index's bound made
        own = self.files.max_seq_length
        if max_seq_length is not None and not 3 <= max_seq_length <= own:
            msg = f"max_seq_length must be in 3..{own} (the model's window), got {max_seq_length}"
            raise ConfigurationError(msg)
        self._seq = max_seq_length or own
        if self.files.pooling != "mean":
            msg = (f"{self.files.path} pools by {self.files.pooling!r}; the ONNX backend supports mean pooling only: "
                   "use the torch backend (sentence-transformers) for this model")
            raise ConfigurationError(msg)
        require("onnxruntime", "embeddings")
        require("tokenizers", "embeddings")
        self.model_path = str(self.files.path)
        self.quantize = quantize
        self.batch_size = batch_size
        self.threads = threads
        self.normalize = normalize
        kind = f"{self._prefix}-int8" if quantize else self._prefix
        if self._seq != own:
            kind += f"-{self._seq}"
        self.name = name or f"{kind}:{self.files.path.name}"

    @property
    def max_seq_length(self) -> int:
        return self._seq

    @property
    def max_input_tokens(self) -> int | None:
        return self._seq - 2

    def _share_key(self) -> tuple:
        return ("onnx", self.model_path, self.quantize, self.threads)

    def for_workers(self, threads: int) -> OnnxEmbedding:
        """A copy whose session runs ``threads`` intra-op threads (one session is shared by the worker threads:
        ONNX Runtime's ``run`` is thread-safe and releases the GIL)."""
        import copy

        twin = copy.copy(self)
        twin.__dict__.pop("_loaded", None)
        twin.threads = threads
        return twin

    def cache_key(self) -> dict[str, Any]:
        """What the exported model depends on (its cache directory is named by this)."""
        return {"source": files_digest(self.files.path), "recipe": _RECIPE, "opset": _OPSET,
                "quantize": "int8-matmul-per-channel" if self.quantize else "fp32",
                "torch": dist_version("torch"), "transformers": dist_version("transformers"),
                "onnx": dist_version("onnx"), "onnxruntime": dist_version("onnxruntime")}

    def model_file(self) -> Path:
        """The exported (and quantized) ``model.onnx``, made at first call and cached."""
        key = self.cache_key()
        if key["torch"] == "missing":
            # No exporter here (an install without torch): any complete export of the same source and recipe
            # serves, whichever torch made it.
            found = _find_compatible(key)
            if found is not None:
                return found / "model.onnx"
        what = f"the embedding model {self.name} (an ONNX export{', quantized to int8' if self.quantize else ''})"
        return cached_build("minilm-onnx", key, self._export, what=what, expect="20-30 s") / "model.onnx"

    def _export(self, out_dir: Path) -> None:
        try:
            export_onnx(self.files, out_dir, quantize=self.quantize)
        except LlmcError:
            raise
        except Exception as exc:  # noqa: BLE001 - torch.onnx and the quantizer raise many types
            msg = (f"cannot export {self.files.path} to ONNX ({type(exc).__name__}: {exc}); use the torch backend "
                   "(SentenceTransformerEmbedding) for this model")
            raise ConfigurationError(msg) from exc

    def _prepare_files(self) -> None:
        mapped_model(self.model_file())

    def _load(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - checked at construction
            raise missing_dependency("onnxruntime", "embeddings") from exc
        path = mapped_model(self.model_file())
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads or (os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        inputs = {i.name for i in session.get_inputs()}
        tok = self.files.tokenizer()
        return session, inputs, tok

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts; each is cut by the model at ``max_seq_length`` word pieces (the index bounds them first)."""
        if not texts:
            return []
        import numpy as np

        session, inputs, tok = self._model()
        limit = self._seq
        # The index bounded each view with this tokenizer just before: its word pieces are reused (same ids as
        # encoding the text again with the special tokens); the other texts are encoded here, in one batch.
        before, after = self.files.special_ids()
        pieces: list[Any] = [self.files.take_ids(t) for t in texts]
        rest = [i for i, got in enumerate(pieces) if got is None]
        if rest:
            encs = tok.encode_batch([clean_text(texts[i]) for i in rest], add_special_tokens=False)
            for i, e in zip(rest, encs):
                pieces[i] = e.ids
        # Keep [CLS] ... [SEP] within the model's window, as sentence-transformers truncation does.
        room = limit - len(before) - len(after)
        rows = [[*before, *(p if len(p) <= room else p[:room]), *after] for p in pieces]
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out: list[Any] = [None] * len(rows)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            width = max(len(rows[i]) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for r, i in enumerate(chunk):
                ids[r, : len(rows[i])] = rows[i]
                mask[r, : len(rows[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            m = mask[..., None].astype(hidden.dtype)
            vecs = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
            if self.normalize:
                vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(chunk):
                out[i] = vecs[r]
        return np.stack(out).astype(np.float32).tolist()


def _find_compatible(key: dict[str, Any]) -> Path | None:
    import json

    parent = cache_root() / "minilm-onnx"
    if not parent.is_dir():
        return None
    wanted = {k: key[k] for k in ("source", "recipe", "opset", "quantize")}
    for d in sorted(parent.iterdir()):
        marker = d / "llmc-build.json"
        if d.name.startswith(".") or not marker.is_file():
            continue
        try:
            got = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        if {k: got.get(k) for k in wanted} == wanted and (d / "model.onnx").is_file():
            return d
    return None


class OnnxMiniLMEmbedding(OnnxEmbedding):
    """The bundled ``all-MiniLM-L6-v2`` on ONNX Runtime, int8, exported from the package's weights at first use.

    Same tokenizer, input limit and 384 dimensions as :class:`~.minilm.MiniLMEmbedding`; vectors agree with
    torch's to a cosine above 0.99 on code (int8) or 0.9999 (``quantize=False``). The first use exports and
    quantizes (a few seconds, needs torch once); afterwards torch is not imported.

    Args:
        quantize: Int8 dynamic quantization (default) or float32.
        batch_size: Texts per ONNX Runtime call.
        threads: Intra-op threads (default: every core).
        normalize: L2-normalise vectors.

    Example:
        >>> emb = OnnxMiniLMEmbedding()          # doctest: +SKIP
        >>> emb.name, emb.dimension              # doctest: +SKIP
        ('minilm-onnx-int8:model', 384)
    """

    _prefix = "minilm-onnx"

    def __init__(self, *, quantize: bool = True, batch_size: int = 16, threads: int | None = None,
                 normalize: bool = True, max_seq_length: int | None = None) -> None:
        super().__init__(bundled_minilm_path(), quantize=quantize, batch_size=batch_size, threads=threads,
                         normalize=normalize, max_seq_length=max_seq_length)

