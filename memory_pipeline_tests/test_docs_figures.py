"""Figures in the README and docs are the records' figures (docfigs.py), never copies.

A quality figure typed by hand drifts the day a new selection is recorded; a marked one is
checked against ``selection.json`` / ``goals.py`` here, and the tables that present the
default's quality may hold no unmarked figure at all.
"""

from __future__ import annotations

import re

import pytest

from memory_pipeline_tests import docfigs
from memory_pipeline_tests.paths import ROOT

# pages whose quality tables (a header naming R@5 or AUROC) must be marked cell by cell
QUALITY_PAGES = ["README.md", "docs/evaluation.md"]
DECIMAL = re.compile(r"(?<![\w.])\d\.\d{2,}")


def test_every_marked_figure_is_its_records() -> None:
    problems = docfigs.stale()
    assert not problems, (
        "\n".join(problems) + "\nrun `python -m memory_pipeline_tests.docfigs --write`"
    )


def test_quality_tables_hold_only_marked_figures() -> None:
    """Every decimal in a row of a quality table sits inside a figure marker."""
    for name in QUALITY_PAGES:
        text = (ROOT / name).read_text(encoding="utf-8")
        in_table = False
        for line in text.splitlines():
            if line.startswith("|") and re.search(r"R@5|AUROC", line):
                in_table = True
            elif not line.startswith("|"):
                in_table = False
            if in_table:
                bare = DECIMAL.findall(docfigs.MARK.sub("", line))
                assert not bare, f"{name}: unmarked figures {bare} in {line[:80]!r}"


def test_readme_results_section_holds_only_marked_figures() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Current results") : text.index("## Read more")]
    bare = DECIMAL.findall(docfigs.MARK.sub("", section))
    assert not bare, f"README 'Current results': unmarked figures {bare}"


def test_a_drifted_figure_is_found_and_rewritten(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text("R@5 <!-- fig sel.default.turn:mean -->0.001<!-- /fig --> and "
                    "<!-- fig no.such -->1<!-- /fig -->", encoding="utf-8")
    table = docfigs.figures()
    problems = [p.split(": ", 1)[1] for p in _stale_in(page)]
    assert problems[0].startswith("sel.default.turn:mean shows '0.001'")
    assert problems[1] == "unknown figure 'no.such'"
    fixed = docfigs.rewrite(page.read_text(encoding="utf-8").split(" and ")[0], table)
    assert f"-->{docfigs.render('sel.default.turn:mean', table)}<!--" in fixed


def _stale_in(page):
    original = docfigs.ROOT
    try:
        docfigs.ROOT = page.parent  # report paths relative to the temporary folder
        return docfigs.stale([page])
    finally:
        docfigs.ROOT = original


# tables whose figures come from a committed results page: (page, header start, results page)
RECORDED_TABLES = [
    ("docs/search.md", "| search (Japanese questions)", "benchmarks/results/select_japanese.md"),
]


@pytest.mark.parametrize("page,header,record", RECORDED_TABLES)
def test_recorded_tables_quote_their_results_page(page: str, header: str, record: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    missing = docfigs.unbacked_in_table(text, header, (ROOT / record).read_text(encoding="utf-8"))
    assert not missing, f"{page}: not in {record}: {missing}"


def test_a_table_figure_missing_from_its_record_is_found() -> None:
    text = "| a | R@5 |\n|---|---|\n| x | 0.847 |\n| y | 0.999 |\n"
    assert docfigs.unbacked_in_table(text, "| a |", "| English default | 0.8471 |") == [
        "| y | 0.999 |: 0.999"
    ]


def test_figures_next_to_a_results_page_are_that_pages() -> None:
    """A paragraph (or the table after it) that cites a committed results page
    (``benchmarks/results/*.md``, ``benchmarks/README.md``) quotes only figures that page
    holds, rounding allowed: a re-measured page cannot leave its old figures in the docs."""
    problems = []
    for page in docfigs.PAGES:
        if page.name == "benchmarks.md":  # row by row: test_docs.py, benchmark figures
            continue
        problems += [
            f"{page.relative_to(ROOT)}: {p}" for p in docfigs.unbacked_near_citations(page)
        ]
    assert not problems, "\n".join(problems)


def test_a_cited_figure_missing_from_its_page_is_found(tmp_path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "Measured: 0.6716 rounds, 0.999 does not (`benchmarks/results/splade.md`).\n",
        encoding="utf-8",
    )
    found = docfigs.unbacked_near_citations(page)
    assert len(found) == 1 and "0.999" in found[0]


# Figures no record backs yet (measured once, written in prose, never committed as a results
# page), per page. The count may only fall: a new figure cites its results page or is marked.
UNCHECKED_ALLOWANCE = {
    "README.md": 4,  # Python versions and install sizes in the prerequisites
    "capacity.md": 12,
    "evaluation.md": 23,
    "getting-started.md": 1,
    "memories.md": 27,
    "operations.md": 1,
    "owners.md": 1,
    "providers.md": 13,
    "references.md": 4,
    "search-and-context.md": 43,
    "search.md": 12,
}


def test_no_new_figure_goes_unchecked() -> None:
    grown = {}
    for page in docfigs.PAGES:
        n = len(docfigs.unchecked_figures(page))
        if n > UNCHECKED_ALLOWANCE.get(page.name, 0):
            grown[page.name] = (n, UNCHECKED_ALLOWANCE.get(page.name, 0))
    assert not grown, (
        f"figures that no record checks (found, allowed): {grown}; cite the results page "
        "(benchmarks/results/*.md) in the paragraph, or mark a recorded figure (docfigs.py)"
    )
