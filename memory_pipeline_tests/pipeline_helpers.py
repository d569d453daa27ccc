"""Helpers for tests that materialize the real Dagster assets into a tmp folder."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections.abc import Iterable
from pathlib import Path

import dagster as dg
import pyarrow as pa

from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import REGISTRY
from memory_pipeline.defs.build import build_assets
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.runner import (
    materialize_stages,
    quiet_run_config,
    stage_for,
    stage_resources,
)

INGEST_KEYS = ["raw_messages", "quarantine", "ingest_audit"]
ID_COLUMNS = {
    "raw_messages": "message_id",
    "quarantine": "quarantine_id",
    "ingest_audit": "source",
    "sessions": "session_id",
    "chunks": "chunk_id",
    "chunk_summaries": "chunk_id",
    "embedding_texts": "chunk_id",
    "session_enrichment": "session_id",
    "memories": "memory_id",
    "memory_rejects": "session_id",
    "dossiers": "contact_id",
}
REPRESENTATION_KEYS = ["chunk_summaries", "embedding_texts", "session_enrichment"]
MEMORY_KEYS = ["memories", "dossiers"]
INDEX_KEYS = ["bm25_index", "vector_index", "time_metadata", "memory_timeline"]


def build_all(runner: Runner, days: list[dt.date]) -> None:
    """Every stage in dependency order, each as one run over ``days``, then the indexes."""
    for keys in (
        INGEST_KEYS,
        ["sessions"],
        ["chunks"],
        REPRESENTATION_KEYS,
        ["chunk_embeddings"],
        MEMORY_KEYS,
    ):
        runner.run(keys, days)
    runner.run(INDEX_KEYS, [])


QUIET_LEVEL = "ERROR"
QUIET = quiet_run_config(QUIET_LEVEL)  # for tests that call dg.materialize themselves


def write_config(folder: Path, body: str) -> Path:
    """A memory_pipeline.toml in ``folder`` (paths inside are relative to it)."""
    path = folder / "memory_pipeline.toml"
    path.write_text(body, encoding="utf-8")
    return path


class Runner:
    """Materializes stages of the real assets for one config into its output folder."""

    def __init__(self, config_file: Path, output_dir: Path, providers: dict | None = None) -> None:
        self.resource = PipelineResource(config_file=str(config_file), output_dir=str(output_dir))
        # offline defaults unless a test passes provider resources (see defs/providers.py)
        self.providers = provider_resources(env={}) if providers is None else providers
        self.cfg: PipelineConfig = self.resource.cfg
        self.assets = build_assets(self.cfg)
        self.store = TableStore(output_dir)

    def run(
        self,
        keys: list[str],
        dates: Iterable[dt.date],
        instance: dg.DagsterInstance | None = None,
        *,
        raise_on_error: bool = True,
    ) -> dg.ExecuteInProcessResult:
        """One run over a date range (single-run backfill) or one date; no dates for the
        unpartitioned assets (indexes, warehouse). Asserts success and no failed ERROR check
        unless ``raise_on_error=False`` (then the caller inspects the result)."""
        [run] = materialize_stages(
            self.assets,
            [stage_for(keys)],
            days=list(dates),
            resources=stage_resources(self.resource, self.providers),
            instance=instance,
            log_level=QUIET_LEVEL,
            raise_on_error=raise_on_error,
        )
        if not raise_on_error:
            return run.result
        assert run.success
        assert not run.failed, [(e.asset_key, e.check_name, e.metadata) for e in run.failed]
        return run.result

    def tables(self) -> dict[str, pa.Table]:
        """Every table, rows sorted by id: equal tables mean equal builds."""
        out = {}
        for name in (t.name for t in REGISTRY if t.schema is not None):
            if name not in ID_COLUMNS or not self.store.dates(name):
                continue
            t = self.store.read(name)
            sort = [(ID_COLUMNS[name], "ascending")]
            if name == "ingest_audit":
                sort = [("partition_date", "ascending"), *sort]
            if name in ("dossiers", "memory_rejects"):
                sort = [
                    ("local_date", "ascending"),
                    *sort,
                    ("text" if name != "dossiers" else "name", "ascending"),
                ]
            out[name] = t.sort_by(sort)
        return out


def rpc_slice(src: Path, dest: Path, owner: str, first: str, last: str) -> int:
    """Copy the owner's real dialogues that start in [first, last] into a small corpus."""
    dest.mkdir(parents=True, exist_ok=True)
    kept = 0
    needle = f'"{owner}"'
    with (
        gzip.open(src / "dialogues.jsonl.gz", "rt", encoding="utf-8") as fin,
        gzip.open(dest / "dialogues.jsonl.gz", "wt", encoding="utf-8") as fout,
    ):
        for line in fin:
            if needle not in line:
                continue
            d = json.loads(line)
            stamps = [u["timestamp"] for u in d["utterances"] if u["timestamp"] != "NaT"]
            if owner in d["interlocutors"] and stamps and first <= stamps[0][:10] <= last:
                fout.write(line)
                kept += 1
    return kept


def rpc_corpus(shared_data: Path, root: Path, owner: str, first: str, last: str) -> Path:
    """A folder with a real RealPersonaChat slice of ``owner`` and its memory_pipeline.toml."""
    kept = rpc_slice(shared_data / "realpersonachat", root / "rpc", owner, first, last)
    assert kept > 30
    write_config(
        root,
        f"""
[pipeline]
owner = "{owner}"
timezone = "Asia/Tokyo"
start_date = "{first}"
end_date = "{last}"
output_dir = "out"

[[sources]]
name = "rpc"
kind = "realpersonachat"
path = "rpc"
""",
    )
    return root
