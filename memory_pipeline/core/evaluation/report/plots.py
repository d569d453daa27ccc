"""The report's plots, drawn on explicit Agg figures (no pyplot, no global backend).

Recall against k with CI bands, the fusion sweep, recall by question type, and the context
packs' recall; each returns PNG bytes or None when its table is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from memory_pipeline.core.evaluation.report.model import (
    ALL,
    ER,
    LEVEL_COLORS,
    LEVEL_NAMES,
    LEVELS,
    PALETTE,
    PAPER_MARKERS,
    SELECTED_COLOR,
    _band,
    _num,
    _plain,
    _png,
    _png_with_legend,
    _short,
    _split_key,
    _Summary,
)

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
    return _png_with_legend(fig, handles, ncol=2)


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
    return _png_with_legend(fig, handles, ncol=3)


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
    return _png_with_legend(fig, handles, ncol=3)


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
