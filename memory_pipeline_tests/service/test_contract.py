"""The contract: schemathesis fuzzes the running server against its own ``/openapi.json``
with every check (undocumented statuses, response schemas, valid data refused, invalid
data accepted, headers, auth), a fixed seed and example count, and must find nothing.

Reads go to Bob's memory with his read key; the mutating routes (forget, the posts of
messages) to the scratch owner Carol with her admin key, so a generated ``confirm: true``
or an accepted message never touches another test's data. The server refreshes nothing
after a post (``refresh=False``): the fuzzer checks the API, not the pipeline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memory_pipeline.service.app import ServiceSettings
from memory_pipeline.service.operations import MemoryService
from memory_pipeline_tests.service.conftest import Served, h, serve_app

SEED = 20261207
EXAMPLES = 25  # per operation and phase; the whole run stays well under a minute
ST = shutil.which("st") or str(Path(sys.executable).with_name("st"))


@pytest.fixture(scope="module")
def contract_server(deployment: dict, service: MemoryService) -> Iterator[Served]:
    os.environ.setdefault("DAGSTER_HOME", str(deployment["root"] / "dagster"))
    settings = ServiceSettings(
        warm=False, rate=10_000, burst=10_000, mcp=False, timeout=60, refresh=False
    )
    served = serve_app(service, deployment["store"], settings)
    yield served
    served.stop()


# a body over the size limit is refused before it is read (413): a rejection too.
# No links inferred from the responses' fields: a post of messages is a batch whose 202
# lists each message's outcome (a refused one is stored nowhere, so its id rightly answers
# 404), not the creation of one resource the stateful phase could look up.
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422",
  "428", "429", "5xx"]

[phases.stateful.inference]
algorithms = ["location-headers"]
"""


def _fuzz(url: str, key: str, config: Path, *selection: str) -> subprocess.CompletedProcess:
    cmd = [ST, "--config-file", str(config), "run", f"{url}/openapi.json"]
    cmd += ["-H", f"Authorization: Bearer {key}"]
    cmd += ["--checks", "all", "--max-examples", str(EXAMPLES), "--seed", str(SEED)]
    cmd += ["--no-color", "--request-timeout", "60", *selection]
    env = dict(os.environ, SCHEMATHESIS_HOOKS="", NO_COLOR="1")
    # in the config's folder: schemathesis keeps its cache beside where it runs
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=env, cwd=config.parent
    )


@pytest.mark.skipif(not Path(ST).exists(), reason="schemathesis (the dev extra) not installed")
def test_schemathesis_finds_no_failure(contract_server, deployment, tmp_path):
    url, keys = contract_server.url, deployment["keys"]
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG, encoding="utf-8")
    writes = "^/v1/(forget|messages)"
    reads = _fuzz(url, keys["bob"], config, "--exclude-path-regex", writes)
    assert reads.returncode == 0, reads.stdout[-6000:] + reads.stderr[-2000:]
    assert "Selected: 5/8" in reads.stdout  # health, search, context, memories, dossier
    changes = _fuzz(url, keys["carol_admin"], config, "--include-path-regex", writes)
    assert changes.returncode == 0, changes.stdout[-6000:] + changes.stderr[-2000:]
    assert "Selected: 3/8" in changes.stdout  # forget, the post and the status of messages


def test_every_status_is_documented_with_one_error_body(contract_server):
    spec = httpx.get(f"{contract_server.url}/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            ok = "202" if (path, method) == ("/v1/messages", "post") else "200"
            assert {ok, "401", "403", "413", "422", "429", "503", "504"} <= codes, (path, method)
            for code, answer in op["responses"].items():
                ref = answer["content"]["application/json"]["schema"]
                if code == ok:
                    assert ref["$ref"].endswith("Response"), (path, code)
                else:
                    assert ref == {"$ref": "#/components/schemas/Error"}, (path, code)
    assert "423" in spec["paths"]["/v1/forget"]["post"]["responses"]
    assert "404" in spec["paths"]["/v1/messages/{client_id}"]["get"]["responses"]


def test_a_422_lists_the_fields_without_the_values(contract_server, deployment):
    r = httpx.post(
        f"{contract_server.url}/v1/search",
        json={"query": "secret words here", "k": 0, "owner": "alice"},
        headers=h(deployment["keys"]["bob"]),
    )
    assert r.status_code == 422
    body = r.json()
    assert isinstance(body["detail"], str) and "secret words" not in r.text
    assert {tuple(e["loc"]) for e in body["errors"]} == {("body", "k"), ("body", "owner")}


# -- one contract for both doors -------------------------------------------------------------------
def _tools(service: MemoryService, owner: str | None = None):
    import asyncio

    from memory_pipeline.service.mcp_server import build_mcp

    mcp = build_mcp(service, owner)
    return mcp, {t.name: t for t in asyncio.run(mcp.list_tools())}


def test_mcp_tools_take_the_http_parameters_bounds_and_defaults(service):
    from memory_pipeline.service.models import ContextRequest, SearchRequest

    _, tools = _tools(service)
    for tool, model, renamed in (
        ("search", SearchRequest, {}),
        ("context", ContextRequest, {"query": "question"}),
    ):
        http = model.model_json_schema()["properties"]
        mcp = tools[tool].input_schema["properties"]
        for name, spec in http.items():
            mine = mcp[renamed.get(name, name)]
            assert mine.get("default") == spec.get("default"), (tool, name)
            for bound in ("maximum", "minimum", "maxLength", "minLength"):
                flat = [spec, *spec.get("anyOf", [])]
                want = next((s[bound] for s in flat if bound in s), None)
                got = next((s[bound] for s in [mine, *mine.get("anyOf", [])] if bound in s), None)
                assert got == want, (tool, name, bound)
        assert mcp["format"]["default"] == "text"


def test_mcp_search_is_compact_text_with_date_speaker_and_citation(service, deployment):
    import asyncio

    from memory_pipeline.service.mcp_server import compact_search

    mcp, _ = _tools(service, owner="bob")
    out = asyncio.run(mcp.call_tool("search", {"query": "Kyoto trip hotel", "k": 5}))
    text = out.content[0].text
    assert not out.is_error and text.startswith("[1] 2024-03-0")
    assert "Maria:" in text or "Bob:" in text  # the speaker of each line
    assert "(conversation " in text and "[" in text.splitlines()[1]  # its citation
    full = asyncio.run(
        mcp.call_tool("search", {"query": "Kyoto trip hotel", "k": 5, "format": "json"})
    )
    assert len(text) < len(full.content[0].text) / 3
    # however long the hits' texts: a bounded size (~4 characters a token)
    hit = {
        "rank": 1, "start": "2024-03-01T10:00", "end": "2024-03-02T10:00",
        "contact_id": "c" * 200, "conversation_id": "v" * 200, "session_id": "s" * 80,
        "highlights": [
            {"local_ts": "2024-03-01T10:00", "sender": "x" * 200, "text": "word " * 5000,
             "source_ref": "r" * 120}
        ] * 20,
    }  # fmt: skip
    text = compact_search({"chunks": [hit] * 5, "index_version": "v"})
    assert len(text) / 4 <= 2000, len(text)


# -- the typed client ----------------------------------------------------------------------------
def test_the_typed_client_returns_the_api_models(contract_server, deployment):
    from memory_pipeline.client import MemoryClient, SearchResponse, ServiceError
    from memory_pipeline_tests.defs.test_owners_pipeline import SECRET

    with MemoryClient(contract_server.url, deployment["keys"]["bob"]) as memory:
        hits = memory.search(f"locker code word {SECRET['bob']}", k=3)
        assert isinstance(hits, SearchResponse) and hits.chunks
        assert any(SECRET["bob"] in (h.text or "") for c in hits.chunks for h in c.highlights)
        assert memory.health().index_version == hits.index_version
        assert memory.context("When is the Kyoto trip?", budget=2000).utf16 <= 2000
        assert memory.memories(limit=3).count <= 3
        assert memory.dossier("Maria").markdown.startswith("# Dossier")
        with pytest.raises(ServiceError) as err:
            memory.dossier("Nobody")
        assert err.value.status == 404
        with pytest.raises(ServiceError) as err:
            memory.search("x", k=0)
        assert err.value.status == 422 and err.value.errors[0]["loc"] == ["body", "k"]
        with pytest.raises(ServiceError) as err:
            memory.forget("Maria")
        assert err.value.status == 403
