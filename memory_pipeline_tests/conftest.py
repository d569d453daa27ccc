"""Shared fixtures: access to ../shared/data with the skip-locally / fail-in-CI rule."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memory_pipeline_tests._env import require_or_skip, shared_data_dir

if TYPE_CHECKING:
    from memory_pipeline_tests.s3_server import S3Server

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


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server for the session; the AWS_* variables point at it (the CLI, the API
    and ``ObjectStoreResource.from_env`` read them) and local copies go to a tmp folder.
    Always stopped, and the environment restored. Shared by every module that talks S3
    (one server per session); moto is imported only when a test asks for it."""
    from memory_pipeline.core.common import fs
    from memory_pipeline.defs.resources import OBJECT_STORE_ENV
    from memory_pipeline_tests.s3_server import S3Server

    _ENV = {**{v: None for v in OBJECT_STORE_ENV.values()}, fs.CACHE_ENV: None}
    saved = {k: os.environ.get(k) for k in _ENV}
    server = S3Server.start()
    try:
        opts = server.options()
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": opts.endpoint_url or "",
                "AWS_ACCESS_KEY_ID": opts.access_key_id or "",
                "AWS_SECRET_ACCESS_KEY": opts.secret_access_key or "",
                "AWS_REGION": opts.region or "",
                fs.CACHE_ENV: str(tmp_path_factory.mktemp("s3_local_copies")),
            }
        )
        fs.configure_s3(opts)
        yield server
    finally:
        server.stop()
        fs.configure_s3(fs.S3Options())
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
