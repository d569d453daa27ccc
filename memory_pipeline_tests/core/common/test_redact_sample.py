"""Precision of redact() on real-looking chat: every message of the bundled sample, and the
PII fixture conversation, against a reviewed list of what may be masked."""

from __future__ import annotations

import json
from pathlib import Path

import memory_pipeline.core.ingest.sources  # noqa: F401  (registers the readers)
from memory_pipeline.core.common.redact import find_spans
from memory_pipeline.core.ingest.sources.base import SourceSpec, read_source
from memory_pipeline_tests.paths import FIXTURES, SAMPLE

# Reviewed by hand: the bundled sample holds no contact details, so nothing may be masked
# (its times, dates, yen amounts, seat numbers and train names must all survive).
SAMPLE_REVIEWED: set[tuple[str, str]] = set()
# The PII fixture: exactly its four planted secrets.
PII_REVIEWED = {
    ("EMAIL", "yuki.tanaka@example.com"),
    ("PHONE", "090-1234-5678"),
    ("CARD", "4111 1111 1111 1111"),
    ("URL_WITH_SECRET", "https://portal.example.com/reset?token=s3cr3tT0ken42"),
}


def texts(kind: str, path: Path) -> list[str]:
    spec = SourceSpec(name=kind, kind=kind, path=path, timezone="Asia/Tokyo", owner="Yuki")
    return [r.text for r in read_source(spec) if getattr(r, "text", None)]


def masked(text: str) -> set[tuple[str, str]]:
    """(kind, original substring) of every span redact() masks in ``text``."""
    return {(kind, text[start:end]) for start, end, kind in find_spans(text)}


def test_sample_masks_exactly_the_reviewed_list():
    messages = texts("line_json", SAMPLE / "line_json") + texts("line_txt", SAMPLE / "line_txt")
    assert len(messages) > 200  # every message was read
    found = set().union(*(masked(t) for t in messages))
    assert found == SAMPLE_REVIEWED


def test_pii_fixture_masks_exactly_its_planted_secrets():
    messages = json.loads((FIXTURES / "pii" / "2024-03-04.json").read_text())["messages"]
    found = set().union(*(masked(m["text"]) for m in messages))
    assert found == PII_REVIEWED
