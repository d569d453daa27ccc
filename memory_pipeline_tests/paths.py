"""Paths the tests share, so a test file can move within the mirrored tree without edits."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE = ROOT / "data" / "sample"
