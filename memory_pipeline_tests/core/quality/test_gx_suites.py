"""Great Expectations suites: pass on tables the real pipeline wrote, fail on each broken rule.

The good tables come from one materialization of the bundled sample (plus the bad-record
fixture, so quarantine is not empty, and chunk_size 4 / stride 3, so sessions have several
overlapping chunks) with the gx checks in the assets list. Each broken table changes one
thing and must fail the expected rule of the expected frame.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.quality import gx_suites as G
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline.defs.gx_checks import GX_TABLES, build_gx_checks, gx_check_name
from memory_pipeline.defs.jobs import RANGE_END, RANGE_START
from memory_pipeline.defs.partitions import daily_partitions
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, QUIET, Runner, write_config

REPO = ROOT
DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
GAP, SIZE, STRIDE = 180, 4, 3
PARAMS = {"gap_minutes": GAP, "chunk_size": SIZE, "chunk_stride": STRIDE}
FAILURE_KEYS = {
    "expectation",
    "frame",
    "column",
    "rule",
    "element_count",
    "unexpected_count",
    "missing_count",
    "observed",
    "raised_exception",
    "missing_partitions",
}


def write_sample_config(folder: Path) -> Path:
    return write_config(
        folder,
        f"""
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "{DAYS[0]}"
end_date = "{DAYS[-1]}"
output_dir = "out"
session_gap_minutes = {GAP}
chunk_size = {SIZE}
chunk_stride = {STRIDE}

[[sources]]
name = "sample_line_json"
kind = "line_json"
path = "{REPO / "data/sample/line_json"}"

[[sources]]
name = "sample_line_txt"
kind = "line_txt"
path = "{REPO / "data/sample/line_txt"}"

[[sources]]
name = "bad_records"
kind = "line_json"
path = "{REPO / "memory_pipeline_tests/fixtures/line_json_bad/records"}"
""",
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Runner, list[dg.ExecuteInProcessResult]]:
    """The sample materialized stage by stage (one range run each) with the gx checks."""
    root = tmp_path_factory.mktemp("gx")
    runner = Runner(write_sample_config(root), root / "out")
    runner.assets = [*runner.assets, *build_gx_checks(daily_partitions(runner.cfg))]
    results = [runner.run(keys, DAYS) for keys in (INGEST_KEYS, ["sessions"], ["chunks"])]
    return runner, results


@pytest.fixture(scope="module")
def store(built) -> TableStore:
    return built[0].store


def rules(outcome: G.GxOutcome) -> set[tuple[str, str, str]]:
    """(frame, rule, column) of every failed expectation."""
    return {(f["frame"], f.get("rule", ""), f["column"]) for f in outcome.failed}


def validate(name: str, data, store: TableStore, days=DAYS, **extra) -> G.GxOutcome:
    """Validate ``data`` as table ``name`` with the other inputs read from the good store."""
    inputs = {
        "ingest_audit": lambda: {
            "messages": store.read("raw_messages", days),
            "quarantine": store.read("quarantine", days),
        },
        "sessions": lambda: {
            "messages": store.read("raw_messages", G.session_window(G.as_arrow(data), days))
        },
        "chunks": lambda: {"sessions": store.read("sessions", days)},
    }
    kwargs = {**inputs.get(name, dict)(), **extra}
    return G.validate_table(name, data, partition_date=days, **{**PARAMS, **kwargs})


def set_value(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.field(i), pa.array(values, table.field(i).type))


# --------------------------------------------------------------------------------------------
# Dagster: the checks run with the assets, per partition
# --------------------------------------------------------------------------------------------


def test_materialize_with_gx_checks_passes(built):
    runner, results = built
    evaluations = {
        e.check_name: e
        for result in results
        for e in result.get_asset_check_evaluations()
        if e.check_name.startswith("gx_")
    }
    assert set(evaluations) == {gx_check_name(t) for t in G.TABLE_NAMES}
    for name, e in evaluations.items():
        assert e.passed, (name, e.metadata)
        # computed once over the run's range, so named range_* on every partition
        assert e.metadata["range_evaluated_expectations"].value >= 9
        assert e.metadata["range_partitions"].value == len(DAYS)
    # a single-partition run records the evaluation against that partition
    one = runner.run(["sessions"], [DAYS[3]])
    (gx,) = [e for e in one.get_asset_check_evaluations() if e.check_name.startswith("gx_")]
    assert gx.passed and gx.partition == DAYS[3].isoformat()


def test_gx_check_fails_and_names_the_partition(built, tmp_path):
    """A chunk removed from one stored partition: the check fails, naming that partition."""
    good, _ = built
    shutil.copytree(good.store.root, tmp_path / "out")
    runner = Runner(good.resource.config_file, tmp_path / "out")
    day, chunks = next((d, t) for d in DAYS if (t := runner.store.read("chunks", [d])).num_rows > 4)
    runner.store.write("chunks", chunks.slice(0, chunks.num_rows - 1), day)
    checks = build_gx_checks(daily_partitions(runner.cfg))
    chunk_check = dict(zip(GX_TABLES, checks, strict=True))["chunks"]
    # checks alone: materialize(partition_key=) rejects a check-only selection in 1.13.27,
    # the partition tags work
    result = dg.materialize(
        [*runner.assets, *checks],
        selection=dg.AssetSelection.checks(chunk_check),
        tags={RANGE_START: DAYS[0].isoformat(), RANGE_END: DAYS[-1].isoformat()},
        resources={"pipeline": runner.resource, **runner.providers},
        run_config=QUIET,
    )
    # one evaluation per partition of the range: only the damaged day fails
    evaluations = result.get_asset_check_evaluations()
    assert sorted(e.partition for e in evaluations) == [d.isoformat() for d in DAYS]
    (e,) = [e for e in evaluations if not e.passed]
    assert e.partition == day.isoformat()
    assert e.metadata["failed_partitions"].value == [day.isoformat()]
    failed = e.metadata["range_failed"].value
    assert {f["rule"] for f in failed} >= {"coverage"}


# --------------------------------------------------------------------------------------------
# Every suite passes on the pipeline's own tables
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", G.TABLE_NAMES)
def test_suite_passes_on_pipeline_tables(store, table):
    outcome = G.validate_stored(store, table, DAYS, **PARAMS)
    assert outcome.success, outcome.failed
    assert outcome.statistics["unsuccessful_expectations"] == 0
    assert sum(outcome.rows.values()) > 0


def test_single_partition_and_missing_partition(store):
    assert G.validate_stored(store, "sessions", [DAYS[5]], **PARAMS).success
    missing = G.validate_stored(store, "raw_messages", [DAYS[-1] + dt.timedelta(days=3)], **PARAMS)
    assert not missing.success
    assert missing.failed[0]["expectation"] == "partition_file_exists"


def test_validate_range_names_only_the_failing_partitions(store, tmp_path):
    """A range that passes names nothing; one broken partition is the only one named."""
    outcome, failed = G.validate_range(store, "chunks", DAYS, **PARAMS)
    assert outcome.success and failed == []
    broken = TableStore(tmp_path / "out")
    shutil.copytree(store.parquet_root, broken.parquet_root)
    day, chunks = next((d, t) for d in DAYS if (t := broken.read("chunks", [d])).num_rows > 4)
    broken.write("chunks", chunks.slice(0, chunks.num_rows - 1), day)
    outcome, failed = G.validate_range(broken, "chunks", DAYS, **PARAMS)
    assert not outcome.success
    assert failed == [day.isoformat()]
    # one partition: the range outcome already says which one, no second pass
    outcome, failed = G.validate_range(broken, "chunks", [day], **PARAMS)
    assert not outcome.success and failed == []


# --------------------------------------------------------------------------------------------
# raw_messages / quarantine
# --------------------------------------------------------------------------------------------


def test_raw_messages_broken(store):
    good = store.read("raw_messages", DAYS)
    dup = set_value(good, "message_id", 1, good.column("message_id")[0].as_py())
    assert ("raw_messages", "id_unique", "message_id") in rules(
        validate("raw_messages", dup, store)
    )
    for column in ("sender", "source_ref", "ts"):
        broken = set_value(good, column, 2, None)
        assert rules(validate("raw_messages", broken, store)) == {
            ("raw_messages", "not_null", column)
        }
    moved = set_value(good, "local_date", 3, DAYS[-1] + dt.timedelta(days=1))
    assert ("raw_messages", "in_partition", "local_date") in rules(
        validate("raw_messages", moved, store)
    )
    odd = set_value(good, "type", 4, "hologram")
    assert rules(validate("raw_messages", odd, store)) == {("raw_messages", "known_type", "type")}


def test_failures_are_log_safe(store):
    good = store.read("raw_messages", DAYS)
    secret = good.column("message_id")[0].as_py()
    broken = set_value(set_value(good, "message_id", 1, secret), "type", 2, "secret-type")
    outcome = validate("raw_messages", broken, store)
    assert not outcome.success
    assert all(set(f) <= FAILURE_KEYS for f in outcome.failed)
    text = repr(outcome.failed)
    assert secret not in text and "secret-type" not in text
    assert not any(t and t in text for t in good.column("text").to_pylist()[:50] if len(t) > 3)


def test_quarantine_broken(store):
    good = store.read("quarantine", DAYS)
    assert good.num_rows > 1
    dup = set_value(good, "quarantine_id", 1, good.column("quarantine_id")[0].as_py())
    assert ("quarantine", "id_unique", "quarantine_id") in rules(validate("quarantine", dup, store))
    assert rules(validate("quarantine", set_value(good, "record_ref", 0, None), store)) == {
        ("quarantine", "not_null", "record_ref")
    }
    assert rules(validate("quarantine", set_value(good, "reason", 0, "bad_vibes"), store)) == {
        ("quarantine", "known_reason", "reason")
    }
    moved = set_value(good, "partition_date", 0, DAYS[0] - dt.timedelta(days=1))
    assert rules(validate("quarantine", moved, store)) == {
        ("quarantine", "in_partition", "partition_date")
    }


# --------------------------------------------------------------------------------------------
# ingest_audit: conservation
# --------------------------------------------------------------------------------------------


def test_audit_conservation_off_by_one(store):
    good = store.read("ingest_audit", DAYS)
    read_more = set_value(good, "records_read", 0, good.column("records_read")[0].as_py() + 1)
    assert rules(validate("ingest_audit", read_more, store)) == {
        ("ingest_audit", "conservation", "records_read,ingested_plus_quarantined")
    }
    # the row still adds up, but claims one message more than raw_messages holds
    row = 0
    claimed = set_value(good, "ingested", row, good.column("ingested")[row].as_py() + 1)
    claimed = set_value(claimed, "records_read", row, good.column("records_read")[row].as_py() + 1)
    assert rules(validate("ingest_audit", claimed, store)) == {
        ("ingest_audit_counts", "conservation", "audit_ingested,stored_messages")
    }


def test_audit_counts_see_a_lost_quarantine_row(store):
    good = store.read("ingest_audit", DAYS)
    quarantine = store.read("quarantine", DAYS)
    outcome = validate(
        "ingest_audit", good, store, quarantine=quarantine.slice(1, quarantine.num_rows - 1)
    )
    assert rules(outcome) == {
        ("ingest_audit_counts", "conservation", "audit_quarantined,stored_quarantined")
    }
    frame = G.audit_counts_frame(good, store.read("raw_messages", DAYS), quarantine)
    assert (frame["audit_ingested"] == frame["stored_messages"]).all()


# --------------------------------------------------------------------------------------------
# sessions: gaps
# --------------------------------------------------------------------------------------------


def with_gap_minutes(sessions: pa.Table, minutes: int) -> pa.Table:
    i = sessions.schema.get_field_index("gap_minutes")
    column = pa.array([minutes] * sessions.num_rows, pa.int32())
    return sessions.set_column(i, sessions.field(i), column)


def test_sessions_broken_ids_dates_order(store):
    good = store.read("sessions", DAYS)
    dup = set_value(good, "session_id", 1, good.column("session_id")[0].as_py())
    assert ("sessions", "id_unique", "session_id") in rules(validate("sessions", dup, store))
    moved = set_value(good, "local_date", 0, DAYS[-1] + dt.timedelta(days=2))
    assert ("sessions", "in_partition", "local_date") in rules(validate("sessions", moved, store))
    swapped = set_value(good, "end_ts", 0, good.column("start_ts")[0].as_py() - dt.timedelta(1))
    assert ("sessions", "ordered", "end_ts,start_ts") in rules(validate("sessions", swapped, store))
    empty = set_value(good, "message_count", 0, 0)
    assert ("sessions", "size", "message_count") in rules(validate("sessions", empty, store))


def test_sessions_with_a_too_long_gap(store):
    """Sessions cut with a 24 h gap but labelled 180 min: a gap inside exceeds the limit."""
    window = store.read("raw_messages", [DAYS[0] - dt.timedelta(days=1), *DAYS])
    merged = sessionize(window, 1440)
    merged = merged.filter(pc.is_in(merged.column("local_date"), pa.array(DAYS, pa.date32())))
    outcome = validate("sessions", with_gap_minutes(merged, GAP), store)
    assert ("sessions", "gap_inside", "gap_limit_seconds,max_gap_seconds") in rules(outcome)
    # also caught on the stored column alone
    good = store.read("sessions", DAYS)
    long = set_value(good, "max_gap_seconds", 0, GAP * 60 + 1)
    assert rules(validate("sessions", long, store)) == {
        ("sessions", "gap_inside", "gap_limit_seconds,max_gap_seconds")
    }


def test_sessions_cut_too_eagerly(store):
    """Sessions cut at 20 min but labelled 180: consecutive sessions are too close."""
    window = store.read("raw_messages", [DAYS[0] - dt.timedelta(days=1), *DAYS])
    split = sessionize(window, 20)
    split = split.filter(pc.is_in(split.column("local_date"), pa.array(DAYS, pa.date32())))
    found = rules(validate("sessions", with_gap_minutes(split, GAP), store))
    assert ("sessions", "gap_between", "gap_before_seconds,gap_limit_seconds") in found
    assert ("sessions", "gap_between", "gap_after_seconds,gap_limit_seconds") in found


def test_session_gap_columns_are_derived_from_neighbours(store):
    sessions = store.read("sessions", DAYS)
    frame = G.session_frame(sessions, store.read("raw_messages", G.session_window(sessions, DAYS)))
    limit = GAP * 60
    assert frame["messages_contiguous"].all()
    assert (frame["gap_before_seconds"].dropna() > limit).all()
    assert frame["gap_before_seconds"].notna().any()  # some sessions do have a predecessor


# --------------------------------------------------------------------------------------------
# chunks: size, overlap, coverage
# --------------------------------------------------------------------------------------------


def longest_session_chunks(chunks: pa.Table) -> tuple[str, list[int]]:
    """The session with the most chunks and its chunks' row numbers, in chunk order."""
    sids = chunks.column("session_id").to_pylist()
    sid = max(set(sids), key=sids.count)
    rows = [i for i, s in enumerate(sids) if s == sid]
    order = chunks.column("chunk_index").to_pylist()
    return sid, sorted(rows, key=lambda i: order[i])


def test_chunks_broken_ids_and_sizes(store):
    good = store.read("chunks", DAYS)
    dup = set_value(good, "chunk_id", 1, good.column("chunk_id")[0].as_py())
    assert ("chunks", "id_unique", "chunk_id") in rules(validate("chunks", dup, store))
    big = set_value(good, "message_count", 0, SIZE + 1)
    assert ("chunks", "size", "message_count") in rules(validate("chunks", big, store))


def test_chunk_table_missing_a_chunk(store):
    good = store.read("chunks", DAYS)
    _, rows = longest_session_chunks(good)
    assert len(rows) >= 3, "the sample needs a session with 3+ chunks"
    keep = pa.array([i for i in range(good.num_rows) if i != rows[1]])
    found = rules(validate("chunks", good.take(keep), store))
    assert ("chunk_coverage", "coverage", "chunk_count") in found
    assert ("chunks", "overlap", "overlap_with_previous") in found
    assert ("chunks", "overlap", "index_step") in found
    keep_last = pa.array([i for i in range(good.num_rows) if i != rows[-1]])
    assert rules(validate("chunks", good.take(keep_last), store)) == {
        ("chunk_coverage", "coverage", "chunk_count")
    }


def test_chunks_with_the_wrong_overlap(store):
    """Chunks written with stride 3 but validated against stride 2: overlap 1, not 2."""
    good = store.read("chunks", DAYS)
    outcome = validate("chunks", good, store, chunk_stride=2)
    assert rules(outcome) == {("chunks", "overlap", "overlap_with_previous")}
