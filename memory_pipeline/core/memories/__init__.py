"""Stage 6, memories and dossiers: source-linked memories (rules or an LLM), supersession, and the
per-contact dossier fold.
"""
