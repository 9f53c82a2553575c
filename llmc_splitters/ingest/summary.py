"""What an ingestion run did, stage by stage (:class:`IngestSummary`), and the default progress report."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .manifest import Plan

__all__ = ["IngestSummary", "ProgressFn", "log_progress"]

logger = logging.getLogger("llmc_splitters.ingest")

_MAX_LISTED = 100


@dataclass(slots=True)
class IngestSummary:
    """What a run did, stage by stage.

    Attributes:
        engine: ``local`` or ``ray``.
        files_total: Files in the manifest.
        files_planned: Files planned for chunking (added + changed).
        files_added: New files.
        files_changed: Changed files (or re-chunked: settings changed, interrupted run).
        files_deleted: Files removed since the last run.
        files_unchanged: Files not read at all.
        files_chunked: Files chunked and written to the index.
        files_skipped: Files skipped for good (binary, undecodable); ``reasons`` says why. A version of such a file
            indexed before is removed.
        files_failed: Files that failed (unreadable, changed since planned, chunker error, write error): they keep
            the version indexed before and are retried next run.
        reasons: ``"skipped: binary" -> count``, ``"failed: could not read ..." -> count``...
        skipped: Up to 100 skipped files as ``[repository, path, reason]``.
        failed: Every failed file as ``[repository, path, reason]``.
        spans_written: Rows written to the index (leaves, parents, summaries).
        spans_embedded: Texts embedded in this run.
        spans_cached: Texts whose vector came from the embedding cache.
        spans_deleted: Rows of deleted files removed from the index (a changed file's rows are replaced in place).
        embedding: The vector space written (``none``: lexical only).
        seconds: Wall time per stage (``plan`` is filled by the caller) and ``total``.
    """

    engine: str = "local"
    files_total: int = 0
    files_planned: int = 0
    files_added: int = 0
    files_changed: int = 0
    files_deleted: int = 0
    files_unchanged: int = 0
    files_chunked: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    skipped: list[list[str]] = field(default_factory=list)
    failed: list[list[str]] = field(default_factory=list)
    spans_written: int = 0
    spans_embedded: int = 0
    spans_cached: int = 0
    spans_deleted: int = 0
    embedding: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_plan(cls, plan: Plan, engine: str) -> IngestSummary:
        """An empty summary of a plan's run."""
        return cls(engine=engine, files_total=plan.total, files_planned=len(plan.added) + len(plan.changed),
                   files_added=len(plan.added), files_changed=len(plan.changed), files_deleted=len(plan.deleted),
                   files_unchanged=plan.unchanged)

    def count_file(self, status: str, repository: str, path: str, reason: str = "") -> None:
        """Count one file that went through the run: ``chunked`` (and written), ``skipped`` or ``failed``."""
        if status == "chunked":
            self.files_chunked += 1
            return
        kind = reason.split(":", 1)[0].split(" (", 1)[0]
        self.reasons[f"{status}: {kind}"] = self.reasons.get(f"{status}: {kind}", 0) + 1
        if status == "skipped":
            self.files_skipped += 1
            if len(self.skipped) < _MAX_LISTED:
                self.skipped.append([repository, path, reason])
        else:
            self.files_failed += 1
            # Every failure is listed: the run keeps these files out of the committed manifest (retried).
            self.failed.append([repository, path, reason])

    @property
    def files_done(self) -> int:
        """Files through the run (chunked, skipped or failed)."""
        return self.files_chunked + self.files_skipped + self.files_failed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return asdict(self)

    def __str__(self) -> str:
        lines = [
            f"[{self.engine}] plan: {self.files_total} files; {self.files_planned} to chunk "
            f"({self.files_added} added, {self.files_changed} changed), {self.files_deleted} deleted, "
            f"{self.files_unchanged} unchanged",
            f"  chunk: {self.files_chunked} chunked, {self.files_skipped} skipped, {self.files_failed} failed",
            f"  embed: {self.spans_embedded} embedded, {self.spans_cached} from cache ({self.embedding or 'none'})",
            f"  write: {self.spans_written} records written, {self.spans_deleted} deleted",
        ]
        for k, v in sorted(self.reasons.items()):
            lines.append(f"  {k}: {v}")
        if self.seconds:
            lines.append("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()))
        return "\n".join(lines)


ProgressFn = Callable[[str, IngestSummary], None]


def log_progress(stage: str, summary: IngestSummary) -> None:
    """The default progress report: one log line per stage event (logger ``llmc_splitters.ingest``)."""
    if stage == "write":
        logger.info(
            "write: %d/%d files (%d chunked, %d skipped, %d failed), %d embedded, %d cached, %d records",
            summary.files_done, summary.files_planned, summary.files_chunked, summary.files_skipped,
            summary.files_failed, summary.spans_embedded, summary.spans_cached, summary.spans_written,
        )
    else:
        logger.info("%s:\n%s", stage, summary)
