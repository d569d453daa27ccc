"""A minimal bridge: forward chat messages from a JSONL stream to ``POST /v1/messages``.

Usage::

    your-chat-export-or-bot | python -m memory_pipeline.service.bridge --url http://localhost:8700

One JSON object per input line, shaped as the API takes it (``id``, ``conversation``,
``sender``, ``time`` with an offset, ``text``; optionally ``type``, ``reply_to``,
``attachment``, ``contact``). The key is read from ``$WRITE_KEY`` (``memory-pipeline keys
create --owner OWNER --scope write``). Lines are posted in batches; a batch is retried
(after ``Retry-After`` on 429/503, with a growing pause when the server is unreachable, say
restarting): the API is idempotent by message id, so a retried batch never stores a message
twice. Each refused message is reported on stderr with its reason; the exit status is 1 when
any was. Standard library only: copy it into a bot's repository as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable

BATCH = 100  # messages per request (the API takes up to 500)
ATTEMPTS = 8


def post(url: str, key: str, batch: list[dict]) -> dict:
    """POST one batch, retrying what a retry can fix; the API's answer."""
    body = json.dumps({"messages": batch}).encode("utf-8")
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    for attempt in range(ATTEMPTS):
        request = urllib.request.Request(f"{url}/v1/messages", body, headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return json.load(r)
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 503):
                raise SystemExit(f"error: HTTP {exc.code}: {exc.read()[:300].decode()}") from None
            time.sleep(float(exc.headers.get("Retry-After") or 1))
        except OSError:  # refused, reset, timed out: the server may be restarting
            time.sleep(min(2**attempt, 30))
    raise SystemExit(f"error: gave up after {ATTEMPTS} attempts")


def forward(lines: Iterable[str], url: str, key: str, batch_size: int = BATCH) -> int:
    """Post every message of ``lines``; the number refused."""
    refused = 0
    batch: list[dict] = []

    def flush() -> None:
        nonlocal refused
        result = post(url, key, batch)
        for row in result["results"]:
            if row["status"] == "refused":
                refused += 1
                print(f"refused {row['id']}: {row['reason']} ({row['detail']})", file=sys.stderr)
        print(
            f"accepted {result['accepted']}, duplicates {result['duplicates']}, "
            f"refused {result['refused']}, forgotten {result['forgotten']}"
        )
        batch.clear()

    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            batch.append(json.loads(line))
        except ValueError:
            print(f"refused line {n}: not JSON", file=sys.stderr)
            refused += 1
            continue
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return refused


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://localhost:8700", help="the memory service")
    ap.add_argument("--batch", type=int, default=BATCH, help="messages per request (<= 500)")
    args = ap.parse_args(argv)
    key = os.environ.get("WRITE_KEY")
    if not key:
        print("error: set WRITE_KEY to a key with the write scope", file=sys.stderr)
        return 2
    return 1 if forward(sys.stdin, args.url.rstrip("/"), key, args.batch) else 0


if __name__ == "__main__":
    sys.exit(main())
