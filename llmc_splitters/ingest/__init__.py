"""Ingestion: walking a tree (:mod:`.walk`), keeping an index in step with it (:mod:`.fresh`: stat-first scans, a
file watcher), git manifests (:mod:`.manifest`), per-file span rows (:mod:`.rows`; their format in
:mod:`.row_format`, their settings and file identities in :mod:`.settings`), the local process-pool pipeline
(:mod:`.pipeline`: sinks, stages, the one writer of the index) and Ray Data (:mod:`.ray`).

The per-file row functions are re-exported here, so ``from llmc_splitters.ingest import chunk_file`` works as it
did when they lived in one ``ingest`` module. Ray and the stores load only when a pipeline runs.
"""

from .rows import (
    BATCH_COLUMNS,
    INT_COLUMNS,
    SPARK_SCHEMA,
    FileRows,
    IngestSettings,
    chunk_batch,
    chunk_file,
    display_path,
    file_version,
    git_blob_sha,
    index_settings,
    prepared_file,
    read_chunk_batch,
    row_span,
    rows_to_columns,
    settings_fingerprint,
    view_row,
)

__all__ = [
    "BATCH_COLUMNS",
    "INT_COLUMNS",
    "SPARK_SCHEMA",
    "FileRows",
    "IngestSettings",
    "chunk_batch",
    "chunk_file",
    "display_path",
    "file_version",
    "git_blob_sha",
    "index_settings",
    "prepared_file",
    "read_chunk_batch",
    "row_span",
    "rows_to_columns",
    "settings_fingerprint",
    "view_row",
]
