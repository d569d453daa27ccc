"""Stage 7, context packs: memories first, then their sources, inside a UTF-16 budget.
"""
