"""A Ray ingestion driver run as its own process, so a test can SIGKILL it part-way.

Usage: python _ray_driver.py ADDRESS REPO STATE_DIR INDEX_DIR HOST PORT COLLECTION LOG_PATH DELAY
It connects to the running Ray cluster, plans against STATE_DIR and ingests REPO into INDEX_DIR (vectors into the
Chroma server) with a slow counting embedding, one file per index transaction, printing ``WRITE <files done>``
after every transaction.
"""

from __future__ import annotations

import functools
import sys

import ray

import llmc_splitters.ingest.writer as writer
from _ray_helpers import CountingEmbedding
from llmc_splitters.ingest import IngestSettings, settings_fingerprint
from llmc_splitters.ingest.manifest import ManifestState, filter_manifest, git_manifest
from llmc_splitters.ingest.pipeline import ChromaSink
from llmc_splitters.ingest.ray import run_ray

SETTINGS = IngestSettings(max_tokens=128)


def main() -> None:
    address, repo, state_dir, index_dir, host, port, collection, log_path, delay = sys.argv[1:10]
    writer._GROUP_FILES = 1  # one file per transaction, so that a kill falls between two of them
    ray.init(address=address, log_to_driver=False)
    state = ManifestState(state_dir)
    plan = state.plan(filter_manifest(git_manifest(repo, repository="demo")), fingerprint=settings_fingerprint(SETTINGS))
    print(f"PLAN {len(plan.to_chunk)} {len(plan.deleted)}", flush=True)

    def progress(stage, summary):
        if stage == "write":
            print(f"WRITE {summary.files_done}", flush=True)

    run_ray(
        plan, ChromaSink(host=host, port=int(port), collection=collection), index=index_dir, roots=repo,
        settings=SETTINGS,
        embedding_factory=functools.partial(CountingEmbedding, log_path, 32, float(delay)), state=state,
        files_per_batch=1, chunk_num_cpus=0.5, embed_num_cpus=0.5, embed_batch_size=16, write_num_cpus=0.25,
        write_batch_size=16, progress=progress,
    )
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
