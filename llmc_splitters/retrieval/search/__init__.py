"""Search and ranking: how a question is read (:mod:`.question`), which spans and files it reaches
(:mod:`.hits`: each engine's candidates, read from the span store by id), how they are ordered (:mod:`.ranking`,
with reciprocal rank fusion in :mod:`.fusion`) and how confident the order is (:mod:`.confidence`).

It uses :mod:`..storage` (the engines' lists, the span store, the filters and terms) and :mod:`..embeddings`; it
never imports the write path, the context or the index above it (``tests/test_import_graph.py`` checks it).
"""
