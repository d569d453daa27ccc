"""Bad input through the real assets: the run goes on, every record is accounted for,
the quarantine says where and why, and no message text reaches the logs."""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter

import dagster as dg
import pyarrow.compute as pc
import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline_tests.paths import FIXTURES
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, write_config

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(10)]


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    shutil.copytree(FIXTURES / "line_json_bad" / "records", root / "json")
    (root / "txt").mkdir()
    for name in ("bad_lines.txt", "bad_utf8.txt", "ja_variants.txt", "en_variants.txt"):
        shutil.copy(FIXTURES / "line_txt" / name, root / "txt" / name)
    write_config(
        root,
        """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-10"
output_dir = "out"

[[sources]]
name = "bad_json"
kind = "line_json"
path = "json"

[[sources]]
name = "bad_txt"
kind = "line_txt"
path = "txt"
""",
    )
    runner = Runner(root / "memory_pipeline.toml", root / "out")
    instance = dg.DagsterInstance.ephemeral()
    logs = []
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"]):
        run_id = runner.run(keys, DAYS, instance=instance).run_id
        logs += [entry.message for entry in instance.all_logs(run_id)]
    return runner, "\n".join(logs)


def test_every_bad_kind_lands_in_quarantine_and_the_run_goes_on(bad_run):
    runner, _ = bad_run
    t = runner.tables()
    reasons = Counter(t["quarantine"].column("reason").to_pylist())
    expected = {
        R.R_MALFORMED_JSON,
        R.R_MISSING_TIMESTAMP,
        R.R_EMPTY_TEXT,
        R.R_DUPLICATE,
        R.R_ENCODING,
        R.R_TOO_LARGE,
        R.R_UNKNOWN_TYPE,
        R.R_UNPARSEABLE_LINE,
    }
    assert expected <= set(reasons), reasons
    assert t["raw_messages"].num_rows > 0 and t["chunks"].num_rows > 0
    q = t["quarantine"]
    assert q.column("source_file").null_count == 0
    assert pc.all(pc.invert(pc.equal(q.column("source_file"), ""))).as_py()
    located = pc.or_(pc.is_valid(q.column("source_line")), pc.is_valid(q.column("record_ref")))
    assert pc.all(located).as_py()


def test_counts_reconcile_per_partition(bad_run):
    runner, _ = bad_run
    t = runner.tables()
    audit = t["ingest_audit"]
    read = pc.sum(audit.column("records_read")).as_py()
    assert read == t["raw_messages"].num_rows + t["quarantine"].num_rows
    for row in audit.to_pylist():
        assert row["records_read"] == row["ingested"] + row["quarantined"]


def test_no_message_text_in_logs(bad_run):
    runner, logged = bad_run
    texts = [
        s
        for s in runner.store.read("raw_messages").column("text").to_pylist()
        + runner.store.read("quarantine").column("raw").to_pylist()
        if len(s) >= 8
    ]
    assert texts
    assert "quarantined" in logged  # the logs do talk about the run, in counts
    for text in texts:
        for line in text.splitlines():
            if len(line) >= 12 and not line.startswith("["):
                assert line not in logged
