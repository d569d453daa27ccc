"""Shared fixtures: access to ../shared/data with the skip-locally / fail-in-CI rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memory_pipeline_tests._env import require_or_skip, shared_data_dir

# Tests using these fixtures are marked ``shared_data`` so ``-m "not shared_data"`` works.
_SHARED_FIXTURES = frozenset({"shared_data", "shared_file"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _SHARED_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.shared_data)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data directory; skips (or fails under CI=true) when it is absent."""
    root = shared_data_dir()
    require_or_skip(
        root.is_dir(),
        f"shared data not found at {root} (set MEMORY_PIPELINE_SHARED_DATA to override)",
    )
    return root


@pytest.fixture(scope="session")
def shared_file(shared_data: Path) -> Callable[[str], Path]:
    """``shared_file("locomo/locomo_dev.json")`` -> path; skips/fails like ``shared_data``."""

    def get(relpath: str) -> Path:
        path = shared_data / relpath
        require_or_skip(path.is_file(), f"shared data file not found: {path}")
        return path

    return get
