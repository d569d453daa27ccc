"""Memory and dossier sections of the report: memory retrieval and context packs, the
labelled memory gold, the differences between memory and chunk retrieval, dossier coverage
and how to reproduce the figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from memory_pipeline.core.evaluation.report.headline import _note
from memory_pipeline.core.evaluation.report.model import (
    _P,
    ALL,
    DEFAULT_COMMAND,
    ER,
    _Cell,
    _ci,
    _Code,
    _Details,
    _f,
    _Img,
    _int,
    _List,
    _mean_ci,
    _measure,
    _num,
    _Section,
    _signed,
    _split_key,
    _Sub,
    _Summary,
    _Table,
    _table_rows,
)
from memory_pipeline.core.evaluation.report.plots import _plot_context_recall


def _memory_section(
    rows: Sequence[Mapping[str, Any]],
    why: str | None,
    diff_rows: Sequence[Mapping[str, Any]],
    diff_why: str | None,
    summ: _Summary | None,
    meta: Mapping[str, Any],
    selected: str,
) -> _Section:
    """Memory retrieval beside the selected chunk config, context-pack recall by budget,
    the paired differences and a caption — each part built alone from the memory tables."""
    sec = _Section("memories", "Memories and context packs")
    if why:
        sec.blocks.append(_note(f"{why}, so memory retrieval and context packs are not shown."))
        return sec
    msumm = _Summary(rows)
    # the test split when the tables have one: the figures that were not used to select
    split = "test" if any(key[1] == "test" for key in msumm.index) else "all"
    sec.blocks += _memory_retrieval_blocks(msumm, split, summ, selected)
    sec.blocks += _context_pack_blocks(msumm, split, str(meta.get("memory_baseline") or ""))
    sec.blocks += _memory_diff_blocks(diff_rows, diff_why)
    sec.blocks += _memory_caption(meta)
    return sec


def _memory_gold_section(
    rows: Sequence[Mapping[str, Any]],
    why: str | None,
    conv_rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
) -> _Section:
    """Memory extraction against the dataset's annotated observations: recall, precision and
    memories per 1,000 messages, mean over conversations with a bootstrap CI, pooled beside
    it, then one row per conversation."""
    sec = _Section("memory-gold", "Memory extraction vs annotated observations")
    if why:
        sec.blocks.append(_note(f"{why}, so memory extraction is not scored."))
        return sec
    goal = {"recall": 0.60, "precision": 0.60}
    table = [
        [
            r["metric"].replace("_", " "),
            _mean_ci(r),
            _f(r["pooled"]),
            _f(goal[r["metric"]], 2) if r["metric"] in goal else "—",
            _int(r["n_conversations"]),
        ]
        for r in rows
    ]
    sec.blocks.append(
        _Table(["Measure", "mean over conversations [95% CI]", "pooled", "goal", "n"], table)
    )
    per = [
        [
            str(r["corpus_id"]),
            _int(r["observations"]),
            _int(r["covered"]),
            _f(r["recall"]),
            _int(r["n_memories"]),
            _f(r["precision"]),
        ]
        for r in conv_rows
    ]
    if per:
        sec.blocks.append(
            _Table(
                ["Conversation", "observations", "covered", "recall", "memories", "precision"],
                per,
            )
        )
    min_f1 = next((r.get("min_f1") for r in rows if r.get("min_f1") is not None), 0.3)
    sec.blocks.append(
        _P(
            "An observation is covered when a memory about the same speaker cites one of its "
            f"evidence turns and their content-word F1 is at least {_f(min_f1, 2)} (NFKC, lower "
            "case, stopwords and speaker names removed, Snowball stems). Precision: share of "
            "memories covering some observation — observations are not exhaustive, so it is a "
            "lower bound; see docs/memory_precision_sample.md for hand-read precision. "
            f"{meta.get('memory_gold_note') or ''}",
            "caption",
        )
    )
    return sec


MEMORY_COLUMNS = (("session", 5), ("session", 10), ("turn", 5), ("turn", 10))  # (level, k)


def _memory_retrieval_blocks(
    msumm: _Summary, split: str, summ: _Summary | None, selected: str
) -> list[Any]:
    """A table of session/turn recall per memory configuration, with the selected chunk
    configuration's row from the chunk summary last, so both read on one scale."""
    cols = MEMORY_COLUMNS
    table = []
    memory_configs = sorted(
        {key[0] for key in msumm.index if key[3] in ("session", "turn", "memory")}
    )
    for config in memory_configs:
        zero = msumm.get(config, split, ALL, "memory", "zero_hits", 0)
        n = msumm.get(config, split, ALL, "session", ER, 5)
        table.append(
            [
                config,
                *(
                    _Cell(_mean_ci(msumm.get(config, split, ALL, lv, ER, k)), "num")
                    for lv, k in cols
                ),
                _Cell(_mean_ci(zero), "num"),
                _Cell(_int(n.get("n") if n else None), "num"),
            ]
        )
    if summ is not None and selected:
        n = summ.get(selected, split, ALL, "session", ER, 5)
        table.append(
            [
                f"{selected} (selected chunk config)",
                *(
                    _Cell(_mean_ci(summ.get(selected, split, ALL, lv, ER, k)), "num")
                    for lv, k in cols
                ),
                _Cell("—", "num"),
                _Cell(_int(n.get("n") if n else None), "num"),
            ]
        )
    return [
        _Sub(f"Memory retrieval ({split} split)"),
        _Table(["Configuration", *(f"{lv} R@{k}" for lv, k in cols), "no memory hit", "n"], table),
        _P(
            "memory[bm25]: BM25 over the memories; memory[fused]: fused with the hybrid score "
            "of each memory's source session. Ranked memories map to their source sessions "
            "(session level) and to the evidence refs of their messages (turn level). "
            "Mean [95% bootstrap CI].",
            "caption",
        ),
    ]


def _context_pack_blocks(msumm: _Summary, split: str, baseline: str) -> list[Any]:
    """Pack recall against the budget (plot and table, the chunk baseline last) and the mean
    pack sizes; nothing when the tables hold no context rows."""
    contexts = sorted(
        {key[0] for key in msumm.index if key[3] == "context"},
        key=lambda c: (c == baseline, c),
    )
    budgets = sorted({key[5] for key in msumm.index if key[3] == "context" and key[5]})
    if not (contexts and budgets):
        return []
    blocks: list[Any] = [_Sub(f"Context-pack evidence recall by budget ({split} split)")]
    png = _plot_context_recall(msumm, contexts, baseline, split)
    if png is not None:
        blocks.append(
            _Img(
                "memory_context_recall.png",
                png,
                "Context-pack evidence recall against budget",
                "Share of gold evidence whose message is in the pack, by budget; dashed: "
                "the selected chunk configuration's top chunks packed whole (raw text, no "
                "citation headers; packing stops at the first chunk that does not fit, so "
                "a budget below the top chunk's size holds nothing).",
            )
        )
    headers = ["Pack", *(f"{int(b):,}" for b in budgets)]
    recall = [
        [c, *(_Cell(_mean_ci(msumm.get(c, split, ALL, "context", ER, b)), "num") for b in budgets)]
        for c in contexts
    ]
    sizes = [
        [
            c,
            *(
                _Cell(_f(msumm.mean(c, split, ALL, "context", "utf16", b), 0), "num")
                for b in budgets
            ),
        ]
        for c in contexts
    ]
    blocks.append(_Table(headers, recall))
    blocks.append(_Details("Mean rendered size (UTF-16 units)", [_Table(headers, sizes)]))
    return blocks


def _memory_diff_blocks(diff_rows: Sequence[Mapping[str, Any]], diff_why: str | None) -> list[Any]:
    """The paired differences, memory rankings first and then packs by budget, or a note
    saying why there are none."""
    if diff_why:
        return [_note(f"{diff_why}, so no paired differences are shown.")]
    ordered = sorted(
        diff_rows,
        key=lambda r: (
            _split_key(r["split"]),
            str(r["level"]) == "context",
            str(r["level"]),
            str(r["config_a"]),
            _num(r["k"]) or 0,
        ),
    )
    return [
        _Sub("Paired differences against the chunk retriever"),
        _Table(
            ["Split", "Measure", "A", "B", "A − B", "95% CI", "Verdict"],
            [_memory_diff_row(r) for r in ordered],
        ),
    ]


def _memory_diff_row(r: Mapping[str, Any]) -> list[str | _Cell]:
    """One difference: a pack row's k is a budget, so it is named as one."""
    lo, hi = _num(r.get("ci_lo")), _num(r.get("ci_hi"))
    verdict = (
        "A better"
        if lo is not None and lo > 0
        else "B better"
        if hi is not None and hi < 0
        else "no CI"
        if lo is None or hi is None
        else "CI spans 0"
    )
    what = (
        f"pack recall @ budget {_int(r['k'])}"
        if r["level"] == "context"
        else _measure(str(r["level"]), str(r["metric"]), _int(r["k"]))
    )
    return [
        str(r["split"]),
        what,
        str(r["config_a"]),
        str(r["config_b"]),
        _Cell(_signed(r.get("mean_diff")), "num strong"),
        _Cell(_ci(lo, hi), "num"),
        _Cell(verdict),
    ]


def _memory_caption(meta: Mapping[str, Any]) -> list[Any]:
    """How many memories and how long, when the run recorded it."""
    seconds = meta.get("memory_seconds")
    if seconds is None:
        return []
    return [
        _P(
            f"{_int(meta.get('memories'))} memories; memory evaluation took {seconds}s. "
            "Pack recall counts a gold ref when its message is cited by any piece "
            "(memory pieces included).",
            "caption",
        )
    ]


def _reproduce_section(meta: Mapping[str, Any]) -> _Section:
    sec = _Section("reproduce", "How to reproduce")
    sec.blocks.append(_Code(str(meta.get("command") or DEFAULT_COMMAND)))
    splits = meta.get("splits") or {}
    boot = meta.get("bootstrap") or {}
    items = [
        f"Dataset: {meta.get('dataset', '—')}",
        f"Generated at: {meta.get('generated_at', '—')}",
        f"Selected configuration: {meta.get('selected_config') or '—'}, "
        f"chosen on dev by {meta.get('selection_metric') or '—'}",
        f"Dev corpora: {', '.join(map(str, splits.get('dev') or [])) or '—'}",
        f"Test corpora: {', '.join(map(str, splits.get('test') or [])) or '—'}",
        f"Bootstrap: {boot.get('resamples', '—')} resamples, seed {boot.get('seed', '—')}",
    ]
    sec.blocks.append(_List(items))
    notes = [str(n) for n in meta.get("notes") or []]
    if notes:
        sec.blocks.append(_Sub("Notes"))
        sec.blocks.append(_List(notes))
    return sec


def _dossier_section(tables: Mapping[str, pa.Table | None], meta: Mapping[str, Any]) -> _Section:
    """Dossier coverage vs gold (core/evaluation/dossier_eval.py): mean over units with its
    bootstrap CI, the pooled share, and the per-unit figures."""
    sec = _Section("dossier-coverage", "Dossier coverage")
    rows, why = _table_rows(tables, "dossier_coverage_summary")
    if why is not None:
        sec.blocks.append(_note(f"{why}, so dossier coverage is not shown."))
        return sec
    names = {
        "locomo_events": "LoCoMo events (contact speaker: the goal)",
        "locomo_events_all": "LoCoMo events (both speakers)",
        "rpc_persona": "RealPersonaChat personas",
    }
    sec.blocks.append(
        _Table(
            ["Gold", "Version", "Coverage (mean over units)", "95% CI", "Pooled", "Units"],
            [
                [
                    names.get(str(r["gold"]), str(r["gold"])),
                    str(r["version"]),
                    _f(r["mean"]),
                    _ci(r["ci_low"], r["ci_high"]),
                    f"{_int(r['covered'])}/{_int(r['items'])} = {_f(r['pooled'])}",
                    _int(r["units"]),
                ]
                for r in rows
            ],
        )
    )
    per, per_why = _table_rows(tables, "dossier_coverage")
    if per_why is None:
        units = [r for r in per if r["speaker"] in ("*",) or r["gold"] == "rpc_persona"]
        sec.blocks.append(
            _Table(
                ["Gold", "Unit", "Version", "Covered", "Coverage"],
                [
                    [
                        names.get(str(r["gold"]), str(r["gold"])),
                        str(r["unit"]),
                        str(r["version"]),
                        f"{_int(r['covered'])}/{_int(r['items'])}",
                        _f(r["coverage"]),
                    ]
                    for r in units
                ],
            )
        )
    sec.blocks.append(
        _P(
            "An event (LoCoMo event_summary) is covered when a dossier bullet citing a session "
            "made of its LoCoMo session has content-word F1 >= 0.3 with it (NFKC, lower case, "
            "the BM25 analyzers' stems, speakers' names removed); at_session scores the version "
            "folded that day, final the last version. A persona statement (RealPersonaChat "
            "interlocutors.json) is covered by any cited bullet of that speaker's final "
            f"dossier. {meta.get('dossier_note') or ''}".rstrip(),
            "caption",
        )
    )
    return sec
