"""``python -m llmc_splitters``: the same command line as the ``llmc-splitters`` console script."""

from .cli import main

# NOTE: guarded, because `index --workers N` starts worker processes with the `spawn` method, which imports the main
# module again in each worker.
if __name__ == "__main__":
    raise SystemExit(main())
