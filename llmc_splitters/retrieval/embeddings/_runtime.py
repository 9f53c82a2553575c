"""Plumbing shared by the local backends: load once (thread-safe), keep third-party output quiet, cache built models.

* :class:`LazyModel` defers the weights to the first embed call; constructing a backend reads no weights and
  imports no heavy package. Objects stay picklable (the loaded model is not pickled), so process workers can
  rebuild theirs.
* :func:`quiet` silences progress bars and false-alarm warnings of transformers, huggingface_hub, model2vec and
  the ONNX exporter while our code calls them; our own progress output is not touched.
* :func:`cached_build` makes a derived model (an ONNX export, a distilled static model) once, in a directory keyed
  by what it was made from, written atomically so that a crash or a concurrent builder never leaves a half model.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError

__all__ = ["LazyModel", "cache_root", "cached_build", "dist_version", "files_digest", "no_tqdm", "offline_hub", "quiet",
           "root_logging_off", "shared"]

_shared_lock = threading.Lock()
_shared: dict[tuple, Any] = {}
_key_locks: dict[tuple, threading.Lock] = {}


def shared(key: tuple, load: Callable[[], Any]) -> Any:
    """One loaded object per ``key`` in this process (two embedding objects of one model share its weights).

    Loads of different keys run in parallel; two threads asking for the same key load it once.
    """
    with _shared_lock:
        if key in _shared:
            return _shared[key]
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        with _shared_lock:
            if key in _shared:
                return _shared[key]
        obj = load()
        with _shared_lock:
            _shared[key] = obj
        return obj


class LazyModel:
    """Base of the local backends: ``_model()`` loads the weights at first use, once, under a lock.

    Subclasses implement ``_load()`` and give ``_share_key()`` (models with the same key are shared by every
    object of this process).
    """

    #: The packages :meth:`_load` imports (``None``: not listed; :meth:`prepare_runtime` then does nothing).
    runtime_modules: tuple[str, ...] | None = None

    def _share_key(self) -> tuple:
        raise NotImplementedError

    def prepare_runtime(self) -> bool:
        """Import what loading the weights needs and build what it reads (an export made once), in this thread;
        whether the backend knows what that is.

        Afterwards loading the weights on another thread imports no package, so it can run while this thread
        imports others: two threads importing one package with internal import cycles (numpy) can each see it
        half-initialised.
        """
        if self.runtime_modules is None:
            return False
        import importlib

        for name in self.runtime_modules:
            importlib.import_module(name)
        self._prepare_files()
        return True

    def _prepare_files(self) -> None:
        """Build the files :meth:`_load` reads, if they are built at first use (nothing by default)."""

    def _load(self) -> Any:
        raise NotImplementedError

    def _model(self) -> Any:
        model = self.__dict__.get("_loaded")
        if model is None:
            model = shared(self._share_key(), self._load)
            self.__dict__["_loaded"] = model
        return model

    @property
    def loaded(self) -> bool:
        """Whether the weights are loaded (in this object)."""
        return self.__dict__.get("_loaded") is not None

    def __getstate__(self) -> dict[str, Any]:
        # The weights are rebuilt from their files in the receiving process, never pickled.
        return {k: v for k, v in self.__dict__.items() if k != "_loaded"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def offline_hub() -> None:
    """Never let the Hugging Face hub client reach the network: every file we load is local."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


_quiet_lock = threading.RLock()
# Libraries that log notices at load time through the standard logging module (model2vec: "Set max_length to ...").
_CHATTY_LOGGERS = ("model2vec", "sentence_transformers", "onnxruntime", "huggingface_hub")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence third-party progress bars, warnings and log lines for the duration (restored afterwards).

    What is silenced: the loggers of model2vec, sentence-transformers, onnxruntime and huggingface_hub below ERROR,
    transformers' logging below ERROR (its "Token indices sequence length is longer than the
    specified maximum" is a false alarm here: the index bounds every input itself) and its weight-loading bar,
    huggingface_hub's bars and Python warnings (the ONNX exporter's tracer warnings). Only packages already
    imported, or imported inside the block, are affected. Used around loading and building, never around our own
    work.
    """
    with _quiet_lock:
        restore: list[Callable[[], None]] = []
        for name in _CHATTY_LOGGERS:
            lg = logging.getLogger(name)
            level = lg.level
            lg.setLevel(logging.ERROR)
            restore.append(functools.partial(lg.setLevel, level))
        try:
            import transformers.utils.logging as tlog

            verbosity, bars = tlog.get_verbosity(), tlog.is_progress_bar_enabled()
            tlog.set_verbosity_error()
            tlog.disable_progress_bar()
            restore.append(lambda: tlog.set_verbosity(verbosity))
            if bars:
                restore.append(tlog.enable_progress_bar)
        except ImportError:
            pass
        try:
            import huggingface_hub.utils as hub

            if not hub.are_progress_bars_disabled():
                hub.disable_progress_bars()
                restore.append(hub.enable_progress_bars)
        except (ImportError, AttributeError):
            pass
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        finally:
            for undo in reversed(restore):
                undo()


@contextlib.contextmanager
def no_tqdm(*modules: Any) -> Iterator[None]:
    """Replace ``tqdm`` in the given modules' namespaces by a disabled one (for libraries with no switch)."""
    saved = []
    for mod in modules:
        bar = getattr(mod, "tqdm", None)
        if bar is not None:
            saved.append((mod, bar))
            mod.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        for mod, bar in saved:
            mod.tqdm = bar


@contextlib.contextmanager
def root_logging_off() -> Iterator[None]:
    """Drop log records of WARNING and below for the duration (a one-off build step only).

    onnxruntime's quantizer calls the bare ``logging.warning()``, which would also install a stderr handler on the
    root logger for the rest of the process when it has none: a null handler stands in while the block runs.
    """
    root = logging.getLogger()
    null = logging.NullHandler() if not root.handlers else None
    if null is not None:
        root.addHandler(null)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)
        if null is not None:
            root.removeHandler(null)


def dist_version(dist: str) -> str:
    """The installed version of a distribution, ``"missing"`` when it is not installed (part of a build's cache key)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "missing"


def cache_root() -> Path:
    """``$LLMC_CACHE_DIR``, else ``~/.cache/llmc-splitters``: where derived models are kept."""
    env = os.environ.get("LLMC_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "llmc-splitters"


_digest_lock = threading.Lock()
_digests: dict[tuple, str] = {}


def files_digest(root: str | os.PathLike[str]) -> str:
    """SHA-256 over every file under ``root`` (relative path and content), in path order.

    Memoised by the files' sizes and modification times, in this process and in ``digests.json`` under
    :func:`cache_root`, so that a process that only loads a derived model (a ``query``) does not re-read ~90 MB of
    weights to name it.
    """
    base = Path(root)
    files = sorted(p for p in base.rglob("*") if p.is_file())
    stat_key = (str(base.resolve()), tuple((p.relative_to(base).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                                           for p in files))
    with _digest_lock:
        if stat_key in _digests:
            return _digests[stat_key]
    memo_key = hashlib.sha256(json.dumps(stat_key).encode()).hexdigest()
    memo_file = cache_root() / "digests.json"
    try:
        memo = json.loads(memo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    digest = memo.get(memo_key) if isinstance(memo, dict) else None
    if not isinstance(digest, str):
        h = hashlib.sha256()
        for p in files:
            h.update(p.relative_to(base).as_posix().encode() + b"\0")
            with p.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            h.update(b"\0")
        digest = h.hexdigest()
        memo = {**(memo if isinstance(memo, dict) else {}), memo_key: digest}
        with contextlib.suppress(OSError):  # a read-only cache only costs the next process the hashing
            memo_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo_file.with_name(f".digests-{os.getpid()}.json")
            tmp.write_text(json.dumps(memo), encoding="utf-8")
            os.replace(tmp, memo_file)
    with _digest_lock:
        _digests[stat_key] = digest
    return digest


_COMPLETE = "llmc-build.json"


def cached_build(kind: str, key: dict[str, Any], build: Callable[[Path], None], *, what: str | None = None,
                 expect: str | None = None) -> Path:
    """The directory of a derived model, built by ``build(tmpdir)`` the first time and reused afterwards.

    The one-time build says so on stderr, in one line (what is built, about how long it takes, where it is kept),
    so that a first run's pause is explained; ``llmc-splitters index --prepare-model`` does it ahead of time.

    Args:
        kind: A folder under :func:`cache_root` (``"minilm-onnx"``, ``"minilm-static"``).
        key: Everything the result depends on (source files' digest, exporter versions, settings); its hash
            names the directory, so a change of any part builds a new one.
        build: Writes the model's files into the directory it is given.
        what: What the build makes, for that line (no line without it).
        expect: About how long it takes (``"20-30 s"``).

    Returns:
        The directory, complete: it is built in a temporary sibling and renamed into place, so readers never see
        a partial model; when two processes build at once, the first rename wins and the other copy is dropped.

    Raises:
        ConfigurationError: The cache directory cannot be created or written (the message names it and the
            ``LLMC_CACHE_DIR`` remedy).
    """
    text = json.dumps(key, sort_keys=True, default=str)
    name = hashlib.sha256(text.encode()).hexdigest()[:20]
    parent = cache_root() / kind
    final = parent / name
    if (final / _COMPLETE).is_file():
        return final
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=parent))
    except OSError as exc:
        msg = (f"cannot write the model cache in {parent} ({exc.strerror or exc}); set LLMC_CACHE_DIR to a "
               "writable directory")
        raise ConfigurationError(msg) from exc
    if what is not None:
        took = f" (about {expect})" if expect else ""
        print(f"llmc-splitters: preparing {what}, once{took}; later runs reuse it from {final}", file=sys.stderr,
              flush=True)
    try:
        build(tmp)
        (tmp / _COMPLETE).write_text(text + "\n")
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / _COMPLETE).is_file():
                # A stale, incomplete directory from an older crash: replace it.
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
