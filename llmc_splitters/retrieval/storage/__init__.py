"""Storage: where an index keeps what it knows, one engine per job, and the parts an index is composed of.

* the span store (:mod:`.span_store`, rows in :mod:`.span_rows`, its SQLite engine in :mod:`.span_sqlite`): every
  span by id, by name and by range, the files' markers, the outbox of what the other engines still miss;
* the lexical index (:mod:`.lexical_tantivy`: BM25 postings on disk, on tantivy, of the code-aware terms of
  :mod:`llmc_splitters.retrieval.terms`);
* the vector stores: Chroma (:mod:`.chroma_vectors`, with :mod:`.chroma_files`, the reader of Chroma's own files)
  and any LangChain ``VectorStore`` (:mod:`.langchain_vectors`); the whole index on Milvus (:mod:`.milvus`);
* what one file is stored as (:mod:`.file_rows`), the filters every engine applies inside its search
  (:mod:`.filters`), what an index directory holds (:mod:`.index_dir`), and the parts one index is made of, as the
  write path and the search are handed them (:mod:`.parts`).

Storage imports nothing above it in :mod:`llmc_splitters.retrieval`: only :mod:`..embeddings`, the terms, the chunker
and the package's errors (``tests/test_import_graph.py`` checks it).
"""
