"""Evaluation report: one self-contained HTML page and a Markdown twin from the eval tables.

The numbers already exist as Arrow tables; this module only *shows* them, so a person can judge
the retrieval memory at a glance: a headline with confidence intervals and goals, plots with CI
bands, and the tables behind them. It is pure (no Dagster import) and never computes statistics
of its own beyond picking rows, so the report cannot disagree with the tables.

* ``report.html`` embeds every plot as a base64 PNG and carries its CSS inline: no network, no
  JavaScript, it can be mailed or archived as one file.
* ``report.md`` has the same numbers as Markdown tables; the PNGs are written next to it.
* Plots are drawn on :class:`matplotlib.figure.Figure` objects with an explicit Agg canvas
  (no pyplot, no global backend switch), so rendering works headless and thread-safely.
* Every table is optional: a missing, empty or malformed table gives a short note saying what
  is absent instead of an exception. All text from the tables and ``meta`` is escaped.
* The papers' figures from ``meta["paper_figures"]`` are only shown beside ours, labelled as
  the paper's, and never drawn as part of one of our series.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from memory_pipeline.core.common.escape import escape_markdown

__all__ = ["DEFAULT_COMMAND", "write_report"]

DEFAULT_COMMAND = "memory-pipeline eval"
LEVELS = ("turn", "session", "chunk")
LEVEL_NAMES = {"turn": "turn (dialog turn)", "session": "session", "chunk": "chunk"}
SPLIT_ORDER = ("test", "dev", "all")
ALL = "all"  # qtype of the mean over all questions (each question weighs the same)
ER = "evidence_recall"
DEFAULT_SELECTION = ("session", ER, 5)
HEADLINE_ROWS = (  # (level, metric, k, qtype)
    ("turn", ER, 5, ALL),
    ("turn", ER, 10, ALL),
    ("session", ER, 5, ALL),
    ("session", ER, 10, ALL),
    ("session", ER, 5, "multi-hop"),
)
MAX_FAILURES_PER_TYPE = 300  # keeps the page light; the note says how many are left out
DPI = 110
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#d62728",
)
SELECTED_COLOR = "#d62728"
LEVEL_COLORS = {"turn": "#4c72b0", "session": "#dd8452", "chunk": "#55a868"}
PAPER_MARKERS = ("*", "P", "X", "D", "^", "v")

REQUIRED = {
    "summary": ("config", "split", "qtype", "level", "metric", "k", "mean", "ci_lo", "ci_hi", "n"),
    "sweep": (
        "family",
        "bm25_rep",
        "dense_rep",
        "beta",
        "rrf_k",
        "config",
        "split",
        "level",
        "metric",
        "k",
        "mean",
        "ci_lo",
        "ci_hi",
    ),
    "diffs": (
        "config_a",
        "config_b",
        "level",
        "metric",
        "k",
        "split",
        "mean_diff",
        "ci_lo",
        "ci_hi",
    ),
    "failures": (
        "config",
        "question_id",
        "corpus_id",
        "qtype",
        "question",
        "level",
        "found_at_5",
        "found_at_10",
        "found_at_20",
    ),
    "ceiling": ("level", "qtype", "pool", "oracle_recall", "n"),
    "questions_report": ("corpus_id", "qtype", "questions", "excluded", "unresolved_ids"),
}
REQUIRED["cv"] = ("config", "qtype", "level", "metric", "k", "mean", "ci_lo", "ci_hi", "n")
# the memory evaluation writes the same shapes as the chunk evaluation
REQUIRED["ambiguous"] = ("kind", "condition", "level", "k", "mean", "ci_lo", "ci_hi", "n")
REQUIRED["memory_summary"] = REQUIRED["summary"]
REQUIRED["memory_diffs"] = REQUIRED["diffs"]
REQUIRED["memory_gold_summary"] = ("metric", "mean", "ci_lo", "ci_hi", "pooled", "n_conversations")
REQUIRED["memory_gold_per_conversation"] = (
    "corpus_id", "observations", "covered", "n_memories", "recall", "precision",
)
# dossier coverage vs gold (core/evaluation/dossier_eval.py)
REQUIRED["dossier_coverage_summary"] = (
    "gold", "version", "units", "items", "covered", "mean", "ci_low", "ci_high", "pooled"
)
REQUIRED["dossier_coverage"] = (
    "gold", "unit", "speaker", "version", "items", "covered", "coverage"
)


# ----------------------------------------------------------------------------- document model


@dataclass(frozen=True)
class _Cell:
    """A table cell; ``cls`` styles it in HTML (num, pass, miss, ...) and is ignored in MD."""

    text: str
    cls: str = ""


@dataclass(frozen=True)
class _P:
    text: str
    cls: str = ""  # "note" (grey, for absent data), "caption"


@dataclass(frozen=True)
class _Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str | _Cell]]


@dataclass(frozen=True)
class _Img:
    filename: str
    png: bytes
    alt: str
    caption: str


@dataclass(frozen=True)
class _Code:
    text: str


@dataclass(frozen=True)
class _List:
    items: Sequence[str]


@dataclass(frozen=True)
class _Sub:
    title: str


@dataclass(frozen=True)
class _Details:
    summary: str
    blocks: Sequence[Any]


@dataclass
class _Section:
    anchor: str
    title: str
    blocks: list[Any] = field(default_factory=list)


# ----------------------------------------------------------------------------- small helpers


def _num(x: Any) -> float | None:
    """A finite float, or None for null/NaN/non-numbers (tables may carry either)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


def _f(x: Any, nd: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:.{nd}f}"


def _signed(x: Any, nd: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:+.{nd}f}"


def _ci(lo: Any, hi: Any) -> str:
    a, b = _num(lo), _num(hi)
    return "—" if a is None or b is None else f"[{a:.3f}, {b:.3f}]"


def _mean_ci(row: Mapping[str, Any] | None) -> str:
    if row is None or _num(row.get("mean")) is None:
        return "—"
    ci = _ci(row.get("ci_lo"), row.get("ci_hi"))
    return _f(row["mean"]) if ci == "—" else f"{_f(row['mean'])} {ci}"


def _int(x: Any) -> str:
    v = _num(x)
    return "—" if v is None else str(int(v))


def _measure(level: str, metric: str, k: Any, qtype: str = ALL) -> str:
    name = f"{level} {metric.replace('_', ' ')}@{k}"
    return name if qtype == ALL else f"{name}, {qtype} questions"


def _plain(s: Any) -> str:
    """Text for matplotlib: a literal ``$`` would otherwise switch on mathtext parsing."""
    return str(s).replace("$", r"\$")


def _short(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _level_key(level: Any) -> tuple[int, str]:
    return (LEVELS.index(level) if level in LEVELS else len(LEVELS), str(level))


def _split_key(split: Any) -> tuple[int, str]:
    return (SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER), str(split))


def _table_rows(
    tables: Mapping[str, pa.Table | None], name: str
) -> tuple[list[dict[str, Any]], str | None]:
    """(rows, None) or ([], why the table cannot be used) — never raises on bad input."""
    table = tables.get(name)
    if table is None:
        return [], f"The `{name}` table was not provided"
    if not isinstance(table, pa.Table):
        return [], f"The `{name}` table is not an Arrow table ({type(table).__name__})"
    missing = [c for c in REQUIRED[name] if c not in table.column_names]
    if missing:
        return [], f"The `{name}` table lacks the column(s) {', '.join(missing)}"
    if table.num_rows == 0:
        return [], f"The `{name}` table is empty"
    return table.to_pylist(), None


def _parse_selection(text: Any) -> tuple[str, str, int]:
    """("session", "evidence_recall", 5) from "session evidence_recall@5"; default otherwise."""
    m = re.fullmatch(r"\s*(\w+)\s+(\w+)\s*@\s*(\d+)\s*", str(text or ""))
    return (m.group(1), m.group(2), int(m.group(3))) if m else DEFAULT_SELECTION


class _Summary:
    """Row lookup over the ``summary`` table by (config, split, qtype, level, metric, k)."""

    def __init__(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self.index: dict[tuple, Mapping[str, Any]] = {}
        for r in rows:
            key = (r["config"], r["split"], r["qtype"], r["level"], r["metric"], _num(r["k"]))
            self.index[key] = r

    def get(
        self, config: str, split: str, qtype: str, level: str, metric: str, k: Any
    ) -> Mapping[str, Any] | None:
        return self.index.get((config, split, qtype, level, metric, _num(k)))

    def mean(self, *key: Any) -> float | None:
        row = self.get(*key)
        return None if row is None else _num(row.get("mean"))

    def configs(self) -> list[str]:
        return sorted({key[0] for key in self.index})


def _png(fig: Figure) -> bytes:
    """PNG bytes through an explicit Agg canvas; metadata stripped so output is reproducible."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _band(ax: Any, xs: Sequence[float], lo: Sequence[Any], hi: Sequence[Any], color: str) -> None:
    lo_v = [math.nan if _num(v) is None else float(v) for v in lo]
    hi_v = [math.nan if _num(v) is None else float(v) for v in hi]
    ax.fill_between(xs, lo_v, hi_v, color=color, alpha=0.16, linewidth=0)


# ----------------------------------------------------------------------------- plots


def _plot_recall_vs_k(
    summ: _Summary,
    series: Sequence[tuple[str, str]],
    selected: str,
    papers: Sequence[Mapping[str, Any]],
    split: str = "test",
) -> bytes | None:
    """Evidence recall against K, one panel per level, one line (+ CI band) per config."""
    levels = [
        lv
        for lv in LEVELS
        if any(
            key[1] == split and key[2] == ALL and key[3] == lv and key[4] == ER and key[0] == c
            for key in summ.index
            for c, _ in series
        )
    ]
    if not levels:
        return None
    fig = Figure(figsize=(4.4 * len(levels) + 0.6, 4.6), layout="constrained")
    axes = fig.subplots(1, len(levels), sharey=True, squeeze=False)[0]
    handles: dict[str, Any] = {}
    for ax, level in zip(axes, levels, strict=True):
        all_ks: set[float] = set()
        for i, (config, label) in enumerate(series):
            pts = sorted(
                (key[5], row)
                for key, row in summ.index.items()
                if key[:5] == (config, split, ALL, level, ER)
                and key[5] is not None
                and _num(row.get("mean")) is not None
            )
            if not pts:
                continue
            xs = [k for k, _ in pts]
            all_ks.update(xs)
            is_sel = config == selected
            color = SELECTED_COLOR if is_sel else PALETTE[i % len(PALETTE)]
            (line,) = ax.plot(
                xs,
                [float(r["mean"]) for _, r in pts],
                marker="o",
                markersize=5 if is_sel else 4,
                linewidth=2.6 if is_sel else 1.5,
                color=color,
                zorder=3 if is_sel else 2,
            )
            _band(ax, xs, [r.get("ci_lo") for _, r in pts], [r.get("ci_hi") for _, r in pts], color)
            handles.setdefault(_plain(label), line)
        for j, paper in enumerate(p for p in papers if p.get("level") == level):
            k, value = _num(paper.get("k")), _num(paper.get("value"))
            if k is None or value is None:
                continue
            mark = ax.scatter(
                [k],
                [value],
                marker=PAPER_MARKERS[j % len(PAPER_MARKERS)],
                s=150,
                facecolor="white",
                edgecolor="black",
                linewidth=1.4,
                zorder=5,
            )
            handles.setdefault(f"paper's reported figure: {_plain(paper.get('label', '?'))}", mark)
        ax.set_title(f"{LEVEL_NAMES.get(level, level)} level")
        ax.set_xlabel("K (units retrieved)")
        if all_ks:
            ax.set_xticks(sorted(all_ks))
        ax.set_xlim(0, max(all_ks or {20}) + 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("evidence recall@K (share of gold evidence found)")
    fig.suptitle(f"Evidence recall vs K — {split} split, mean over all questions")
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncol=2,
        frameon=False,
        fontsize=8,
    )
    return _png(fig)


def _rep(row: Mapping[str, Any], column: str) -> str:
    return str(row.get(column) or "—")


def _pairing(row: Mapping[str, Any]) -> str:
    return f"BM25 {_rep(row, 'bm25_rep')} + dense {_rep(row, 'dense_rep')}"


def _plot_fusion(
    rows: Sequence[Mapping[str, Any]], selection: tuple[str, str, int], selected: str
) -> bytes | None:
    """Linear-fusion mean vs β with CI bands as small multiples, RRF markers beside each panel.

    Nine overlapping bands in one panel are unreadable, so there is one row of panels per BM25
    representation and one column per split; inside a panel the lines are the dense
    representations. All panels share the y axis so any two can be compared.
    """
    level, metric, k = selection
    rows = [
        r
        for r in rows
        if r["level"] == level
        and r["metric"] == metric
        and _num(r["k"]) == k
        and _num(r.get("mean")) is not None
    ]
    linear = [r for r in rows if r["family"] == "linear" and _num(r.get("beta")) is not None]
    rrf = [r for r in rows if r["family"] == "rrf" and _num(r.get("rrf_k")) is not None]
    present = {r["split"] for r in linear + rrf}
    splits = [s for s in ("dev", "test") if s in present]
    splits += sorted(present - set(splits), key=_split_key)
    if not splits:
        return None
    bm25_reps = sorted({_rep(r, "bm25_rep") for r in linear + rrf})
    dense_reps = sorted({_rep(r, "dense_rep") for r in linear + rrf})
    color = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(dense_reps)}
    rrf_ks = sorted({int(r["rrf_k"]) for r in rrf})
    sel_rows = [r for r in linear + rrf if r["config"] == selected]
    sel_beta = next((float(r["beta"]) for r in sel_rows if r["family"] == "linear"), None)
    per_split = 2 if rrf_ks else 1
    fig = Figure(
        figsize=(6.4 * len(splits) + 0.8, 2.9 * len(bm25_reps) + 1.7), layout="constrained"
    )
    ratios = [4.0, 1.4] * len(splits) if rrf_ks else None
    grid = fig.add_gridspec(len(bm25_reps), per_split * len(splits), width_ratios=ratios)
    handles: dict[str, Any] = {}
    # one y range for every panel, set explicitly: sharey's callbacks cost more than the drawing
    ys = [
        v
        for r in linear + rrf
        for c in ("mean", "ci_lo", "ci_hi")
        if (v := _num(r.get(c))) is not None
    ]
    pad = 0.05 * (max(ys) - min(ys) or 0.1)
    ylim = (min(ys) - pad if min(ys) < 0 else max(min(ys) - pad, 0.0), max(ys) + pad)
    offsets = {
        d: (j - (len(dense_reps) - 1) / 2) * (0.6 / len(dense_reps))
        for j, d in enumerate(dense_reps)
    }
    for ri, brep in enumerate(bm25_reps):
        bottom = ri == len(bm25_reps) - 1
        for si, split in enumerate(splits):
            ax = fig.add_subplot(grid[ri, si * per_split])
            ax.set_ylim(ylim)
            for drep in dense_reps:
                pts = sorted(
                    (float(r["beta"]), r)
                    for r in linear
                    if r["split"] == split
                    and _rep(r, "bm25_rep") == brep
                    and _rep(r, "dense_rep") == drep
                )
                if not pts:
                    continue
                xs = [b for b, _ in pts]
                (line,) = ax.plot(
                    xs, [float(r["mean"]) for _, r in pts], color=color[drep], linewidth=1.7
                )
                lo = [r.get("ci_lo") for _, r in pts]
                _band(ax, xs, lo, [r.get("ci_hi") for _, r in pts], color[drep])
                handles.setdefault(f"dense retriever on {_plain(drep)}", line)
            if sel_beta is not None:
                vl = ax.axvline(sel_beta, color="black", linestyle="--", linewidth=1)
                handles.setdefault(f"selected β = {sel_beta:.2f} (chosen on dev)", vl)
            for r in sel_rows:
                if (r["family"], r["split"], _rep(r, "bm25_rep")) == ("linear", split, brep):
                    star = ax.scatter(
                        [float(r["beta"])],
                        [float(r["mean"])],
                        marker="*",
                        s=230,
                        color="k",
                        zorder=5,
                    )
                    handles.setdefault(f"selected config: {_plain(_short(selected, 60))}", star)
            ax.set_xlim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            if ri == 0:
                role = {"dev": " (selection)", "test": " (held out)"}.get(split, "")
                ax.set_title(f"{split} split{role}: linear fusion")
            if si == 0:
                ax.set_ylabel(f"BM25 on {_plain(brep)}\n{level} {metric}@{k}")
            else:
                ax.tick_params(labelleft=False)
            if bottom:
                ax.set_xlabel("β (linear fusion weight)")
            else:
                ax.tick_params(labelbottom=False)
            if not rrf_ks:
                continue
            rax = fig.add_subplot(grid[ri, si * per_split + 1])
            rax.set_ylim(ylim)
            for drep in dense_reps:  # one artist per colour: far faster than one per point
                pts = [
                    (rrf_ks.index(int(r["rrf_k"])) + offsets[drep], r)
                    for r in rrf
                    if r["split"] == split
                    and _rep(r, "bm25_rep") == brep
                    and _rep(r, "dense_rep") == drep
                ]
                if not pts:
                    continue
                bars = [
                    (x, _num(r.get("ci_lo")), _num(r.get("ci_hi")))
                    for x, r in pts
                    if _num(r.get("ci_lo")) is not None and _num(r.get("ci_hi")) is not None
                ]
                if bars:
                    xs, los, his = zip(*bars, strict=True)
                    rax.vlines(xs, los, his, color=color[drep], linewidth=0.9, alpha=0.55)
                xs, means = [x for x, _ in pts], [float(r["mean"]) for _, r in pts]
                rax.scatter(xs, means, marker="_", s=200, linewidths=2.6, color=color[drep])
                for x, r in pts:
                    if r["config"] == selected:
                        star = rax.scatter(
                            [x], [float(r["mean"])], marker="*", s=230, color="k", zorder=5
                        )
                        handles.setdefault(f"selected config: {_plain(_short(selected, 60))}", star)
            rax.set_xticks(range(len(rrf_ks)), [str(v) for v in rrf_ks])
            rax.set_xlim(-0.6, len(rrf_ks) - 0.4)
            rax.tick_params(labelleft=False)
            rax.grid(alpha=0.3, axis="y")
            if ri == 0:
                rax.set_title("RRF")
            if bottom:
                rax.set_xlabel("RRF constant k")
            else:
                rax.tick_params(labelbottom=False)
    if rrf_ks:
        handles["RRF result (horizontal marker; thin bar: 95% CI)"] = Line2D(
            [], [], marker="_", markersize=14, markeredgewidth=2.6, color="0.35", linestyle="none"
        )
    handles["95% CI band"] = Patch(facecolor="0.5", alpha=0.25, linewidth=0)
    fig.suptitle(
        f"Fusion sweep — {level} {metric}@{k}, by BM25 (rows) and dense (colour) representation"
    )
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncol=3,
        frameon=False,
        fontsize=8,
    )
    return _png(fig)


def _plot_types(
    summ: _Summary, selected: str, goals: Sequence[Mapping[str, Any]], split: str = "test"
) -> bytes | None:
    """Grouped bars per question type (turn vs session) with CI error bars, one panel per K."""
    keys = [key for key in summ.index if key[:2] == (selected, split) and key[4] == ER]
    levels = [lv for lv in ("turn", "session") if any(key[3] == lv for key in keys)]
    ks = [k for k in (5, 10) if any(key[5] == k for key in keys)]
    if not levels or not ks:
        return None
    qtypes = sorted({key[2] for key in keys if key[2] != ALL})
    if any(key[2] == ALL for key in keys):
        qtypes.append(ALL)

    def n_of(qtype: str) -> str:
        for level in ("session", "turn"):
            for k in ks:
                row = summ.get(selected, split, qtype, level, ER, k)
                if row is not None and _num(row.get("n")) is not None:
                    return f"n={int(row['n'])}"
        return "n=?"

    fig = Figure(figsize=(max(6.5, 1.3 * len(qtypes) * len(ks) + 1.5), 4.8), layout="constrained")
    axes = fig.subplots(1, len(ks), sharey=True, squeeze=False)[0]
    width = 0.8 / len(levels)
    handles: dict[str, Any] = {}
    for ax, k in zip(axes, ks, strict=True):
        for j, level in enumerate(levels):
            xs, ys, err_lo, err_hi = [], [], [], []
            for x, qtype in enumerate(qtypes):
                row = summ.get(selected, split, qtype, level, ER, k)
                mean = None if row is None else _num(row.get("mean"))
                if mean is None:
                    continue
                lo, hi = _num(row.get("ci_lo")), _num(row.get("ci_hi"))
                xs.append(x + (j - (len(levels) - 1) / 2) * width)
                ys.append(mean)
                err_lo.append(0.0 if lo is None else max(mean - lo, 0.0))
                err_hi.append(0.0 if hi is None else max(hi - mean, 0.0))
            if not xs:
                continue
            bars = ax.bar(
                xs,
                ys,
                width=width * 0.95,
                color=LEVEL_COLORS.get(level, "0.5"),
                yerr=[err_lo, err_hi],
                capsize=3,
                error_kw={"elinewidth": 1, "ecolor": "0.2"},
            )
            ax.bar_label(bars, fmt="%.2f", label_type="center", fontsize=8, color="white")
            handles.setdefault(f"{level} level", bars)
            for goal in goals:
                if (
                    goal.get("level") == level
                    and goal.get("metric", ER) == ER
                    and _num(goal.get("k")) == k
                    and goal.get("qtype", ALL) in qtypes
                    and _num(goal.get("target")) is not None
                ):
                    x = qtypes.index(goal.get("qtype", ALL)) + (j - (len(levels) - 1) / 2) * width
                    (gl,) = ax.plot(
                        [x - width / 2, x + width / 2],
                        [float(goal["target"])] * 2,
                        color="black",
                        linewidth=2.2,
                        linestyle=(0, (2, 1)),
                    )
                    handles.setdefault("goal target", gl)
        labels = [f"{'all questions' if q == ALL else _plain(q)}\n{n_of(q)}" for q in qtypes]
        ax.set_xticks(range(len(qtypes)), labels, fontsize=8)
        if ALL in qtypes and len(qtypes) > 1:
            ax.axvline(len(qtypes) - 1.5, color="0.6", linewidth=0.8)
        ax.set_ylim(0, 1.12)
        ax.set_title(f"evidence recall@{k}")
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("evidence recall (share of gold evidence found)")
    fig.suptitle(f"By question type — {_plain(selected)}, {split} split (error bars: 95% CI)")
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncol=3,
        frameon=False,
        fontsize=8,
    )
    return _png(fig)


# ----------------------------------------------------------------------------- sections


def _note(text: str) -> _P:
    return _P(text, "note")


def _headline(
    summ: _Summary | None, why: str | None, meta: Mapping[str, Any], selected: str
) -> _Section:
    sec = _Section("headline", "Headline")
    selection = meta.get("selection_metric") or "the selection metric"
    splits = meta.get("splits") or {}
    sec.blocks.append(
        _P(
            f"Selected configuration: {selected or '(not given)'} — chosen on the dev split by "
            f"{selection}. The test split "
            f"({', '.join(map(str, splits.get('test', []))) or 'corpora not listed'}) was not "
            "used for any choice, so its numbers are the honest estimate; dev and all-question "
            "figures are in-sample and shown only for comparison."
        )
    )
    papers = [p for p in meta.get("paper_figures") or [] if isinstance(p, Mapping)]
    goals = [g for g in meta.get("goals") or [] if isinstance(g, Mapping)]
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the headline numbers are absent."))
    else:
        rows = []
        for level, metric, k, qtype in HEADLINE_ROWS:
            test = summ.get(selected, "test", qtype, level, metric, k)
            goal_txt = [
                f"≥ {_f(g.get('target'))}: {_verdict(test, g.get('target'))}"
                for g in goals
                if _matches(g, level, metric, k, qtype)
            ]
            paper_txt = [
                f"{_f(p.get('value'))} ({p.get('label', '?')})"
                for p in papers
                if _matches(p, level, metric, k, qtype)
            ]
            goal_cls = ""
            if goal_txt:
                goal_cls = "miss" if any(t.endswith("MISS") for t in goal_txt) else "pass"
                goal_cls = "nodata" if any(t.endswith("NO DATA") for t in goal_txt) else goal_cls
            rows.append(
                [
                    _measure(level, metric, k, qtype),
                    _Cell(_f(None if test is None else test.get("mean")), "num strong"),
                    _Cell(
                        "—" if test is None else _ci(test.get("ci_lo"), test.get("ci_hi")), "num"
                    ),
                    _Cell("—" if test is None else _int(test.get("n")), "num"),
                    _Cell(_mean_ci(summ.get(selected, "dev", qtype, level, metric, k)), "num"),
                    _Cell(_mean_ci(summ.get(selected, "all", qtype, level, metric, k)), "num"),
                    _Cell("; ".join(goal_txt) or "—", goal_cls),
                    _Cell("; ".join(paper_txt) or "—", "paper"),
                ]
            )
        sec.blocks.append(
            _Table(
                [
                    "Measure",
                    "Test mean",
                    "Test 95% CI",
                    "Test n",
                    "Dev (selection, in-sample)",
                    "All questions (in-sample)",
                    "Goal (vs test mean)",
                    "Paper's reported figure (not our run)",
                ],
                rows,
            )
        )
        sec.blocks.append(
            _P(
                "Evidence recall = share of a question's gold evidence found in the top K units. "
                "95% CIs: percentile bootstrap over questions"
                + _boot_text(meta)
                + ". The last column repeats figures published in the papers, for orientation "
                "only: their splits, filtering and retrievers differ from ours.",
                "caption",
            )
        )
    sec.blocks.append(_Sub("Goals"))
    if not goals:
        sec.blocks.append(_note("No goals were given in meta."))
    else:
        grows = []
        for g in goals:
            level, metric = g.get("level", "?"), g.get("metric", ER)
            k, qtype = g.get("k", "?"), g.get("qtype", ALL)
            test = None if summ is None else summ.get(selected, "test", qtype, level, metric, k)
            verdict = _verdict(test, g.get("target"))
            mean = None if test is None else _num(test.get("mean"))
            target = _num(g.get("target"))
            margin = None if mean is None or target is None else mean - target
            grows.append(
                [
                    str(g.get("label", "")),
                    _measure(str(level), str(metric), k, str(qtype)),
                    _Cell(f"≥ {_f(target)}", "num"),
                    _Cell(_mean_ci(test), "num"),
                    _Cell("—" if test is None else _int(test.get("n")), "num"),
                    _Cell(_signed(margin), "num"),
                    _Cell(verdict, verdict.lower().replace(" ", "")),
                ]
            )
        sec.blocks.append(
            _Table(
                ["Goal", "Measure", "Target", "Test mean [95% CI]", "n", "Margin", "Result"], grows
            )
        )
        sec.blocks.append(
            _P(
                "PASS when the selected configuration's TEST-split mean reaches the target; "
                "NO DATA when the summary has no such row.",
                "caption",
            )
        )
    sec.blocks.append(_Sub("Published figures (the papers' numbers, not ours)"))
    if not papers:
        sec.blocks.append(_note("No paper figures were given in meta."))
    else:
        prows = []
        for p in papers:
            level, k = p.get("level", "?"), p.get("k", "?")
            metric, qtype = p.get("metric", ER), p.get("qtype", ALL)
            ours = None if summ is None else summ.get(selected, "test", qtype, level, metric, k)
            prows.append(
                [
                    f"Paper: {p.get('label', '?')}",
                    _measure(str(level), str(metric), k, str(qtype)),
                    _Cell(_f(p.get("value")), "num paper"),
                    _Cell(_mean_ci(ours), "num"),
                ]
            )
        sec.blocks.append(
            _Table(
                ["Source (paper)", "Measure", "Paper's reported value", "Ours: test mean [95% CI]"],
                prows,
            )
        )
    return sec


def _matches(spec: Mapping[str, Any], level: str, metric: str, k: Any, qtype: str) -> bool:
    """Whether a goal / paper-figure dict (metric and qtype defaulted) names this measure."""
    return (
        spec.get("level"),
        spec.get("metric", ER),
        _num(spec.get("k")),
        spec.get("qtype", ALL),
    ) == (level, metric, _num(k), qtype)


def _verdict(test: Mapping[str, Any] | None, target: Any) -> str:
    mean = None if test is None else _num(test.get("mean"))
    t = _num(target)
    if mean is None or t is None:
        return "NO DATA"
    return "PASS" if mean >= t else "MISS"


def _boot_text(meta: Mapping[str, Any]) -> str:
    boot = meta.get("bootstrap") or {}
    parts = []
    if boot.get("resamples") is not None:
        parts.append(f"{boot['resamples']} resamples")
    if boot.get("seed") is not None:
        parts.append(f"seed {boot['seed']}")
    return f" ({', '.join(parts)})" if parts else ""


def _comparison_series(
    summ: _Summary,
    sweep_rows: Sequence[Mapping[str, Any]],
    selected: str,
    selection: tuple[str, str, int],
) -> list[tuple[str, str]]:
    """(config, legend label): the selected config, then the best BM25 and best dense single
    retriever on dev (from the sweep), falling back to the best other configs of the summary."""
    level, metric, k = selection
    present = set(summ.configs())
    out = [(selected, f"{selected} (selected)")] if selected else []
    seen = {selected}
    for family, name in (("bm25", "best BM25"), ("dense", "best dense")):
        cands = [
            r
            for r in sweep_rows
            if r["family"] == family
            and r["split"] == "dev"
            and (r["level"], r["metric"], _num(r["k"])) == (level, metric, k)
            and _num(r.get("mean")) is not None
            and r["config"] not in seen
            and r["config"] in present
        ]
        if cands:
            best = max(cands, key=lambda r: float(r["mean"]))
            out.append((best["config"], f"{best['config']} ({name} on dev)"))
            seen.add(best["config"])
    if len(out) <= 1:
        others = [
            (summ.mean(c, "dev", ALL, level, metric, k) or -1.0, c)
            for c in summ.configs()
            if c not in seen
        ]
        out += [(c, c) for _, c in sorted(others, reverse=True)[:3]]
    return out


def _recall_section(
    summ: _Summary | None,
    why: str | None,
    sweep_rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    selected: str,
) -> _Section:
    sec = _Section("recall-vs-k", "Recall vs K")
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the recall-vs-K curves are absent."))
        return sec
    selection = _parse_selection(meta.get("selection_metric"))
    series = _comparison_series(summ, sweep_rows, selected, selection)
    papers = [
        p
        for p in meta.get("paper_figures") or []
        if isinstance(p, Mapping) and p.get("metric", ER) == ER and p.get("qtype", ALL) == ALL
    ]
    png = _plot_recall_vs_k(summ, series, selected, papers)
    if png is None:
        sec.blocks.append(
            _note(
                'The summary has no test-split evidence_recall rows (qtype "all") for the '
                "selected or comparison configurations, so the curves are absent."
            )
        )
        return sec
    sec.blocks.append(
        _Img(
            "recall_vs_k.png",
            png,
            "Evidence recall against K per level for the selected config and the best single "
            "retrievers, test split, with 95% confidence bands",
            "How much of the gold evidence is in the top K, as K grows, on the held-out test "
            "split (mean over all questions, each weighing the same). Red, thick: the selected "
            "configuration; "
            "other lines: the best BM25 and dense retriever chosen on dev. Shaded bands: 95% "
            "bootstrap CI. Hollow black markers are figures published in the papers, plotted "
            "for orientation only — they are not our measurements.",
        )
    )
    ks = sorted(
        {key[5] for key in summ.index if key[1:3] == ("test", ALL) and key[4] == ER} - {None}
    )
    rows = []
    for level in LEVELS:
        for config, label in series:
            cells = [summ.get(config, "test", ALL, level, ER, k) for k in ks]
            if any(c is not None for c in cells):
                rows.append([label, level, *(_Cell(_mean_ci(c), "num") for c in cells)])
    if rows:
        headers = ["Configuration", "Level", *(f"K={int(k)}" for k in ks)]
        sec.blocks.append(_Details("Numbers behind the curves", [_Table(headers, rows)]))
    return sec


def _fusion_section(
    sweep_rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any], selected: str
) -> _Section:
    sec = _Section("fusion", "Fusion weight sweep")
    if why:
        sec.blocks.append(_note(f"{why}, so the fusion-weight curve is absent."))
        return sec
    selection = _parse_selection(meta.get("selection_metric"))
    available = {(r["level"], r["metric"], _num(r["k"])) for r in sweep_rows}
    if selection not in available:
        fallback = next(
            (s for s in (DEFAULT_SELECTION, *sorted(available, key=str)) if s in available), None
        )
        sec.blocks.append(
            _note(
                f"The sweep has no rows for {' '.join(map(str, selection[:2]))}@{selection[2]}; "
                f"showing {fallback[0]} {fallback[1]}@{int(fallback[2])} instead."
                if fallback
                else "The sweep has no usable rows."
            )
        )
        if fallback is None:
            return sec
        selection = (fallback[0], fallback[1], int(fallback[2]))
    png = _plot_fusion(sweep_rows, selection, selected)
    if png is None:
        sec.blocks.append(_note("The sweep has no linear-fusion or RRF rows to plot."))
        return sec
    level, metric, k = selection
    sec.blocks.append(
        _Img(
            "fusion_sweep.png",
            png,
            f"Linear fusion {level} {metric}@{k} against beta per representation pairing, dev "
            "and test splits, with RRF results as horizontal markers",
            f"How the fusion weight β changes {level} {metric}@{k}. One row of panels per "
            "BM25 representation, one line per dense representation (colour), shaded: 95% CI. "
            "Left: the dev split the choice was made on; right: the held-out test split — a peak "
            "that moves or flattens on test is a sign of over-tuning. At β = 0 and β = 1 one "
            "retriever gets all the weight. Dashed line and star: the selected configuration. "
            "Narrow panels: reciprocal-rank fusion at each constant k as horizontal markers on the "
            "same y scale (thin bars: 95% CI).",
        )
    )
    table = _fusion_table(sweep_rows, selection, selected)
    if table is not None:
        sec.blocks.append(_Details("Numbers behind the sweep (per pairing and split)", [table]))
    return sec


def _beta(row: Mapping[str, Any]) -> float | None:
    """β rounded so 0.30000000000000004 and 0.3 are the same sweep point."""
    b = _num(row.get("beta"))
    return None if b is None else round(b, 6)


def _fusion_table(
    rows: Sequence[Mapping[str, Any]], selection: tuple[str, str, int], selected: str
) -> _Table | None:
    """Per split and pairing: the ends of the β curve, its peak, the selected β and best RRF."""
    level, metric, k = selection
    rows = [
        r
        for r in rows
        if (r["level"], r["metric"], _num(r["k"])) == (level, metric, k)
        and _num(r.get("mean")) is not None
        and r["family"] in ("linear", "rrf")
    ]
    sel_beta = next(
        (_beta(r) for r in rows if r["config"] == selected and r["family"] == "linear"), None
    )
    groups: dict[tuple[Any, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["split"], _pairing(r))].append(r)
    out = []
    for split, pairing in sorted(groups, key=lambda g: (g[0] != "dev", _split_key(g[0]), g[1])):
        group = groups[(split, pairing)]
        by_beta = {_beta(r): r for r in group if r["family"] == "linear" and _beta(r) is not None}
        rrf = [r for r in group if r["family"] == "rrf" and _num(r.get("rrf_k")) is not None]
        peak = max(by_beta.values(), key=lambda r: float(r["mean"]), default=None)
        best_rrf = max(rrf, key=lambda r: float(r["mean"]), default=None)
        ends = [_f((by_beta.get(b) or {}).get("mean")) for b in (0.0, 1.0)]
        out.append(
            [
                str(split),
                pairing,
                _Cell(ends[0], "num"),
                _Cell(ends[1], "num"),
                _Cell("—" if peak is None else f"{float(peak['beta']):.2f}", "num"),
                _Cell(_mean_ci(peak), "num"),
                _Cell(_mean_ci(by_beta.get(sel_beta)) if sel_beta is not None else "—", "num"),
                _Cell(
                    "—"
                    if best_rrf is None
                    else f"k={int(best_rrf['rrf_k'])}: {_mean_ci(best_rrf)}",
                    "num",
                ),
            ]
        )
    if not out:
        return None
    return _Table(
        [
            "Split",
            "Pairing",
            "β = 0",
            "β = 1",
            "Best β",
            "Mean at best β [95% CI]",
            "At selected β" + ("" if sel_beta is None else f" ({sel_beta:.2f})"),
            "Best RRF",
        ],
        out,
    )


def _types_section(
    summ: _Summary | None, why: str | None, meta: Mapping[str, Any], selected: str
) -> _Section:
    sec = _Section("by-type", "By question type")
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the per-type bars are absent."))
        return sec
    goals = [g for g in meta.get("goals") or [] if isinstance(g, Mapping)]
    png = _plot_types(summ, selected, goals)
    if png is None:
        sec.blocks.append(
            _note(
                "The summary has no test-split evidence_recall@5/@10 rows at turn or session "
                "level for the selected configuration, so the per-type bars are absent."
            )
        )
        return sec
    sec.blocks.append(
        _Img(
            "by_question_type.png",
            png,
            "Evidence recall per question type for the selected configuration, turn and session "
            "level, test split, with 95% CI error bars",
            "Evidence recall of the selected configuration on the test split for each question "
            "type (n = questions of that type), turn vs session level; error bars are 95% "
            "bootstrap CIs, so wide bars mean few questions. The right-most group is the mean "
            "over all questions; short dashed black lines mark goal targets.",
        )
    )
    cols = [(lv, k) for k in (5, 10) for lv in ("turn", "session")]
    qtypes = sorted(
        {key[2] for key in summ.index if key[:2] == (selected, "test") and key[4] == ER},
        key=lambda q: (q == ALL, q),
    )
    rows = []
    for qtype in qtypes:
        cells = [summ.get(selected, "test", qtype, lv, ER, k) for lv, k in cols]
        n = next((_int(c.get("n")) for c in cells if c is not None), "—")
        label = "all questions" if qtype == ALL else qtype
        rows.append([label, *(_Cell(_mean_ci(c), "num") for c in cells), _Cell(n, "num")])
    if rows:
        sec.blocks.append(
            _Details(
                "Numbers behind the bars",
                [_Table(["Question type", *(f"{lv} @{k}" for lv, k in cols), "n"], rows)],
            )
        )
    return sec


def _granularity_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any]
) -> _Section:
    """Per granularity (turn, session) and question type, evidence recall@5 out of fold:
    the default procedure against each single retriever, the earlier defaults and the
    published anchors (``meta["cv"]["columns"]``: column label -> cv table config)."""
    sec = _Section("granularity", "Granularities: the default against each single retriever")
    if why is not None:
        sec.blocks.append(_note(f"{why}, so the cross-validated comparison is absent."))
        return sec
    cv = meta.get("cv") if isinstance(meta.get("cv"), Mapping) else {}
    columns = dict(cv.get("columns") or {"default (CV)": "cv:selected"})
    index = {
        (r["config"], r["level"], r["qtype"]): r
        for r in rows
        if r.get("metric") == ER and r.get("k") == 5
    }
    present = {label: name for label, name in columns.items() if any(k[0] == name for k in index)}
    papers = [p for p in meta.get("paper_figures") or [] if isinstance(p, Mapping)]
    qtypes = sorted({k[2] for k in index}, key=lambda q: (q != ALL, q))
    table_rows = []
    for level in ("turn", "session"):
        anchors = "; ".join(
            f"{_plain(p.get('label'))} {_f(p.get('value'))}"
            for p in papers
            if p.get("level") == level and p.get("k") == 5
        )
        for qtype in qtypes:
            cells = [index.get((name, level, qtype)) for name in present.values()]
            if all(c is None for c in cells):
                continue
            table_rows.append(
                [
                    level,
                    "all questions" if qtype == ALL else qtype,
                    *(_Cell(_mean_ci(c), "num") for c in cells),
                    anchors if qtype == ALL else "",
                ]
            )
    sec.blocks.append(
        _P(
            "Evidence recall@5, pooled out of fold (leave one conversation out; 95% CIs "
            "resample conversations, then questions). The default is the procedure: select on "
            "the other conversations (and, with the reranker, train it there), score the held-"
            "out one. The single retrievers and the earlier defaults are fixed configurations. "
            "Anchors are published figures on the full LoCoMo, not on these conversations.",
            "caption",
        )
    )
    sec.blocks.append(_Table(["Level", "Question type", *present, "Anchors"], table_rows))
    return sec


def _diffs_section(rows: Sequence[Mapping[str, Any]], why: str | None) -> _Section:
    sec = _Section("differences", "Differences between configurations")
    if why:
        sec.blocks.append(_note(f"{why}, so no paired differences are shown."))
        return sec
    out = []
    for r in sorted(
        rows,
        key=lambda r: (
            _split_key(r["split"]),
            _level_key(r["level"]),
            str(r["metric"]),
            _num(r["k"]) or 0,
            str(r["config_a"]),
            str(r["config_b"]),
        ),
    ):
        lo, hi = _num(r.get("ci_lo")), _num(r.get("ci_hi"))
        if lo is not None and lo > 0:
            verdict, cls = "A better", "pass"
        elif hi is not None and hi < 0:
            verdict, cls = "B better", "miss"
        elif lo is None or hi is None:
            verdict, cls = "no CI", ""
        else:
            verdict, cls = "no clear difference (CI spans 0)", ""
        out.append(
            [
                str(r["split"]),
                _measure(str(r["level"]), str(r["metric"]), _int(r["k"])),
                str(r["config_a"]),
                str(r["config_b"]),
                _Cell(_signed(r.get("mean_diff")), "num strong"),
                _Cell(_ci(lo, hi), "num"),
                _Cell(verdict, cls),
            ]
        )
    sec.blocks.append(_Table(["Split", "Measure", "A", "B", "A − B", "95% CI", "Verdict"], out))
    sec.blocks.append(
        _P(
            "Paired bootstrap over the same questions: both configurations are scored on each "
            "resample, so per-question difficulty cancels. A CI that excludes 0 means the "
            "difference is unlikely to be resampling noise.",
            "caption",
        )
    )
    return sec


def _ceiling_section(rows: Sequence[Mapping[str, Any]], why: str | None) -> _Section:
    sec = _Section("ceiling", "Oracle ceiling")
    if why:
        sec.blocks.append(_note(f"{why}, so the oracle ceiling is absent."))
        return sec
    out = [
        [
            LEVEL_NAMES.get(r["level"], str(r["level"])),
            "all questions" if r["qtype"] == ALL else str(r["qtype"]),
            _Cell(_int(r["pool"]), "num"),
            _Cell(_f(r["oracle_recall"]), "num strong"),
            _Cell(_int(r["n"]), "num"),
        ]
        for r in sorted(
            rows,
            key=lambda r: (
                _level_key(r["level"]),
                r["qtype"] != ALL,
                str(r["qtype"]),
                _num(r["pool"]) or 0,
            ),
        )
    ]
    sec.blocks.append(_Table(["Level", "Question type", "Pool", "Oracle recall", "n"], out))
    sec.blocks.append(
        _P(
            "Share of gold evidence present anywhere in the candidate pool (the first 'pool' "
            "candidates): the best any re-ranking of that pool could reach. A low ceiling means "
            "candidate generation, not ranking, is the bottleneck.",
            "caption",
        )
    )
    return sec


AMBIGUOUS_CONDITIONS = {
    "original": "original question",
    "ambiguous": "ambiguous, no recent messages",
    "resolved": "ambiguous + recent (rules)",
    "resolved-ambiguous": "difference (resolved - ambiguous)",
}


def _query_variant(row: Mapping[str, Any]) -> bool:
    """Whether a sweep row is a query-understanding variant (speaker boost, stripped
    question, PRF) rather than a plain configuration."""
    return bool(row.get("speaker_boost") or row.get("strip_question") or row.get("prf_terms"))


def _ambiguous_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any]
) -> _Section:
    """Ambiguous follow-up questions (Alonso et al. 2024): recall with and without the
    recent messages that hold the entity."""
    sec = _Section("ambiguous", "Ambiguous follow-up questions")
    if why:
        sec.blocks.append(_note(f"{why}, so the ambiguous-question evaluation is absent."))
        return sec
    info = meta.get("ambiguous") or {}
    order = list(AMBIGUOUS_CONDITIONS)
    out = []
    for r in sorted(
        rows,
        key=lambda r: (
            r["kind"] != ALL,
            str(r["kind"]),
            _level_key(r["level"]),
            order.index(r["condition"]) if r["condition"] in order else 9,
        ),
    ):
        strong = "num strong" if r["condition"] == "resolved-ambiguous" else "num"
        fmt = _signed if r["condition"] == "resolved-ambiguous" else _f
        out.append(
            [
                "all variants" if r["kind"] == ALL else str(r["kind"]),
                LEVEL_NAMES.get(r["level"], str(r["level"])),
                AMBIGUOUS_CONDITIONS.get(r["condition"], str(r["condition"])),
                _Cell(fmt(r["mean"]), strong),
                _ci(r["ci_lo"], r["ci_hi"]),
                _Cell(_int(r["n"]), "num"),
                _Cell(_f(r["resolved_exactly"]), "num"),
            ]
        )
    headers = [
        "Variant",
        "Level",
        "Question",
        f"R@{_int(rows[0]['k']) if rows else 5}",
        "95% CI",
        "n",
        "Entity recovered",
    ]
    sec.blocks.append(_Table(headers, out))
    limits = "; ".join(str(x) for x in info.get("limits", ()))
    sec.blocks.append(
        _P(
            "Each labelled question made ambiguous: 'person' replaces the speaker it names by "
            "they/their, 'topic' replaces its key noun phrase by 'that'; a synthetic "
            "preceding turn holds the entity. Evidence recall of the original question, the "
            "ambiguous one searched alone, and the ambiguous one resolved by the rules of "
            f"search(recent=...), under {info.get('config', 'the selected search')}. CIs "
            "resample conversations, then questions. 'Entity recovered': share of resolved "
            f"questions that hold the entity again. What the generator cannot do: {limits}.",
            "caption",
        )
    )
    return sec


def _failures_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, selected: str
) -> _Section:
    sec = _Section("failures", "Failures: no primary gold in the top 5")
    if why:
        empty = why.endswith("is empty")
        sec.blocks.append(
            _note(
                "No failures were recorded: the failures table is empty."
                if empty
                else f"{why}, so the failure list is absent."
            )
        )
        return sec
    configs = sorted({str(r["config"]) for r in rows})
    if selected in configs:
        rows = [r for r in rows if r["config"] == selected]
        scope = f"selected configuration {selected}"
    else:
        scope = f"configuration(s) {', '.join(configs)}"
    failed = [r for r in rows if not r.get("found_at_5")]
    if not failed:
        sec.blocks.append(
            _note(f"No failures for the {scope}: every question had primary gold in the top 5.")
        )
        return sec
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in failed:
        by_type[str(r["qtype"])].append(r)
    overview = []
    for qtype in sorted(by_type):
        group = by_type[qtype]
        n = len(group)
        at10 = sum(1 for r in group if r.get("found_at_10"))
        at20 = sum(1 for r in group if r.get("found_at_20"))
        overview.append(
            [
                qtype,
                _Cell(str(n), "num"),
                _Cell(f"{at10} ({at10 / n:.0%})", "num"),
                _Cell(f"{at20} ({at20 / n:.0%})", "num"),
                _Cell(f"{n - at20} ({(n - at20) / n:.0%})", "num"),
            ]
        )
    sec.blocks.append(
        _P(
            f"Questions (per level) for the {scope} with no primary gold unit in the top 5, and "
            'whether deeper retrieval brings it back. "Lost" ones are missing even at 20: '
            "look at those first."
        )
    )
    sec.blocks.append(
        _Table(
            ["Question type", "Failing @5", "Back by @10", "Back by @20", "Lost at 20"], overview
        )
    )
    for qtype in sorted(by_type):
        group = sorted(
            by_type[qtype],
            key=lambda r: (
                bool(r.get("found_at_20")),
                bool(r.get("found_at_10")),
                _level_key(r["level"]),
                str(r["corpus_id"]),
                str(r["question_id"]),
            ),
        )
        shown = group[:MAX_FAILURES_PER_TYPE]
        table = _Table(
            ["Question id", "Corpus", "Level", "Question", "@10", "@20"],
            [
                [
                    str(r["question_id"]),
                    str(r["corpus_id"]),
                    str(r["level"]),
                    str(r["question"] or ""),
                    _yes_no(r.get("found_at_10")),
                    _yes_no(r.get("found_at_20")),
                ]
                for r in shown
            ],
        )
        blocks: list[Any] = [table]
        if len(group) > len(shown):
            blocks.append(_note(f"{len(group) - len(shown)} more not shown."))
        sec.blocks.append(_Details(f"{qtype} — {len(group)} failing", blocks))
    return sec


def _yes_no(x: Any) -> _Cell:
    return _Cell("yes", "pass") if x else _Cell("no", "miss")


def _questions_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any]
) -> _Section:
    sec = _Section("questions", "Questions and exclusions")
    if why:
        sec.blocks.append(_note(f"{why}, so the question report is absent."))
        return sec
    split_of: dict[str, str] = {}
    for split, corpora in (meta.get("splits") or {}).items():
        for c in corpora or []:
            split_of[str(c)] = str(split)
    out = []
    totals = [0, 0, 0]
    for r in sorted(rows, key=lambda r: (str(r["corpus_id"]), str(r["qtype"]))):
        q, e, u = (int(_num(r[c]) or 0) for c in ("questions", "excluded", "unresolved_ids"))
        totals = [totals[0] + q, totals[1] + e, totals[2] + u]
        out.append(
            [
                str(r["corpus_id"]),
                split_of.get(str(r["corpus_id"]), "—"),
                str(r["qtype"]),
                _Cell(str(q), "num"),
                _Cell(str(e), "num"),
                _Cell(str(q - e), "num"),
                _Cell(str(u), "num"),
            ]
        )
    out.append(
        [
            _Cell("total", "strong"),
            "",
            "",
            _Cell(str(totals[0]), "num strong"),
            _Cell(str(totals[1]), "num strong"),
            _Cell(str(totals[0] - totals[1]), "num strong"),
            _Cell(str(totals[2]), "num strong"),
        ]
    )
    sec.blocks.append(
        _Table(
            ["Corpus", "Split", "Question type", "Questions", "Excluded", "Used", "Unresolved ids"],
            out,
        )
    )
    sec.blocks.append(
        _P(
            "Excluded questions are left out of every mean (e.g. no usable gold evidence); "
            "unresolved ids are gold evidence references that matched no unit of the corpus.",
            "caption",
        )
    )
    return sec


def _plot_context_recall(
    msumm: _Summary, configs: Sequence[str], baseline: str, split: str = "test"
) -> bytes | None:
    """Context-pack evidence recall against the budget, one line (+ CI band) per strategy."""
    fig = Figure(figsize=(7.2, 4.6), layout="constrained")
    ax = fig.subplots()
    drawn = False
    for i, config in enumerate(configs):
        pts = sorted(
            (key[5], row)
            for key, row in msumm.index.items()
            if key[:5] == (config, split, ALL, "context", ER)
            and key[5] is not None
            and _num(row.get("mean")) is not None
        )
        if not pts:
            continue
        xs = [k for k, _ in pts]
        is_base = config == baseline
        color = "#444444" if is_base else PALETTE[i % len(PALETTE)]
        ax.plot(
            xs,
            [float(r["mean"]) for _, r in pts],
            marker="o",
            markersize=4,
            linewidth=1.5,
            linestyle="--" if is_base else "-",
            color=color,
            label=_plain(_short(config, 60)),
        )
        _band(ax, xs, [r.get("ci_lo") for _, r in pts], [r.get("ci_hi") for _, r in pts], color)
        drawn = True
    if not drawn:
        return None
    ax.set_xscale("log")
    ax.set_xlabel("budget (UTF-16 units, log scale)")
    ax.set_ylabel("share of gold evidence in the pack")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"Context-pack evidence recall vs budget — {split} split")
    ax.legend(fontsize=8, frameon=False)
    return _png(fig)


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


# ----------------------------------------------------------------------------- rendering

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1180px;padding:1.5rem 2rem;color:#222;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2.4rem}
.sub{color:#555;margin-top:0}nav ol{columns:2;font-size:.95rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #ddd;padding:.3rem .55rem;vertical-align:top;text-align:left}
th{background:#f3f4f6}tr:nth-child(even) td{background:#fafafa}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.strong{font-weight:600}td.pass{color:#11691f;font-weight:700;background:#e7f6e9}
td.miss{color:#a61b1b;font-weight:700;background:#fbe9e9}td.nodata{color:#8a6d00;
font-weight:700}td.paper{font-style:italic;color:#555}
p.note{color:#8a6d00;background:#fff8e1;padding:.4rem .7rem;border-left:4px solid #f0c36d}
p.caption,figcaption{color:#555;font-size:.88rem}figure{margin:1rem 0}
figure img{max-width:100%;height:auto;border:1px solid #eee}
pre{background:#f6f8fa;padding:.7rem 1rem;border-radius:4px;overflow-x:auto}
details{margin:.4rem 0}summary{cursor:pointer;font-weight:600}
"""


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _html_cell(c: str | _Cell, tag: str = "td") -> str:
    cell = c if isinstance(c, _Cell) else _Cell(c)
    cls = f' class="{_e(cell.cls)}"' if cell.cls else ""
    return f"<{tag}{cls}>{_e(cell.text)}</{tag}>"


def _html_block(b: Any) -> str:
    if isinstance(b, _P):
        cls = f' class="{_e(b.cls)}"' if b.cls else ""
        return f"<p{cls}>{_e(b.text)}</p>"
    if isinstance(b, _Table):
        head = "".join(f"<th>{_e(h)}</th>" for h in b.headers)
        body = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in b.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(b, _Img):
        data = base64.b64encode(b.png).decode("ascii")
        return (
            f'<figure><img src="data:image/png;base64,{data}" alt="{_e(b.alt)}">'
            f"<figcaption>{_e(b.caption)}</figcaption></figure>"
        )
    if isinstance(b, _Code):
        return f"<pre><code>{_e(b.text)}</code></pre>"
    if isinstance(b, _List):
        return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, _Sub):
        return f"<h3>{_e(b.title)}</h3>"
    if isinstance(b, _Details):
        inner = "".join(_html_block(x) for x in b.blocks)
        return f"<details><summary>{_e(b.summary)}</summary>{inner}</details>"
    raise TypeError(f"unknown block {type(b).__name__}")


def _render_html(title: str, meta: Mapping[str, Any], sections: Sequence[_Section]) -> str:
    sub = f"{meta.get('dataset', '')} — generated {meta.get('generated_at', '')}".strip(" —")
    nav = "".join(f'<li><a href="#{_e(s.anchor)}">{_e(s.title)}</a></li>' for s in sections)
    body = "".join(
        f'<section id="{_e(s.anchor)}"><h2>{_e(s.title)}</h2>'
        + "".join(_html_block(b) for b in s.blocks)
        + "</section>"
        for s in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{_e(title)}</h1><p class="sub">{_e(sub)}</p>'
        f"<nav><ol>{nav}</ol></nav>{body}</body></html>\n"
    )


_MD_FORMAT = re.compile(r"([*_~#])")


def _m(s: Any) -> str:
    """Markdown-escape text and fold newlines for table cells: the shared chat-text escape
    (no HTML, link, image or code span can form; ``|`` cannot end a cell), then backslashes
    before the emphasis and heading marks so a question shows as it was asked."""
    return _MD_FORMAT.sub(r"\\\1", escape_markdown(" ".join(str(s).split()), table_cell=True))


def _md_block(b: Any) -> list[str]:
    if isinstance(b, _P):
        text = _m(b.text)
        return [f"*{text}*" if b.cls == "caption" else f"> {text}" if b.cls == "note" else text, ""]
    if isinstance(b, _Table):

        def cell(c: str | _Cell) -> str:
            return _m(c.text if isinstance(c, _Cell) else c) or " "

        lines = ["| " + " | ".join(_m(h) for h in b.headers) + " |"]
        lines.append("|" + "|".join("---" for _ in b.headers) + "|")
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in b.rows]
        return [*lines, ""]
    if isinstance(b, _Img):
        return [f"![{_m(b.alt)}]({b.filename})", "", f"*{_m(b.caption)}*", ""]
    if isinstance(b, _Code):
        # a fence longer than any backtick run in the text, so the text cannot close it
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", b.text)), default=0))
        return [f"{fence}sh", b.text, fence, ""]
    if isinstance(b, _List):
        return [*(f"- {_m(i)}" for i in b.items), ""]
    if isinstance(b, _Sub):
        return [f"### {_m(b.title)}", ""]
    if isinstance(b, _Details):
        lines = [f"#### {_m(b.summary)}", ""]
        for x in b.blocks:
            lines += _md_block(x)
        return lines
    raise TypeError(f"unknown block {type(b).__name__}")


def _render_md(title: str, meta: Mapping[str, Any], sections: Sequence[_Section]) -> str:
    lines = [f"# {_m(title)}", ""]
    sub = f"{meta.get('dataset', '')} — generated {meta.get('generated_at', '')}".strip(" —")
    if sub:
        lines += [_m(sub), ""]
    for i, s in enumerate(sections, start=1):
        lines += [f"## {i}. {_m(s.title)}", ""]
        for b in s.blocks:
            lines += _md_block(b)
    return "\n".join(lines).rstrip() + "\n"


# ----------------------------------------------------------------------------- entry point


def write_report(
    tables: Mapping[str, pa.Table | None], meta: Mapping[str, Any], out_dir: Path
) -> tuple[Path, Path]:
    """Write ``report.html`` (self-contained) and ``report.md`` (+ PNGs) into ``out_dir``.

    ``tables`` holds the evaluation runner's Arrow tables by name (summary, sweep, diffs,
    failures, ceiling, questions_report); any of them may be missing or empty, and the report
    then says so in that section. Returns (html path, markdown path).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = meta or {}
    selected = str(meta.get("selected_config") or "")
    title = str(meta.get("title") or "Retrieval memory evaluation")

    summary_rows, summary_why = _table_rows(tables, "summary")
    summ = _Summary(summary_rows) if summary_why is None else None
    sweep_rows, sweep_why = _table_rows(tables, "sweep")
    diffs_rows, diffs_why = _table_rows(tables, "diffs")
    fail_rows, fail_why = _table_rows(tables, "failures")
    ceil_rows, ceil_why = _table_rows(tables, "ceiling")
    q_rows, q_why = _table_rows(tables, "questions_report")
    cv_rows, cv_why = _table_rows(tables, "cv")

    sections = [
        _headline(summ, summary_why, meta, selected),
        _recall_section(summ, summary_why, sweep_rows, meta, selected),
        # the fusion curves are of plain configurations; query-option variants share betas
        _fusion_section(
            [r for r in sweep_rows if not _query_variant(r)], sweep_why, meta, selected
        ),
        _types_section(summ, summary_why, meta, selected),
        _diffs_section(diffs_rows, diffs_why),
        _ceiling_section(ceil_rows, ceil_why),
        _failures_section(fail_rows, fail_why, selected),
        _questions_section(q_rows, q_why, meta),
        _reproduce_section(meta),
    ]
    if "memory_summary" in tables:  # only runs that scored memories get the section
        mem_rows, mem_why = _table_rows(tables, "memory_summary")
        mdiff_rows, mdiff_why = _table_rows(tables, "memory_diffs")
        sections.insert(
            -1,
            _memory_section(mem_rows, mem_why, mdiff_rows, mdiff_why, summ, meta, selected),
        )
    if "memory_gold_summary" in tables:
        gold_rows, gold_why = _table_rows(tables, "memory_gold_summary")
        conv_rows, _ = _table_rows(tables, "memory_gold_per_conversation")
        sections.insert(-1, _memory_gold_section(gold_rows, gold_why, conv_rows, meta))
    if "ambiguous" in tables:  # only LoCoMo runs make ambiguous variants
        amb_rows, amb_why = _table_rows(tables, "ambiguous")
        sections.insert(-1, _ambiguous_section(amb_rows, amb_why, meta))
    if "dossier_coverage_summary" in tables:  # runs that scored dossiers against gold
        sections.insert(-1, _dossier_section(tables, meta))
    # after the memory section, so the numbering of the sections before it stays as it was
    sections.insert(-1, _granularity_section(cv_rows, cv_why, meta))
    for sec in sections:
        for img in _images(sec.blocks):
            (out_dir / img.filename).write_bytes(img.png)
    html_path = out_dir / "report.html"
    md_path = out_dir / "report.md"
    html_path.write_text(_render_html(title, meta, sections), encoding="utf-8")
    md_path.write_text(_render_md(title, meta, sections), encoding="utf-8")
    return html_path, md_path


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


def _images(blocks: Iterable[Any]) -> Iterable[_Img]:
    for b in blocks:
        if isinstance(b, _Img):
            yield b
        elif isinstance(b, _Details):
            yield from _images(b.blocks)
