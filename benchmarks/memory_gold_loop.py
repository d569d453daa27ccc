"""Fast loop for the memory extractor against LoCoMo dev observations (issue 12).

Usage (from the repository root)::

    PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/memory_gold_loop.py          # LoCoMo
    ... benchmarks/memory_gold_loop.py --dossier      # + dossier final-page event coverage
    ... benchmarks/memory_gold_loop.py --rpc          # + RealPersonaChat persona coverage (AA)
                                                      #   and memories per 1,000 messages
    ... benchmarks/memory_gold_loop.py --dump DIR     # uncovered / non-covering lists to read

The corpus (ingest -> sessions, gap 180, and the extractive enrichment the dossier fold
reads) is built once into ``--cache`` (default /tmp/memory_gold_loop) and reused; only
``extract_memories`` and the scoring run again, so a rule change is measured in seconds.
The corpus is the one of docs/memory_precision_sample.md (the same memories as the
``memory-pipeline eval`` corpus). Only the dev file is read; observations are used for
scoring and for the category counts printed here, never by the extractor.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import os
import re
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
RPC_OWNER = "AA"
RPC_SLICE = 200

_FIRST = re.compile(r"\b(?:I|I'm|I've|I'll|I'd|me|my|mine|myself|we|we're|our|us)\b", re.I)
_YOU = re.compile(r"\b(?:you|your|yours|you're|you've)\b", re.I)


class Clock:
    """Wall and CPU seconds per step (the machine is shared: CPU time is the figure)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float, float]] = []

    def __call__(self, name: str):
        clock = self

        class _Step:
            def __enter__(self):
                self.w, self.c = time.perf_counter(), time.process_time()

            def __exit__(self, *exc):
                clock.steps.append(
                    (name, time.perf_counter() - self.w, time.process_time() - self.c)
                )

        return _Step()

    def report(self) -> str:
        return ", ".join(f"{n} {w:.2f}s wall/{c:.2f}s cpu" for n, w, c in self.steps)


def _cached(path: Path, build):
    if path.exists():
        return pq.read_table(path)
    table = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return table


def locomo_corpus(locomo: Path, cache: Path) -> tuple[pa.Table, pa.Table]:
    """(messages, sessions) of the dev file, cached as Parquet."""
    from memory_pipeline.core.ingest.columnar import ingest
    from memory_pipeline.core.ingest.normalize import messages_table
    from memory_pipeline.core.ingest.sources import SourceSpec, read_source
    from memory_pipeline.core.sessions.sessionize import sessionize

    def build_messages() -> pa.Table:
        spec = SourceSpec("locomo", "locomo", locomo, "UTC", None)
        result = ingest(list(read_source(spec)), start_date=dt.date(2000, 1, 1))
        return messages_table(result.messages)

    messages = _cached(cache / "locomo_messages.parquet", build_messages)
    sessions = _cached(cache / "locomo_sessions.parquet", lambda: sessionize(messages, 180))
    return messages, sessions


def _enrichment(cache: Path, name: str, sessions: pa.Table, messages: pa.Table) -> pa.Table:
    from memory_pipeline.core.represent.build import enrich_sessions

    return _cached(
        cache / f"{name}_enrichment.parquet", lambda: enrich_sessions(sessions, messages)
    )


def _categories(memories: pa.Table, messages: pa.Table, observations, speakers, gold) -> None:
    """Counts of uncovered observations and non-covering memories by a rough category."""
    from memory_pipeline.core.evaluation.memory_gold import content_f1, content_words

    turn = {}
    for r in messages.select(["conversation_id", "source_ref", "sender", "text"]).to_pylist():
        turn[(r["conversation_id"], r["source_ref"])] = r
    ref_of = dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("source_ref").to_pylist(),
            strict=True,
        )
    )
    cited: dict[tuple[str, str, str], list[dict]] = {}
    rows = memories.select(
        ["memory_id", "conversation_id", "subject", "kind", "text", "message_ids"]
    ).to_pylist()
    for r in rows:
        for mid in r["message_ids"]:
            cited.setdefault((r["conversation_id"], r["subject"], ref_of[mid]), []).append(r)
    unc: Counter[str] = Counter()
    unc_items: list[tuple[str, object, list[dict]]] = []
    for i, o in enumerate(observations):
        if i in gold.covered_by:
            continue
        turns = [turn.get((o.corpus_id, ref)) for ref in o.evidence]
        turns = [t for t in turns if t]
        mems = [m for ref in o.evidence for m in cited.get((o.corpus_id, o.speaker, ref), [])]
        own = [t for t in turns if t["sender"] == o.speaker]
        if not turns:
            cat = "no_turn"
        elif mems:
            cat = "memory_low_f1"
        elif not own:
            cat = "other_speaker_turn"
        elif all("?" in t["text"] for t in own):
            cat = "question"
        elif not any(_FIRST.search(t["text"]) for t in own):
            cat = "no_first_person"
        else:
            cat = "first_person_no_memory"
        unc[cat] += 1
        unc_items.append((cat, o, mems, turns))
    obs_at: dict[tuple[str, str, str], list[int]] = {}
    for i, o in enumerate(observations):
        for ref in o.evidence:
            obs_at.setdefault((o.corpus_id, o.speaker, ref), []).append(i)
    non: Counter[str] = Counter()
    non_items = []
    for r in rows:
        if r["memory_id"] in gold.covers or r["conversation_id"] not in speakers:
            continue
        near = [
            i
            for mid in r["message_ids"]
            for i in obs_at.get((r["conversation_id"], r["subject"], ref_of[mid]), ())
        ]
        words = content_words(r["text"], speakers[r["conversation_id"]])
        best = max(
            (content_f1(words, content_words(observations[i].text, ())) for i in near),
            default=None,
        )
        cat = "no_observation_on_turn" if best is None else "observation_low_f1"
        non[f"{cat}/{r['kind']}"] += 1
        non_items.append((cat, r, best, [observations[i].text for i in near]))
    print("uncovered observations:", dict(unc.most_common()))
    print("non-covering memories:", dict(sorted(non.items())))
    return unc_items, non_items


def _dump(out: Path, unc_items, non_items, messages: pa.Table) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text_of = dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("text").to_pylist(),
            strict=True,
        )
    )
    with (out / "uncovered.txt").open("w", encoding="utf-8") as f:
        for cat, o, mems, turns in sorted(unc_items, key=lambda x: x[0]):
            f.write(f"[{cat}] {o.corpus_id} {o.speaker} {o.evidence}\n  OBS: {o.text}\n")
            for t in turns:
                f.write(f"  TURN {t['source_ref']} {t['sender']}: {t['text']}\n")
            for m in mems:
                f.write(f"  MEM: {m['text']}\n")
    with (out / "noncovering.txt").open("w", encoding="utf-8") as f:
        for cat, r, best, near in sorted(non_items, key=lambda x: (x[0], x[1]["kind"])):
            src = " | ".join(text_of[m] for m in r["message_ids"])
            f.write(f"[{cat}/{r['kind']}] {r['conversation_id']} best_f1={best}\n")
            f.write(f"  MEM: {r['text']}\n  SRC: {src}\n")
            for t in near:
                f.write(f"  OBS: {t}\n")


def _rpc(cache: Path, clock: Clock) -> None:
    """Persona coverage of AA's partners' dossiers, and memories / 1,000 messages on the
    first RPC_SLICE dialogues (the corpus of docs/memory_precision_sample.md)."""
    from memory_pipeline.core.evaluation import dossier_eval as de
    from memory_pipeline.core.ingest.normalize import messages_table
    from memory_pipeline.core.ingest.sources.base import SourceSpec
    from memory_pipeline.core.ingest.stage import discover_dates, read_all
    from memory_pipeline.core.memories.extract import count_by_kind, extract_memories
    from memory_pipeline.core.sessions.sessionize import sessionize

    folder = SHARED / "realpersonachat"
    start = dt.date(1970, 1, 1)

    def read(spec: SourceSpec) -> pa.Table:
        return messages_table(read_all([spec], discover_dates([spec], start), start).messages)

    slice_dir = cache / "rpc_slice"
    if not (slice_dir / "dialogues.jsonl.gz").exists():
        slice_dir.mkdir(parents=True, exist_ok=True)
        with gzip.open(folder / "dialogues.jsonl.gz", "rt", encoding="utf-8") as src:
            lines = [next(src) for _ in range(RPC_SLICE)]
        with gzip.open(slice_dir / "dialogues.jsonl.gz", "wt", encoding="utf-8") as dst:
            dst.writelines(lines)
    spec = SourceSpec("rpc", "realpersonachat", slice_dir, "Asia/Tokyo", None)
    s_msgs = _cached(cache / "rpc_slice_messages.parquet", lambda: read(spec))
    s_ses = _cached(cache / "rpc_slice_sessions.parquet", lambda: sessionize(s_msgs, 180))
    with clock("rpc slice extract"):
        s_mem, _ = extract_memories(s_ses, s_msgs)
    print(
        f"RPC first {RPC_SLICE} dialogues: {s_mem.num_rows} memories / {s_msgs.num_rows} "
        f"messages = {1000 * s_mem.num_rows / s_msgs.num_rows:.1f} per 1,000; "
        f"kinds {count_by_kind(s_mem)}"
    )
    spec = SourceSpec("rpc", "realpersonachat", folder, "Asia/Tokyo", RPC_OWNER)
    msgs = _cached(cache / "rpc_aa_messages.parquet", lambda: read(spec))
    ses = _cached(cache / "rpc_aa_sessions.parquet", lambda: sessionize(msgs, 180))
    enr = _enrichment(cache, "rpc_aa", ses, msgs)
    with clock("rpc AA extract+fold+persona"):
        mem, _ = extract_memories(ses, msgs)
        versions = de.fold_versions(ses, msgs, enr, mem)
        run = de.persona_coverage(folder / "interlocutors.json", versions, resamples=2000)
    de.format_summary(run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--locomo", type=Path, default=SHARED / "locomo" / "locomo_dev.json")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/memory_gold_loop"))
    ap.add_argument("--dump", type=Path, default=None)
    ap.add_argument("--dossier", action="store_true")
    ap.add_argument("--rpc", action="store_true")
    ap.add_argument("--resamples", type=int, default=5000)
    args = ap.parse_args()

    from memory_pipeline.core.evaluation.memory_gold import (
        load_locomo_observations,
        score_memories_against_gold,
    )
    from memory_pipeline.core.memories.extract import extract_memories

    clock = Clock()
    with clock("corpus"):
        messages, sessions = locomo_corpus(args.locomo, args.cache)
        observations, speakers = load_locomo_observations(args.locomo)
    with clock("extract"):
        memories, _ = extract_memories(sessions, messages)
    with clock("score"):
        gold = score_memories_against_gold(
            memories, messages, observations, speakers, resamples=args.resamples
        )
    for r in gold.summary.to_pylist():
        print(
            f"{r['metric']}: {r['mean']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}] "
            f"pooled {r['pooled']:.3f}"
        )
    for r in gold.per_conversation.to_pylist():
        print(
            f"  {r['corpus_id']}: {r['covered']}/{r['observations']} covered, "
            f"{r['covering_memories']}/{r['n_memories']} covering"
        )
    unc, non = _categories(memories, messages, observations, speakers, gold)
    if args.dump:
        _dump(args.dump, unc, non, messages)
    if args.dossier:
        from memory_pipeline.core.evaluation import dossier_eval as de

        enrichment = _enrichment(args.cache, "locomo", sessions, messages)
        with clock("dossier fold+coverage"):
            versions = de.fold_versions(sessions, messages, enrichment, memories)
            run = de.event_coverage(
                args.locomo, sessions, messages, versions, resamples=args.resamples
            )
        de.format_summary(run)
    if args.rpc:
        _rpc(args.cache, clock)
    print(f"timings: {clock.report()}; load {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
