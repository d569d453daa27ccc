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

The package's modules: ``model`` (block types and shared helpers), ``plots``, ``headline``, the
sections (``retrieval_sections``, ``question_sections``, ``memory_sections``), ``render`` (HTML
and Markdown) and ``write`` (the page in order).
"""

from __future__ import annotations

from memory_pipeline.core.evaluation.report.model import DEFAULT_COMMAND
from memory_pipeline.core.evaluation.report.write import write_report

__all__ = ["DEFAULT_COMMAND", "write_report"]
