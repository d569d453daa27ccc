"""Stage 1, ingest: source readers (``sources/``) turn exports into records; ``normalize``
validates, dedupes and ids them; ``stage`` cuts the raw_messages / quarantine / audit tables per
date.
"""
