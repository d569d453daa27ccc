"""Stage 3, representations: extractive/LLM summaries, embedding_text, session enrichment and
embeddings through the providers (``providers/``), cached by content hash (``cache``).
"""
