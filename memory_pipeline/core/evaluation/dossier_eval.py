"""Does a dossier know what a person's gold says about them? Coverage against annotations.

Two gold sets, both evaluation data only (the pipeline never reads them):

* **LoCoMo event coverage** — ``event_summary`` of the dev file: the key events of each
  speaker per session (370 in ``locomo_dev.json``). An event is *covered* when a bullet of
  the dossier holding that conversation **cites a pipeline session made of the event's
  LoCoMo session** (turns ``D<k>:*``) and says the same thing: content-word overlap F1 ≥
  ``F1_THRESHOLD`` after normalization. Scored on the version folded the day of that session
  (``at_session``: what the dossier said right after hearing it) and on the last version
  (``final``: what is still there once the dossier has moved on).

  **The goal's figure** ("the share of a speaker's annotated events that their dossier
  states") is ``locomo_events``: the events of the *contact-side* speaker (the sender who is
  not the owner: in the benchmark corpus speaker_b, whose dossier it is), mean over
  conversations, ``final`` being the stricter reading (what the living page still states)
  and ``at_session`` the gentler one. The owner (speaker_a) has no dossier, and a contact's
  page never carries the owner's own statements, so the owner's events are reported apart,
  as ``locomo_events_all`` (both speakers, the definition used before), for comparison.
* **RealPersonaChat persona coverage** — ``interlocutors.json``: ten self-written statements
  per speaker. A statement is covered when any cited bullet of that speaker's (final)
  dossier has F1 ≥ ``F1_THRESHOLD`` with it (the personas have no session, so any citation).

Normalization (``content_tokens``): NFKC + lower case, the BM25 analyzers' tokens
(English: stop words dropped and Snowball stems; Japanese: Sudachi content words, or CJK
bigrams without Sudachi), minus the tokens of the speakers' names (every bullet names its
subject, so names would match everything), as a set. F1 = 2|A∩B| / (|A| + |B|).

Figures are per conversation (LoCoMo) or per speaker (RealPersonaChat), with percentile
bootstrap CIs over those units (``metrics.bootstrap_ci``): 6 conversations make a wide CI,
and it says so.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.evaluation.metrics import bootstrap_ci
from memory_pipeline.core.memories.dossier import DossierState, build_day, render_markdown

F1_THRESHOLD = 0.3
_CITATION = re.compile(r"\s\[sessions: ([^\[\]]+)\]$")
_JA = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")

COVERAGE_SCHEMA = pa.schema(
    [
        ("gold", pa.string()),  # locomo_events | rpc_persona
        ("unit", pa.string()),  # conversation (LoCoMo sample id) or speaker id
        ("speaker", pa.string()),
        ("version", pa.string()),  # at_session | final
        ("items", pa.int64()),
        ("covered", pa.int64()),
        ("coverage", pa.float64()),
    ]
)
SUMMARY_SCHEMA = pa.schema(
    [
        ("gold", pa.string()),
        ("version", pa.string()),
        ("units", pa.int64()),
        ("items", pa.int64()),
        ("covered", pa.int64()),
        ("mean", pa.float64()),  # mean of the per-unit coverages
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("pooled", pa.float64()),  # covered / items over all units
    ]
)


# -- matching -----------------------------------------------------------------------------------


class _Analyzer:
    """English and Japanese content tokens, with the tokenizers built once."""

    def __init__(self) -> None:
        from memory_pipeline.core.indexes.tokenize import (
            CjkBigramTokenizer,
            EnglishTokenizer,
            SudachiTokenizer,
            sudachi_available,
        )

        self.en = EnglishTokenizer()
        self.ja = SudachiTokenizer() if sudachi_available() else CjkBigramTokenizer()
        self._names: dict[str, set[str]] = {}

    def tokens(self, text: str, names: Iterable[str] = ()) -> set[str]:
        text = unicodedata.normalize("NFKC", text).lower()
        tok = self.ja if _JA.search(text) else self.en
        drop: set[str] = set()
        for name in names:
            if name not in self._names:
                self._names[name] = set(tok.tokenize(unicodedata.normalize("NFKC", name).lower()))
            drop |= self._names[name]
        return set(tok.tokenize(text)) - drop


def content_f1(a: set[str], b: set[str]) -> float:
    """Set overlap F1 of two token sets (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


def cited_bullets(markdown: str) -> list[tuple[str, set[str]]]:
    """(bullet text without its citation, cited session ids) of every cited bullet."""
    out = []
    for line in markdown.splitlines():
        found = _CITATION.search(line.rstrip())
        if line.lstrip().startswith("- ") and found:
            ids = {p.strip() for p in found.group(1).split(",")}
            out.append((line[: found.start()].lstrip()[2:], ids))
    return out


def _covered(
    analyzer: _Analyzer,
    gold: str,
    bullets: list[tuple[set[str], set[str]]],
    sessions: set[str] | None,
    names: Sequence[str],
) -> bool:
    want = analyzer.tokens(gold, names)
    return any(
        content_f1(want, toks) >= F1_THRESHOLD
        for toks, cited in bullets
        if sessions is None or cited & sessions
    )


# -- folding every version ----------------------------------------------------------------------


def fold_versions(
    sessions: pa.Table,
    messages: pa.Table,
    enrichment: pa.Table,
    memories: pa.Table,
    owner_label: str = "you",
) -> dict[str, list[tuple[dt.date, str]]]:
    """contact -> [(date, markdown)] of every dossier version, in date order (the rule fold
    of ``memories.dossier``, built in memory: the evaluation never writes dossiers)."""
    days = sorted(set(sessions.column("local_date").to_pylist()))

    def on(table: pa.Table, day: dt.date) -> pa.Table:
        return table.filter(pc.equal(table.column("local_date"), pa.scalar(day, pa.date32())))

    states: dict[str, DossierState] = {}
    versions: dict[str, list[tuple[dt.date, str]]] = {}
    for day in days:
        changed = build_day(
            states, day, on(sessions, day), messages, on(enrichment, day), on(memories, day)
        )
        states.update(changed)
        for contact, st in changed.items():
            versions.setdefault(contact, []).append((day, render_markdown(st, owner_label)))
    return versions


# -- LoCoMo events ------------------------------------------------------------------------------


@dataclass
class CoverageRun:
    """Per-unit rows, the summary with CIs, and per-item rows for reading the misses."""

    rows: list[dict]
    summary: list[dict]
    items: list[dict] = field(default_factory=list)

    def tables(self) -> dict[str, pa.Table]:
        return {
            "dossier_coverage": pa.Table.from_pylist(self.rows, schema=COVERAGE_SCHEMA),
            "dossier_coverage_summary": pa.Table.from_pylist(self.summary, schema=SUMMARY_SCHEMA),
        }


def locomo_events(locomo: Path) -> list[dict]:
    """Every annotated event: sample id, LoCoMo session number, speaker, text."""
    data = json.loads(Path(locomo).read_text(encoding="utf-8"))
    out = []
    for sample in data:
        for key, per in sorted(sample.get("event_summary", {}).items()):
            k = int(key.rsplit("_", 1)[1])
            for speaker, events in per.items():
                if isinstance(events, list):
                    out += [
                        {"unit": sample["sample_id"], "session": k, "speaker": speaker, "text": e}
                        for e in events
                    ]
    return out


def _locomo_sessions(sessions: pa.Table, messages: pa.Table) -> dict[tuple[str, int], set[str]]:
    """(conversation, LoCoMo session number) -> pipeline session ids holding its turns."""
    turn = dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("source_ref").to_pylist(),
            strict=True,
        )
    )
    out: dict[tuple[str, int], set[str]] = {}
    for r in sessions.select(["session_id", "conversation_id", "message_ids"]).to_pylist():
        for mid in r["message_ids"]:
            found = re.match(r"D(\d+):", turn.get(mid) or "")
            if found:
                out.setdefault((r["conversation_id"], int(found[1])), set()).add(r["session_id"])
    return out


def event_coverage(
    locomo: Path,
    sessions: pa.Table,
    messages: pa.Table,
    versions: Mapping[str, list[tuple[dt.date, str]]],
    *,
    seed: int = 0,
    resamples: int = 5000,
) -> CoverageRun:
    """LoCoMo event coverage of the dossiers ``versions`` (see the module docstring)."""
    analyzer = _Analyzer()
    by_turns = _locomo_sessions(sessions, messages)
    contact_of = dict(
        zip(
            sessions.column("session_id").to_pylist(),
            sessions.column("contact_id").to_pylist(),
            strict=True,
        )
    )
    day_of = dict(
        zip(
            sessions.column("session_id").to_pylist(),
            sessions.column("local_date").to_pylist(),
            strict=True,
        )
    )
    speakers = sorted(set(messages.column("sender").to_pylist()) - {None})
    contact_side = {
        (c, who)
        for c, who, own in zip(
            messages.column("conversation_id").to_pylist(),
            messages.column("sender").to_pylist(),
            messages.column("is_owner").to_pylist(),
            strict=True,
        )
        if who and not own
    }
    parsed: dict[tuple[str, int], list[tuple[set[str], set[str]]]] = {}

    def bullets(contact: str, index: int) -> list[tuple[set[str], set[str]]]:
        if (contact, index) not in parsed:
            md = versions[contact][index][1]
            parsed[(contact, index)] = [
                (analyzer.tokens(t, speakers), ids) for t, ids in cited_bullets(md)
            ]
        return parsed[(contact, index)]

    items = []
    for ev in locomo_events(locomo):
        ses = by_turns.get((ev["unit"], ev["session"]), set())
        hit = {"at_session": False, "final": False}
        contacts = {contact_of[s] for s in ses}
        for contact in contacts:
            vs = versions.get(contact, [])
            last_day = max(day_of[s] for s in ses if contact_of[s] == contact)
            at = max((i for i, (d, _) in enumerate(vs) if d <= last_day), default=None)
            text = ev["text"]
            if at is not None:
                hit["at_session"] |= _covered(analyzer, text, bullets(contact, at), ses, speakers)
            if vs:
                final = bullets(contact, len(vs) - 1)
                hit["final"] |= _covered(analyzer, text, final, ses, speakers)
        side = "contact" if (ev["unit"], ev["speaker"]) in contact_side else "owner"
        items.append({**ev, **hit, "sessions": sorted(ses), "side": side})
    goal = _summarize(
        "locomo_events", [i for i in items if i["side"] == "contact"], seed, resamples
    )
    both = _summarize("locomo_events_all", items, seed, resamples)
    return CoverageRun(goal.rows + both.rows, goal.summary + both.summary, items)


# -- RealPersonaChat personas -------------------------------------------------------------------


def persona_coverage(
    interlocutors: Path,
    versions: Mapping[str, list[tuple[dt.date, str]]],
    *,
    seed: int = 0,
    resamples: int = 5000,
) -> CoverageRun:
    """Share of each contact-speaker's persona statements its final dossier states."""
    personas = json.loads(Path(interlocutors).read_text(encoding="utf-8"))
    analyzer = _Analyzer()
    items = []
    for contact, vs in sorted(versions.items()):
        person = personas.get(contact)
        if not person or not vs:
            continue
        names = [contact]
        final = [(analyzer.tokens(t, names), ids) for t, ids in cited_bullets(vs[-1][1])]
        for statement in person.get("persona") or []:
            hit = _covered(analyzer, statement, final, None, names)
            items.append(
                {"unit": contact, "speaker": contact, "text": statement, "final": hit}
            )
    return _summarize("rpc_persona", items, seed, resamples)


def _summarize(gold: str, items: list[dict], seed: int, resamples: int) -> CoverageRun:
    rows, summary = [], []
    versions = [v for v in ("at_session", "final") if items and v in items[0]]
    for version in versions:
        per: dict[tuple[str, str], list[bool]] = {}
        per_unit: dict[str, list[bool]] = {}
        for it in items:
            per.setdefault((it["unit"], it["speaker"]), []).append(it[version])
            per_unit.setdefault(it["unit"], []).append(it[version])
        for (unit, speaker), hits in sorted(per.items()):
            rows.append(_row(gold, unit, speaker, version, hits))
        for unit, hits in sorted(per_unit.items()):
            if gold.startswith("locomo_events"):  # every scored speaker of a conversation
                rows.append(_row(gold, unit, "*", version, hits))
        values = [sum(h) / len(h) for h in per_unit.values()]
        mean, lo, hi = bootstrap_ci(values, n_resamples=resamples, seed=seed)
        n = sum(len(h) for h in per_unit.values())
        k = sum(sum(h) for h in per_unit.values())
        summary.append(
            {
                "gold": gold,
                "version": version,
                "units": len(per_unit),
                "items": n,
                "covered": k,
                "mean": mean,
                "ci_low": lo,
                "ci_high": hi,
                "pooled": k / n if n else float("nan"),
            }
        )
    return CoverageRun(rows, summary, items)


def _row(gold: str, unit: str, speaker: str, version: str, hits: list[bool]) -> dict:
    return {
        "gold": gold,
        "unit": unit,
        "speaker": speaker,
        "version": version,
        "items": len(hits),
        "covered": sum(hits),
        "coverage": sum(hits) / len(hits),
    }


def format_summary(run: CoverageRun, log: Callable[[str], None] = print) -> None:
    """One line per version: mean over units [95% CI], pooled share, counts."""
    for s in run.summary:
        log(
            f"dossier coverage ({s['gold']}, {s['version']}): {s['mean']:.3f} "
            f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}] over {s['units']} units; "
            f"pooled {s['covered']}/{s['items']} = {s['pooled']:.3f}"
        )


def persona_coverage_of_corpus(
    folder: Path,
    owner: str,
    *,
    timezone: str = "Asia/Tokyo",
    session_gap_minutes: int = 180,
    seed: int = 0,
    resamples: int = 5000,
) -> CoverageRun:
    """Persona coverage of the dossiers of ``owner``'s RealPersonaChat partners, built in
    memory with the pipeline's core stages (ingest, sessions, extractive enrichment, rule
    memories, the dossier fold): the personas are read only here, never by the pipeline."""
    from memory_pipeline.core.ingest.normalize import messages_table
    from memory_pipeline.core.ingest.sources.base import SourceSpec
    from memory_pipeline.core.ingest.stage import discover_dates, read_all
    from memory_pipeline.core.memories.extract import extract_memories
    from memory_pipeline.core.represent.build import enrich_sessions
    from memory_pipeline.core.sessions.sessionize import sessionize

    spec = SourceSpec("rpc", "realpersonachat", Path(folder), timezone, owner)
    start = dt.date(1970, 1, 1)
    dates = discover_dates([spec], start)
    messages = messages_table(read_all([spec], dates, start).messages)
    sessions = sessionize(messages, session_gap_minutes)
    enrichment = enrich_sessions(sessions, messages)
    memories, _ = extract_memories(sessions, messages)
    versions = fold_versions(sessions, messages, enrichment, memories)
    return persona_coverage(
        Path(folder) / "interlocutors.json", versions, seed=seed, resamples=resamples
    )
