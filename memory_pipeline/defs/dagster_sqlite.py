"""Dagster's SQLite instance storage, with an event log that costs what a write costs.

A first run over years of history stores one materialization per asset and one check
evaluation per check for every day with data: about 33 events a day, 100,000 for a decade.
Dagster's ``SqliteEventLogStorage`` spends ~8-12 ms of a core on each of them (measured with
1,214 events of a 300-partition run: 8.6 ms CPU, 12.6 ms wall), nearly all of it around the
write rather than in it:

- every read or write creates a SQLAlchemy engine and opens a new SQLite connection
  (``_connect``, and ``has_table`` on every asset event), so no compiled statement is ever
  reused: creating engines, connecting and compiling were ~60 % of the time;
- every write is its own transaction, committed with ``synchronous=FULL`` (an fsync of the
  WAL per commit, two or three commits per event), which costs wall time at equal CPU;
- a materialization batch (``DAGSTER_EVENT_BATCH_SIZE``) is written event by event;
- the planned evaluation of a check over N partitions is stored on each of its N rows of
  ``asset_check_executions`` with its whole partition subset: N x N partition keys, 380 MB
  of the index for 1,831 days x 8 checks, and quadratic in the days.

:class:`SqliteEventLogStorage` keeps Dagster's schema, files and semantics and changes only
that: one engine and connection per shard file, reused (the storage's own lock already
serializes them), ``synchronous=NORMAL`` (WAL mode: a crash of the process or of the machine
never corrupts the file; a power cut may lose the last events, and Parquet, not the event log,
is the data of record), a batch written in one transaction per shard (on any error rolled back
and written again event by event, as Dagster's fallback does), and each planned check row
stores the planned event of its own partition only. Measured on the same 300-partition run:
2.7 ms of CPU per event instead of 8.6 (``benchmarks/results/life.md``).

:class:`SqliteStorage` is Dagster's ``DagsterSqliteStorage`` with this event log. A generated
``dagster.yaml`` (``state.write_instance_yaml``) names it under ``storage: custom:``; the
daemon and the web UI import it from this package, installed beside them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import dagster as dg
import sqlalchemy as db
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from memory_pipeline.defs import dagster_internals as di

# Shard files whose engine (and one open connection) a process keeps: the index, and the
# runs it writes or watches. Older ones are closed; reopening one costs about a millisecond.
OPEN_SHARDS = 32
SYNCHRONOUS = "NORMAL"


class SqliteEventLogStorage(di.SqliteEventLogStorage):
    """Dagster's SQLite event log with engines kept, batches in one transaction and slim
    planned check rows (module docstring)."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._known_tables: set[str] = set()
        self._batch = threading.local()
        super().__init__(base_dir, inst_data=inst_data)
        # re-entrant: a batch holds it while the events it stores connect again
        self._db_lock = threading.RLock()

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> SqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    # -- connections --------------------------------------------------------------------
    def _engine(self, shard: str) -> Engine:
        """The shard's engine, made once (caller holds ``_db_lock``)."""
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = db.create_engine(
            self.conn_string_for_shard(shard),
            poolclass=StaticPool,
            connect_args={
                "timeout": di.SQLITE_BUSY_TIMEOUT_SECONDS,
                "check_same_thread": False,
            },
        )
        db.event.listen(engine, "connect", _pragmas)
        if shard not in self._initialized_dbs:
            self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        while len(self._engines) > OPEN_SHARDS:
            _, old = self._engines.popitem(last=False)
            old.dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            batch = getattr(self._batch, "conns", None)
            if batch is not None:  # inside store_event_batch: one transaction per shard
                conn = batch.get(shard)
                if conn is None:
                    conn = self._engine(shard).connect()
                    conn.begin()
                    batch[shard] = conn
                yield conn
                return
            with self._engine(shard).connect() as conn, conn.begin():
                yield conn

    def _forget_engines(self) -> None:
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()

    def has_table(self, table_name: str) -> bool:
        """Asked on every asset event; a table once there stays, so a yes is remembered.

        Dagster asks it inside an open index transaction: the answer comes from a connection
        of its own (Dagster's way), never from the shard's kept one, whose return to the pool
        would roll that transaction back."""
        if table_name in self._known_tables:
            return True
        found = super().has_table(table_name)
        if found:
            self._known_tables.add(table_name)
        return found

    # -- writes ---------------------------------------------------------------------------
    def store_event_batch(self, events: Sequence[Any]) -> None:
        """The batch in one transaction per shard file; on an error nothing of it is kept and
        the error is raised, so Dagster stores the events one by one instead."""
        with self._db_lock:
            self._batch.conns = {}
            try:
                for event in events:
                    self.store_event(event)
                for conn in self._batch.conns.values():
                    conn.commit()
            except BaseException:
                for conn in self._batch.conns.values():
                    conn.rollback()
                raise
            finally:
                for conn in self._batch.conns.values():
                    conn.close()
                self._batch.conns = None

    def _store_asset_check_evaluation_planned(self, event: Any, event_id: int | None) -> None:
        """One row per planned partition, each holding the planned event of that partition
        (Dagster stores the whole subset on every row: quadratic in the partitions)."""
        planned = event.dagster_event.event_specific_data
        subset = planned.partitions_subset
        if subset is None or len(subset) <= 1:
            super()._store_asset_check_evaluation_planned(event, event_id)
            return
        table = di.AssetCheckExecutionsTable
        timestamp = self._event_insert_timestamp(event)
        empty = subset.empty_subset()
        rows = []
        for key in subset.get_partition_keys():
            own = event._replace(
                dagster_event=event.dagster_event._replace(
                    event_specific_data=di.AssetCheckEvaluationPlanned(
                        asset_key=planned.asset_key,
                        check_name=planned.check_name,
                        partitions_subset=empty.with_partition_keys([key]),
                    )
                )
            )
            rows.append(
                dict(
                    asset_key=planned.asset_key.to_string(),
                    check_name=planned.check_name,
                    partition=key,
                    run_id=event.run_id,
                    execution_status=di.AssetCheckExecutionRecordStatus.PLANNED.value,
                    evaluation_event=dg.serialize_value(own),
                    evaluation_event_timestamp=timestamp,
                    evaluation_event_storage_id=event_id,
                )
            )
        with self.index_connection() as conn:
            conn.execute(table.insert().values(rows))

    # -- files removed under the cached connections ----------------------------------------
    def delete_events(self, run_id: str) -> None:
        super().delete_events(run_id)
        with self._db_lock:
            engine = self._engines.pop(run_id, None)
            if engine is not None:
                engine.dispose()

    def wipe(self) -> None:
        self._forget_engines()
        super().wipe()

    def dispose(self) -> None:
        self._forget_engines()
        super().dispose()


def _pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")


class SqliteStorage(di.DagsterSqliteStorage):
    """Dagster's SQLite instance storage (runs, schedules: unchanged) with the event log of
    :class:`SqliteEventLogStorage`; the same ``base_dir`` layout, so an instance made with
    ``storage: sqlite:`` is read as it is."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        super().__init__(base_dir, inst_data=inst_data)
        self._event_log_storage = SqliteEventLogStorage(di._event_logs_directory(base_dir))

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> SqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)
