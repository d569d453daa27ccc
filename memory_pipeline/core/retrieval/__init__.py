"""Stage 5, retrieval: the searcher over a published index version, fusion and time expressions.
"""
