"""The chunking core: the span model, tokens, languages and grammars, the engine and ``ASTChunker``.

Framework-free: nothing here imports LangChain, LlamaIndex, Chroma or an embedding model.
"""
