"""Apps write to the memory: ``POST /v1/messages``, ``GET /v1/messages/{id}`` and MCP
``remember`` against a real ``memory-pipeline serve`` process on 127.0.0.1 (a free port),
over a two-owner deployment built once for the module (Alice and Bob, built to collide:
same contacts, same texts).

What is asserted: per-message errors beside accepted messages, idempotency by client id,
scopes and owner isolation, MCP remember, a burst of posts refreshed (coalesced) into a
searchable index while searches keep being served without one failure, durability across a
``kill -9`` right after the 202 (what a restarted server reads, and the refresh it resumes), and a
forgotten contact whose messages keep arriving (refused, never written in clear).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memory_pipeline.service.keys import KeyStore, default_keys_path
from memory_pipeline_tests.defs.test_owners_pipeline import DAYS, _write_owner
from memory_pipeline_tests.pipeline_helpers import Runner, build_all, write_config
from memory_pipeline_tests.service.conftest import CONFIG

DAY = DAYS[-1].isoformat()  # a built partition: 2024-03-02 (end_date 2024-03-05)


def _msg(cid: str, text: str, conv: str = "maria", sender: str = "Maria", minute: int = 0):
    return {
        "id": cid,
        "conversation": conv,
        "sender": sender,
        "time": f"{DAY}T21:{minute:02d}:00+09:00",
        "text": text,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the refresh subprocesses of a server)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        frontier += kids
    return out


def _gone(pids: list[int], timeout: float) -> None:
    """Wait for ``pids`` to exit (a refresh orphaned by a kill -9 finishes its run), then
    kill what is left: no process outlives the test."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Server:
    """``memory-pipeline serve`` as a subprocess (kill -9 must be a real process's death)."""

    def __init__(self, config: Path, keys: Path, env: dict[str, str]) -> None:
        self.config, self.keys, self.env = config, keys, env
        self.orphans: list[int] = []
        self.start()

    def start(self, *flags: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "memory_pipeline.cli", "--config", str(self.config)]
        cmd += ["serve", "--port", str(self.port), "--keys", str(self.keys)]
        cmd += ["--rate", "10000", "--burst", "10000", *flags]
        # the log to a file: a pipe nobody reads fills up and blocks the server's event loop
        self.log = self.config.parent / f"serve-{self.port}.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            assert time.monotonic() < deadline, "server did not start"
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)

    def kill9(self) -> None:
        self.orphans += _descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            kids = _descendants(self.proc.pid)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.orphans += kids
        _gone(self.orphans, 120)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("messages")
    for oid in ("alice", "bob"):
        _write_owner(root, oid, DAYS)
    config = write_config(root, CONFIG.split("[[owners]]\nid = \"carol\"")[0])  # two owners
    runner = Runner(config, root / "out")
    build_all(runner, DAYS)
    store = KeyStore(default_keys_path(runner.cfg.local_state_dir))  # where `serve` looks
    keys = {
        f"{oid}_{scope}": store.create(oid, scope)[1]
        for oid in ("alice", "bob")
        for scope in ("read", "write")
    }
    return {"root": root, "config": config, "cfg": runner.cfg, "store": store, "keys": keys}


@pytest.fixture(scope="module")
def server(deployment: dict) -> Iterator[Server]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["DAGSTER_HOME"] = str(deployment["root"] / "dagster")
    (deployment["root"] / "dagster").mkdir(exist_ok=True)
    env.pop("CI", None)
    served = Server(deployment["config"], deployment["store"].path, env)
    yield served
    served.stop()


def _h(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _post(server: Server, key: str, messages: list, **kw) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/messages", json={"messages": messages}, headers=_h(key), timeout=60, **kw
    )


def _status(server: Server, key: str, cid: str) -> httpx.Response:
    return httpx.get(f"{server.url}/v1/messages/{cid}", headers=_h(key), timeout=60)


def _inbox(deployment: dict, oid: str) -> Path:
    """The owner's inbox: in their state folder (``<state>/owners/<id>/inbox``)."""
    cfg = deployment["cfg"]
    folder = cfg.for_owner(next(s for s in cfg.owner_specs() if s.id == oid)).inbox_path
    assert folder == deployment["root"] / "state" / "owners" / oid / "inbox"
    return folder


def _inbox_text(deployment: dict, oid: str) -> str:
    folder = _inbox(deployment, oid)
    return "".join(p.read_text("utf-8") for p in sorted(folder.glob("*/*.jsonl")))


def _found(server: Server, key: str, word: str) -> bool:
    r = httpx.post(
        f"{server.url}/v1/search", json={"query": word, "k": 5}, headers=_h(key), timeout=60
    )
    return r.status_code == 200 and word in json.dumps(r.json()["chunks"], ensure_ascii=False)


# -- the batch ----------------------------------------------------------------------------------
def test_per_message_errors_beside_accepted_messages_and_idempotency(server, deployment):
    key = deployment["keys"]["alice_write"]
    batch = [
        _msg("ok-1", "The spare key is under the blue flowerpot"),
        {**_msg("bad-time", "x"), "time": "2024-03-02 21:00"},  # no offset
        _msg("bad-empty", "   "),
        {**_msg("bad-type", "x"), "type": "hologram"},
        {**_msg("bad-field", "x"), "owner": "bob"},  # no owner field: the key's owner
        _msg("bad-long", "x" * 20_001),
        {"conversation": "maria", "sender": "Maria", "time": f"{DAY}T21:00:00+09:00"},
        "not an object",
        {**_msg("ok-photo", ""), "type": "photo", "attachment": "IMG_0042.jpg"},
    ]
    r = _post(server, key, batch)
    assert r.status_code == 202, r.text
    got = r.json()
    by = {row["index"]: row for row in got["results"]}
    assert [by[i]["status"] for i in range(len(batch))] == [
        "accepted", "refused", "refused", "refused", "refused", "refused", "refused", "refused",
        "accepted",
    ]  # fmt: skip
    reasons = [by[i].get("reason") for i in range(1, 8)]
    assert reasons == [
        "bad_timestamp", "empty_text", "unknown_type", "unknown_field", "too_large",
        "missing_field", "missing_field",
    ]  # fmt: skip
    assert "x" * 50 not in r.text  # details name the problem, never the text
    assert (got["accepted"], got["refused"]) == (2, 7) and got["refresh"]["dates"] == [DAY]
    # a retried batch adds nothing; a reused id with other content is refused, not kept
    again = _post(server, key, batch).json()
    assert [row["status"] for row in again["results"]][0::8] == ["duplicate", "duplicate"]
    assert again["accepted"] == 0 and again["refresh"]["dates"] == []
    clash = _post(server, key, [_msg("ok-1", "The spare key is under the red pot")]).json()
    assert clash["results"][0]["reason"] == "id_conflict"
    text = _inbox_text(deployment, "alice")
    assert text.count('"ok-1"') == 1 and "blue flowerpot" in text and "red pot" not in text
    assert "bad-" not in text
    assert _status(server, key, "ok-1").json()["status"] in ("received", "searchable")
    # stored, but no refresh can ingest it (after end_date): the answer says so
    late = _post(server, key, [{**_msg("late-1", "from the future"), "time": "2030-01-01T00:00Z"}])
    assert "end_date" in late.json()["results"][0]["note"] and late.json()["accepted"] == 1
    assert "end_date" in _status(server, key, "late-1").json()["stage"]
    assert _status(server, key, "bad-time").status_code == 404


def test_scopes_bounds_and_owner_isolation(server, deployment):
    keys = deployment["keys"]
    r = _post(server, keys["alice_read"], [_msg("r-1", "reading keys cannot write")])
    assert r.status_code == 403
    assert _status(server, keys["alice_read"], "ok-1").status_code == 403
    assert _post(server, "mpk_" + "x" * 43, [_msg("r-2", "nobody")]).status_code == 401
    # the envelope: no owner, 1..500 messages, a body within its limit
    r = httpx.post(
        f"{server.url}/v1/messages",
        json={"messages": [_msg("o-1", "x")], "owner": "bob"},
        headers=_h(keys["alice_write"]),
    )
    assert r.status_code == 422
    assert _post(server, keys["alice_write"], []).status_code == 422
    many = [_msg(f"n-{i}", "x") for i in range(501)]
    assert _post(server, keys["alice_write"], many).status_code == 422
    huge = [_msg(f"h-{i}", "y" * 19_000) for i in range(300)]  # ~5.7 MB
    assert _post(server, keys["alice_write"], huge).status_code == 413
    # one id, two owners: each stores its own, neither sees the other's
    bob = _post(server, keys["bob_write"], [_msg("same-id", "Bob's bike lock is 4711")])
    alice = _post(server, keys["alice_write"], [_msg("same-id", "Alice's gym locker is 815")])
    assert bob.json()["accepted"] == alice.json()["accepted"] == 1
    assert _status(server, keys["bob_write"], "ok-1").status_code == 404  # alice's id
    assert "4711" in _inbox_text(deployment, "bob") and "4711" not in _inbox_text(
        deployment, "alice"
    )
    assert "815" not in _inbox_text(deployment, "bob")
    # files of the inbox are the owner's only (0600, folders 0700)
    for p in [_inbox(deployment, "alice"), *_inbox(deployment, "alice").rglob("*")]:
        assert p.stat().st_mode & 0o077 == 0, p


def test_mcp_remember_needs_a_write_key(server, deployment):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def call(key: str, args: dict):
        http = create_mcp_http_client(headers=_h(key))
        async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            return names, await c.call_tool("remember", args)

    args = {"text": "Alice prefers the aisle seat", "time": f"{DAY}T22:00:00+09:00", "id": "mcp-1"}
    names, r = asyncio.run(call(deployment["keys"]["alice_write"], args))
    assert "remember" in names and not r.is_error
    assert r.content[0].text.startswith("accepted: message mcp-1; searchable after")
    names, r = asyncio.run(call(deployment["keys"]["alice_write"], {**args, "format": "json"}))
    assert json.loads(r.content[0].text)["results"][0]["status"] == "duplicate"
    _, r = asyncio.run(call(deployment["keys"]["alice_read"], {**args, "id": "mcp-2"}))
    assert r.is_error and json.loads(r.content[0].text)["status"] == 403
    assert "write" in r.content[0].text
    line = next(
        json.loads(x)
        for x in _inbox_text(deployment, "alice").splitlines()
        if json.loads(x)["id"] == "mcp-1"
    )
    assert (line["conversation"], line["sender"]) == ("assistant", "Alice")  # the person


def test_the_jsonl_bridge_forwards_a_stream_and_retries_idempotently(server, deployment):
    stream = "\n".join(
        json.dumps(m)
        for m in (
            _msg("tg-1", "Bridge says the ferry leaves at 8", minute=40),
            {**_msg("tg-2", "no time"), "time": "yesterday"},
            _msg("tg-3", "Bridge says bring the red umbrella", minute=41),
        )
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["WRITE_KEY"] = deployment["keys"]["alice_write"]
    cmd = [sys.executable, "-m", "memory_pipeline.service.bridge", "--url", server.url]
    for shown in ("accepted 2, duplicates 0, refused 1", "accepted 0, duplicates 2, refused 1"):
        done = subprocess.run(
            cmd, input=stream, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 1 and shown in done.stdout, (done.stdout, done.stderr)
        assert "refused tg-2: bad_timestamp" in done.stderr


# -- searchable within seconds, searches served throughout ----------------------------------------
def test_a_burst_of_posts_is_refreshed_once_while_searches_keep_being_served(server, deployment):
    keys = deployment["keys"]
    codes: list[int] = []
    stop = threading.Event()

    def searches() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                r = client.post(
                    f"{server.url}/v1/search",
                    json={"query": "Kyoto trip hotel", "k": 3},
                    headers=_h(keys["alice_read"]),
                )
                codes.append(r.status_code)

    words = [f"zebra{n}quartz" for n in range(5)]
    before = _status(server, keys["alice_write"], "ok-1").json()["refresh"]["runs"]
    worker = threading.Thread(target=searches)
    worker.start()
    try:
        t0 = time.monotonic()
        for n, word in enumerate(words):  # five posts in a row: one burst
            r = _post(server, keys["alice_write"], [_msg(f"burst-{n}", f"code {word}", minute=n)])
            assert r.json()["accepted"] == 1
        deadline = t0 + 300
        while not all(_found(server, keys["alice_read"], w) for w in words):
            assert time.monotonic() < deadline, "not searchable in 300 s"
            time.sleep(0.5)
        status = _status(server, keys["alice_write"], "burst-4").json()
    finally:
        stop.set()
        worker.join(60)
    assert status["status"] == "searchable" and status["message_id"].startswith("msg_")
    assert len(codes) > 5 and set(codes) == {200}, sorted(set(codes))
    # the burst coalesced: one refresh (plus one of earlier posts, if it was running)
    assert status["refresh"]["runs"] - before <= 2, (before, status["refresh"])
    # bob's index never holds alice's words
    assert not _found(server, keys["bob_read"], words[0])


# -- forget (it changes the deployment) -------------------------------------------------
def test_a_forgotten_contact_whose_messages_keep_arriving(server, deployment):
    from memory_pipeline.config import owner_config
    from memory_pipeline.core.common.lock import output_lock
    from memory_pipeline.core.privacy.forget import apply_forget
    from memory_pipeline.defs.forget import plan_for

    key = deployment["keys"]["alice_write"]
    ken = _msg("ken-1", "Ken's passport number is quokkaecho", "ken", "Ken")
    before = _post(server, key, [ken])
    assert before.json()["accepted"] == 1
    cfg = owner_config(deployment["cfg"], "alice")
    with output_lock(deployment["cfg"].output_dir, wait=600):  # after a refresh in progress
        apply_forget(plan_for(cfg, "Ken"))  # what POST /v1/forget does, before its rebuild
    assert "quokkaecho" not in _inbox_text(deployment, "alice")  # scrubbed to a text-free line
    assert _status(server, key, "ken-1").json()["status"] == "forgotten"
    r = _post(
        server,
        key,
        [
            _msg("ken-2", "Ken again: quokkafoxtrot", "ken", "Ken", minute=1),
            _msg("maria-9", "Maria is not forgotten", minute=2),
        ],
    )
    assert [row["status"] for row in r.json()["results"]] == ["forgotten", "accepted"]
    assert _post(server, key, [_msg("ken-2", "Ken again: quokkafoxtrot", "ken", "Ken", 1)]).json()[
        "results"
    ][0]["status"] == "forgotten"
    text = _inbox_text(deployment, "alice")
    assert "quokka" not in text and "Maria is not forgotten" in text
    assert _status(server, key, "ken-2").json()["status"] == "forgotten"
    # bob's Ken is untouched
    assert _status(server, deployment["keys"]["bob_write"], "same-id").json()["status"]


def test_the_log_names_routes_never_ids_texts_or_names(server):
    """The access log of every request above: the route's template and the status, never a
    client id, a message text, a contact name or a query."""
    text = "".join(p.read_text("utf-8") for p in server.config.parent.glob("serve-*.log"))
    assert "POST /v1/messages 202" in text and "GET /v1/messages/{client_id} " in text
    for leaked in ("ok-1", "flowerpot", "quokka", "Maria", "Ken", "zebra0quartz", "Kyoto"):
        assert leaked not in text, leaked


# -- kill -9 right after the 202 (last: the server is gone after it) ----------------------
def test_accepted_messages_survive_kill_9_right_after_the_202(server, deployment):
    key = deployment["keys"]["alice_write"]
    batch = [_msg(f"k9-{i}", f"durable note number {i} walrus", minute=30 + i) for i in range(20)]
    r = _post(server, key, batch)
    assert r.status_code == 202 and r.json()["accepted"] == 20
    server.kill9()  # no graceful anything
    # the refresh the killed server owed is on disk (its refresher was still collecting
    # the burst): a restarted server resumes it (Messages.resume, tested below)
    pending = _inbox(deployment, "alice") / ".pending"
    assert any(p.name.startswith(DAY) for p in pending.iterdir())
    # what a restarted server reads from disk, in-process (a second server process would
    # cost its start-up and its index load for the same answers)
    from memory_pipeline.service.messages import Messages
    from memory_pipeline.service.operations import MemoryService

    restarted = Messages(MemoryService(deployment["cfg"], str(deployment["config"])))
    for i in range(20):
        assert restarted.status("alice", f"k9-{i}")["status"] in ("received", "searchable")
    again = restarted.accept("alice", batch)
    assert again["duplicates"] == 20 and again["accepted"] == 0


def test_a_restarted_server_resumes_the_refresh_it_owed(deployment):
    from memory_pipeline.service.messages import Messages
    from memory_pipeline.service.operations import MemoryService

    class Recorder:
        days: set = set()

        def request(self, days) -> int:
            self.days |= set(days)
            return 1

    service = MemoryService(deployment["cfg"], str(deployment["config"]))
    recorder = Recorder()
    resumed = Messages(service, recorder).resume()
    assert DAYS[-1] in resumed and recorder.days == resumed
