"""Nightly refresh vs full build, side by side in one run, on all of RealPersonaChat.

Usage (from the repository root)::

    PYTHONPATH=$PWD python benchmarks/bench_nightly.py --data /work/shared/data/realpersonachat

What is compared (one process, one fresh output folder and token cache, ephemeral instance;
the shipped definitions with their asset checks; offline providers: extractive summaries,
rule memories):

- **full**: every partition of the corpus (2022-07-29..2022-11-05) except the nightly day D,
  each stage one single-run backfill (ingest, sessions, chunks, representations, memories),
  then the refresh the automation conditions request (``search_indexes`` = BM25 x3 + vectors
  + time metadata + memory timeline, ``storage_report``, ``warehouse``) with a cold token
  cache. Leaving D out makes this a slight *under*-estimate of a full build, so the ratio
  below is conservative.
- **nightly**: what the nightly schedule runs for D (partitions D-1..D, the same stages),
  then the same refresh, now with the token cache of the full build: only D's new chunks
  (and D-1's re-chunked ones, if any changed) and turn documents are tokenized, and ingest
  reads the parsed records of the unchanged export from ``<output>/cache/ingest``; the
  indexes are assembled from the per-partition token parts of ``<output>/cache/index_parts``
  (``core/indexes/parts.py``), recomputed for D-1 and D only.

D is the busiest day of the corpus (most messages): the worst nightly. Dense vectors are
off (``[representations] dense = []``) on both sides: the local all-MiniLM-L6-v2 embeds
~10 texts/s here, so a full build with vectors would take hours; embeddings are cached per
text like the tokens, so with vectors on the nightly share would be smaller still.
Target: nightly <= 2 % of full. Figures to ``benchmarks/results/nightly.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import peak_rss_mib

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "realpersonachat"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "nightly.json"
START, END = dt.date(2022, 7, 29), dt.date(2022, 11, 5)
TARGET_SHARE = 0.02
PARTITION_STAGES = ("ingest", "sessions", "chunks", "representations", "memories")
REFRESH_STAGES = ("indexes", "storage", "warehouse")


def write_config(root: Path, data: Path) -> Path:
    path = root / "memory_pipeline.toml"
    path.write_text(
        f"""
[pipeline]
owner = "bench"
timezone = "Asia/Tokyo"
start_date = "{START}"
end_date = "{END}"
output_dir = "out"

[[sources]]
name = "rpc"
kind = "realpersonachat"
path = "{data}"
owner = ""

[representations]
dense = []
""",
        encoding="utf-8",
    )
    return path


def subset(data: Path, dest: Path, n: int) -> Path:
    """The first ``n`` dialogue lines of ``data`` (and its interlocutors) under ``dest``."""
    import gzip
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    with (
        gzip.open(data / "dialogues.jsonl.gz", "rt", encoding="utf-8") as src,
        gzip.open(dest / "dialogues.jsonl.gz", "wt", encoding="utf-8") as out,
    ):
        for k, line in enumerate(src):
            if k >= n:
                break
            out.write(line)
    shutil.copyfile(data / "interlocutors.json", dest / "interlocutors.json")
    return dest


def busiest_day(cfg) -> tuple[dt.date, int]:
    from memory_pipeline.core.common.records import Message
    from memory_pipeline.core.ingest.sources import read_source

    days: Counter[dt.date] = Counter()
    for spec in cfg.sources:
        for rec in read_source(spec):
            if isinstance(rec, Message):
                days[rec.local_date] += 1
    day, n = max(((d, n) for d, n in days.items() if START < d <= END), key=lambda x: x[1])
    return day, n


def run_stages(defs, resources, instance, names, days) -> dict[str, float]:
    from memory_pipeline.defs.runner import materialize_stages, stages

    out: dict[str, float] = {}
    for stage in stages(*names):
        [res] = materialize_stages(
            defs, [stage], days=days, resources=resources, instance=instance, log_level="ERROR"
        )
        if not res.success or res.failed:
            raise SystemExit(f"stage {stage.name} failed: {[e.check_name for e in res.failed]}")
        out[stage.name] = res.seconds
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    ap.add_argument("--work", type=Path, default=None, help="output folder (default: a tmp dir)")
    ap.add_argument(
        "--dialogues",
        type=int,
        default=None,
        help="only the first N dialogues (a copy in the work folder): quick iterations",
    )
    args = ap.parse_args()
    for k in [k for k in os.environ if k.startswith("MEMORY_PIPELINE_")]:
        del os.environ[k]
    os.environ["HF_HUB_OFFLINE"] = "1"
    import dagster as dg

    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.providers import provider_resources
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import stage_resources

    work = args.work or Path(tempfile.mkdtemp(prefix="bench_nightly_"))
    work.mkdir(parents=True, exist_ok=True)
    data = args.data.resolve()
    if args.dialogues is not None:
        data = subset(data, work / "data", args.dialogues)
    config = write_config(work, data)
    cfg = load_config(config)
    day, day_messages = busiest_day(cfg)
    prev = day - dt.timedelta(days=1)
    every = [START + dt.timedelta(days=i) for i in range((END - START).days + 1)]
    before, after = [d for d in every if d < day], [d for d in every if d > day]
    defs = build_definitions(cfg, str(config))
    resources = stage_resources(PipelineResource(config_file=str(config)), provider_resources({}))
    instance = dg.DagsterInstance.ephemeral()
    print(f"nightly day D = {day} ({day_messages} messages); work folder {work}", flush=True)

    t0, c0 = time.perf_counter(), time.process_time()
    full = {}
    for days in (before, after):
        for name, s in run_stages(defs, resources, instance, PARTITION_STAGES, days).items():
            full[name] = full.get(name, 0.0) + s
    full |= {
        f"refresh/{k}": v
        for k, v in run_stages(defs, resources, instance, REFRESH_STAGES, []).items()
    }
    full_total, full_cpu = time.perf_counter() - t0, time.process_time() - c0
    store = TableStore(cfg.output_dir)
    chunks_full = store.read(T.CHUNKS, columns=["chunk_id"]).num_rows
    print(
        f"full build: {full_total:.1f} s  {json.dumps({k: round(v, 1) for k, v in full.items()})}"
    )

    t0, c0 = time.perf_counter(), time.process_time()
    nightly = run_stages(defs, resources, instance, PARTITION_STAGES, [prev, day])
    nightly |= {
        f"refresh/{k}": v
        for k, v in run_stages(defs, resources, instance, REFRESH_STAGES, []).items()
    }
    nightly_total, nightly_cpu = time.perf_counter() - t0, time.process_time() - c0
    bm25 = instance.get_latest_materialization_event(dg.AssetKey("bm25_index"))
    meta = {k: v.value for k, v in bm25.asset_materialization.metadata.items()}
    chunks_all = store.read(T.CHUNKS, columns=["chunk_id"]).num_rows
    share = nightly_total / full_total
    print(
        f"nightly D-1..D: {nightly_total:.1f} s  "
        f"{json.dumps({k: round(v, 1) for k, v in nightly.items()})}"
    )
    print(
        f"refresh tokenized {meta.get('tokens_computed')} chunk texts, read "
        f"{meta.get('tokens_cached')} from the cache; turn documents: "
        f"{meta.get('turn_tokens_computed')} tokenized, {meta.get('turn_tokens_cached')} cached; "
        f"chunks {chunks_full} -> {chunks_all}"
    )
    print(
        f"cpu seconds: full {full_cpu:.1f}, nightly {nightly_cpu:.1f} "
        f"({nightly_cpu / full_cpu:.2%}; the wall share is the target, cpu shows the load)"
    )
    verdict = "OK" if share <= TARGET_SHARE else "MISSED"
    print(
        f"nightly / full = {share:.2%} (target <= {TARGET_SHARE:.0%}): {verdict}; "
        f"peak RSS {peak_rss_mib():.0f} MiB; load {os.getloadavg()[0]:.1f}"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "dialogues": args.dialogues,
                "day": day.isoformat(),
                "day_messages": day_messages,
                "full_seconds": full_total,
                "full": full,
                "nightly_seconds": nightly_total,
                "nightly": nightly,
                "full_cpu_seconds": full_cpu,
                "nightly_cpu_seconds": nightly_cpu,
                "share": share,
                "target": TARGET_SHARE,
                "tokens_computed": meta.get("tokens_computed"),
                "tokens_cached": meta.get("tokens_cached"),
                "turn_tokens_computed": meta.get("turn_tokens_computed"),
                "turn_tokens_cached": meta.get("turn_tokens_cached"),
                "load_average": os.getloadavg()[0],
                "chunks": chunks_all,
                "python": sys.version.split()[0],
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    return 0 if share <= TARGET_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
