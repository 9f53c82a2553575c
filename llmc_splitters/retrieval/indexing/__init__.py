"""The write path: which files a directory holds for the index (:mod:`.selection`), chunking them in worker
processes (:mod:`.workers`), embedding and writing them in groups (:mod:`.indexer`, :mod:`.group_writer`):
incremental, stat-first, crash-safe, and keeping finished work when it is interrupted.

It uses :mod:`..storage` (the stores and what a file is stored as) and :mod:`..embeddings`; it never imports the
search, the context or the index above it (``tests/test_import_graph.py`` checks it).
"""
