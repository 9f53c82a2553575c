"""The write path of an index: decide what changed, chunk, embed, and write each group of files in one transaction.

For each file (from disk or from memory):

1. **Change detection, stat first.** A file on disk whose size and modification time equal what the index recorded
   (under the same chunking settings) is not read at all. A file whose stat changed is read and hashed; if its
   content hash is the same, only the new stat is recorded (a ``touch`` re-indexes and re-embeds nothing).
2. **Chunk** (in this process, or in worker processes with ``workers > 1``) and lay the file out
   (:func:`~llmc_splitters.retrieval.storage.file_rows.build_file`).
3. **Embed**, batched across the files of a group. Views whose vector is already cached (by content hash: the
   same text embedded before, by this or an interrupted run, under any path) are not embedded again; new vectors
   are cached at once, in their own transaction, so no run pays for them twice.
4. **Write** a group (up to 32 files / 4,000 rows; the first groups 1, 2, 4, ... files, so the model starts on
   the first file) in one span-store transaction, then bring the lexical index and the vector store up to date and
   clear the group's ``pending`` rows (see :mod:`.spanstore`).

Steps 3 and 4 run on two threads of their own, each one group at a time and in order, while the calling thread
chunks the next files (at most two groups wait at each step): SQLite, tantivy, the vector store and the embedding
model release the GIL, so chunking, embedding and writing overlap, and the model never waits for the stores.

SIGINT and SIGTERM during a run stop it at once, in every step, and keep what is done (see :mod:`.stop`): the file
being chunked or laid out is dropped (however large it is; the next run indexes it); no call to the model starts
after the signal, and the files not yet wholly embedded are dropped (the vectors of the calls that finished are
cached: the next run does not pay for them again); every file already embedded is written, and so is every prepared
file of a lexical index (nothing to embed). :class:`IndexInterrupted` (a ``KeyboardInterrupt``) says how many files were
kept. The stop waits for the calls to the model in flight (one per embedding worker, a few texts each: see
:mod:`~llmc_splitters.retrieval.embeddings.batching`) and the write in hand. A SIGKILL loses at most the files of
the group in flight; the next run finds them unchanged-but-missing and redoes them.

Progress: ``run``'s ``progress`` callback receives an :class:`~.progress.IndexProgress` at every change (files
chunked, texts embedded, files written), from the run's threads.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...chunking.inputs import decode
from ...errors import ConfigurationError, LlmcError
from ..storage.lexical_tantivy import LexDoc, row_doc
from ..storage.parts import Dense, HasParts, IndexParts, parts_of
from ..storage.file_rows import PreparedFile, build_file, embed_source, parse_note, sha, split_note
from ..storage.span_store import LEXICAL, VECTORS, SpanRow
from .group_writer import GroupWriter
from .progress import IndexProgress, ProgressCallback, Tracker
from .stop import Abandon, StopFlag
from ..storage.chroma_vectors import Record, vector_metadata
from .workers import Outcome, chunk, chunk_in_processes
from .workers import payload as worker_payload

__all__ = ["IndexInterrupted", "IndexProgress", "IndexReport", "Indexer", "Item", "read_text", "stat_of"]

_GROUP_FILES = 32
AUTO_MIN_FILES = 64
"""With ``workers="auto"``, at least this many files to chunk start a pool of worker processes."""
AUTO_MAX_WORKERS = 4
"""With ``workers="auto"``, at most this many worker processes (one per core)."""
_GROUP_ROWS = 4000
_FIRST_GROUP_FILES = 1  # then twice as many in each group, up to _GROUP_FILES
# A lexical-index commit syncs the disk (~0.1 s): groups written within this many seconds share one.
_LEXICAL_COMMIT_SECONDS = 1.0
# Groups that reach the writer within this many seconds of the first one waiting are written as one (one transaction
# of the span store, one write to each engine), up to _WRITE_BATCH_ROWS rows (see GroupWriter).
_WRITE_BATCH_SECONDS = 1.0
_WRITE_BATCH_ROWS = 20000


@dataclass(slots=True)
class IndexReport:
    """What an indexing call changed.

    Attributes:
        added: Files indexed for the first time.
        updated: Files whose content changed and were re-indexed.
        unchanged: Files skipped (same stat, or same content hash).
        removed: Files whose records were deleted.
        spans: Rows written.
        embedded: Texts sent to the embedding model.
        reused: Vectors reused (their embedded text was embedded before).
        bytes_read: Bytes of file content read from disk (0 when every stat matched).
        failed: ``path -> reason`` for files that could not be read, decoded (binary data) or chunked, or whose
            rows could not be written. Such a file keeps the version indexed before, if any.
        interrupted: ``"SIGINT"``/``"SIGTERM"`` when the run was stopped (every file finished by then was kept).
        split: ``path -> how`` for files that were not parsed whole: cut by lines and tokens (over the chunker's
            ``max_file_bytes``), parsed in windows (over ~1 MB), or degraded (a syntax error over most of the file).
        parse_errors: ``path -> where`` for files with syntax errors: their lines, and the lines the chunker parsed
            again from so that the definitions after an error keep their names (the file span's metadata
            ``parse_errors`` and ``parse_resumed``).
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    spans: int = 0
    embedded: int = 0
    reused: int = 0
    bytes_read: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    interrupted: str | None = None
    split: dict[str, str] = field(default_factory=dict)
    parse_errors: dict[str, str] = field(default_factory=dict)

    @property
    def written(self) -> int:
        """Files written (added + updated)."""
        return len(self.added) + len(self.updated)


class IndexInterrupted(KeyboardInterrupt):
    """An indexing run was stopped by SIGINT or SIGTERM after writing every file it had finished (chunked, and
    with a model embedded; see the module docstring).

    Attributes:
        report: What the run did before it stopped (``report.added``/``updated`` are kept in the index).
        signal_name: ``"SIGINT"`` or ``"SIGTERM"``.
    """

    def __init__(self, report: IndexReport, signal_name: str) -> None:
        super().__init__(f"indexing interrupted by {signal_name} after {report.written} files were written")
        self.report = report
        self.signal_name = signal_name


@dataclass(slots=True)
class Item:
    """A file to index: its stored path, and its text, or the file on disk to read it from (only when its stat
    says it may have changed)."""

    path: str
    text: str | None = None
    source: Path | None = None
    stat: tuple[int, int] | None = None


class Indexer:
    """The write path of one index (see the module docstring).

    Args:
        parts: The engines it writes to and the chunker (:class:`~llmc_splitters.retrieval.storage.parts.IndexParts`), or
            what holds them (a :class:`~llmc_splitters.retrieval.CodeIndex`).
    """

    def __init__(self, parts: IndexParts | HasParts) -> None:
        self.parts = parts_of(parts)
        self.store = self.parts.spans
        self._uncommitted: list[str] = []  # files written to the lexical index since its last commit
        self._last_commit = time.monotonic()
        # The vectors of the groups embedded and not yet written, by embed hash: the write takes them from here
        # instead of reading the cache it just wrote (which a run resumed after a kill reads).
        self._fresh: dict[str, list[float]] = {}

    # ------------------------------------------------------------------------------------------- the stream

    def run(self, items: Iterable[Item], report: IndexReport, workers: int | str,
            progress: ProgressCallback | None = None) -> None:
        """Index ``items``; failures go to the report; ``progress`` is called with each new
        :class:`~.progress.IndexProgress`. Raises :class:`IndexInterrupted` on SIGINT/SIGTERM.

        ``workers="auto"``: chunk in one worker process per core (at most :data:`AUTO_MAX_WORKERS`) when the index
        has no model or a static one and at least :data:`AUTO_MIN_FILES` files need chunking, else in this process: a
        pool's start costs about a second, and with a neural model the cores are the model's (chunking here overlaps
        its encoding)."""
        if workers != "auto" and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            msg = f"workers must be a positive integer (1: chunk in this process) or 'auto', got {workers!r}"
            raise ConfigurationError(msg)
        self.catch_up()
        markers = self.store.markers()
        fp = self.parts.chunking.fingerprint
        tracker = Tracker(progress)
        with StopFlag() as stop, self._committing():
            todo: Iterator[Item] = self._changed(items, markers, fp, report, stop, tracker)
            if workers == "auto":
                # The first files that need chunking decide: a few changed files are chunked here.
                head = list(itertools.islice(todo, AUTO_MIN_FILES))
                cores = os.cpu_count() or 1
                wide = len(head) >= AUTO_MIN_FILES and cores > 1 and self._chunking_holds_the_cores()
                workers = min(cores, AUTO_MAX_WORKERS) if wide else 1
                todo = itertools.chain(head, todo)
            source: Iterable[tuple[Item, Outcome | None]]
            if workers == 1:
                source = ((it, None) for it in todo)
            else:
                # The workers lay the files out too, unless the model's view of a text cannot be sent to them.
                dense = self.parts.dense
                payload = worker_payload(self.parts.chunking, workers, layout=fp, dense=dense is not None,
                                         view=dense.view if dense is not None else None)
                texts = {}

                def pairs() -> Iterator[tuple[str, str, tuple[int, int] | None]]:
                    for it in todo:
                        texts[it.path] = it
                        yield it.path, it.text or "", it.stat

                source = ((texts.pop(p), outcome) for p, _, outcome in chunk_in_processes(payload, pairs(), workers))
            writer = GroupWriter(self.open_engines,
                                 functools.partial(self.embed_group, report=report, stop=stop, tracker=tracker),
                                 functools.partial(self.write_group, report=report, tracker=tracker),
                                 embed_while_opening=self._runtime_ready, batch_seconds=_WRITE_BATCH_SECONDS,
                                 batch_size=_WRITE_BATCH_ROWS, size=_rows, stopped=stop.requested)
            try:
                self._prepare(source, markers, fp, report, stop, writer, tracker)
                writer.close()
            except BaseException:
                writer.abandon()
                raise
            self.store.set_failed(report.failed)
            if stop.signal_name is not None:
                report.interrupted = stop.signal_name
                raise IndexInterrupted(report, stop.signal_name)
            if not self.store.exists:  # a run that found nothing to write leaves an index, empty (and says when)
                self.store.set_meta("updated_at", repr(time.time()))

    def _chunking_holds_the_cores(self) -> bool:
        """Whether chunking, not the model, keeps the cores busy: no model, or a static one (``light``: a table
        lookup per piece of a text; code-static embeds about 18,000 texts per CPU-second)."""
        dense = self.parts.dense
        return dense is None or bool(getattr(dense.embedding, "light", False))

    def _runtime_ready(self) -> bool:
        """Whether embedding can start before the stores open: nothing to embed, or a model whose runtime is now
        imported here (:meth:`~.embeddings._runtime.LazyModel.prepare_runtime`)."""
        dense = self.parts.dense
        if dense is None or dense.embeds_itself:
            return True
        prepare = getattr(dense.embedder().embedding, "prepare_runtime", None)
        try:
            return bool(prepare()) if callable(prepare) else False
        except LlmcError:
            return False  # the first embedding meets the same failure and reports the files it fails

    def _prepare(self, source: Iterable[tuple[Item, Outcome | None]], markers: dict[str, Any], fp: str,
                 report: IndexReport, stop: StopFlag, writer: GroupWriter, tracker: Tracker) -> None:
        """Chunk and lay out each file of ``source``; hand each full group to ``writer``."""
        group: list[PreparedFile] = []
        # The first groups are small (1, 2, 4, ... files up to a whole group): the model starts on the first file
        # rather than wait for 32 to be chunked.
        size = min(_FIRST_GROUP_FILES, _GROUP_FILES)
        pending = iter(source)
        while stop.signal_name is None:
            try:
                # A signal drops the file in hand (reading, chunking or laying it out) rather than wait for it.
                with stop.abandoning():
                    step = next(pending, None)
                    prepared = None if step is None else self._prepare_one(*step, fp, report)
            except Abandon:
                break
            if step is None:
                break
            if prepared is None:
                tracker.skipped()
                continue
            tracker.chunked(prepared.path, len(prepared.views))
            prepared.update = prepared.path in markers
            group.append(prepared)
            if len(group) >= size or sum(len(g.write.rows) for g in group) >= _GROUP_ROWS:
                writer.submit(group)
                group = []
                size = min(2 * size, _GROUP_FILES)
        writer.submit(group)

    def _prepare_one(self, it: Item, outcome: Outcome | None, fp: str, report: IndexReport) -> PreparedFile | None:
        """Chunk and lay out one file, unless a worker did (``outcome``: its tree, its layout, or why it failed);
        ``None`` when it failed."""
        chunking, dense = self.parts.chunking, self.parts.dense
        if isinstance(outcome, str):
            report.failed[it.path] = outcome
            return None
        if isinstance(outcome, tuple):
            prepared, how, errors = outcome
            _note(report, it.path, how, errors)
            return prepared
        try:
            tree = outcome if outcome is not None else chunk(chunking.chunker, it.path, it.text or "")
            _note(report, it.path, split_note(tree, len((it.text or "").encode("utf-8", "surrogatepass"))),
                  parse_note(tree))
            return build_file(it.path, it.text or "", tree, file_hash=sha(it.text or ""), settings=fp,
                              stat=it.stat, summarizer=chunking.summarizer,
                              view=dense.view if dense is not None else None)
        except LlmcError as exc:
            report.failed[it.path] = str(exc)
            return None

    def _changed(self, items: Iterable[Item], markers: dict[str, Any], fp: str, report: IndexReport,
                 stop: StopFlag, tracker: Tracker) -> Iterator[Item]:
        """The items that must be (re-)indexed, texts loaded; unchanged ones go to the report."""
        seen: set[str] = set()
        errors = getattr(self.parts.chunking.chunker, "errors", "fallback")
        errors = errors if errors in ("fallback", "strict") else "fallback"
        for it in items:
            if stop.signal_name is not None:
                return
            if it.path in seen:
                continue
            seen.add(it.path)
            m = markers.get(it.path)
            if it.source is not None:  # on disk: stat first, read only when the stat changed
                it.stat = stat_of(it.source)
                if m is not None and it.stat is not None and m.settings == fp and (m.size, m.mtime_ns) == it.stat:
                    report.unchanged.append(it.path)
                    tracker.skipped()
                    continue
                text, failure, n = read_text(it.source, errors)
                report.bytes_read += n
                if text is None:
                    if failure is not None:
                        report.failed[it.path] = failure
                    else:
                        with stop.shielded():
                            if self.remove([it.path]):  # gone since it was listed
                                report.removed.append(it.path)
                    tracker.skipped()
                    continue
                it.text = text
            if m is not None and m.settings == fp and m.hash == sha(it.text):
                if it.stat is not None and (m.size, m.mtime_ns) != it.stat:
                    with stop.shielded():
                        self.store.touch(it.path, *it.stat)
                report.unchanged.append(it.path)
                tracker.skipped()
                continue
            yield it

    # -------------------------------------------------------------------------------------------- one group

    def open_engines(self) -> None:
        """Open what :meth:`flush` writes to (the lexical indexes, and the vector store of a dense index)."""
        self.parts.lexical("leaf")
        self.parts.lexical("summary")
        if self.parts.dense is not None:
            self.parts.dense.vectors()

    def flush(self, group: list[PreparedFile], report: IndexReport) -> None:
        """Embed, write and publish a group of prepared files (:meth:`embed_group`, then :meth:`write_group`);
        ``group`` is emptied."""
        self.embed_group(group, report)
        self.write_group(group, report)

    def embed_group(self, group: list[PreparedFile], report: IndexReport, *, stop: StopFlag | None = None,
                    tracker: Tracker | None = None) -> None:
        """Fill the vector cache for a group (see :meth:`_embed`). A file whose text the model keeps failing on is
        taken out of the group; a group the cache cannot be written for is reported failed and emptied; once ``stop``
        says stop, the files not wholly embedded are taken out (the vectors they got are cached)."""
        try:
            self._embed(group, report, stop, tracker or Tracker(None))
        except LlmcError as exc:
            self._fail(group, report, exc)

    def write_group(self, group: list[PreparedFile], report: IndexReport, *, tracker: Tracker | None = None) -> None:
        """Write and publish a group whose vectors are cached; ``group`` is emptied.

        A group the store cannot write is reported failed and keeps its previous version (nothing of it is
        half-written).
        """
        if not group:
            return
        dense = self.parts.dense
        try:
            paths = [g.path for g in group]
            self.store.write_files([g.write for g in group], pending=LEXICAL | (VECTORS if dense is not None else 0))
        except LlmcError as exc:
            self._forget(group)
            self._fail(group, report, exc)
            return
        for g in group:
            report.spans += len(g.write.rows)
            (report.updated if g.update else report.added).append(g.path)
        written = len(group)
        self._publish_lexical(paths, [d for g in group for d in g.leaves], [d for g in group for d in g.summaries])
        if dense is not None:
            if not getattr(dense.vectors(), "written_with_rows", False):  # Milvus: the span store wrote them
                dense.vectors().upsert([self._vector_record(g.write.rows[i], vtext, v) for g in group
                                        for i, vtext, v in self._vectors(dense, g)])
            self._delete_stale(dense)
            self.store.done(paths, VECTORS)
        self._forget(group)
        group.clear()
        if time.monotonic() - self._last_commit >= _LEXICAL_COMMIT_SECONDS:
            self.commit_lexical()
        if tracker is not None:
            tracker.written(written)

    def _forget(self, group: list[PreparedFile]) -> None:
        """Drop the vectors of a group that is written (or failed) from those kept for the write."""
        for g in group:
            for _, _, eh in g.views:
                self._fresh.pop(eh, None)

    @staticmethod
    def _fail(group: list[PreparedFile], report: IndexReport, exc: LlmcError) -> None:
        for g in group:
            report.failed[g.path] = f"could not write the records of {g.path}: {exc}"
        group.clear()

    def commit_lexical(self) -> None:
        """Commit the lexical indexes and clear the outbox rows of the files they now hold."""
        self.parts.lexical("leaf").commit()
        self.parts.lexical("summary").commit()
        self._last_commit = time.monotonic()
        waiting, self._uncommitted = self._uncommitted, []
        self.store.done(waiting, LEXICAL)

    @contextlib.contextmanager
    def _committing(self) -> Iterator[None]:
        """Whatever happens in the block, what reached the lexical index is committed at its end (every file
        written so far is complete in the span store, so it may be searched)."""
        try:
            yield
        finally:
            if self._uncommitted:
                self.commit_lexical()

    def _delete_stale(self, dense: Dense) -> None:
        stale = self.store.stale_ids()
        if stale:
            dense.vectors().delete(ids=stale)
            self.store.drop_stale(stale)

    def _embed(self, group: list[PreparedFile], report: IndexReport, stop: StopFlag | None, tracker: Tracker) -> None:
        """Fill the vector cache for every view of the group (cached views are not embedded again), in batches
        sized by the model's tokens (:class:`~llmc_splitters.retrieval.embeddings.BatchEmbedder`: sorted by length,
        a failed batch retried with backoff, then split). A file with a text that keeps failing is taken out of
        the group and reported failed: it keeps the version indexed before. Once ``stop`` says stop, no call to the
        model starts: the files of the group not wholly embedded are taken out of it (what they got is cached for
        the next run)."""
        dense = self.parts.dense
        if dense is None or dense.embeds_itself:
            tracker.embedded(sum(len(g.views) for g in group))
            return  # lexical only, or a vector store that embeds what it stores
        want = {eh: vtext for g in group for _, vtext, eh in g.views}
        cached = self.store.cached_vectors(want) if want else {}
        self._fresh.update(cached)
        report.reused += sum(1 for g in group for _, _, eh in g.views if eh in cached)
        todo = [(eh, vtext) for eh, vtext in want.items() if eh not in cached]
        # Progress counts views: the cached ones, and each repeat of a text embedded once, are settled now.
        tracker.embedded(sum(len(g.views) for g in group) - len(todo))
        if not todo:
            return
        result = dense.embedder().embed([v for _, v in todo], stop=stop.requested if stop is not None else None,
                                        done=tracker.embedded)
        got = {eh: v for (eh, _), v in zip(todo, result.vectors) if v is not None}  # lists of floats already
        self.store.cache_vectors(got)
        self._fresh.update(got)
        report.embedded += len(got)
        if result.stopped:
            # Stopped part-way: the files whose every text has its vector are written; the others are not (the
            # next run finds the vectors they got cached).
            group[:] = [g for g in group if all(eh in cached or eh in got for _, _, eh in g.views)]
            return
        failed = {todo[f.index][0]: f.reason for f in result.failures}
        if failed:
            for g in list(group):
                why = next((failed[eh] for _, _, eh in g.views if eh in failed), None)
                if why is not None:
                    report.failed[g.path] = f"could not embed a text of {g.path}: {why}"
                    group.remove(g)

    def _vectors(self, dense: Dense, g: PreparedFile) -> Iterator[tuple[int, str, list[float] | None]]:
        """``(row index, embedded text, vector)`` of a prepared file (no vector for a store that embeds)."""
        if getattr(dense.vectors(), "embeds_itself", False):
            for i, vtext, _ in g.views:
                yield i, vtext, None
            return
        fresh = self._fresh
        missing = {eh for _, _, eh in g.views if eh not in fresh}
        cached = self.store.cached_vectors(missing) if missing else {}
        for i, vtext, eh in g.views:
            yield i, vtext, fresh[eh] if eh in fresh else cached[eh]

    @staticmethod
    def _vector_record(row: SpanRow, text: str, vector: list[float] | None) -> Record:
        s = row.span
        meta = vector_metadata(row.file, row.role, s.language, s.kind)
        if row.embed_hash:
            meta["embed_hash"] = row.embed_hash  # the cache key Ray's embed workers look vectors up by
        return Record(s.id, text, meta, vector)

    def _publish_lexical(self, paths: list[str], leaves: list[LexDoc], summaries: list[LexDoc]) -> None:
        self.parts.lexical("leaf").replace(paths, leaves, commit=False)
        self.parts.lexical("summary").replace(paths, summaries, commit=False)
        self._uncommitted.extend(paths)

    # ------------------------------------------------------------------------------------------- removals

    def remove(self, paths: Iterable[str]) -> list[str]:
        """Delete files from every engine; returns the paths that were indexed."""
        paths = [p for p in dict.fromkeys(paths)]
        if not paths:
            return []
        if self._upgrade_lexical():  # the lexical index of an older layout is rebuilt first
            self.catch_up()
        known = set(self.store.paths()) | set(self.store.pending(LEXICAL | VECTORS))
        dense = self.parts.dense
        self.store.remove_files(paths, pending=LEXICAL | (VECTORS if dense is not None else 0))
        with self._committing():
            self._publish_lexical(paths, [], [])
            if dense is not None:
                self._delete_stale(dense)
                self.store.done(paths, VECTORS)
        self.store.clear_failed(paths)
        return [p for p in paths if p in known]

    # ----------------------------------------------------------------------------------------------- replay

    def _upgrade_lexical(self) -> bool:
        """A lexical index written in an older layout (:attr:`~..storage.lexical_tantivy.LexicalIndex.outdated`:
        without message phrases) is emptied in the current one and every file is marked pending for it, so that
        :meth:`catch_up` replays the whole store into it (a run that dies meanwhile leaves them pending). Whether it
        was."""
        old = [lex for lex in (self.parts.lexical("leaf"), self.parts.lexical("summary"))
               if getattr(lex, "outdated", False)]
        if not old:
            return False
        self.store.mark_pending(self.store.paths(), LEXICAL)
        for lex in old:
            lex.recreate()
        return True

    def catch_up(self) -> None:
        """Bring the lexical index and the vector store up to date with files a dead run left ``pending``, and
        rebuild a lexical index of an older layout from the span store (nothing is chunked or embedded again)."""
        self._upgrade_lexical()
        lex = self.store.pending(LEXICAL)
        for i in range(0, len(lex), _GROUP_FILES):
            part = lex[i : i + _GROUP_FILES]
            leaves: list[LexDoc] = []
            summaries: list[LexDoc] = []
            for path in part:
                for r in self.store.searched(path):
                    (leaves if r.role == "leaf" else summaries).append(row_doc(r.span, r.role, r.file))
            with self._committing():
                self._publish_lexical(part, leaves, summaries)
        vec = self.store.pending(VECTORS)
        dense = self.parts.dense
        if not vec:
            if dense is not None:
                self._delete_stale(dense)
            return
        if dense is None:
            self.store.done(vec, VECTORS)
            return
        embeds = getattr(dense.vectors(), "embeds_itself", False)
        for i in range(0, len(vec), _GROUP_FILES):
            part = vec[i : i + _GROUP_FILES]
            rows = [r for p in part for r in self.store.searched(p) if r.embed_hash]
            views = {r.span.id: dense.view(embed_source(r.span, r.role), {})[0] for r in rows}
            cached = {} if embeds else self.store.cached_vectors({r.embed_hash for r in rows if r.embed_hash})
            missing = [r for r in rows if not embeds and r.embed_hash not in cached]
            if missing:  # vectors are cached before their rows are written: only a cache emptied by hand gets here
                vecs = dense.embedding.embed_documents([views[r.span.id] for r in missing])
                cached.update({r.embed_hash: [float(x) for x in v] for r, v in zip(missing, vecs) if r.embed_hash})
            dense.vectors().upsert([self._vector_record(r, views[r.span.id], cached.get(r.embed_hash or ""))
                                    for r in rows])
            self.store.done(part, VECTORS)
        self._delete_stale(dense)


def _note(report: IndexReport, path: str, how: str | None, errors: str | None) -> None:
    """Record in ``report`` how a file was cut and where it has syntax errors (when it was, or has)."""
    if how:
        report.split[path] = how
    if errors:
        report.parse_errors[path] = errors


def _rows(group: list[PreparedFile]) -> int:
    return sum(len(g.write.rows) for g in group)


def read_text(path: Path, errors: str) -> tuple[str | None, str | None, int]:
    """``(text, failure, bytes read)`` of a file on disk, decoded by the chunker's policy."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None, 0
    except OSError as exc:
        return None, f"could not read {path}: {type(exc).__name__}: {exc}", 0
    try:
        return decode(data, errors).text, None, len(data)
    except LlmcError as exc:
        return None, f"skipped: {exc}", len(data)


def stat_of(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of a file, or ``None`` when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns
