"""The service's test deployment, built once per worker process for every service test
file: two owners built to collide (same contacts, same message texts and ids), each with
a secret word, and a key file. Servers are real uvicorn servers on 127.0.0.1 (a free
port) with the app's own connection guards.

Tests that change the deployment (forget) run last in test_service.py; other files use
only Bob's data, the scratch owner ``carol`` (the contract fuzzer's forget calls land
there) or what forget leaves.
"""

from __future__ import annotations

import threading
import time

import pytest

from memory_pipeline.service.app import ServiceSettings, create_app, uvicorn_options
from memory_pipeline.service.keys import KeyStore, default_keys_path
from memory_pipeline.service.operations import MemoryService
from memory_pipeline_tests.defs.test_owners_pipeline import DAYS, _write_owner
from memory_pipeline_tests.pipeline_helpers import Runner, build_all, write_config

CONFIG = """
[pipeline]
owner = "Alice"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-05"
output_dir = "out"

[[owners]]
id = "alice"
owner = "Alice"
[[owners.sources]]
name = "alice_chats"
kind = "line_json"
path = "chats/alice"

[[owners]]
id = "bob"
owner = "Bob"
[[owners.sources]]
name = "bob_chats"
kind = "line_json"
path = "chats/bob"

[[owners]]
id = "carol"
owner = "Carol"
[[owners.sources]]
name = "carol_chats"
kind = "line_json"
path = "chats/carol"
"""


class Served:
    """A uvicorn server in a thread of the test process, on a free 127.0.0.1 port, with
    the options ``serve`` uses (the guarded protocol)."""

    def __init__(self, app, settings: ServiceSettings | None = None) -> None:
        import uvicorn

        options = uvicorn_options(settings or ServiceSettings())
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **options)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not (self.server.started and self.server.servers):
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    @staticmethod
    def free_port() -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def serve_app(service: MemoryService, store: KeyStore, settings: ServiceSettings) -> Served:
    return Served(create_app(service, store, settings), settings)


def h(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("service")
    for oid in ("alice", "bob", "carol"):
        _write_owner(root, oid, DAYS)
    config = write_config(root, CONFIG)
    runner = Runner(config, root / "out")
    build_all(runner, DAYS)
    store = KeyStore(default_keys_path(runner.cfg.local_state_dir))  # where `serve` looks
    keys = {
        "alice": store.create("alice", "read")[1],
        "bob": store.create("bob", "read")[1],
        "alice_admin": store.create("alice", "admin")[1],
        "carol": store.create("carol", "read")[1],
        "carol_admin": store.create("carol", "admin")[1],
    }
    return {"root": root, "config": config, "cfg": runner.cfg, "store": store, "keys": keys}


@pytest.fixture(scope="session")
def service(deployment: dict) -> MemoryService:
    return MemoryService(deployment["cfg"], str(deployment["config"]))
