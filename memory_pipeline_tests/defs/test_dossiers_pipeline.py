"""memories and dossiers through the real assets: backfill == night by night, chain, files.

On real RealPersonaChat dialogues (Japanese, sessions past midnight): the dossier of a date
must be identical whether the range is built as one backfill (a single run folding the days
in order) or night by night the way the schedule runs it (each night rebuilds D-1 and D).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from memory_pipeline.core.memories.dossier import contact_file_name
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, rpc_corpus

OWNER = "DT"
FIRST, LAST = "2022-08-09", "2022-08-15"
DAYS = [dt.date(2022, 8, 9) + dt.timedelta(days=i) for i in range(7)]
STAGES = [INGEST_KEYS, ["sessions"], ["session_enrichment"], ["memories"], ["dossiers"]]
SESSION_ID = re.compile(r"ses_[0-9a-f]{20}")


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory) -> Path:
    return rpc_corpus(shared_data, tmp_path_factory.mktemp("rpc_dossiers"), OWNER, FIRST, LAST)


def _runner(corpus: Path, folder: Path) -> Runner:
    return Runner(corpus / "memory_pipeline.toml", folder / "out")


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))}


@pytest.fixture(scope="module")
def backfill(corpus: Path, tmp_path_factory) -> Runner:
    r = _runner(corpus, tmp_path_factory.mktemp("backfill"))
    for keys in STAGES:
        r.run(keys, DAYS)
    return r


def test_backfill_builds_memories_and_dossiers_for_every_contact(backfill: Runner):
    t = backfill.tables()
    assert t["memories"].num_rows >= 10
    sessions = t["sessions"]
    contacts = set(sessions.column("contact_id").to_pylist())
    assert set(t["dossiers"].column("contact_id").to_pylist()) == contacts
    files = _files(backfill.cfg.dossiers_path)
    assert set(files) == {contact_file_name(c) for c in contacts}
    owner_of = dict(
        zip(
            sessions.column("session_id").to_pylist(),
            sessions.column("contact_id").to_pylist(),
            strict=True,
        )
    )
    for contact in contacts:
        text = files[contact_file_name(contact)]
        assert text.startswith(f"# Dossier: {contact}")
        cited = set(SESSION_ID.findall(text))
        assert cited, contact
        # isolation: a contact's dossier cites only conversations with that contact
        assert {owner_of[s] for s in cited} == {contact}


def test_current_file_is_the_latest_version(backfill: Runner):
    dossiers = backfill.tables()["dossiers"].sort_by([("local_date", "ascending")])
    latest = {}
    for row in dossiers.to_pylist():
        latest[row["contact_id"]] = row["markdown"]
    files = _files(backfill.cfg.dossiers_path)
    for contact, markdown in latest.items():
        assert files[contact_file_name(contact)] == markdown
    assert not list(backfill.cfg.dossiers_path.glob(".*"))  # no temp files left


def test_night_by_night_equals_backfill(backfill: Runner, corpus: Path, tmp_path):
    nightly = _runner(corpus, tmp_path)
    for i in range(len(DAYS)):
        window = DAYS[max(0, i - 1) : i + 1]  # the schedule rebuilds yesterday and today
        for keys in STAGES:
            nightly.run(keys, window)
    got, want = nightly.tables(), backfill.tables()
    for name in ("sessions", "memories", "memory_rejects", "dossiers"):
        assert got[name] == want[name], name
    assert _files(nightly.cfg.dossiers_path) == _files(backfill.cfg.dossiers_path)


def test_one_day_at_a_time_equals_backfill(backfill: Runner, corpus: Path, tmp_path):
    r = _runner(corpus, tmp_path)
    for keys in STAGES[:-1]:
        r.run(keys, DAYS)
    for day in DAYS:
        r.run(["dossiers"], [day])
    assert r.tables()["dossiers"] == backfill.tables()["dossiers"]
    # re-running a day in the middle rewrites it identically (idempotent)
    r.run(["dossiers"], [DAYS[3]])
    assert r.tables()["dossiers"] == backfill.tables()["dossiers"]


def test_a_gap_in_the_chain_is_a_clear_error(corpus: Path, tmp_path):
    r = _runner(corpus, tmp_path)
    for keys in STAGES[:-1]:
        r.run(keys, DAYS)
    result = r.run(["dossiers"], [DAYS[-1]], raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_failure and e.step_failure_data)
    message = failure.step_failure_data.user_failure_data.description
    assert f"materialize dossiers from {DAYS[0]}" in message
    assert not r.store.dates("dossiers")


def test_llm_writer_through_the_asset(backfill: Runner, corpus: Path, tmp_path, monkeypatch):
    """The dossiers asset with the openai writer against the local fake: a garbage answer is
    rejected (rule page kept, rejection in ``method``), valid rewrites are stored and become
    the next day's "previous dossier"; the fold's state is the rules run's either way, and a
    rerun is served from the content cache."""
    from memory_pipeline.defs.providers import provider_resources
    from memory_pipeline_tests.fake_servers import FakeProviderServer, block_external_network

    block_external_network(monkeypatch)
    want = backfill.tables()["dossiers"]
    rows = sorted(want.to_pylist(), key=lambda r: (r["local_date"], r["contact_id"]))
    reworded = [r["markdown"].replace("- Messages:", "- In total, messages:") for r in rows]
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeProviderServer() as server:
        server.script_chat("Sorry, I cannot help with that.", *reworded[1:])
        providers = provider_resources(
            env={
                "MEMORY_PIPELINE_DOSSIER_WRITER": "openai",
                "MEMORY_PIPELINE_LLM_BASE_URL": server.openai_base_url,
            }
        )
        r = Runner(corpus / "memory_pipeline.toml", tmp_path / "out", providers)
        for keys in STAGES:
            r.run(keys, DAYS)
        assert len(server.chat_requests()) == len(rows)
        got = sorted(
            r.tables()["dossiers"].to_pylist(), key=lambda x: (x["local_date"], x["contact_id"])
        )
        assert [g["state"] for g in got] == [w["state"] for w in rows]  # same fold
        assert got[0]["markdown"] == rows[0]["markdown"]
        assert got[0]["method"].startswith("deterministic; rejected openai/")
        assert [g["markdown"] for g in got[1:]] == reworded[1:]
        assert {g["method"] for g in got[1:]} == {"openai/gpt-4o-mini"}
        # a contact's second version was written from its first (LLM) page
        second = next(
            i for i, g in enumerate(got) if g["contact_id"] in {x["contact_id"] for x in got[1:i]}
        )
        previous = server.chat_requests()[second].body["messages"][-1]["content"]
        assert "- In total, messages:" in previous.split("Today's rule-built dossier")[0]
        # rerunning the range asks the model nothing new
        before = r.tables()["dossiers"]
        r.run(["dossiers"], DAYS)
        assert len(server.chat_requests()) == len(rows)
        assert r.tables()["dossiers"] == before
