"""API keys: each key belongs to one owner and has a scope (``read``, ``write`` or ``admin``).

Only a key's SHA-256 is stored (a key is 32 random bytes, so a plain hash is enough: there
is nothing to guess), in one JSON file with 0600 permissions, written atomically. The
server re-reads the file when its identity changes (inode, size, mtime: one ``stat`` per
request), so ``keys revoke`` in another process takes effect on the next request.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import secrets
import threading
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

# admin can do everything read and write can, and forget; write posts messages
# (POST /v1/messages, MCP remember) and reads nothing
SCOPES = ("read", "write", "admin")
KEY_PREFIX = "mpk_"
KEYS_FILE = "service/keys.json"  # under the deployment's (local) state folder
KEYS_ENV = "MEMORY_PIPELINE_KEYS"


class KeyError_(ValueError):
    """A key operation that cannot be done (unknown key id, bad scope, unreadable file)."""


@dataclass(frozen=True)
class KeyRecord:
    key_id: str  # public handle: shown by `keys list`, used by `keys revoke`, logged
    owner: str
    scope: str
    sha256: str
    created: str
    revoked: str | None = None

    def allows(self, scope: str) -> bool:
        return self.scope == "admin" or self.scope == scope


def default_keys_path(state_dir: Path) -> Path:
    """``$MEMORY_PIPELINE_KEYS``, else ``<state folder>/service/keys.json``: keys cannot be
    rebuilt, so they live with the state, not in the output (docs/state-and-backup.md)."""
    env = os.environ.get(KEYS_ENV)
    return Path(env) if env else Path(state_dir) / KEYS_FILE


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class KeyStore:
    """The key file of a deployment; thread-safe, cheap to consult per request."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._by_hash: dict[str, KeyRecord] = {}

    # -- reading --------------------------------------------------------------------------
    def _read(self) -> list[KeyRecord]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise KeyError_(f"{self.path}: cannot read the key file ({exc})") from None
        return [KeyRecord(**r) for r in data.get("keys", [])]

    def records(self) -> list[KeyRecord]:
        return self._read()

    def _fresh(self) -> dict[str, KeyRecord]:
        """The active keys by hash, re-read when the file changed since the last call."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            with self._lock:
                records = self._read() if stamp is not None else []
                self._by_hash = {r.sha256: r for r in records if r.revoked is None}
                self._stamp = stamp
        return self._by_hash

    def verify(self, token: str | None) -> KeyRecord | None:
        """The active key record of ``token``, or None (missing, unknown or revoked)."""
        if not token or not token.startswith(KEY_PREFIX) or len(token) > 200:
            return None
        record = self._fresh().get(_hash(token))
        # compare in constant time too: the dict lookup already matched the hash
        if record is not None and secrets.compare_digest(record.sha256, _hash(token)):
            return record
        return None

    # -- writing (the `keys` command) -----------------------------------------------------
    def _write(self, records: list[KeyRecord]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}")
        text = json.dumps({"keys": [asdict(r) for r in records]}, indent=1) + "\n"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, self.path)

    def create(self, owner: str, scope: str = "read") -> tuple[KeyRecord, str]:
        """A new key for ``owner``: (its record, the key itself, shown once)."""
        if scope not in SCOPES:
            raise KeyError_(f"unknown scope {scope!r}; scopes: {', '.join(SCOPES)}")
        token = KEY_PREFIX + secrets.token_urlsafe(32)
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        record = KeyRecord(f"k-{secrets.token_hex(4)}", owner, scope, _hash(token), now)
        with self._lock:
            self._write([*self._read(), record])
        return record, token

    def revoke(self, key_id: str) -> KeyRecord:
        """Mark ``key_id`` revoked (kept in the file, so `keys list` shows when)."""
        with self._lock:
            records = self._read()
            found = [r for r in records if r.key_id == key_id]
            if not found:
                raise KeyError_(f"unknown key id {key_id!r} (see `memory-pipeline keys list`)")
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            done = [
                KeyRecord(**{**asdict(r), "revoked": r.revoked or now}) if r.key_id == key_id else r
                for r in records
            ]
            self._write(done)
        return next(r for r in done if r.key_id == key_id)
