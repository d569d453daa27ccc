"""Re-exports through the real assets: three overlapping exports of one chat, one dossier.

The core rule is tested in ``core/ingest/test_reexports.py``; here the tables the assets write
and the dossier's counts must see each message once.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline_tests.paths import FIXTURES
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, write_config

DAYS = [dt.date(2024, 3, 5) + dt.timedelta(days=i) for i in range(4)]
STAGES = [INGEST_KEYS, ["sessions"], ["session_enrichment"], ["memories"], ["dossiers"]]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Runner:
    root = tmp_path_factory.mktemp("reexports")
    write_config(
        root,
        f"""
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-05"
end_date = "2024-03-08"
output_dir = "out"

[[sources]]
name = "maria_exports"
kind = "line_txt"
path = "{(FIXTURES / "line_txt_reexports").as_posix()}"
""",
    )
    runner = Runner(root / "memory_pipeline.toml", root / "out")
    for keys in STAGES:
        runner.run(keys, DAYS)
    return runner


def test_each_message_once_and_the_copies_accounted(built: Runner):
    t = built.tables()
    msgs = t["raw_messages"]
    assert msgs.num_rows == 10
    assert set(msgs.column("conversation_id").to_pylist()) == {"maria"}
    assert Counter(t["quarantine"].column("reason").to_pylist()) == {R.R_DUPLICATE_EXPORT: 11}
    audit = t["ingest_audit"]
    assert pc.sum(audit.column("records_read")).as_py() == 21
    for row in audit.to_pylist():
        assert row["records_read"] == row["ingested"] + row["quarantined"]


def test_dossier_counts_each_message_once(built: Runner):
    dossiers = built.tables()["dossiers"].sort_by([("local_date", "ascending")]).to_pylist()
    assert {d["contact_id"] for d in dossiers} == {"Maria"}
    latest = dossiers[-1]
    assert latest["messages_total"] == 10
    assert "- Messages: 10 over" in latest["markdown"]
    files = sorted(p.name for p in Path(built.cfg.dossiers_path).glob("*.md"))
    assert len(files) == 1
