"""The living dossiers' day-by-day fold and render over a synthetic life, without Dagster.

A life of ``--messages`` over ``--years`` (``life_corpus.life``: six contacts, five apps,
English) goes through the real core steps up to the memories (ingest, sessions, the rule
enrichment, the rule memory extractor; not timed), then every day with sessions is folded
(``build_day``) and rendered (``dossier_rows``) in order, as the ``dossiers`` stage does in a
first run. Printed: process CPU seconds of the fold and of the render, the longest Timeline
held, and a SHA-256 over every day's rows (markdown and state), so two versions of the code
can be checked to give byte-identical pages (``--dump``: one digest per day and contact, to
find the first page that differs). Compare digests at one ``PYTHONHASHSEED``: the inputs
are not the same under every seed (the session enrichment picks among tied summary bullets
in set order, 2 of 5,057 sessions at 100,000 messages), so ``inputs_sha256`` says whether
two runs started from the same tables.

Usage::

    PYTHONHASHSEED=0 python benchmarks/bench_dossier_days.py --messages 100000 --years 10
    python benchmarks/bench_dossier_days.py --messages 20000 --years 10 --profile out.prof
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import life_corpus as lc  # noqa: E402

from memory_pipeline.core.common.records import Message  # noqa: E402
from memory_pipeline.core.common.timeutil import to_utc  # noqa: E402
from memory_pipeline.core.ingest.columnar import ingest  # noqa: E402
from memory_pipeline.core.ingest.normalize import messages_table  # noqa: E402
from memory_pipeline.core.memories.dossier import build_day, dossier_rows  # noqa: E402
from memory_pipeline.core.memories.extract import extract_memories  # noqa: E402
from memory_pipeline.core.represent.build import enrich_sessions  # noqa: E402
from memory_pipeline.core.sessions.sessionize import sessionize  # noqa: E402

GAP_MINUTES = 30


def inputs(messages: int, years: float, seed: int) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table]:
    """(messages, sessions, enrichment, memories) of a synthetic life, by the core steps."""
    last = dt.date(2024, 12, 31)
    first = last - dt.timedelta(days=round(365.25 * years) - 1)
    records = []
    for i, m in enumerate(lc.life(messages, first, last, seed=seed)):
        local = m.ts.replace(tzinfo=None)
        conv = f"{m.app}:{m.contact}"
        records.append(
            Message(
                source=m.app,
                conversation_id=conv,
                contact_id=m.contact,
                sender=lc.OWNER if m.from_owner else m.contact,
                is_owner=m.from_owner,
                ts=to_utc(local, "UTC"),
                local_ts=local,
                tz="UTC",
                type="text",
                text=m.text,
                source_order=i,
                source_ref=f"{conv}:{i + 1}",
                source_file=f"{m.app}.txt",
                source_line=i + 1,
            )
        )
    result = ingest(records, start_date=first)
    table = messages_table(result.messages)
    sessions = sessionize(table, GAP_MINUTES)
    enrichment = enrich_sessions(sessions, table)
    memories, _ = extract_memories(sessions, table, owner=lc.OWNER)
    return table, sessions, enrichment, memories


def by_day(table: pa.Table, days: list[dt.date]) -> dict[dt.date, pa.Table]:
    col = table.column("local_date")
    return {d: table.filter(pc.equal(col, pa.scalar(d, pa.date32()))) for d in days}


def run(
    messages: int, years: float, seed: int, profile: str | None, dump: str | None = None
) -> dict:
    t0 = time.process_time()
    msgs, sessions, enrichment, memories = inputs(messages, years, seed)
    prep = time.process_time() - t0
    given = hashlib.sha256()  # the inputs too: a different page may come from them
    for t in (msgs, sessions, enrichment, memories):
        given.update(repr(t.to_pydict()).encode())
    days = sorted(set(sessions.column("local_date").to_pylist()))
    per_ses, per_enr, per_mem = (by_day(t, days) for t in (sessions, enrichment, memories))
    index = {m: i for i, m in enumerate(msgs.column("message_id").to_pylist())}
    per_msg = {
        d: msgs.take(
            pa.array(sorted(index[m] for ids in per_ses[d].column("message_ids").to_pylist()
                            for m in ids))
        )
        for d in days
    }  # fmt: skip
    states: dict = {}
    fold = render = 0.0
    digest = hashlib.sha256()
    longest = 0
    lines = []  # with --dump: one digest per day and contact, to find where two runs part
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    for d in days:
        t = time.process_time()
        changed = build_day(states, d, per_ses[d], per_msg[d], per_enr[d], per_mem[d])
        t1 = time.process_time()
        rows = dossier_rows(changed, d)
        t2 = time.process_time()
        fold += t1 - t
        render += t2 - t1
        states.update(changed)
        longest = max([longest, *(len(s.timeline) for s in changed.values())])
        for c, md, st in zip(*(rows.column(k).to_pylist() for k in
                               ("contact_id", "markdown", "state")), strict=True):  # fmt: skip
            digest.update(f"{d}\x1f{c}\x1f{md}\x1f{st}\x1e".encode())
            if dump:
                one = [hashlib.sha256(x.encode()).hexdigest()[:16] for x in (md, st)]
                lines.append(f"{d} {c} markdown {one[0]} state {one[1]}\n")
    if prof:
        prof.disable()
        prof.dump_stats(profile)
    if dump:
        Path(dump).write_text("".join(lines))
    return {
        "messages": messages,
        "years": years,
        "sessions": sessions.num_rows,
        "memories": memories.num_rows,
        "days": len(days),
        "prep_cpu_s": round(prep, 2),
        "fold_cpu_s": round(fold, 2),
        "render_cpu_s": round(render, 2),
        "longest_timeline": longest,
        "inputs_sha256": given.hexdigest(),
        "sha256": digest.hexdigest(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--years", type=float, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", help="write a cProfile of the day loop to this file")
    ap.add_argument("--dump", help="write a digest per day and contact to this file")
    args = ap.parse_args()
    out = run(args.messages, args.years, args.seed, args.profile, args.dump)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
