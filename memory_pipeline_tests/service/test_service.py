"""The service end to end: a real uvicorn server on 127.0.0.1 (a free port), real httpx and
MCP clients, over a two-owner deployment built once for the module.

Alice and Bob are built to collide (same contacts, same message texts and ids) and each
has a secret word: nothing Bob's key or body can do reaches Alice's secret and vice versa.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from memory_pipeline.core.indexes.publish import current_version, index_root, publish
from memory_pipeline.service.app import ServiceSettings
from memory_pipeline.service.keys import KeyStore
from memory_pipeline.service.operations import MemoryService
from memory_pipeline_tests.defs.test_owners_pipeline import SECRET
from memory_pipeline_tests.service.conftest import CONFIG, Served, serve_app
from memory_pipeline_tests.service.conftest import h as _h


@pytest.fixture(scope="module")
def server(deployment: dict, service: MemoryService) -> Iterator[Served]:
    os.environ["DAGSTER_HOME"] = str(deployment["root"] / "dagster")  # forget records runs
    settings = ServiceSettings(rate=10_000, burst=10_000, max_body=16 * 1024, warm=False)
    served = serve_app(service, deployment["store"], settings)
    yield served
    served.stop()


@pytest.fixture(scope="module")
def strict_server(deployment: dict, service: MemoryService) -> Iterator[Served]:
    """The same service with a tight rate limit and timeout (the error-code tests)."""
    settings = ServiceSettings(rate=0.5, burst=2, timeout=0.001, mcp=False, warm=False)
    served = serve_app(service, deployment["store"], settings)
    yield served
    served.stop()


def _served(r: httpx.Response | str) -> str:
    """What a response serves from the memory: its JSON without the echoed query/question
    and the notes about it (which repeat the caller's own words)."""
    data = json.loads(r if isinstance(r, str) else r.text)
    for echo in ("query", "question", "notes"):
        data.pop(echo, None)
    return json.dumps(data, ensure_ascii=False)


def _search(url: str, key: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}/v1/search", json=body, headers=_h(key), timeout=60)


# -- endpoints ----------------------------------------------------------------------------------
def test_health_needs_no_key_and_names_the_version_for_a_key(server, deployment):
    r = httpx.get(f"{server.url}/v1/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert "alice" not in r.text  # no owner listing without a key
    r = httpx.get(f"{server.url}/v1/health", headers=_h(deployment["keys"]["alice"]), timeout=60)
    alice_dir = deployment["root"] / "out" / "owners" / "alice"
    assert r.json()["index_version"] == current_version(alice_dir).name


def test_search_returns_the_api_result_as_json(server, deployment):
    import memory_pipeline

    r = _search(server.url, deployment["keys"]["alice"], {"query": "Kyoto trip hotel", "k": 3})
    assert r.status_code == 200, r.text
    got = r.json()
    want = memory_pipeline.search(
        "Kyoto trip hotel", 3, config=deployment["config"], owner="alice"
    ).to_dict()
    assert [c["chunk_id"] for c in got["chunks"]] == [c["chunk_id"] for c in want["chunks"]]
    assert set(want) <= set(got)  # every field of SearchResult flows through
    # the answerability an app needs to say "I don't know", as the API computes it
    assert got["answerable"] == want["answerable"] and 0.0 <= got["confidence"] <= 1.0
    assert got["confidence"] == pytest.approx(want["confidence"])
    assert got["chunks"][0]["highlights"][0]["source_ref"]
    assert r.headers["X-Index-Version"] == got["index_version"]


def test_context_memories_dossier(server, deployment):
    key = deployment["keys"]["alice"]
    r = httpx.post(
        f"{server.url}/v1/context",
        json={"query": "When is the Kyoto trip?", "budget": 2000},
        headers=_h(key),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert r.json()["text"] and r.json()["utf16"] <= 2000
    r = httpx.get(f"{server.url}/v1/memories", params={"limit": 5}, headers=_h(key), timeout=60)
    assert r.status_code == 200 and r.json()["count"] == len(r.json()["memories"]) <= 5
    r = httpx.get(f"{server.url}/v1/dossiers/Maria", headers=_h(key), timeout=60)
    assert r.status_code == 200 and r.json()["markdown"].startswith("# Dossier")
    r = httpx.get(f"{server.url}/v1/dossiers/Nobody", headers=_h(key), timeout=60)
    assert r.status_code == 404
    r = httpx.get(f"{server.url}/openapi.json")
    paths = r.json()["paths"]
    assert {"/v1/search", "/v1/context", "/v1/memories", "/v1/forget"} <= set(paths)


# -- error codes ----------------------------------------------------------------------------------
def test_401_for_missing_wrong_and_revoked_keys_revocation_immediate(server, deployment):
    url, body = server.url, {"query": "Kyoto", "k": 1}
    assert httpx.post(f"{url}/v1/search", json=body).status_code == 401
    assert _search(url, "mpk_" + "x" * 43, body).status_code == 401
    assert _search(url, deployment["keys"]["alice"][:-1], body).status_code == 401
    store: KeyStore = deployment["store"]
    record, key = store.create("bob", "read")
    assert _search(url, key, body).status_code == 200
    KeyStore(store.path).revoke(record.key_id)  # another process's store: the file changes
    assert _search(url, key, body).status_code == 401  # the very next request
    assert (store.path.stat().st_mode & 0o777) == 0o600


def test_403_422_413(server, deployment):
    url, key = server.url, deployment["keys"]["alice"]
    r = httpx.post(f"{url}/v1/forget", json={"contact": "Ken"}, headers=_h(key))
    assert r.status_code == 403  # a read key cannot forget
    for bad in (
        {"query": "Kyoto", "k": 0},
        {"query": "Kyoto", "k": 101},
        {"query": "Kyoto", "k": "5"},
        {"query": "Kyoto", "k": True},
        {"query": ""},
        {"query": "x" * 2001},
        {"k": 3},
        {"query": "Kyoto", "owner": "bob"},  # the owner is the key's, never the body's
        {"query": "Kyoto", "as_of": "last week"},
    ):
        assert _search(url, key, bad).status_code == 422, bad
    r = httpx.post(f"{url}/v1/context", json={"query": "q", "budget": -1}, headers=_h(key))
    assert r.status_code == 422
    r = httpx.post(f"{url}/v1/search", content=b"{" + b" " * 20_000 + b"}", headers=_h(key))
    assert r.status_code == 413

    def chunked():
        for _ in range(40):
            yield b" " * 1024

    r = httpx.post(f"{url}/v1/search", content=chunked(), headers=_h(key))
    assert r.status_code == 413  # no Content-Length: counted as it arrives


def test_429_rate_limit_and_504_timeout(strict_server, deployment):
    url = strict_server.url
    record, key = deployment["store"].create("bob", "read")
    codes = [_search(url, key, {"query": "Kyoto", "k": 1}).status_code for _ in range(4)]
    assert codes[:2] == [504, 504]  # 1 ms per request: the search does not fit
    assert codes[2:] == [429, 429]  # burst 2, then 0.5/s
    r = _search(url, key, {"query": "Kyoto", "k": 1})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1


# -- isolation ------------------------------------------------------------------------------------
def test_two_owners_never_see_each_other(server, deployment):
    url, keys = server.url, deployment["keys"]
    for me, other in (("alice", "bob"), ("bob", "alice")):
        mine = _search(url, keys[me], {"query": f"locker code word {SECRET[me]}", "k": 5})
        assert SECRET[me] in mine.text
        crafted = [
            {"query": f"locker code word {SECRET[other]}", "k": 100},
            {"query": SECRET[other], "k": 100, "contact": "Maria"},
            {"query": SECRET[other], "k": 100, "conversation": "maria"},
        ]
        for body in crafted:
            r = _search(url, keys[me], body)
            assert r.status_code == 200 and SECRET[other] not in _served(r), body
        r = httpx.post(
            f"{url}/v1/context",
            json={"query": f"code word {SECRET[other]}", "budget": 20_000},
            headers=_h(keys[me]),
            timeout=60,
        )
        assert r.status_code == 200 and SECRET[other] not in _served(r)
        r = httpx.get(
            f"{url}/v1/memories", params={"q": SECRET[other]}, headers=_h(keys[me]), timeout=60
        )
        assert SECRET[other] not in r.text
        for path in ("Maria", f"..%2F..%2F{other}%2Fdossiers%2FMaria", "..", "%2E%2E"):
            r = httpx.get(f"{url}/v1/dossiers/{path}", headers=_h(keys[me]), timeout=60)
            assert SECRET[other] not in r.text and r.status_code in (200, 404), path


# -- freshness ------------------------------------------------------------------------------------
def _republish(owner_dir: Path) -> str:
    """Publish a copy of the current version as a new version (what a run does)."""
    root = index_root(owner_dir)
    new = root / f"v-{uuid.uuid4().hex[:12]}"
    shutil.copytree(current_version(owner_dir), new, symlinks=True)
    publish(root, new)
    return new.name


def test_index_switch_under_load_fails_no_request(server, deployment):
    key = deployment["keys"]["alice"]
    owner_dir = deployment["root"] / "out" / "owners" / "alice"
    before = current_version(owner_dir).name
    stop = threading.Event()
    seen: list[tuple[int, str]] = []

    def hammer() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                r = client.post(
                    f"{server.url}/v1/search",
                    json={"query": "Kyoto hotel station", "k": 3},
                    headers=_h(key),
                )
                seen.append((r.status_code, r.headers.get("X-Index-Version", "")))

    with ThreadPoolExecutor(6) as pool:
        for _ in range(6):
            pool.submit(hammer)

        def wait_for(done) -> None:
            deadline = time.monotonic() + 60
            while not done() and time.monotonic() < deadline:
                time.sleep(0.02)

        wait_for(lambda: len(seen) >= 12)  # the load is on
        versions = []
        for _ in range(2):
            versions.append(_republish(owner_dir))
            n = len(seen)
            wait_for(lambda n=n: len(seen) >= n + 12)
        stop.set()
    codes = {c for c, _ in seen}
    assert codes == {200}, codes
    served = [v for _, v in seen]
    assert before in served and versions[-1] in served
    assert served[-1] == versions[-1]  # switched without a restart
    assert set(served) <= {before, *versions}


# -- object storage, several processes -----------------------------------------------------------
def _upload(src: Path, owner_prefix: str) -> str:
    """Publish a copy of the local version ``src`` as the owner's new version on S3 (what a
    run with an ``s3://`` output does: upload, manifest, then the pointer)."""
    from memory_pipeline.core.indexes.publish import new_version

    root = index_root(owner_prefix)
    version = new_version(root)
    shutil.copytree(src, version, dirs_exist_ok=True)
    publish(root, version)
    return version.name


@pytest.fixture(scope="module")
def s3_deployment(s3, deployment: dict) -> dict:
    """The two owners' published versions uploaded to ``s3://service/deployment`` and a
    config naming the bucket (the same owners and key file)."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import fs

    uri = f"{s3.bucket('service')}/deployment"
    local = deployment["root"] / "out" / "owners"
    prefixes = {oid: fs.join(uri, "owners", oid) for oid in ("alice", "bob")}
    versions = {oid: _upload(current_version(local / oid), p) for oid, p in prefixes.items()}
    config = deployment["root"] / "s3.toml"
    body = CONFIG.replace('output_dir = "out"', f'output_dir = "{uri}"\nwork_dir = "work_s3"')
    config.write_text(body, encoding="utf-8")
    cfg = load_config(config)
    assert cfg.output_uri == uri
    return {"uri": uri, "config": config, "cfg": cfg, "prefixes": prefixes, "versions": versions}


@pytest.fixture(scope="module")
def s3_server(s3_deployment: dict, deployment: dict) -> Iterator[Served]:
    settings = ServiceSettings(rate=10_000, burst=10_000, mcp=False, warm=False)
    service = MemoryService(s3_deployment["cfg"], str(s3_deployment["config"]))
    served = serve_app(service, deployment["store"], settings)
    yield served
    served.stop()


def test_serves_an_owner_from_object_storage(s3_server, s3_deployment, deployment):
    import memory_pipeline

    key = deployment["keys"]["alice"]
    query = {"query": f"locker code word {SECRET['alice']}", "k": 3}
    r = _search(s3_server.url, key, query)
    assert r.status_code == 200, r.text
    assert r.json()["index_version"] == s3_deployment["versions"]["alice"]
    want = memory_pipeline.search(query["query"], 3, config=deployment["config"], owner="alice")
    assert [c["chunk_id"] for c in r.json()["chunks"]] == [h.chunk_id for h in want.chunks]
    assert SECRET["alice"] in r.text and SECRET["bob"] not in _served(r)
    r = httpx.post(
        f"{s3_server.url}/v1/context",
        json={"query": f"code word {SECRET['bob']}", "budget": 20_000},
        headers=_h(key),
        timeout=60,
    )
    assert r.status_code == 200 and SECRET["bob"] not in _served(r)


def test_a_loaded_s3_version_no_longer_needs_its_local_copy(
    server, s3_server, s3_deployment, deployment
):
    """Another worker sharing the cache prunes a version's local copy as soon as it fetches
    a newer one, while this one still serves it: what a request reads lazily (memories,
    turns) was read at load, so the answers stay whole instead of silently empty."""
    from memory_pipeline.core.common import fs

    key = deployment["keys"]["alice"]
    version = s3_deployment["versions"]["alice"]
    assert _search(s3_server.url, key, {"query": "Kyoto", "k": 1}).status_code == 200
    root = index_root(s3_deployment["prefixes"]["alice"])
    copy = fs.cache_dir(root) / "versions" / version
    assert copy.is_dir()
    shutil.rmtree(copy)
    params = {"limit": 50}
    want = httpx.get(f"{server.url}/v1/memories", params=params, headers=_h(key), timeout=60)
    got = httpx.get(f"{s3_server.url}/v1/memories", params=params, headers=_h(key), timeout=60)
    assert got.status_code == 200 and got.json()["index_version"] == version
    assert got.json()["count"] == want.json()["count"] > 0
    r = _search(s3_server.url, key, {"query": f"locker code word {SECRET['alice']}", "k": 3})
    assert r.status_code == 200 and r.json()["turns"], r.text


def test_an_s3_switch_under_load_never_mixes_two_versions(s3_server, s3_deployment, deployment):
    """The new version holds other texts (Bob's, published under Alice's prefix), so an
    answer labelled with one version but holding the other's texts would show."""
    key, url = deployment["keys"]["alice"], s3_server.url
    prefix = s3_deployment["prefixes"]["alice"]
    before = s3_deployment["versions"]["alice"]
    words = f"locker code word {SECRET['alice']} {SECRET['bob']}"
    stop = threading.Event()
    seen: list[tuple[int, str, str]] = []

    def hammer() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                r = client.post(f"{url}/v1/search", json={"query": words, "k": 5}, headers=_h(key))
                seen.append((r.status_code, r.headers.get("X-Index-Version", ""), r.text))

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 60
        while len(seen) < n and time.monotonic() < deadline:
            time.sleep(0.02)

    bobs = current_version(deployment["root"] / "out" / "owners" / "bob")
    with ThreadPoolExecutor(6) as pool:
        for _ in range(6):
            pool.submit(hammer)
        wait_for(12)
        after = _upload(bobs, prefix)
        wait_for(len(seen) + 24)
        stop.set()
    assert {c for c, _, _ in seen} == {200}
    assert {v for _, v, _ in seen} == {before, after} and seen[-1][1] == after
    for _, version, text in seen:
        mine, other = ("alice", "bob") if version == before else ("bob", "alice")
        assert SECRET[mine] in text and SECRET[other] not in _served(text), version
    s3_deployment["versions"]["alice"] = after


def _children(pid: int) -> list[int]:
    """The worker processes uvicorn spawned under ``pid`` (multiprocessing spawn)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmd:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads worker processes from /proc")
def test_worker_processes_and_a_replica_serve_one_store(
    s3_server, s3_deployment, deployment, tmp_path
):
    """``serve --workers 2`` (two processes, a local cache of their own, as a replica on
    another machine) and the in-test server serve the same bucket; a version published to
    it is served by the next request of every process; a revoked key fails on all."""
    port = Served.free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["MEMORY_PIPELINE_CACHE_DIR"] = str(tmp_path / "replica_cache")
    cmd = [sys.executable, "-m", "memory_pipeline.cli", "--config", str(s3_deployment["config"])]
    cmd += ["serve", "--port", str(port), "--workers", "2", "--no-mcp"]
    cmd += ["--keys", str(deployment["store"].path), "--rate", "10000", "--burst", "10000"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    key = deployment["keys"]["alice"]
    body = {"query": f"locker code word {SECRET['alice']} {SECRET['bob']}", "k": 3}
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "server did not start"
            try:
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert len(_children(proc.pid)) == 2

        def versions(base: str, n: int = 8) -> set[str]:
            got = set()
            for _ in range(n):  # a new connection each: the kernel spreads them
                r = _search(base, key, body)
                assert r.status_code == 200, r.text
                got.add(r.json()["index_version"])
            return got

        current = s3_deployment["versions"]["alice"]
        assert versions(url) == versions(s3_server.url) == {current}
        alices = current_version(deployment["root"] / "out" / "owners" / "alice")
        new = _upload(alices, s3_deployment["prefixes"]["alice"])
        assert versions(url) == versions(s3_server.url) == {new}
        s3_deployment["versions"]["alice"] = new
        record, token = deployment["store"].create("alice", "read")
        assert {_search(url, token, body).status_code for _ in range(6)} == {200}
        KeyStore(deployment["store"].path).revoke(record.key_id)
        assert {_search(url, token, body).status_code for _ in range(6)} == {401}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# -- MCP ------------------------------------------------------------------------------------------
async def _mcp_http(url: str, key: str, secret: str, other: str) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"search", "context", "memories", "dossier", "remember"}
        r = await client.call_tool("search", {"query": f"code word {secret}", "k": 3})
        assert not r.is_error and secret in r.content[0].text
        r = await client.call_tool("context", {"question": f"code word {other}"})
        assert other not in r.content[0].text
        r = await client.call_tool("dossier", {"contact": "Maria"})
        assert not r.is_error and "# Dossier" in r.content[0].text


def test_mcp_over_streamable_http_with_the_keys(server, deployment):
    asyncio.run(_mcp_http(server.url, deployment["keys"]["bob"], SECRET["bob"], SECRET["alice"]))
    r = httpx.post(f"{server.url}/mcp", json={})
    assert r.status_code == 401


def _documented_mcp_configs() -> list[dict]:
    """The MCP client configurations docs/service.md shows (its ```json blocks)."""
    from memory_pipeline_tests.paths import ROOT

    text = (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
    section = text[text.index("## MCP\n") : text.index("## Guarantees")]
    blocks = re.findall(r"^```json\n(.*?)^```\n", section, re.S | re.M)
    servers = []
    for block in blocks:
        data = json.loads(block)
        servers += (data.get("mcpServers") or data.get("servers")).values()
    return servers


def test_the_documented_mcp_configurations_answer(server, deployment):
    """Each configuration of docs/service.md, with the test deployment's paths and key,
    started by the MCP SDK's own clients: stdio (the command, its args, the key in the
    environment) and streamable HTTP (the URL and its header)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    configs = _documented_mcp_configs()
    assert len(configs) >= 3
    key = deployment["keys"]["alice"]
    stdio = {json.dumps([c["command"], c["args"]]) for c in configs if "command" in c}
    assert len(stdio) == 1  # every desktop client starts the same command
    (command, args), = [json.loads(x) for x in stdio]
    assert command.endswith("/memory-pipeline") and args[-1] == "mcp"
    args = [str(deployment["config"]) if a.endswith(".toml") else a for a in args]
    for c in configs:
        if "command" in c:
            assert set(c["env"]) == {"MEMORY_PIPELINE_KEY"}  # the key, never in args
    params = StdioServerParameters(
        command=sys.executable,  # the documented command, as this interpreter runs it
        args=["-m", "memory_pipeline.cli", *args],
        env={"PYTHONPATH": os.pathsep.join(sys.path), "MEMORY_PIPELINE_KEY": key},
    )
    (http,) = [c for c in configs if "url" in c]
    assert http["url"].endswith("/mcp") and http["headers"]["Authorization"].startswith("Bearer")

    async def go() -> None:
        async with Client(params) as client:
            r = await client.call_tool("search", {"query": f"code word {SECRET['alice']}"})
            assert SECRET["alice"] in r.content[0].text
            r = await client.call_tool(
                "search", {"query": SECRET["bob"], "k": 50, "format": "json"}
            )
            assert SECRET["bob"] not in _served(r.content[0].text)
        client_http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        url = http["url"].replace("http://127.0.0.1:8700", server.url)
        async with client_http, Client(streamable_http_client(url, http_client=client_http)) as c:
            r = await c.call_tool("search", {"query": f"code word {SECRET['alice']}"})
            assert SECRET["alice"] in r.content[0].text

    asyncio.run(asyncio.wait_for(go(), 120))


# -- forget (last: it changes the deployment) -------------------------------------------------
def test_forget_through_the_api(server, deployment):
    url, admin = server.url, deployment["keys"]["alice_admin"]
    reader = deployment["keys"]["alice"]
    assert _search(url, reader, {"query": "Kyoto", "k": 3, "contact": "Ken"}).status_code == 200
    r = httpx.post(f"{url}/v1/forget", json={"contact": "Ken"}, headers=_h(admin), timeout=60)
    assert r.status_code == 200 and r.json()["dry_run"] is True
    assert _search(url, reader, {"query": "Kyoto", "k": 3, "contact": "Ken"}).status_code == 200
    r = httpx.post(
        f"{url}/v1/forget", json={"contact": "Nobody", "confirm": True}, headers=_h(admin)
    )
    assert r.status_code == 404
    r = httpx.post(
        f"{url}/v1/forget",
        json={"contact": "Ken", "confirm": True},
        headers=_h(admin),
        timeout=600,
    )
    assert r.status_code == 200 and r.json()["forgotten"] and r.json()["rebuilt"], r.text
    # never served again, from the first request after forget returned
    r = _search(url, reader, {"query": "Kyoto", "k": 3, "contact": "Ken"})
    assert r.status_code == 404
    r = _search(url, reader, {"query": "Kyoto trip hotel", "k": 100})
    assert r.status_code == 200 and all(c["contact_id"] != "Ken" for c in r.json()["chunks"])
    assert httpx.get(f"{url}/v1/dossiers/Ken", headers=_h(reader)).status_code == 404
    # bob's Ken is untouched
    r = _search(url, deployment["keys"]["bob"], {"query": "Kyoto", "k": 3, "contact": "Ken"})
    assert r.status_code == 200 and r.json()["chunks"]
