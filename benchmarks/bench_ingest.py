"""Ingest benchmark: all of RealPersonaChat through a DuckDB SQL peer, the core functions and
Dagster, side by side in one run.

Usage (from the repository root)::

    /work/venv/bin/python benchmarks/bench_ingest.py              # full corpus, one round
    /work/venv/bin/python benchmarks/bench_ingest.py --limit 500  # quick run: 500 dialogues
    /work/venv/bin/python benchmarks/bench_ingest.py --repeat 3   # best of 3 rounds
    /work/venv/bin/python benchmarks/bench_ingest.py --profile    # cProfile of the core path
    /work/venv/bin/python benchmarks/bench_ingest.py --instance postgres --event-batch-sizes 0,100
        # Dagster on a fresh PostgreSQL database (127.0.0.1:5432, trust), once per
        # DAGSTER_EVENT_BATCH_SIZE, side by side in each round

Every dialogue is read (the source has no owner: benchmark mode), timezone Asia/Tokyo, daily
partitions 2022-07-29..2022-11-05. Each round runs three subprocesses (sql, core, dagster), so
their peak RSS figures are separate:

- ``sql``: the peer. The same job as plain DuckDB SQL on 2 threads (``read_json`` + ``unnest``,
  ``try_cast`` for the timestamps, a ``row_number()`` window for the duplicated lines, md5
  ids, a ``lag()`` window for the 180-minute gap, ``string_agg`` / ``list`` per 42/36 chunk
  window, Parquet out for messages, quarantine, sessions and chunks).
- ``core``: no Dagster. The columnar reader (read: ``stage.read_source_tables``),
  ``columnar.ingest_tables`` + ``stage.split_ingest`` (ingest: validate/dedupe/ids, then the
  messages/quarantine/audit tables split per date), ``core.sessionize.sessionize`` and
  ``core.chunking.chunk_sessions`` over the whole corpus in memory. With ``--record-path`` the
  row-based path (``stage.read_all``: one object per utterance) is timed too and its tables
  compared with the columnar ones. Then the store-based path the assets use: the per-date
  tables written to a temporary ``TableStore``, ``stages.build_sessions`` and
  ``stages.build_chunks`` over all dates (each + its writes).
- ``dagster``: ``dagster.materialize`` of the real assets from ``defs.build.build_assets``
  (ingest multi-asset, then sessions, then chunks), each as one single-run backfill over the
  whole range (range tags), ephemeral instance, console logger at ERROR, into a temporary
  output folder. The asset checks run as part of each materialization, as in production.
  ``--instance postgres``: the instance of deploy/postgres/dagster.yaml on a database created
  for the child and dropped after it (``DAGSTER_PG_*``, default 127.0.0.1:5432, user postgres,
  trust auth). ``--event-batch-sizes 0,100`` runs the Dagster child once per value of
  ``DAGSTER_EVENT_BATCH_SIZE`` (0: Dagster's default, one write per event; only the Postgres
  event log writes a batch in one statement, and only for materializations/observations). The
  first value is the ``dagster`` row of the report; every variant's run events are counted per
  type and its materialized partitions listed, outside the timed region, so a variant that
  loses events shows. The Postgres server's own CPU is in another process: not in the cpu s.

Core and Dagster must give the same messages, quarantine, sessions and chunks (counts and a
digest of the sorted ids); the SQL peer's ids are md5s, so it is compared by counts, by the
session boundaries (conversation, first local time, message count) and by the chunks' rendered
text; on the full corpus the quarantine must hold the 352 ``NaT`` utterances (plus
60 ``duplicate``: two dialogue lines appear twice in the corpus). The figures go to
benchmarks/results/ingest.json (git-ignored).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import CPU, peak_rss_mib, rate, timed

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "realpersonachat"
)
DEFAULT_JSON = REPO / "benchmarks" / "results" / "ingest.json"

SOURCE = "realpersonachat"
TIMEZONE = "Asia/Tokyo"
START = dt.date(2022, 7, 29)
END = dt.date(2022, 11, 5)
CORPUS_UTTERANCES = 408_619
CORPUS_NAT = 352
NAT_REASON = "missing_timestamp"

TARGET_CORE_MSG_S = 100_000
TARGET_SQL_RATIO = 1.5  # core wall / DuckDB SQL peer wall
TARGET_DAGSTER_RATIO = 1.5
TARGET_RSS_MIB = 2048

DAGSTER_STAGES = ("ingest", "sessions", "chunks")  # stages of defs/runner.py's table
QUIET_LEVEL = "ERROR"


# --------------------------------------------------------------------------- helpers


def add_up(into: dict[str, float], name: str, parts: list[str]) -> None:
    for suffix in ("", CPU):
        into[name + suffix] = sum(into[p + suffix] for p in parts)


def days_of_range() -> list[dt.date]:
    return [START + dt.timedelta(days=i) for i in range((END - START).days + 1)]


def write_config(folder: Path, data: Path, limit: int | None) -> Path:
    """The benchmark's memory_pipeline.toml: one realpersonachat source with no owner.

    ``[pipeline].owner`` is required by config.py, and a source without ``owner`` inherits it;
    ``owner = ""`` on the source is what config.py turns into ``None`` (every dialogue).
    """
    lines = [
        "[pipeline]",
        'owner = "benchmark"  # required; the source below overrides it with no owner',
        f'timezone = "{TIMEZONE}"',
        f'start_date = "{START.isoformat()}"',
        f'end_date = "{END.isoformat()}"',
        'output_dir = "out"',
        "",
        "[[sources]]",
        f'name = "{SOURCE}"',
        'kind = "realpersonachat"',
        f"path = {json.dumps(str(data.resolve()))}",
        'owner = ""  # "" -> None: benchmark mode, every dialogue',
    ]
    if limit is not None:
        lines.append(f"dialogue_limit = {limit}")
    path = folder / "memory_pipeline.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check_config(cfg: Any) -> None:
    (spec,) = cfg.sources
    if spec.owner is not None or spec.kind != SOURCE or cfg.timezone != TIMEZONE:
        raise SystemExit(f"benchmark config not as intended: {spec}")


def id_digest(values: list[str]) -> str:
    return hashlib.blake2b("\n".join(sorted(values)).encode(), digest_size=8).hexdigest()


def structure(sessions: Any, chunks: Any) -> dict[str, str]:
    """Digests that do not depend on how ids are made: the session boundaries (conversation,
    first local time, message count) and the chunks' rendered text. The SQL peer is compared
    with the core on these."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bounds = pc.binary_join_element_wise(
        sessions.column("conversation_id"),
        pc.cast(sessions.column("start_local_ts"), pa.string()),
        pc.cast(sessions.column("message_count"), pa.string()),
        "|",
    )
    return {
        "session_bounds": id_digest(bounds.to_pylist()),
        "chunk_text": id_digest(chunks.column("raw_text").to_pylist()),
    }


def summarize(messages: Any, quarantine: Any, sessions: Any, chunks: Any) -> dict[str, Any]:
    """Counts and id digests of one path's output (computed outside every timed region)."""
    reasons = Counter(quarantine.column("reason").to_pylist())
    return {
        "structure": structure(sessions, chunks),
        "messages": messages.num_rows,
        "quarantine": quarantine.num_rows,
        "quarantine_by_reason": dict(sorted(reasons.items())),
        "sessions": sessions.num_rows,
        "chunks": chunks.num_rows,
        "digests": {
            "messages": id_digest(messages.column("message_id").to_pylist()),
            "quarantine": id_digest(quarantine.column("quarantine_id").to_pylist()),
            "sessions": id_digest(sessions.column("session_id").to_pylist()),
            "chunks": id_digest(chunks.column("chunk_id").to_pylist()),
        },
    }


# --------------------------------------------------------------------------- children

# The peer: the same job as plain DuckDB SQL. Parameters: {path} {out} {gap} {size} {stride}
# {tail} (= size - stride, the overlap). A message at index k of its session lies in window
# k // stride and, inside the overlap, in the window before; windows past the first one that
# reaches the session's end are dropped (chunking.chunk_windows' rule).
PEER_SQL = """
CREATE TEMP TABLE utt AS
SELECT 'rpc-' || dialogue_id AS conversation_id,
       array_to_string(list_sort(interlocutors), '+') AS contact_id,
       u.utterance_id AS source_order, u.interlocutor_id AS sender, u.text AS text,
       try_cast(u.timestamp AS TIMESTAMP) AS local_ts, line_no,
       row_number() OVER (PARTITION BY dialogue_id, u.utterance_id ORDER BY line_no) AS copy_no
FROM (SELECT dialogue_id, interlocutors, line_no, unnest(utterances) AS u
      FROM (SELECT *, row_number() OVER () AS line_no
            FROM read_json('{path}', format = 'newline_delimited', columns = {{
                 dialogue_id: 'BIGINT', interlocutors: 'VARCHAR[]',
                 utterances: 'STRUCT(utterance_id BIGINT, interlocutor_id VARCHAR,
                                     text VARCHAR, timestamp VARCHAR)[]'}})));
COPY (SELECT conversation_id, source_order, line_no,
             CASE WHEN local_ts IS NULL THEN 'missing_timestamp' ELSE 'duplicate' END AS reason
      FROM utt WHERE local_ts IS NULL OR copy_no > 1)
  TO '{out}/quarantine.parquet' (FORMAT parquet);
CREATE TEMP TABLE msgs AS
WITH ok AS (
    SELECT * EXCLUDE (copy_no), md5(concat_ws(chr(31), conversation_id, local_ts, sender,
                                              'text', text)) AS message_id
    FROM utt WHERE local_ts IS NOT NULL AND copy_no = 1
), gapped AS (
    SELECT *, CASE WHEN lag(local_ts) OVER w IS NULL
                     OR local_ts - lag(local_ts) OVER w > INTERVAL {gap} MINUTE
                   THEN 1 ELSE 0 END AS starts
    FROM ok WINDOW w AS (PARTITION BY conversation_id ORDER BY local_ts, source_order)
), numbered AS (
    SELECT *, sum(starts) OVER (PARTITION BY conversation_id ORDER BY local_ts, source_order
                                ROWS UNBOUNDED PRECEDING) AS session_no
    FROM gapped
)
SELECT * EXCLUDE (starts),
       row_number() OVER w - 1 AS k,
       count(*) OVER (PARTITION BY conversation_id, session_no) AS n
FROM numbered WINDOW w AS (PARTITION BY conversation_id, session_no
                           ORDER BY local_ts, source_order);
COPY (SELECT * EXCLUDE (k, n, line_no) FROM msgs) TO '{out}/messages.parquet' (FORMAT parquet);
COPY (SELECT conversation_id, session_no, min(local_ts) AS start_local_ts,
             max(local_ts) AS end_local_ts, count(*) AS message_count,
             list(DISTINCT sender ORDER BY sender) AS participants,
             list(message_id ORDER BY k) AS message_ids
      FROM msgs GROUP BY conversation_id, session_no)
  TO '{out}/sessions.parquet' (FORMAT parquet);
COPY (
    WITH member AS (
        SELECT *, unnest([k // {stride}, k // {stride} - 1]) AS w FROM msgs
    ), windows AS (
        SELECT * FROM member
        WHERE w >= 0 AND k < w * {stride} + {size}
          AND (w = 0 OR (w - 1) * {stride} + {size} < n)
    )
    SELECT conversation_id, session_no, w AS chunk_index, min(k) AS first_message_index,
           count(*) AS message_count,
           string_agg(format('[{{}}] {{}}: {{}}', strftime(local_ts, '%Y-%m-%d %H:%M'), sender,
                             replace(text, chr(10), chr(10) || '  ')), chr(10) ORDER BY k)
               AS raw_text,
           list(message_id ORDER BY k) AS message_ids
    FROM windows GROUP BY conversation_id, session_no, w
) TO '{out}/chunks.parquet' (FORMAT parquet);
"""


def child_sql(data: Path, out_dir: Path, limit: int | None) -> dict[str, Any]:
    """The DuckDB SQL peer (2 threads), timed from connect to the last Parquet file."""
    t0 = time.perf_counter()
    import duckdb
    import pyarrow.parquet as pq

    setup = time.perf_counter() - t0
    if limit is not None:
        raise SystemExit("the SQL peer reads the whole corpus: run without --limit")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = data / "dialogues.jsonl.gz"
    sql = PEER_SQL.format(path=path, out=out_dir, gap=180, size=42, stride=36)
    walls: dict[str, float] = {}
    with timed(walls, "total"):
        con = duckdb.connect()
        con.execute("SET threads = 2")
        for stmt in filter(str.strip, sql.split(";")):
            con.execute(stmt)
        con.close()
    read = {
        name: pq.read_table(out_dir / f"{name}.parquet")
        for name in ("messages", "quarantine", "sessions", "chunks")
    }
    reasons = Counter(read["quarantine"].column("reason").to_pylist())
    return {
        "setup_s": setup,
        "duckdb": duckdb.__version__,
        "records_read": read["messages"].num_rows + read["quarantine"].num_rows,
        "stages_s": walls,
        "peak_rss_mib": peak_rss_mib(),
        "result": {
            "structure": structure(read["sessions"], read["chunks"]),
            "messages": read["messages"].num_rows,
            "quarantine": read["quarantine"].num_rows,
            "quarantine_by_reason": dict(sorted(reasons.items())),
            "sessions": read["sessions"].num_rows,
            "chunks": read["chunks"].num_rows,
        },
    }


def child_core(
    config: Path, out_dir: Path, profile: Path | None, record_path: bool = False
) -> dict[str, Any]:
    t0 = time.perf_counter()
    import pyarrow as pa

    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.ingest.columnar import ingest_tables
    from memory_pipeline.core.ingest.stage import read_all, read_source_tables, split_ingest
    from memory_pipeline.core.sessions.chunking import chunk_sessions
    from memory_pipeline.core.sessions.sessionize import sessionize
    from memory_pipeline.core.sessions.stage import build_chunks, build_sessions

    cfg = load_config(config, env={})
    check_config(cfg)
    days = days_of_range()
    pa.array([0])  # the first pyarrow.array imports pandas (~0.2 s): not part of any phase
    setup = time.perf_counter() - t0

    mem: dict[str, float] = {}
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    # stage.read_all_tables is these two phases in one call; split to time them apart
    with timed(mem, "read"):
        tables = [read_source_tables(spec, days) for spec in cfg.sources]
    with timed(mem, "ingest.validate_dedupe_ids"):
        result = ingest_tables(tables, start_date=cfg.start_date, dates=days)
    with timed(mem, "ingest.tables_split"):
        per_day = split_ingest(result, days)
    with timed(mem, "sessionize"):
        messages = pa.concat_tables([t.messages for t in per_day.values()])
        sessions = sessionize(messages, cfg.session_gap_minutes)
    with timed(mem, "chunk"):
        chunks = chunk_sessions(sessions, messages, cfg.chunk_size, cfg.chunk_stride)
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(profile))
    add_up(mem, "ingest", ["ingest.validate_dedupe_ids", "ingest.tables_split"])
    add_up(mem, "read+ingest", ["read", "ingest"])
    add_up(mem, "total", ["read+ingest", "sessionize", "chunk"])
    records_read = sum(result.read_counts.values())
    columnar = all(t.columnar for t in tables)  # False: a file took the row reader
    rss_in_memory = peak_rss_mib()
    quarantine = pa.concat_tables([t.quarantine for t in per_day.values()])
    in_memory = summarize(messages, quarantine, sessions, chunks)
    del tables, result, sessions, chunks
    record_same = None
    if record_path:  # the row-based path (one object per utterance), timed and compared
        with timed(mem, "record_path.read_ingest_split"):
            rows = split_ingest(read_all(cfg.sources, days, cfg.start_date), days)
        record_same = all(
            getattr(rows[d], k).equals(getattr(per_day[d], k))
            for d in days
            for k in ("messages", "quarantine", "audit")
        )
        del rows

    store = TableStore(out_dir)
    st: dict[str, float] = {}
    with timed(st, "write_ingest"):
        for day, tables in per_day.items():
            store.write(T.RAW_MESSAGES, tables.messages, day)
            store.write(T.QUARANTINE, tables.quarantine, day)
            store.write(T.INGEST_AUDIT, tables.audit, day)
    with timed(st, "sessions"):
        for day, table in build_sessions(store, days, cfg.session_gap_minutes).items():
            store.write(T.SESSIONS, table, day)
    with timed(st, "chunks"):
        built = build_chunks(store, days, cfg.chunk_size, cfg.chunk_stride)
        for day, table in built.items():
            store.write(T.CHUNKS, table, day)
    for suffix in ("", CPU):
        st["read+ingest" + suffix] = mem["read+ingest" + suffix]
    add_up(st, "total", ["read+ingest", "write_ingest", "sessions", "chunks"])
    stored = summarize(
        store.read(T.RAW_MESSAGES),
        store.read(T.QUARANTINE),
        store.read(T.SESSIONS),
        store.read(T.CHUNKS),
    )
    return {
        "setup_s": setup,
        "records_read": records_read,
        "in_memory_s": mem,
        "store_s": st,
        "peak_rss_in_memory_mib": rss_in_memory,
        "peak_rss_mib": peak_rss_mib(),
        "dagster_imported": "dagster" in sys.modules,
        "columnar_reader": columnar,
        "record_path_same_tables": record_same,
        "result": in_memory,
        "result_store": stored,
    }


PG_HOST = os.environ.get("DAGSTER_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("DAGSTER_PG_PORT", "5432"))
PG_USER = os.environ.get("DAGSTER_PG_USER", "postgres")
# run events counted per variant: the planned and stored materializations and the checks
AUDITED_EVENTS = (
    "ASSET_MATERIALIZATION_PLANNED",
    "ASSET_MATERIALIZATION",
    "ASSET_CHECK_EVALUATION_PLANNED",
    "ASSET_CHECK_EVALUATION",
)


def pg_admin() -> Any:
    import psycopg2

    con = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres")
    con.autocommit = True
    return con


def make_instance(kind: str, pg_db: str | None, workdir: Path) -> Any:
    """The child's Dagster instance: ephemeral, or deploy/postgres/dagster.yaml on ``pg_db``
    (its relative artifact folders land in ``workdir``)."""
    import dagster as dg

    if kind == "ephemeral":
        return dg.DagsterInstance.ephemeral()
    os.environ.update(
        DAGSTER_PG_HOST=PG_HOST,
        DAGSTER_PG_PORT=str(PG_PORT),
        DAGSTER_PG_USER=PG_USER,
        DAGSTER_PG_PASSWORD=os.environ.get("DAGSTER_PG_PASSWORD", "unused-with-trust-auth"),
        DAGSTER_PG_DB=str(pg_db),
    )
    os.chdir(workdir)
    return dg.DagsterInstance.from_config(str(REPO / "deploy" / "postgres"))


def audit_events(instance: Any, run_ids: list[str], asset_keys: list[Any]) -> dict[str, Any]:
    """What the UI reads back: the runs' events per type and each asset's materialized
    partitions (counted after the timed region)."""
    import dagster as dg

    counts: dict[str, int] = {}
    for name in AUDITED_EVENTS:
        kind = dg.DagsterEventType[name]
        counts[name] = sum(len(instance.all_logs(run_id, of_type=kind)) for run_id in run_ids)
    partitions = {
        key.to_user_string(): len(instance.get_materialized_partitions(key)) for key in asset_keys
    }
    return {"events": counts, "materialized_partitions": partitions}


def child_dagster(
    config: Path, out_dir: Path, instance_kind: str = "ephemeral", pg_db: str | None = None
) -> dict[str, Any]:
    t0 = time.perf_counter()

    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.defs.build import build_assets
    from memory_pipeline.defs.providers import provider_resources
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import materialize_stages, stage_resources, stages

    pipeline = PipelineResource(config_file=str(config), output_dir=str(out_dir))
    cfg = pipeline.cfg
    check_config(cfg)
    assets = build_assets(cfg)
    instance = make_instance(instance_kind, pg_db, out_dir.parent)
    days = days_of_range()
    setup = time.perf_counter() - t0
    run_ids: list[str] = []
    asset_keys: list[Any] = []

    walls: dict[str, float] = {}
    checks: dict[str, int] = {}
    for stage in stages(*DAGSTER_STAGES):
        with timed(walls, stage.name):
            [run] = materialize_stages(
                assets,
                [stage],
                days=days,
                resources=stage_resources(pipeline, provider_resources(env={})),
                instance=instance,
                log_level=QUIET_LEVEL,
            )
        failed = [e.check_name for e in run.checks if not e.passed]
        if not run.success or failed:
            raise SystemExit(f"dagster stage {stage.name} failed (checks failed: {failed})")
        checks[stage.name] = len(run.checks)
        run_ids.append(run.result.run_id)
        asset_keys.extend(stage.keys)
    add_up(walls, "total", list(DAGSTER_STAGES))
    audit = audit_events(instance, run_ids, asset_keys)
    instance_class = type(instance.event_log_storage).__name__
    instance.dispose()
    store = TableStore(out_dir)
    ingest_audit = store.read(T.INGEST_AUDIT)
    return {
        "setup_s": setup,
        "records_read": sum(ingest_audit.column("records_read").to_pylist()),
        "stages_s": walls,
        "checks_passed": checks,
        "event_log_storage": instance_class,
        "event_batch_size": os.environ.get("DAGSTER_EVENT_BATCH_SIZE", ""),
        **audit,
        "peak_rss_mib": peak_rss_mib(),
        "result": summarize(
            store.read(T.RAW_MESSAGES),
            store.read(T.QUARANTINE),
            store.read(T.SESSIONS),
            store.read(T.CHUNKS),
        ),
    }


def child_main(args: argparse.Namespace) -> None:
    out_dir = Path(args.workdir) / f"{args.child}_out"
    if args.child == "core":
        prof = Path(args.profile_out) if args.profile_out else None
        data = child_core(Path(args.config), out_dir, prof, args.record_path)
    elif args.child == "sql":
        data = child_sql(args.data, out_dir, args.limit)
    else:
        data = child_dagster(Path(args.config), out_dir, args.instance, args.pg_db)
    Path(args.result).write_text(json.dumps(data, default=str), encoding="utf-8")


# --------------------------------------------------------------------------- parent


def run_child(
    mode: str,
    config: Path,
    workdir: Path,
    profile: Path | None = None,
    extra: list[str] = (),
    env_set: dict[str, str] | None = None,
    label: str | None = None,
) -> dict:
    """Run one measurement in a fresh interpreter; its own peak RSS comes from wait4."""
    label = label or mode
    result = workdir / f"{label}.json"
    log = workdir / f"{label}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode]
    cmd += ["--config", str(config), "--workdir", str(workdir), "--result", str(result)]
    cmd += list(extra)
    if profile:
        cmd += ["--profile-out", str(profile)]
    # config.py reads MEMORY_PIPELINE_* overrides: the benchmark must not inherit any
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(env_set or {})
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write(log.read_text(errors="replace")[-6000:])
        raise SystemExit(f"{mode} child failed with exit code {proc.returncode}")
    data = json.loads(result.read_text(encoding="utf-8"))
    data["process_wall_s"] = time.perf_counter() - t0
    data["loadavg_1min"] = [load_before, os.getloadavg()[0]]
    data["peak_rss_wait4_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
    return data


def run_round(args: argparse.Namespace) -> tuple[dict | None, dict, dict]:
    """One round: the SQL peer, the core and Dagster, one after the other (same minute)."""
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as tmp:
        work = Path(tmp)
        config = write_config(work, args.data, args.limit)
        extra = ["--data", str(args.data)]
        sql = run_child("sql", config, work, extra=extra) if args.limit is None else None
        core = run_child("core", config, work, extra=["--record-path"] if args.record_path else [])
        variants = [run_dagster(args, config, work, size) for size in args.event_batch_sizes]
    dagster = variants[0]
    dagster["variants"] = [{k: v[k] for k in VARIANT_KEYS if k in v} for v in variants]
    return sql, core, dagster


VARIANT_KEYS = (
    "label",
    "event_batch_size",
    "event_log_storage",
    "stages_s",
    "events",
    "materialized_partitions",
    "checks_passed",
    "loadavg_1min",
    "peak_rss_wait4_mib",
    "result",
)


def run_dagster(args: argparse.Namespace, config: Path, work: Path, batch_size: int) -> dict:
    """One Dagster child with ``DAGSTER_EVENT_BATCH_SIZE=batch_size``; on Postgres, on a
    database of its own, created before and dropped after (like the Postgres tests)."""
    label = f"dagster_{args.instance}_batch{batch_size}"
    extra = ["--instance", args.instance]
    admin = name = None
    if args.instance == "postgres":
        name = f"mp_bench_{uuid.uuid4().hex[:10]}"
        admin = pg_admin()
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        extra += ["--pg-db", name]
    try:
        env = {"DAGSTER_EVENT_BATCH_SIZE": str(batch_size)}
        data = run_child("dagster", config, work, extra=extra, env_set=env, label=label)
    finally:
        if admin is not None:
            with admin.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.close()
    data["label"] = label
    return data


def verify(sql: dict | None, core: dict, dagster: dict, full: bool) -> list[tuple[str, bool, str]]:
    a, b, c = core["result"], core["result_store"], dagster["result"]
    rows = []
    for key in ("messages", "quarantine", "sessions", "chunks"):
        same = a[key] == b[key] == c[key] and (
            a["digests"][key] == b["digests"][key] == c["digests"][key]
        )
        rows.append((key, same, f"{a[key]:>9,} {b[key]:>9,} {c[key]:>9,}"))
    for key in ("session_bounds", "chunk_text"):
        same = a["structure"][key] == b["structure"][key] == c["structure"][key]
        rows.append((key, same, f"{a['structure'][key]:>29}"))
    read = core["records_read"]
    conserved = read == dagster["records_read"] == a["messages"] + a["quarantine"]
    figures = f"{read:>9,} {dagster['records_read']:>19,}"
    rows.append(("records read = msgs + quar.", conserved, figures))
    rows.append(("columnar reader used", bool(core["columnar_reader"]), ""))
    if core.get("record_path_same_tables") is not None:
        same = bool(core["record_path_same_tables"])
        rows.append(("record path: same tables", same, "(stage.read_all)"))
    if sql is not None:
        r = sql["result"]
        rows.extend(
            (f"SQL peer: {key}", r[key] == a[key], f"{r[key]:>9,}")
            for key in ("messages", "quarantine", "sessions", "chunks")
        )
        same = r["quarantine_by_reason"] == a["quarantine_by_reason"]
        rows.append(("SQL peer: quarantine reasons", same, ""))
        for key in ("session_bounds", "chunk_text"):
            same = r["structure"][key] == a["structure"][key]
            rows.append((f"SQL peer: {key}", same, f"{r['structure'][key]:>19}"))
    if full:
        nat = a["quarantine_by_reason"].get(NAT_REASON, 0)
        rows.append((f"NaT quarantined = {CORPUS_NAT}", nat == CORPUS_NAT, f"{nat:>9,}"))
        rows.append((f"all {CORPUS_UTTERANCES:,} read", read == CORPUS_UTTERANCES, f"{read:>9,}"))
    return rows


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def report(
    rounds: list[tuple[dict | None, dict, dict]], args: argparse.Namespace
) -> dict[str, Any]:
    sqls = [q for q, _, _ in rounds if q is not None]
    core = min((c for _, c, _ in rounds), key=lambda c: c["in_memory_s"]["total"])
    dag = min((d for _, _, d in rounds), key=lambda d: d["stages_s"]["total"])
    sql = min(sqls, key=lambda q: q["stages_s"]["total"]) if sqls else None
    n = core["records_read"]
    mem, st, dg_s = core["in_memory_s"], core["store_s"], dag["stages_s"]
    res = core["result"]
    full = args.limit is None
    versions = {name: version(name) for name in ("dagster", "pyarrow", "duckdb")}
    out: list[str] = []
    add = out.append
    add(
        f"RealPersonaChat ingest benchmark: {n:,} utterances read, "
        f"{'every dialogue' if full else f'first {args.limit} dialogues'}, "
        f"{len(days_of_range())} daily partitions {START}..{END} ({TIMEZONE})"
    )
    add(
        f"python {platform.python_version()}, dagster {versions['dagster']}, pyarrow "
        f"{versions['pyarrow']}, duckdb {versions['duckdb']}, {os.cpu_count()} CPUs; "
        f"{len(rounds)} round(s) of sql, core, dagster in turn; phases: best round; "
        "msg/s = utterances read / wall s"
    )
    loads = ", ".join(
        "/".join(f"{x['loadavg_1min'][0]:.1f}" for x in r if x is not None) for r in rounds
    )
    add(f"1-min load average when each child started (sql/core/dagster, per round): {loads}")
    add("")
    row = "{:<52}{:>8}{:>11}{:>8}"
    add(row.format("phase", "wall s", "msg/s", "cpu s"))

    def line(label: str, d: dict[str, float], key: str) -> None:
        add(row.format(label, f"{d[key]:.2f}", f"{rate(n, d[key]):,.0f}", f"{d[key + CPU]:.2f}"))

    if sql is not None:
        add("peer: DuckDB SQL, 2 threads (read_json .. Parquet out)")
        line("  total", sql["stages_s"], "total")
    add("core, no Dagster, whole corpus in memory (columnar path)")
    line("  read (columnar reader -> Arrow)", mem, "read")
    line("  ingest (validate/dedupe/ids + tables)", mem, "ingest")
    line("    validate, dedupe, ids (columnar.ingest_tables)", mem, "ingest.validate_dedupe_ids")
    line("    tables + per-date split (stage.split_ingest)", mem, "ingest.tables_split")
    line("  sessionize (core.sessionize.sessionize)", mem, "sessionize")
    line("  chunk (core.chunking.chunk_sessions)", mem, "chunk")
    line("  total", mem, "total")
    if "record_path.read_ingest_split" in mem:
        line(
            "  row-based path: stage.read_all + split_ingest", mem, "record_path.read_ingest_split"
        )
    add("core, store-based path (TableStore Parquet, all dates)")
    line("  read + ingest (as above)", st, "read+ingest")
    line("  write raw_messages/quarantine/audit", st, "write_ingest")
    line("  stages.build_sessions + write", st, "sessions")
    line("  stages.build_chunks + write", st, "chunks")
    line("  total", st, "total")
    add(
        f"dagster.materialize, {args.instance} instance, DAGSTER_EVENT_BATCH_SIZE="
        f"{args.event_batch_sizes[0]}, one single-run backfill per stage"
    )
    setup = f"{dag['setup_s']:.2f}"
    add(row.format("  setup: import dagster, build_assets (not counted)", setup, "", ""))
    line("  ingest multi-asset (+5 checks)", dg_s, "ingest")
    line("  sessions (+2 checks)", dg_s, "sessions")
    line("  chunks (+1 check)", dg_s, "chunks")
    line("  total", dg_s, "total")
    add("")
    # ratios pair by pair within a round (same minute), then the median over rounds
    dag_ratios = [d["stages_s"]["total"] / c["in_memory_s"]["total"] for _, c, d in rounds]
    ratio = _median(dag_ratios)
    cpu_mem = dg_s["total" + CPU] / mem["total" + CPU]
    add(
        f"dagster / core in-memory: {ratio:.2f}x (per round: "
        f"{', '.join(f'{r:.2f}' for r in dag_ratios)})   dagster / core store-based: "
        f"{dg_s['total'] / st['total']:.2f}x   (by cpu s: {cpu_mem:.2f}x)"
    )
    variant_rows = variants_report(rounds)
    out.extend(variant_rows["lines"])
    sql_ratios = [
        c["in_memory_s"]["total"] / q["stages_s"]["total"] for q, c, _ in rounds if q is not None
    ]
    sql_ratio = _median(sql_ratios) if sql_ratios else None
    if sql_ratio is not None:
        cpu_sql = mem["total" + CPU] / sql["stages_s"]["total" + CPU]
        add(
            f"core in-memory / SQL peer: {sql_ratio:.2f}x (per round: "
            f"{', '.join(f'{r:.2f}' for r in sql_ratios)})   core store-based / SQL peer: "
            f"{st['total'] / sql['stages_s']['total']:.2f}x   (by cpu s: {cpu_sql:.2f}x)"
        )
    rss = (
        f"peak RSS (wait4 per child / VmHWM): core {core['peak_rss_wait4_mib']:,.0f} / "
        f"{core['peak_rss_mib']:,.0f} MiB (in-memory phases {core['peak_rss_in_memory_mib']:,.0f}),"
        f" dagster {dag['peak_rss_wait4_mib']:,.0f} / {dag['peak_rss_mib']:,.0f} MiB"
    )
    if sql is not None:
        rss += f", sql {sql['peak_rss_wait4_mib']:,.0f} MiB"
    add(rss)
    add("")
    add("{:<32}{:>9} {:>9} {:>9}".format("same results", "core", "store", "dagster"))
    checks = verify(sql, core, dag, full)
    for label, ok, figures in checks:
        add(f"{label:<32}{figures:<30}  {'OK' if ok else 'DIFFERENT'}")
    reasons = ", ".join(f"{k} {v:,}" for k, v in res["quarantine_by_reason"].items())
    add(f"quarantine by reason: {reasons}")
    add("")
    core_rate = rate(n, mem["total"])
    targets = [
        (
            "core throughput",
            f">= {TARGET_CORE_MSG_S:,} msg/s",
            f"{core_rate:,.0f} msg/s",
            core_rate >= TARGET_CORE_MSG_S,
        ),
        (
            "Dagster wall / core wall",
            f"<= {TARGET_DAGSTER_RATIO}x",
            f"{ratio:.2f}x",
            ratio <= TARGET_DAGSTER_RATIO,
        ),
        (
            "peak RSS core",
            f"<= {TARGET_RSS_MIB:,} MiB",
            f"{core['peak_rss_wait4_mib']:,.0f} MiB",
            core["peak_rss_wait4_mib"] <= TARGET_RSS_MIB,
        ),
        (
            "peak RSS dagster",
            f"<= {TARGET_RSS_MIB:,} MiB",
            f"{dag['peak_rss_wait4_mib']:,.0f} MiB",
            dag["peak_rss_wait4_mib"] <= TARGET_RSS_MIB,
        ),
    ]
    if sql_ratio is not None:
        targets.insert(
            1,
            (
                "core wall / SQL peer wall",
                f"<= {TARGET_SQL_RATIO}x",
                f"{sql_ratio:.2f}x",
                sql_ratio <= TARGET_SQL_RATIO,
            ),
        )
    tfmt = "{:<26}{:>18}{:>16}  {}"
    add(tfmt.format("target", "goal", "measured", "result"))
    for name, goal, got, ok in targets:
        add(tfmt.format(name, goal, got, "PASS" if ok else "MISS"))
    same = all(ok for _, ok, _ in checks)
    add(f"{'results identical':<26}{'sql=core=dagster':>18}{'':>16}  {'PASS' if same else 'MISS'}")
    print("\n".join(out))
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": {"data": str(args.data), "limit": args.limit, "repeat": args.repeat},
        "env": {
            "python": platform.python_version(),
            **versions,
            "cpus": os.cpu_count(),
        },
        "records_read": n,
        "core_msg_per_s": core_rate,
        "sql_msg_per_s": rate(n, sql["stages_s"]["total"]) if sql else None,
        "dagster_msg_per_s": rate(n, dg_s["total"]),
        "core_over_sql": sql_ratio,
        "core_over_sql_per_round": sql_ratios,
        "dagster_over_core": ratio,
        "dagster_over_core_per_round": dag_ratios,
        "dagster_over_core_store": dg_s["total"] / st["total"],
        "dagster_over_core_cpu": cpu_mem,
        "targets": {name: {"goal": g, "measured": m, "pass": ok} for name, g, m, ok in targets},
        "results_identical": same,
        "dagster_variants": variant_rows["figures"],
        "best": {"sql": sql, "core": core, "dagster": dag},
        "rounds": [{"sql": q, "core": c, "dagster": d} for q, c, d in rounds],
    }


def variants_report(rounds: list[tuple[dict | None, dict, dict]]) -> dict[str, Any]:
    """The Dagster variants (one per event batch size) side by side: per round, each one's
    wall and CPU over the same round's in-memory core, and the events it stored."""
    lines = ["", "dagster variants, per round (cpu/core = dagster cpu s / core in-memory cpu s):"]
    head = "{:<34}{:>8}{:>8}{:>10}{:>10}  {}"
    lines.append(head.format("variant", "wall s", "cpu s", "wall/core", "cpu/core", "events"))
    figures: list[dict[str, Any]] = []
    reference = None
    for i, (_, core, dag) in enumerate(rounds):
        mem = core["in_memory_s"]
        for v in dag["variants"]:
            st = v["stages_s"]
            wall_r, cpu_r = st["total"] / mem["total"], st["total" + CPU] / mem["total" + CPU]
            events = "/".join(str(v["events"][k]) for k in AUDITED_EVENTS)
            seen = (v["events"], v["materialized_partitions"], v["result"])
            reference = seen if reference is None else reference
            same = "same" if seen == reference else "DIFFERENT"
            label = f"r{i + 1} {v['label']}"
            lines.append(
                head.format(
                    label,
                    f"{st['total']:.2f}",
                    f"{st['total' + CPU]:.2f}",
                    f"{wall_r:.2f}x",
                    f"{cpu_r:.2f}x",
                    f"{events} ({same})",
                )
            )
            figures.append(
                {
                    "round": i + 1,
                    "label": v["label"],
                    "wall_s": st["total"],
                    "cpu_s": st["total" + CPU],
                    "wall_over_core": wall_r,
                    "cpu_over_core": cpu_r,
                    "events": v["events"],
                    "materialized_partitions": v["materialized_partitions"],
                    "same_events_and_results": seen == reference,
                }
            )
    lines.append("events: " + " / ".join(AUDITED_EVENTS) + " (of the 3 runs)")
    if reference is not None:
        parts = ", ".join(f"{k} {n}" for k, n in reference[1].items())
        lines.append(f"materialized partitions: {parts}")
    return {"lines": lines, "figures": figures}


def profile_core(args: argparse.Namespace) -> None:
    """The in-memory core phases under cProfile (timings inflated by the profiler)."""
    target = Path(args.json).with_name("ingest_core.prof")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as tmp:
        work = Path(tmp)
        config = write_config(work, args.data, args.limit)
        data = run_child("core", config, work, profile=target)
    print("in-memory phases under cProfile (s):")
    for k, v in data["in_memory_s"].items():
        if not k.endswith(CPU):
            print(f"  {k:<32}{v:8.2f}")
    stats = pstats.Stats(str(target))
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    print(f"profile written to {target}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealPersonaChat folder")
    p.add_argument("--limit", type=int, default=None, help="read only the first N dialogues")
    p.add_argument("--repeat", type=int, default=1, help="rounds; the best one is reported")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the figures")
    p.add_argument("--profile", action="store_true", help="cProfile the core path instead")
    p.add_argument("--top", type=int, default=30, help="rows of the profile to print")
    p.add_argument(
        "--record-path",
        action="store_true",
        help="also time the row-based path (stage.read_all) and compare its tables",
    )
    p.add_argument(
        "--instance",
        choices=["ephemeral", "postgres"],
        default="ephemeral",
        help="Dagster instance: ephemeral, or a fresh PostgreSQL database per Dagster child",
    )
    p.add_argument(
        "--event-batch-sizes",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[0],
        help="DAGSTER_EVENT_BATCH_SIZE values, one Dagster child each per round (e.g. 0,100)",
    )
    p.add_argument("--child", choices=["sql", "core", "dagster"], help=argparse.SUPPRESS)
    p.add_argument("--pg-db", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args)
        return
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    if not (args.data / "dialogues.jsonl.gz").is_file():
        p.error(f"no dialogues.jsonl.gz in {args.data}")
    if args.profile:
        profile_core(args)
        return
    rounds = [run_round(args) for _ in range(max(1, args.repeat))]
    figures = report(rounds, args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
