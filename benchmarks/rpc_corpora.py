"""RealPersonaChat speakers' chat histories as pipeline corpora (one index per speaker).

A corpus of the Japanese chat check is one speaker's history: every dialogue that speaker
took part in, read by the project's own RealPersonaChat reader with ``owner`` = the speaker
(so the other interlocutor is the contact, as a deployment would read it), and run through
the real stages (ingest, sessions, chunks, representations, indexes) by ``defs.runner``.
Dense vectors: ``embedding_text`` only (the default reads no other). The provider cache is
one SQLite file shared by every corpus in ``work`` (a dialogue belongs to both speakers).

    python benchmarks/rpc_corpora.py --work /work/scratch/ja/rpc AA AB ...

A corpus being built holds ``LOCK`` (a second builder skips it; ``--reverse`` runs one from
the other end of the list); a finished one holds ``DONE``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
RPC = SHARED / "realpersonachat"

CONFIG = """
[pipeline]
owner = "{owner}"
timezone = "Asia/Tokyo"
start_date = "{start}"
end_date = "{end}"
output_dir = "output"

[representations]
dense = ["embedding_text"]

[[sources]]
name = "realpersonachat"
kind = "realpersonachat"
path = "{path}"
"""


class Busy(RuntimeError):
    """The corpus is being built by another process."""


def corpus_config(work: Path, speaker: str) -> Path:
    """The config path of ``speaker``'s corpus under ``work`` (built or not)."""
    return work / speaker / "memory_pipeline.toml"


def build_speaker(
    rpc: Path, work: Path, speaker: str, log=lambda m: print(m, file=sys.stderr)
) -> Path:
    """``speaker``'s history indexed through the pipeline in ``work/<speaker>`` (built on the
    first call; a finished build leaves ``DONE``); returns its config path."""
    from memory_pipeline.config import load_config, parse_config
    from memory_pipeline.core.ingest.stage import discover_dates
    from memory_pipeline.defs.build import build_assets
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import materialize_stages, stage_resources, stages

    folder = work / speaker
    config = corpus_config(work, speaker)
    if (folder / "DONE").exists():
        return config
    folder.mkdir(parents=True, exist_ok=True)
    try:  # one builder per corpus: a second process building the same folder would clash
        os.close(os.open(folder / "LOCK", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        raise Busy(f"{speaker}: another process is building it ({folder / 'LOCK'})") from None
    probe = parse_config(
        {
            "pipeline": {"owner": speaker, "timezone": "Asia/Tokyo", "start_date": "2022-01-01"},
            "sources": [{"name": "realpersonachat", "kind": "realpersonachat", "path": str(rpc)}],
        },
        base_dir=folder,
        env={},
    )
    dates = discover_dates(probe.sources, probe.start_date)
    config.write_text(
        CONFIG.format(owner=speaker, start=dates[0], end=dates[-1], path=rpc.resolve().as_posix()),
        encoding="utf-8",
    )
    cfg = load_config(config, env={})
    shared_cache = work / "provider_cache.sqlite"
    cache = cfg.cache_path
    cache.parent.mkdir(parents=True, exist_ok=True)
    if not cache.exists():
        cache.symlink_to(shared_cache.resolve())
    t0 = time.perf_counter()
    materialize_stages(
        build_assets(cfg),
        [*stages("ingest", "sessions", "chunks", "representations"), *stages("indexes")],
        days=[dates[0], dates[-1]],
        resources=stage_resources(PipelineResource(config_file=str(config))),
        on_done=lambda done: log(f"{speaker}: built {', '.join(done.stage.key_names)}"),
    )
    (folder / "DONE").write_text(f"{time.perf_counter() - t0:.0f} s\n")
    log(f"{speaker}: done in {time.perf_counter() - t0:.0f} s")
    return config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rpc", type=Path, default=RPC)
    p.add_argument("--work", type=Path, default=Path("/tmp/rpc_corpora"))
    p.add_argument("--reverse", action="store_true", help="build the list from its end")
    p.add_argument("speakers", nargs="+")
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    order = list(reversed(args.speakers)) if args.reverse else args.speakers
    for s in order:
        try:
            build_speaker(args.rpc, args.work, s)
        except Busy as e:  # two builders (one from each end) share the list
            print(e, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
