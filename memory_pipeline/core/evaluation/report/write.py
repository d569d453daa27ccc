"""Writing the report: the sections in order, rendered to ``report.html`` and
``report.md`` with the PNGs beside the Markdown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from memory_pipeline.core.evaluation.report.answer_section import _answerability_section
from memory_pipeline.core.evaluation.report.headline import _headline
from memory_pipeline.core.evaluation.report.memory_sections import (
    _dossier_section,
    _memory_gold_section,
    _memory_section,
    _reproduce_section,
)
from memory_pipeline.core.evaluation.report.model import _Details, _Img, _Summary, _table_rows
from memory_pipeline.core.evaluation.report.question_sections import (
    _ambiguous_section,
    _failures_section,
    _query_variant,
    _questions_section,
)
from memory_pipeline.core.evaluation.report.render import _render_html, _render_md
from memory_pipeline.core.evaluation.report.retrieval_sections import (
    _ceiling_section,
    _diffs_section,
    _fusion_section,
    _granularity_section,
    _recall_section,
    _types_section,
)

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
    # what the page is about: the shipped default when the run scored it, else the selection
    selected = str(meta.get("headline_config") or meta.get("selected_config") or "")
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
        *([_answerability_section(meta)] if "answerability" in meta else []),
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


def _images(blocks: Iterable[Any]) -> Iterable[_Img]:
    for b in blocks:
        if isinstance(b, _Img):
            yield b
        elif isinstance(b, _Details):
            yield from _images(b.blocks)
