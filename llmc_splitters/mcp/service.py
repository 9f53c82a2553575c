"""What the MCP tools do, with no MCP in it: budgeted search, exact slices, status and re-indexing of one index.

:class:`CodeService` is the server's core; :mod:`llmc_splitters.mcp.server` only maps tool calls onto it. Each
method returns a :class:`~llmc_splitters.mcp.replies.Reply` (the text an agent reads, and the same facts as data)
or raises :class:`~llmc_splitters.errors.RequestError` with one sentence that says what to send instead. The rules
it keeps:

* **Budgets.** A ``search_code`` reply (its text *and* its data, as compact JSON) is at most ``max_tokens`` tokens
  of the index's tokenizer: the hits' context gets what the listing leaves, and the whole is counted again before
  it goes out. A request over the hard cap is clamped, and the reply says so. ``get_symbol``/``get_lines`` replies
  are held to the server's default budget: a longer slice is cut at a line, and the reply names the
  ``get_lines`` call that continues it.
* **Nothing outside the index.** Text comes from the index (its leaves tile each file), never from disk; paths are
  relative to the indexed root (:mod:`llmc_splitters.mcp.paths`); every message is scrubbed of the server's
  absolute paths.
* **Consistent.** Each tool call reads the index in one snapshot
  (:meth:`~llmc_splitters.retrieval.storage.span_store.SpanStore.snapshot`): a file re-indexed meanwhile, by this server or
  another process, is seen whole, in its old version or its new one, never a hit of one with the imports of the
  other. Refreshes write while searches run: nothing waits for a lock.
* **Fresh.** Reads go through :meth:`Refresher.before_request` in refresh mode; in watch mode a reply says when
  changes are still waiting to be indexed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LlmcError, RequestError, UnsupportedInputError
from ..ingest.fresh import Refresher, RefreshReport
from ..ingest.walk import WalkOptions
from .paths import inside_root, relative_path, scrub
from .replies import MAX_LIST, Reply, fit_search, slices_reply

__all__ = ["CodeService", "ServiceSettings"]

log = logging.getLogger(__name__)

_MAX_QUERY_CHARS = 4000


@dataclass(frozen=True)
class ServiceSettings:
    """Budgets and defaults of one server.

    Attributes:
        max_tokens: Default reply budget (``search_code`` without ``max_tokens``; every ``get_*`` reply).
        hard_cap: Largest reply budget a request may ask for; larger ones are clamped.
        k: Default number of hits; ``None`` (the default, as in the core ``CodeRetriever``): as many as fill the
            budget, from the ``max_k`` best.
        max_k: Largest ``k`` a request may ask for.
    """

    max_tokens: int = 8000
    hard_cap: int = 25000
    k: int | None = None
    max_k: int = 50

    def __post_init__(self) -> None:
        if not 0 < self.max_tokens <= self.hard_cap:
            msg = f"max_tokens must be in 1..hard_cap ({self.hard_cap}), got {self.max_tokens}"
            raise ValueError(msg)
        if self.k is not None and not 0 < self.k <= self.max_k:
            msg = f"k must be in 1..{self.max_k}, got {self.k}"
            raise ValueError(msg)


class CodeService:
    """The five tools over one index, with freshness and path rules (see the module docstring).

    Args:
        open_retriever: Opens the index: returns a :class:`~llmc_splitters.retrieval.CodeRetriever` or raises
            :class:`~llmc_splitters.errors.LlmcError` with a message for the agent (no index there, Chroma
            unreachable). Called again on the next request until it succeeds.
        root: The indexed source tree, or ``None`` when the server only reads an index (no re-indexing).
        walk_options: The policy that selects the tree's files (default: the ``index`` command's).
        settings: Budgets and defaults.
        freshness: ``watch`` (a file watcher), ``refresh`` (a scan before each request) or ``off``.
        debounce: Watch mode: seconds of quiet before changed files are indexed.
        location: How replies name the index (never an absolute path).
        hide: Absolute paths to replace in every message (path -> stand-in); ``root`` is always hidden.
        on_refreshed: Called after each refresh that changed the index.

    Example:
        >>> from llmc_splitters.retrieval import CodeRetriever
        >>> r = CodeRetriever(k=2)
        >>> _ = r.index_texts({"m.py": "import os\\n\\ndef home():\\n    return os.environ['HOME']\\n"})
        >>> service = CodeService(lambda: r, freshness="off")
        >>> reply = service.search_code("home directory", max_tokens=300)
        >>> print(reply.text.splitlines()[1])
        1. m.py:3-4 home (function) score 0.0164
        >>> reply.data["hits"][0]["symbol"]
        'home'
    """

    def __init__(
        self,
        open_retriever: Callable[[], Any],
        *,
        root: str | Path | None = None,
        walk_options: WalkOptions | None = None,
        settings: ServiceSettings | None = None,
        freshness: str = "watch",
        debounce: float = 0.5,
        location: str = "the index",
        hide: dict[str, str] | None = None,
        on_refreshed: Callable[[RefreshReport], None] | None = None,
    ) -> None:
        if freshness not in ("watch", "refresh", "off"):
            msg = f"freshness must be 'watch', 'refresh' or 'off', got {freshness!r}"
            raise ValueError(msg)
        self._open = open_retriever
        self._opened: Any = None
        self._open_lock = threading.Lock()
        self.root = Path(root).resolve() if root is not None else None
        self.settings = settings or ServiceSettings()
        self.location = location
        self.freshness = freshness if self.root is not None else "off"
        self.debounce = debounce
        self._hide = dict(hide or {})
        if self.root is not None:
            self._hide.setdefault(str(self.root), "<root>")
        home = str(Path.home())
        if len(home) > 1:  # a home of "/" would turn every slash into "~"
            self._hide.setdefault(home, "~")
        self.refresher: Refresher | None = None
        if self.root is not None:
            self.refresher = Refresher(lambda: self._retriever().index, self.root, walk_options or WalkOptions(),
                                       on_refreshed=on_refreshed)
        self.watch_error: str | None = None
        self.search_ready = False  # the index is open and one search has run (see start)
        self._started = False
        self._catch_up = threading.Event()

    # ------------------------------------------------------------------------------------------------ life

    def start(self, *, catch_up: bool = True) -> None:
        """In the background: open the index and run one search (which loads the embedding model, if any, so that
        no agent waits for it), then, in watch mode, start watching, and catch up with the tree (with a root,
        whatever the freshness mode: searches are served meanwhile, and their replies say the index is still
        catching up).

        ``catch_up=False`` holds the watcher and the catch-up back until a later ``start()``: the command line
        starts the service before it imports the MCP SDK, so that opening the index overlaps that import, while
        the scan of the tree, which would compete with the import for the interpreter, waits until the server is
        built. A later call only releases what was held."""
        if not self._started:
            self._started = True
            threading.Thread(target=self._warm_and_catch_up, name="llmc-start", daemon=True).start()
        if catch_up:
            self._catch_up.set()

    def _warm_and_catch_up(self) -> None:
        opened = self._warm()
        self._catch_up.wait()
        if self.refresher is None:
            return
        if self.freshness == "watch":
            try:
                self.refresher.watch(self.debounce)
            except (LlmcError, OSError) as exc:
                # No watcher (watchdog missing, inotify limit): fall back to a scan before each request.
                self.watch_error = self.scrub(f"{type(exc).__name__}: {exc}")
                log.warning("cannot watch the tree (%s); checking it before each request instead", self.watch_error)
                self.freshness = "refresh"
        if not opened:
            return
        try:
            self.refresher.refresh(full=True)
            self.search_ready = True
        except LlmcError as exc:
            log.warning("start-up: %s", self.scrub(str(exc)))
        except Exception:
            log.exception("start-up failed")

    def _warm(self) -> bool:
        """Open the index and run one search; whether the index could be opened (no index yet, Chroma down: the
        requests will say so)."""
        try:
            retriever = self._retriever()
            if retriever.index.span_store.exists:  # a new index is created by the catch-up's first write
                with retriever.index.span_store.snapshot():
                    retriever.search("warm up", 1)
                self.search_ready = True
        except LlmcError as exc:
            log.warning("start-up: %s", self.scrub(str(exc)))
            return False
        except Exception:
            log.exception("start-up failed")
            return False
        return True

    def stop(self, *, wait: float | None = None) -> None:
        """Stop watching (with ``wait``, give a running refresh that many seconds to finish its writes)."""
        if self.refresher is not None:
            self.refresher.stop(wait=wait)

    def scrub(self, text: str) -> str:
        """``text`` without the server's absolute paths."""
        return scrub(text, self._hide)

    def _retriever(self) -> Any:
        if self._opened is not None:
            return self._opened
        with self._open_lock:
            if self._opened is None:
                try:
                    self._opened = self._open()
                except LlmcError as exc:
                    raise RequestError(self.scrub(str(exc))) from exc
            return self._opened

    def _fresh_note(self) -> str | None:
        """Refresh mode: scan first. Watch mode: say whether changes are still queued."""
        r = self.refresher
        if r is None or self.freshness == "off":
            return None
        if self.freshness == "refresh":
            return r.before_request()
        if not r.caught_up:
            return "the index is still catching up with the tree: results may miss recent edits"
        if r.pending:
            return f"{r.pending} changed paths are waiting to be indexed: results may miss them"
        if r.running:
            return "a refresh is running: results may miss the latest edits"
        return None

    # ------------------------------------------------------------------------------------------- arguments

    def _budget(self, max_tokens: Any) -> tuple[int, str | None]:
        if max_tokens is None:
            return self.settings.max_tokens, None
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            msg = f"max_tokens must be a positive number of tokens, got {max_tokens!r}; omit it for the default " \
                  f"({self.settings.max_tokens})"
            raise RequestError(msg)
        if max_tokens > self.settings.hard_cap:
            return self.settings.hard_cap, (f"max_tokens {max_tokens} was clamped to this server's hard cap, "
                                            f"{self.settings.hard_cap}")
        return max_tokens, None

    def _k(self, k: Any) -> int | None:
        if k is None:
            return self.settings.k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.settings.max_k:
            msg = f"k must be a number of hits from 1 to {self.settings.max_k}, got {k!r}"
            raise RequestError(msg)
        return k

    def _file(self, retriever: Any, path: Any) -> str:
        """``path`` as the index stores it: a file, or a notebook's cell (``nb.ipynb#cell3``)."""
        rel = relative_path(path)
        store = retriever.index.span_store
        if store.marker(rel) is None and store.file_of(rel) is None:
            raise RequestError(self._unknown_file(retriever, rel))
        return rel

    def _line_count(self, retriever: Any, rel: str) -> int:
        last = retriever.index.span_store.last_line(rel)
        if last is not None:
            return int(last[0])
        try:  # a notebook (its cells are the documents) or an empty file: the index says which
            retriever.get_lines(rel, 1)
        except ConfigurationError as exc:
            raise RequestError(self.scrub(str(exc))) from exc
        return 1

    def _unknown_file(self, retriever: Any, rel: str) -> str:
        import difflib

        paths = retriever.index.paths
        near = difflib.get_close_matches(rel, paths, n=3, cutoff=0.5)
        if not near:
            tail = rel.rsplit("/", 1)[-1]
            near = [p for p in paths if p.rsplit("/", 1)[-1] == tail][:3]
        hint = f"; did you mean {', '.join(repr(p) for p in near)}?" if near else \
            "; use a path as search_code reports it (relative to the indexed root)"
        return f"{rel!r} is not in the index{hint}"

    # --------------------------------------------------------------------------------------------- search

    def search_code(
        self,
        query: Any,
        max_tokens: Any = None,
        k: Any = None,
        path: Any = None,
        language: Any = None,
        dense_fallback: Any = False,
    ) -> Reply:
        """Budgeted search: hits with their scope or class skeleton and used imports, within ``max_tokens``.

        Args:
            query: Words, identifiers, code or an error message.
            max_tokens: Reply budget (default and hard cap: :class:`ServiceSettings`).
            k: Hits to expand (default :attr:`ServiceSettings.k`; ``None`` fills the budget).
            path: Only files under this path (a file or directory, relative to the root).
            language: Only files in this language (``python``, ``typescript``, ...).
            dense_fallback: When no word of the query occurs in the index, the nearest code by meaning alone
                (default: no hits, and the reply says that no word occurs; see ``SearchResult.words_in_index``).

        Raises:
            RequestError: A bad argument, or an index that cannot be opened.
        """
        if not isinstance(query, str) or not query.strip():
            msg = "query is empty; describe what you are looking for, or give an identifier or a line of code"
            raise RequestError(msg)
        if len(query) > _MAX_QUERY_CHARS:
            msg = f"query has {len(query)} characters; keep it under {_MAX_QUERY_CHARS} (the key words or lines)"
            raise RequestError(msg)
        if not isinstance(dense_fallback, bool):
            raise RequestError(f"dense_fallback must be true or false, got {dense_fallback!r}")
        budget, clamp_note = self._budget(max_tokens)
        k = self._k(k)
        prefix = relative_path(path, what="path", allow_root=True) if path is not None else ""
        lang = _language(language) if language is not None else None
        retriever = self._retriever()
        fresh_note = self._fresh_note()
        notes = [n for n in (clamp_note, fresh_note) if n]
        if self.refresher is not None and not self.refresher.caught_up and not retriever.index.span_store.exists:
            # A new index is created by the first file the catch-up writes: until then there is nothing to search.
            notes.append("the index of the tree is being built and holds no file yet: search again in a moment")
            return fit_search(retriever, [], [], 0.0, budget, notes, clamped=clamp_note is not None, files=())
        with retriever.index.span_store.snapshot():
            where = _path_filter(retriever.index.span_store, prefix) if prefix else None
            hits, confidence, contexts, files, in_index = search_with_contexts(
                retriever, query, k or self.settings.max_k, where, lang, dense_fallback=dense_fallback)
            self.search_ready = True
            if not hits and not retriever.index.span_store.counts()["files"]:
                notes.append(f"the index is empty: {self._why_empty()}")
            elif not hits and in_index and (where or lang):
                # A filter that lets nothing through is a bad argument, not words that match nothing.
                unmatched = retriever.index.unmatched_filter(path=where, language=lang)
                if unmatched is not None:
                    raise RequestError(f"{unmatched}; or omit {'path' if where else 'language'}")
                given = " ".join(f"{k}={v!r}" for k, v in (("path", where), ("language", lang)) if v)
                notes.append(f"indexed files match the filters ({given}), but none of their code matches these words")
            return fit_search(retriever, hits, contexts, confidence, budget, notes, clamped=clamp_note is not None,
                              fill=k is None, files=files, words_in_index=in_index,
                              dense=retriever.index.embedding is not None)

    # ----------------------------------------------------------------------------------------------- slices

    def get_symbol(self, name: Any, path: Any = None) -> Reply:
        """The exact source of a symbol (``Class.method``), from the index; cut at a line to fit the budget.

        Raises:
            RequestError: No such symbol, a bad path, or an index that cannot be opened.
        """
        if not isinstance(name, str) or not name.strip():
            msg = "name is empty; give a function, class or method name, qualified like 'Class.method'"
            raise RequestError(msg)
        name = name.strip()
        retriever = self._retriever()
        notes = [n for n in (self._fresh_note(),) if n]
        with retriever.index.span_store.snapshot():
            rel = self._file(retriever, path) if path is not None else None
            snippets = retriever.get_symbol(name, rel)
            if not snippets:
                where = f" in {rel!r}" if rel else ""
                msg = f"no symbol named {name!r}{where}; give the qualified name as search_code reports it " \
                      "(for example 'Class.method'), or find it with search_code"
                raise RequestError(msg)
            return slices_reply(retriever, snippets, notes, {"name": name}, self.settings.max_tokens)

    def get_lines(self, path: Any, start: Any, end: Any = None) -> Reply:
        """Lines ``start..end`` (1-based, inclusive) of an indexed file, from the index; ``end`` defaults to the
        end of the file. Cut at a line to fit the budget.

        Raises:
            RequestError: A bad path or range, or an index that cannot be opened.
        """
        for arg, v in (("start", start), ("end", end)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                msg = f"{arg} must be a line number (1 is the first line), got {v!r}"
                raise RequestError(msg)
        if start is None:
            raise RequestError("start is missing; give the first line to read (1 is the first line)")
        if end is not None and end < start:
            raise RequestError(f"end ({end}) is before start ({start}); give end >= start, or omit end")
        retriever = self._retriever()
        notes = [n for n in (self._fresh_note(),) if n]
        with retriever.index.span_store.snapshot():
            rel = self._file(retriever, path)
            n_lines = self._line_count(retriever, rel)
            if start > n_lines:
                raise RequestError(f"{rel!r} has {n_lines} lines; start must be at most {n_lines}")
            if end is None or end > n_lines:
                end = n_lines
            snippet = retriever.get_lines(rel, start, end)
            return slices_reply(retriever, [snippet], notes, {"path": rel, "lines_in_file": n_lines},
                                self.settings.max_tokens)

    # ----------------------------------------------------------------------------------------------- status

    def index_status(self) -> Reply:
        """Files indexed, last update, pending changes, refresh state, embedding, chunking settings, failures.

        Raises:
            RequestError: The index cannot be opened.
        """
        retriever = self._retriever()
        index = retriever.index
        with index.span_store.snapshot():
            st = index.status()
        r = self.refresher
        failed = st["failed"]
        chunker = index.chunker
        tok = getattr(getattr(chunker, "tokenizer", None), "name", None)
        updated = st["updated_at"]
        data: dict[str, Any] = {
            "index": self.location,
            "root": self.root.name if self.root is not None else None,
            "files_indexed": st["files"],
            "leaf_spans": st["leaves"],
            "last_update": (datetime.fromtimestamp(updated, timezone.utc).isoformat(timespec="seconds")
                            if updated else None),
            "freshness": self.freshness,
            "refreshing": bool(r and r.running),
            "caught_up": bool(r and r.caught_up),
            "pending_changes": r.pending if r is not None else 0,
            "unpublished_files": len(st["pending"]),
            "search_ready": self.search_ready,
            "embedding": st["embedding"],
            "search": "lexical (BM25)" if index.embedding is None else "hybrid (BM25 + dense)",
            "chunking": {"max_tokens": getattr(chunker, "max_tokens", None), "tokenizer": tok,
                         "settings": st["settings"]},
            "reply_budget": {"default": self.settings.max_tokens, "hard_cap": self.settings.hard_cap},
            "failed_files": {p: self.scrub(v) for p, v in list(failed.items())[:MAX_LIST]},
            "failed_count": len(failed),
            "last_error": self.scrub(r.last_error) if r is not None and r.last_error else None,
            "watch_error": self.watch_error,
            "empty": self._why_empty() if st["files"] == 0 and not st["pending"] else None,
        }
        files, leaves = data["files_indexed"], data["leaf_spans"]
        how = {"watch": "watching the tree", "refresh": "checking the tree before each request",
               "off": "not following a tree (read-only)"}[self.freshness]
        lines = [
            f"{files} files indexed ({leaves} spans) in {self.location}; {how}",
            f"last update {data['last_update'] or 'none since start'}; refresh running: "
            f"{'yes' if data['refreshing'] else 'no'}; pending changes: {data['pending_changes']}"
            + ("" if data["caught_up"] or self.refresher is None else "; still catching up with the tree")
            + (f"; {data['unpublished_files']} files written but not yet searchable by every engine (replayed by "
               "the next write)" if data["unpublished_files"] else "")
            + ("" if self.search_ready else "; the index is still being opened (the first search waits for it)"),
            f"embedding {data['embedding']} ({data['search']}); chunking {data['chunking']['settings']}",
            f"reply budget {self.settings.max_tokens} tokens by default, {self.settings.hard_cap} at most",
        ]
        if data["empty"]:
            lines.append(f"the index is empty: {data['empty']}")
        if failed:
            lines.append(f"{len(failed)} files failed: " + "; ".join(f"{p}: {self.scrub(v)}"
                                                                    for p, v in list(failed.items())[:10]))
        for key in ("last_error", "watch_error"):
            if data[key]:
                lines.append(f"{key.replace('_', ' ')}: {data[key]}")
        return Reply("\n".join(lines), data)

    def _why_empty(self) -> str:
        """Why the index holds no file: what the tree's walk selects (nothing, and why), or that its files are
        still being indexed."""
        from ..ingest.walk import nothing_selected, walk

        r = self.refresher
        if r is None or self.root is None:
            return "no file was indexed into it (`llmc-splitters index PATH` indexes the source files under PATH)"
        found = walk(self.root, r.state.options)
        if found.files:
            return f"the tree's {len(found.files)} files are still being indexed" if not r.caught_up else \
                f"the tree's {len(found.files)} files could not be indexed (see failed_files)"
        return self.scrub(nothing_selected(self.root.name, r.state.options.include, found.skipped))

    def reindex(self, paths: Any = None) -> Reply:
        """Bring the index up to date now (the whole tree, or only ``paths``) and say what changed.

        Raises:
            RequestError: No source root, a path outside it, or an index that cannot be opened.
        """
        if self.refresher is None or self.root is None:
            msg = "this server serves an index without its source tree, so it cannot re-index; restart it with " \
                  "the tree: llmc-splitters mcp PATH"
            raise RequestError(msg)
        only: list[str] | None = None
        if paths is not None:
            if isinstance(paths, str):
                paths = [paths]
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise RequestError("paths must be a list of paths relative to the indexed root, or omitted")
            only = []
            for p in paths:
                rel = relative_path(p, what="path", allow_root=True)
                inside_root(self.root, rel)
                only.append(rel)
        report = self.refresher.refresh(full=True, only=only, force=only is not None)
        return self._reindex_reply(report, only)

    def _reindex_reply(self, report: RefreshReport, only: list[str] | None) -> Reply:
        skipped = {}
        missing = []
        if only is not None:
            touched = set(report.added) | set(report.updated) | set(report.removed) | set(report.failed)
            for rel in only:
                why = report.skipped.get(rel) or report.skipped.get(rel + "/")
                if why is not None:
                    skipped[rel] = why
                elif rel and rel not in touched and not (self.root / rel).exists():  # type: ignore[operator]
                    missing.append(rel)
        data = {
            "added": report.added[:MAX_LIST], "updated": report.updated[:MAX_LIST],
            "removed": report.removed[:MAX_LIST],
            "counts": {"added": len(report.added), "updated": len(report.updated), "removed": len(report.removed),
                       "unchanged": report.unchanged, "failed": len(report.failed)},
            "bytes_read": report.bytes_read,
            "failed": {p: self.scrub(v) for p, v in list(report.failed.items())[:MAX_LIST]},
            "skipped": {p: self.scrub(v) for p, v in list(skipped.items())[:MAX_LIST]},
            "not_found": missing[:MAX_LIST],
            "seconds": report.seconds,
        }
        c = data["counts"]
        lines = [(f"reindex: {c['added']} added, {c['updated']} updated, {c['removed']} removed, {c['unchanged']} "
                  f"unchanged, {c['failed']} failed in {report.seconds:.2f} s ({report.bytes_read:,} bytes read)")]
        for key in ("added", "updated", "removed"):
            if data[key]:
                lines.append(f"{key}: {', '.join(data[key])}")
        for p, why in data["failed"].items():
            lines.append(f"failed: {p}: {why}")
        for p, why in data["skipped"].items():
            lines.append(f"not indexed by the tree's rules: {p}: {why}")
        for p in missing:
            lines.append(f"not found: {p} (no such file or directory under the root)")
        return Reply("\n".join(lines), data)


# ---------------------------------------------------------------------------------------------- helpers


def search_with_contexts(retriever: Any, query: str, k: int, path: str | None, language: str | None, *,
                         dense_fallback: bool = False) -> tuple[list[Any], float, list[Any], tuple[Any, ...], bool]:
    """The ``k`` best hits (filtered inside the searches), the confidence, each hit's expansion material, the
    ranked files, and whether any word of the query occurs in the index.

    One function on purpose: :func:`~llmc_splitters.mcp.replies.fit_search` expands these contexts several times
    to fit the budget, which ``CodeRetriever.retrieve`` (one search, one expansion) cannot do; a public
    ``CodeRetriever.expand(hits, budget)`` would replace this.
    """
    found = retriever.search(query, k, path=path, language=language, dense_fallback=dense_fallback,
                             ranking=retriever.index.ranking.for_reply())
    hits = list(found.hits)
    contexts = [retriever.index.hit_context(h.span, h.score) for h in hits]
    return hits, float(found.confidence), contexts, found.files, found.words_in_index


def _language(language: Any) -> str:
    from ..chunking.dispatch import resolve_language

    try:
        return resolve_language(language)
    except UnsupportedInputError:
        msg = f"language {language!r} is not one the index knows; use a name such as 'python', 'javascript', " \
              "'typescript' or 'bash', or omit it"
        raise RequestError(msg) from None


def _path_filter(store: Any, prefix: str) -> str:
    """The search filter for ``path``: a file, a glob, or a directory (``json`` is ``json/``, never ``json5/``).

    Raises:
        RequestError: No indexed file is there.
    """
    from ..retrieval.storage.filters import SearchFilter, unmatched

    filt = SearchFilter.of(path=prefix)
    if filt.is_glob:
        if not store.paths(glob=prefix):
            msg = f"{unmatched(filt, store)}; '*' matches any characters ('/' too), or omit path"
            raise RequestError(msg)
        return prefix
    if store.marker(prefix) is not None:
        return prefix
    if not store.count_paths(prefix + "/"):
        msg = f"{unmatched(SearchFilter.of(path=prefix + '/'), store)}; or omit path"
        raise RequestError(msg)
    return prefix + "/"
