"""Owners benchmark: every RealPersonaChat speaker as an owner, one read pass, per-owner ingest.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_owners.py               # all dialogues, all speakers
    .venv/bin/python benchmarks/bench_owners.py --limit 2000  # first 2,000 dialogues

What it times (no Dagster; the core functions the ingest asset calls, in the asset's order):
the corpus read once with no owner (``read_source``), the split into one record list per
speaker (``core.common.owners.fan_out_by_speaker``: a dialogue goes to both its speakers),
then per owner ``core.ingest.columnar.ingest`` + ``stage.split_ingest`` and the per-date
writes through that owner's ``OwnerStore`` (``owner_id`` stamped) into
``<tmp>/owners/<owner_id>/``, only for the days the owner has records on. It checks what the
isolation tests check at scale: every owner's messages read back through their own store, no
message of a dialogue the owner is not in, and the total equal to twice the corpus's messages
(each dialogue has two speakers). Figures go to benchmarks/results/owners.json (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
from pathlib import Path

from _common import peak_rss_mib, timed

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import OwnerStore, fan_out_by_speaker, owner_slug
from memory_pipeline.core.common.records import Message
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.stage import gc_paused, split_ingest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
RPC = SHARED / "realpersonachat"
START = dt.date(2022, 7, 29)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=RPC, help="folder of dialogues.jsonl.gz")
    parser.add_argument("--limit", type=int, help="first N dialogues only")
    args = parser.parse_args(argv)
    if not (args.path / "dialogues.jsonl.gz").is_file():
        print(f"error: no dialogues.jsonl.gz under {args.path}", file=sys.stderr)
        return 2
    options = {} if args.limit is None else {"dialogue_limit": args.limit}
    spec = SourceSpec("rpc", "realpersonachat", args.path.resolve(), "Asia/Tokyo", None, options)
    t: dict[str, float] = {}
    with timed(t, "read_once"), gc_paused():
        records = list(read_source(spec))
    corpus_messages = sum(isinstance(r, Message) for r in records)
    with timed(t, "fan_out"), gc_paused():
        fan = fan_out_by_speaker(records)
    del records
    owners = sorted(fan.records)
    files = rows = 0
    with tempfile.TemporaryDirectory() as tmp, timed(t, "ingest_and_write_per_owner"):
        for speaker in owners:
            store = OwnerStore(Path(tmp) / "owners" / owner_slug(speaker), owner_slug(speaker))
            with gc_paused():
                result = ingest(fan.records[speaker], start_date=START)
            days = sorted({m.local_date for _, m in result.messages} | {START})
            for day, tables in split_ingest(result, days).items():
                if not tables.audit.num_rows:
                    continue  # a day the owner did not talk on: nothing written
                store.write(T.RAW_MESSAGES, tables.messages, day)
                store.write(T.QUARANTINE, tables.quarantine, day)
                store.write(T.INGEST_AUDIT, tables.audit, day)
                files += 3
            back = store.read(T.RAW_MESSAGES)
            others = {c for c in back.column("contact_id").to_pylist() if speaker in c.split("+")}
            assert not others, f"{speaker}: a contact names the owner"
            rows += back.num_rows
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*.parquet"))
    # each dialogue is in both its speakers' memories; ingest drops the corpus's duplicated
    # lines per owner, so the total is 2 x the corpus minus a few (< 0.1%), never more
    gap = 2 * corpus_messages - rows
    assert 0 <= gap < max(1, corpus_messages // 1000), (rows, corpus_messages)
    figures = {
        "owners": len(owners),
        "corpus_messages": corpus_messages,
        "owner_messages": rows,
        "duplicates_dropped": gap,
        "unassigned_quarantine_records": fan.unassigned,
        "files_written": files,
        "parquet_bytes": size,
        "seconds": {k: round(v, 2) for k, v in t.items()},
        "owner_messages_per_second": round(rows / t["ingest_and_write_per_owner"]),
        "peak_rss_mib": round(peak_rss_mib(), 1),
    }
    out = ROOT / "benchmarks" / "results" / "owners.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
