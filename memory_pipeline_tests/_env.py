"""Test-environment rules shared by fixtures: what is optional locally is mandatory in CI.

A developer without PostgreSQL or ../shared/data still gets a green run (the tests are
skipped with the reason), but a CI job (CI=true) that silently skipped them would prove
nothing, so there the same condition fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA_ENV = "MEMORY_PIPELINE_SHARED_DATA"
# ../shared/data relative to the repository root (this file is <root>/memory_pipeline_tests/).
DEFAULT_SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def in_ci() -> bool:
    """True when the CI convention variable CI is "true" (any case), as set by CI services."""
    return os.environ.get("CI", "").strip().lower() == "true"


def require_or_skip(condition: bool, why: str) -> None:
    """Skip the calling test unless ``condition``; under CI=true fail it instead.

    ``why`` says what is missing, e.g. "PostgreSQL not reachable at localhost:5432".
    """
    if condition:
        return
    if in_ci():
        pytest.fail(f"required under CI=true: {why}", pytrace=False)
    pytest.skip(why)


def shared_data_dir() -> Path:
    """Where the read-only shared datasets live: $MEMORY_PIPELINE_SHARED_DATA or ../shared/data."""
    override = os.environ.get(SHARED_DATA_ENV, "").strip()
    return Path(override).expanduser() if override else DEFAULT_SHARED_DATA
