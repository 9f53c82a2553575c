"""Context: a hit becomes what an LLM needs to read it, under a hard token budget: the rows a hit needs, read by id
(:mod:`.lookup`: enclosing scopes, bindings it uses, exact slices), what to show of them (:mod:`.expand`) and how it
is shown (:mod:`.render`).

It uses :mod:`..search` and :mod:`..storage`; it never imports the write path or the index above it
(``tests/test_import_graph.py`` checks it).
"""
