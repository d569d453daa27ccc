"""A run where every record is quarantined completes: every stage, check and the evaluation
handle an empty corpus and say so (0 messages), instead of crashing on an empty table."""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq

from memory_pipeline.core.common import records as R
from memory_pipeline_tests.pipeline_helpers import Runner, build_all, write_config

DAYS = [dt.date(2024, 3, 1), dt.date(2024, 3, 2)]


def test_all_quarantined_run_completes_through_evaluation(tmp_path):
    chat = tmp_path / "json" / "chat"
    chat.mkdir(parents=True)
    (chat / "2024-03-01.json").write_text('{"messages": [ {"time": ', encoding="utf-8")
    config = write_config(
        tmp_path,
        """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-02"
output_dir = "out"

[[sources]]
name = "only_bad"
kind = "line_json"
path = "json"
""",
    )
    runner = Runner(config, tmp_path / "out")
    build_all(runner, DAYS)
    runner.run(["storage_report"], [])
    result = runner.run(["evaluation"], [])
    runner.run(["warehouse"], [])
    [mat] = result.asset_materializations_for_node("evaluation")
    assert (mat.metadata["sessions"].value, mat.metadata["time_queries"].value) == (0, 0)
    t = runner.tables()
    assert t["raw_messages"].num_rows == 0
    assert t["quarantine"].column("reason").to_pylist() == [R.R_MALFORMED_JSON]
    out = runner.cfg.output_dir / "eval" / "tables"
    assert pq.read_table(out / "summary.parquet").num_rows == 0
    assert pq.read_table(out / "per_question.parquet").num_rows == 0
