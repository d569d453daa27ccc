"""The report's building blocks: constants, the block types a section is made of, and the
formatting and table-reading helpers every section shares.

A section is a list of blocks (paragraphs, tables, images, code, details); the renderers
(``render``) turn the same blocks into HTML and Markdown, so the two files cannot disagree.
Table readers return rows or nothing: a missing or malformed table never raises here.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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
    "corpus_id",
    "observations",
    "covered",
    "n_memories",
    "recall",
    "precision",
)
# dossier coverage vs gold (core/evaluation/dossier_eval.py)
REQUIRED["dossier_coverage_summary"] = (
    "gold",
    "version",
    "units",
    "items",
    "covered",
    "mean",
    "ci_low",
    "ci_high",
    "pooled",
)
REQUIRED["dossier_coverage"] = (
    "gold",
    "unit",
    "speaker",
    "version",
    "items",
    "covered",
    "coverage",
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


def _png_with_legend(fig: Figure, handles: Mapping[str, Any], ncol: int) -> bytes:
    """``_png`` of ``fig`` with one shared legend of ``handles`` (label -> artist) below the
    panels, as every multi-panel plot of the report draws it."""
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncol=ncol,
        frameon=False,
        fontsize=8,
    )
    return _png(fig)


def _band(ax: Any, xs: Sequence[float], lo: Sequence[Any], hi: Sequence[Any], color: str) -> None:
    lo_v = [math.nan if _num(v) is None else float(v) for v in lo]
    hi_v = [math.nan if _num(v) is None else float(v) for v in hi]
    ax.fill_between(xs, lo_v, hi_v, color=color, alpha=0.16, linewidth=0)
