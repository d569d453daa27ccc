"""Stage 4, search indexes: tokenizers, BM25, dense matrices, time metadata, and the atomic
publication of an index version.
"""
