"""What a backup costs: bytes and time of `backup` (state only, and --include-derived) and
`restore`, on a real build.

    python benchmarks/bench_backup.py --work DIR                   # the bundled sample
    python benchmarks/bench_backup.py --work DIR --rpc 200 --data /path/to/realpersonachat
                                          # RealPersonaChat: the first 200 dialogues, no owner

Each case builds its project in ``DIR/<case>`` with ``memory-pipeline run`` (the sample's
config, or one RealPersonaChat source in benchmark mode: ``owner = ""``), forgets a contact
(so the state has a forget list) and creates a key, then runs, as child processes:
``backup DIR/<case>/b-state``, ``backup DIR/<case>/b-all --include-derived``, and ``restore``
of each into a wiped copy. Wall seconds and the children's CPU seconds (getrusage) are
recorded with the bytes of every part (state, its Dagster instance, output, provider cache,
indexes, tables) in ``benchmarks/results/backup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "backup.json"
CLI = [sys.executable, "-m", "memory_pipeline.cli"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cli(config: Path, *args: str, env: dict[str, str]) -> dict:
    """One CLI command as a child: its wall and CPU seconds (it must succeed)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [*CLI, "--config", str(config), *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return {
        "wall_s": round(time.perf_counter() - t0, 2),
        "cpu_s": round(_children_cpu() - c0, 2),
        "stdout_tail": done.stdout.strip().splitlines()[-1:],
    }


def _bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _sample_project(work: Path) -> tuple[Path, str]:
    shutil.copytree(ROOT / "data" / "sample", work / "data" / "sample")
    shutil.copy(ROOT / "memory_pipeline.toml", work / "memory_pipeline.toml")
    shutil.copy(ROOT / "dagster.yaml", work / "dagster.yaml")
    return work / "memory_pipeline.toml", "Sam"


def _rpc_project(work: Path, data: Path, dialogues: int) -> tuple[Path, str]:
    config = work / "memory_pipeline.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "dagster.yaml", work / "dagster.yaml")
    config.write_text(
        "\n".join(
            [
                "[pipeline]",
                'owner = "AA"',
                'timezone = "Asia/Tokyo"',
                'start_date = "2022-07-29"',
                'end_date = "2022-11-05"',
                'output_dir = "data/output"',
                "",
                "[[sources]]",
                'name = "rpc"',
                'kind = "realpersonachat"',
                f"path = {json.dumps(str(data.resolve()))}",
                'owner = ""',
                f"dialogue_limit = {dialogues}",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return config, ""


def _first_contact(config: Path, env: dict[str, str]) -> str:
    import pyarrow.dataset as ds

    out = config.parent / "data" / "output" / "parquet" / "raw_messages"
    ids = ds.dataset(out, format="parquet").to_table(columns=["contact_id"])["contact_id"]
    return sorted(set(ids.to_pylist()))[0]


def run_case(name: str, config: Path, contact: str, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env.pop("DAGSTER_HOME", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    rec: dict = {"case": name}
    rec["run"] = _cli(config, "run", "--quiet", env=env)
    contact = contact or _first_contact(config, env)
    rec["forget"] = _cli(config, "forget", "--contact", contact, "--yes", env=env)
    _cli(config, "keys", "create", "--owner", "default", env=env)
    data = config.parent / "data"
    out, state = data / "output", data / "state"
    rec["bytes"] = {
        "state": _bytes(state),
        "state_dagster_instance": _bytes(state / "dagster"),
        "state_forget_list_salt_keys": _bytes(state) - _bytes(state / "dagster"),
        "output": _bytes(out),
        "output_provider_cache": _bytes(out / "cache"),
        "output_indexes": _bytes(out / "indexes"),
        "output_tables": _bytes(out / "parquet"),
        "output_eval": _bytes(out / "eval"),
        "output_warehouse": _bytes(out / "warehouse.duckdb"),
    }
    for kind, flags in (("state", []), ("all", ["--include-derived"])):
        dest = work / f"b-{kind}"
        shutil.rmtree(dest, ignore_errors=True)
        rec[f"backup_{kind}"] = _cli(config, "backup", str(dest), *flags, env=env)
        rec[f"backup_{kind}"]["bytes"] = _bytes(dest)
        manifest = json.loads((dest / "MANIFEST.json").read_text())
        rec[f"backup_{kind}"]["files"] = len(manifest["files"])
        # restore into a wiped copy of the project (the build stays for the next backup)
        copy = work / f"restore-{kind}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(config.parent, copy, ignore=shutil.ignore_patterns("data"))
        if (config.parent / "data" / "sample").is_dir():
            shutil.copytree(config.parent / "data" / "sample", copy / "data" / "sample")
        rec[f"restore_{kind}"] = _cli(copy / config.name, "restore", str(dest), env=env)
    return rec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (emptied)")
    parser.add_argument("--rpc", type=int, help="RealPersonaChat: the first N dialogues")
    shared = os.environ.get("MEMORY_PIPELINE_SHARED_DATA")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(shared) / "realpersonachat" if shared else None,
        help="the RealPersonaChat folder (default: $MEMORY_PIPELINE_SHARED_DATA/realpersonachat)",
    )
    args = parser.parse_args()
    name = f"rpc{args.rpc}" if args.rpc else "sample"
    work = args.work / name
    shutil.rmtree(work, ignore_errors=True)
    project = work / "project"
    project.mkdir(parents=True)
    if args.rpc:
        if args.data is None or not (args.data / "dialogues.jsonl.gz").is_file():
            parser.error("--rpc needs --data /path/to/realpersonachat")
        config, contact = _rpc_project(project, args.data, args.rpc)
    else:
        config, contact = _sample_project(project)
    rec = run_case(name, config, contact, work)
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    results[name] = rec
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
