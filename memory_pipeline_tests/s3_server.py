"""A real S3 wire protocol on 127.0.0.1 for the object-storage tests: moto's standalone
server (``moto[server]``, a dev dependency), plus a TCP proxy that can cut uploads.

The server runs in a thread of the test process, on a free port, and is always stopped
(``S3Server.stop`` from a fixture's ``finally``); nothing outlives the session.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from memory_pipeline.core.common import fs

KEY = "testing"  # moto accepts any credentials; these are fake
REGION = "us-east-1"
START_TIMEOUT_S = 20.0


@dataclass
class S3Server:
    """A running moto server and a boto3 client on it (to create and list buckets)."""

    endpoint: str
    client: Any
    _server: Any = field(repr=False)

    @classmethod
    def start(cls) -> S3Server:
        import logging

        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        started = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                server.start()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            started.set()

        threading.Thread(target=run, daemon=True).start()
        if not started.wait(START_TIMEOUT_S) or errors:
            raise RuntimeError(f"moto server did not start in {START_TIMEOUT_S}s: {errors}")
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
            region_name=REGION,
        )
        return cls(endpoint, client, server)

    def options(self, endpoint: str | None = None) -> fs.S3Options:
        return fs.S3Options(endpoint or self.endpoint, KEY, KEY, REGION)

    def bucket(self, name: str) -> str:
        """Create ``name`` (if needed) and return ``s3://name``."""
        existing = {b["Name"] for b in self.client.list_buckets().get("Buckets", [])}
        if name not in existing:
            self.client.create_bucket(Bucket=name)
        return f"s3://{name}"

    def objects(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """key -> size of every object under ``prefix``."""
        out: dict[str, int] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        ):
            out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        return out

    def stop(self) -> None:
        self._server.stop()


class CutProxy:
    """Forwards TCP to the server; while ``cut`` is set, a connection is dropped once the
    client has sent ``limit`` bytes (an upload broken mid-body, as a network failure
    would). Stopped by ``close``."""

    def __init__(self, endpoint: str, limit: int) -> None:
        host, port = endpoint.rsplit("//", 1)[1].split(":")
        self.target = (host, int(port))
        self.limit = limit
        self.cut = False
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target, timeout=10)

        def back() -> None:
            try:
                while data := upstream.recv(65536):
                    client.sendall(data)
            except OSError:
                pass
            finally:
                client.close()

        threading.Thread(target=back, daemon=True).start()
        sent = 0
        try:
            while data := client.recv(65536):
                sent += len(data)
                if self.cut and sent > self.limit:
                    upstream.sendall(data[: max(0, len(data) - (sent - self.limit))])
                    break
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            upstream.close()
            client.close()

    def close(self) -> None:
        self._sock.close()
