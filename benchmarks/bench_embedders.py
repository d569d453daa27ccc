"""Local embedders side by side: texts/s on 2 threads, query latency, RSS, projected build.

Usage (from the repository root)::

    nice -n 5 .venv/bin/python benchmarks/bench_embedders.py   # 400 windows, 100 dialogues
    nice -n 5 .venv/bin/python benchmarks/bench_embedders.py --windows 100 --dialogues 30

Inputs (RealPersonaChat, Japanese, read in file order): ``--windows`` six-message windows
(consecutive utterances ``[sender] text`` lines; the unit the issue measured) and
``--dialogues`` whole dialogues as one text each (a RealPersonaChat chunk is a whole
dialogue, so this is what a build embeds). Each model runs in a fresh interpreter (its own
peak RSS), 2 threads, after a warm-up: load time, windows/s, dialogue texts/s **including
splitting to the model window** (pieces per dialogue shown), single-query latency p50/p95 of
``embed([query], "query")`` over 50 short Japanese queries, and the projected time to embed
the full corpus (13,592 chunks × the representations given by ``--reps``) at that rate.
Figures go to benchmarks/results/embedders.json (git-ignored).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import peak_rss_mib

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "realpersonachat"
)
DEFAULT_JSON = REPO / "benchmarks" / "results" / "embedders.json"
MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small", "use-multilingual-v3")
RPC_CHUNKS = 13_592  # chunks of the full RealPersonaChat build (benchmarks/README.md)
QUERIES = [f"{w}の話をしたのはいつ？" for w in ("旅行", "猫", "映画", "仕事", "ラーメン")] * 10


def load_texts(data: Path, windows: int, dialogues: int) -> tuple[list[str], list[str]]:
    """(six-message windows, whole dialogues) from the start of dialogues.jsonl.gz."""
    wins: list[str] = []
    whole: list[str] = []
    with gzip.open(data / "dialogues.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            lines = [f"[{u['interlocutor_id']}] {u['text']}" for u in d["utterances"]]
            if len(whole) < dialogues:
                whole.append("\n".join(lines))
            for i in range(0, len(lines) - 5, 6):
                if len(wins) < windows:
                    wins.append("\n".join(lines[i : i + 6]))
            if len(wins) >= windows and len(whole) >= dialogues:
                break
    return wins, whole


def child(model: str, data: Path, windows: int, dialogues: int) -> dict:
    """Measure one model in this process."""
    from memory_pipeline.core.represent.providers.factory import make_embedder

    wins, whole = load_texts(data, windows, dialogues)
    t0 = time.perf_counter()
    e = make_embedder("local", model)
    e.embed(["ウォームアップの文です。"] * 8)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = e.embed(wins)
    win_s = time.perf_counter() - t0
    win_over = sum(r.truncated)
    t0 = time.perf_counter()
    pieces = [p for t in whole for p in e.split(t)]
    e.embed(pieces)
    dia_s = time.perf_counter() - t0
    lat = []
    for q in QUERIES:
        t0 = time.perf_counter()
        e.embed([q], input_type="query")
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    tokens = e.token_counts(wins)
    return {
        "model": model,
        "dim": e.dim,
        "window": e.window,
        "load_s": round(load_s, 2),
        "windows": len(wins),
        "window_tokens_mean": round(sum(tokens) / len(tokens), 1),
        "windows_over_window": win_over,
        "windows_per_s": round(len(wins) / win_s, 1),
        "dialogues": len(whole),
        "pieces_per_dialogue": round(len(pieces) / len(whole), 2),
        "dialogues_per_s": round(len(whole) / dia_s, 2),
        "query_ms_p50": round(lat[len(lat) // 2], 1),
        "query_ms_p95": round(lat[int(len(lat) * 0.95)], 1),
        "peak_rss_mib": round(peak_rss_mib(), 0),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--windows", type=int, default=400)
    p.add_argument("--dialogues", type=int, default=100)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--reps", type=int, default=3, help="dense representations per chunk")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.data, args.windows, args.dialogues)))
        return
    rows = []
    for model in args.models.split(","):
        cmd = [sys.executable, __file__, "--child", model, "--data", str(args.data),
               "--windows", str(args.windows), "--dialogues", str(args.dialogues)]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if out.returncode:
            sys.exit(f"{model}: child failed: {out.stderr.strip().splitlines()[-1:]}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["projected_full_build_min"] = round(
            RPC_CHUNKS * args.reps / row["dialogues_per_s"] / 60, 1
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'model':24} {'win/s':>7} {'dia/s':>7} {'pieces':>6} {'q p50':>6} "
          f"{'RSS MiB':>8} {'full build (min, ' + str(args.reps) + ' reps)':>26}")
    for r in rows:
        print(f"{r['model']:24} {r['windows_per_s']:7.1f} {r['dialogues_per_s']:7.2f} "
              f"{r['pieces_per_dialogue']:6.2f} {r['query_ms_p50']:6.1f} {r['peak_rss_mib']:8.0f} "
              f"{r['projected_full_build_min']:26.1f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
