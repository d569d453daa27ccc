"""TableStore and index publishing on local disk vs S3 (moto's server on 127.0.0.1).

    python benchmarks/bench_object_storage.py [--partitions 100] [--rows 1000] [--mib 20]

Writes ``--partitions`` date partitions of ``raw_messages``-shaped rows (``--rows`` each,
~80-character texts) through ``TableStore``, lists and reads them back, then publishes an
index version of ``--mib`` MiB (random float32 "matrix" + a small file) and loads it from a
fresh reader (download + manifest check on S3). moto is a Python server in this process, so
the S3 figures are an upper bound of the protocol's cost, not a real store's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from _common import timed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_pipeline.core.common import fs  # noqa: E402
from memory_pipeline.core.common import tables as T  # noqa: E402
from memory_pipeline.core.common.storage import TableStore  # noqa: E402
from memory_pipeline.core.indexes import publish as P  # noqa: E402
from memory_pipeline_tests.s3_server import S3Server  # noqa: E402


def _rows(n: int, day: int) -> pa.Table:
    schema = T.RAW_MESSAGES.schema
    cols = {}
    for f in schema:
        if f.name == "message_id":
            cols[f.name] = pa.array([f"{day}-{i:06d}" for i in range(n)], f.type)
        elif f.name == "text":
            cols[f.name] = pa.array([f"message {i} of day {day} " + "x" * 60 for i in range(n)])
        else:
            cols[f.name] = pa.nulls(n, f.type)
    return pa.table(cols, schema=schema)


def run(root: fs.Location, parts: int, rows: int, mib: int) -> dict[str, float]:
    out: dict[str, float] = {}
    store = TableStore(root)
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(parts)]
    data = [_rows(rows, i) for i in range(parts)]
    with timed(out, "write"):
        for day, t in zip(days, data, strict=True):
            store.write(T.RAW_MESSAGES, t, day)
    with timed(out, "list"):
        assert store.dates(T.RAW_MESSAGES) == days
    with timed(out, "read"):
        assert store.read(T.RAW_MESSAGES).num_rows == parts * rows
    out["bytes"] = sum(n for _, n in store.files(T.RAW_MESSAGES))
    idx = P.index_root(root)
    version = P.new_version(idx)
    rng = np.random.default_rng(0)
    np.save(version / "matrix.npy", rng.random((mib * 1024 * 1024 // 4,), dtype=np.float32))
    (version / "chunks.parquet").write_bytes(b"x" * 1000)
    with timed(out, "publish"):
        P.publish(idx, version)
    if fs.is_remote(idx):
        shutil.rmtree(fs.cache_dir(idx) / "versions", ignore_errors=True)
    with timed(out, "load_version"):
        assert P.current_version(root) is not None
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--mib", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_s3_"))
    import os

    os.environ[fs.CACHE_ENV] = str(tmp / "copies")
    server = S3Server.start()
    try:
        fs.configure_s3(server.options())
        local = run(tmp / "local", args.partitions, args.rows, args.mib)
        remote = run(server.bucket("bench") + "/run", args.partitions, args.rows, args.mib)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.partitions} partitions x {args.rows} rows; index version {args.mib} MiB")
    print(f"{'step':<14}{'local s':>10}{'s3 (moto) s':>14}{'s3 CPU s':>10}")
    for step in ("write", "list", "read", "publish", "load_version"):
        print(f"{step:<14}{local[step]:>10.3f}{remote[step]:>14.3f}{remote[step + '/cpu']:>10.3f}")
    print(f"parquet bytes: local {local['bytes']:,.0f}, s3 {remote['bytes']:,.0f}")


if __name__ == "__main__":
    main()
