"""The asset graph of the shipped configuration as a reviewed snapshot.

Why: assets, their dependencies and partition mappings, partition definitions, checks and groups
are what the Dagster UI and every backfill see; a refactor must not change them by accident.
The graph is serialized to ``snapshots/asset_graph.json``; any change shows up as a diff in
review. After an intended change, rewrite it with::

    UPDATE_SNAPSHOTS=1 python -m pytest memory_pipeline_tests/test_asset_graph.py
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any

import dagster as dg
import pytest

from memory_pipeline.config import ENV_PREFIX, load_config
from memory_pipeline.defs.build import build_definitions
from memory_pipeline_tests.paths import ROOT

SNAPSHOT = ROOT / "memory_pipeline_tests" / "snapshots" / "asset_graph.json"
# The shipped config is bounded (end_date covers the bundled sample), so the snapshot does not
# depend on today's date; everything comes from memory_pipeline.toml.
FIXED_ENV: dict[str, str] = {}


def _partitions(pd: dg.PartitionsDefinition | None) -> dict[str, Any] | None:
    if pd is None:
        return None
    out: dict[str, Any] = {"type": type(pd).__name__}
    if isinstance(pd, dg.TimeWindowPartitionsDefinition):
        out |= {
            "start": pd.start.isoformat(),
            "end": pd.end.isoformat() if pd.end else None,  # exclusive
            "timezone": pd.timezone,
            "cron_schedule": pd.cron_schedule,
            "fmt": pd.fmt,
            "end_offset": pd.end_offset,
        }
    return out


def graph_snapshot(defs: dg.Definitions) -> dict[str, Any]:
    """Asset keys, deps, partition mappings and definitions, checks, groups, jobs, schedules."""
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    checks: dict[str, dict[str, str]] = {}  # asset -> check name -> blocking | non-blocking
    for key in graph.asset_check_keys:
        blocking = graph.get_check_spec(key).blocking
        checks.setdefault(key.asset_key.to_user_string(), {})[key.name] = (
            "blocking" if blocking else "non-blocking"
        )
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        name = key.to_user_string()
        assets[name] = {
            "group": node.group_name,
            "deps": sorted(p.to_user_string() for p in node.parent_keys),
            "partition_mappings": {
                p.to_user_string(): repr(m)
                for p, m in sorted(node.partition_mappings.items(), key=lambda i: str(i[0]))
            },
            "partitions": _partitions(node.partitions_def),
            "backfill_policy": repr(node.backfill_policy) if node.backfill_policy else None,
            "checks": checks.get(name, {}),
        }
    jobs = {
        job.name: sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys)
        for job in sorted(repo.get_all_jobs(), key=lambda j: j.name)
        if not job.name.startswith("__")  # dagster's implicit asset job
    }
    schedules = {
        s.name: {
            "job": s.job_name,
            "cron_schedule": s.cron_schedule,
            "timezone": s.execution_timezone,
        }
        for s in sorted(repo.schedule_defs, key=lambda s: s.name)
    }
    return {"assets": assets, "jobs": jobs, "schedules": schedules}


def _render(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):  # provider/source overrides must not leak into the graph
            if name.startswith(ENV_PREFIX):
                mp.delenv(name)
        cfg = load_config(ROOT / "memory_pipeline.toml", env=FIXED_ENV)
        return graph_snapshot(build_definitions(cfg))


def test_asset_graph_matches_the_snapshot(current: dict[str, Any]):
    text = _render(current)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert SNAPSHOT.is_file(), f"no snapshot yet: run with UPDATE_SNAPSHOTS=1 to write {SNAPSHOT}"
    expected = SNAPSHOT.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            "snapshots/asset_graph.json",
            "current graph",
        )
    )
    assert not diff, f"asset graph changed (UPDATE_SNAPSHOTS=1 to accept):\n{diff}"


def test_snapshot_does_not_depend_on_today(current: dict[str, Any]):
    """Every partitioned asset has a fixed end (an open end would be today's date): the
    shipped end_date, the sample's last day (2024-03-14; the snapshot holds the exclusive end)."""
    parts = [a["partitions"] for a in current["assets"].values() if a["partitions"]]
    assert parts and all(p["end"].startswith("2024-03-15T00:00:00") for p in parts)  # exclusive


def test_snapshot_covers_the_pipeline(current: dict[str, Any]):
    """A sanity floor so an empty or truncated snapshot cannot be accepted unnoticed."""
    assets = current["assets"]
    assert {"raw_messages", "sessions", "chunks", "bm25_index", "warehouse"} <= set(assets)
    assert "raw_messages" in assets["sessions"]["deps"]
    assert assets["ingest_audit"]["checks"]["conservation"] == "blocking"
    assert current["schedules"]["nightly"]["job"] == "memory_pipeline_daily"


def test_readme_picture_is_drawn_from_the_definitions(current: dict[str, Any]):
    """The README's graph is the generated one (asset_picture.py), so it names every asset,
    `retention` included, and only real edges."""
    from memory_pipeline_tests.asset_picture import PAGES, block, readme_block

    for page in PAGES:
        shown = readme_block(page.read_text(encoding="utf-8"))
        assert shown == block(current["assets"]), (
            f"{page.name}: asset graph is stale: "
            "python -m memory_pipeline_tests.asset_picture --write"
        )


def test_picture_edges_are_real_and_keep_every_path(current: dict[str, Any]):
    """The reduction draws only declared inputs and loses no dependency: what reaches what
    through the drawn arrows is what reaches what in the definitions."""
    from memory_pipeline_tests.asset_picture import reduced_edges

    deps = {n: set(a["deps"]) for n, a in current["assets"].items()}
    edges = reduced_edges(deps)
    assert all(up in deps[down] for up, down in edges)

    def closure(adj: dict[str, set[str]]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}

        def up(n: str) -> set[str]:
            if n not in out:
                out[n] = set()
                for d in adj[n] - {n}:
                    out[n] |= {d} | up(d)
            return out[n]

        for n in adj:
            up(n)
        return out

    drawn: dict[str, set[str]] = {n: set() for n in deps}
    for a, b in edges:
        drawn[b].add(a)
    assert closure(drawn) == closure(deps)
    assert ("retention", "raw_messages") in edges
    assert "memory_timeline" not in {d for u, d in edges if u == "chunk_embeddings"}


def test_pipeline_page_describes_every_asset(current: dict[str, Any]):
    """docs/pipeline.md's asset table has a row naming each asset of the graph."""
    import re

    page = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    rows = [ln for ln in page.splitlines() if ln.startswith("| `")]
    named = {n for ln in rows for n in re.findall(r"`(\w+)`", ln.split("|")[1])}
    assert set(current["assets"]) <= named, sorted(set(current["assets"]) - named)
