"""Figures in the README and docs, filled in from the records they come from.

A figure in a page is written between two markers::

    <!-- fig sel.default.turn -->0.697 [0.654, 0.739]<!-- /fig -->

The name picks a value from a record (``core/retrieval/selection.json`` with its
answerability and language provenance, the goals and published anchors of
``core/evaluation/goals.py``); a suffix picks its form (none: ``mean [lo, hi]``, ``:mean``,
``:ci`` ``[lo, hi]``, ``:range`` ``lo–hi``; ``:code`` puts a text in backticks).
``test_docs_figures.py`` fails when a marked figure differs from its record, so a new selection
cannot leave an old figure in the docs;
``python -m memory_pipeline_tests.docfigs --write`` rewrites every marked figure.

Figures named ``sample.*`` are measured by a run on the bundled sample, not recorded in a
file: ``test_docs_examples.py`` checks them against the evaluation tables of its own run
(``sample_figures``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_pipeline_tests.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!-- fig ([\w.:+-]+) -->(.*?)<!-- /fig -->", re.S)

# the LoCoMo metrics of the selection's provenance, by short name
METRICS = {
    "turn": "turn evidence_recall@5 [all]",
    "session": "session evidence_recall@5 [all]",
    "multihop": "session evidence_recall@5 [multi-hop]",
    "turn_multihop": "turn evidence_recall@5 [multi-hop]",
}
# the configurations of the selection's provenance, by short name
CONFIGS = {
    "norerank": "cv:selected",
    "bm25": "bm25[raw_text]",
    "dense": "dense[embedding_text]",
    "turnindex": "bm25[raw_text] turns=1.00/0.00/0.00 lift=0.00",
    "rrf": "rrf[raw_text+embedding_text] k=60",
}


NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def backed(figure: str, source: str) -> bool:
    """``figure`` is in ``source`` as written, or rounds from a more precise figure there
    (0.672 from 0.6716, 18.2 from 18.16)."""
    if figure in source:
        return True
    value = figure.replace(",", "")
    places = len(value.split(".")[1]) if "." in value else 0
    return any(
        "." in s and len(s.split(".")[1]) > places and round(float(s), places) == float(value)
        for s in (n.replace(",", "") for n in NUMBER.findall(source))
    )


def unbacked_in_table(text: str, header: str, record: str) -> list[str]:
    """The figures of the table whose header row starts with ``header`` that ``record``
    (the text of the results page it comes from) does not hold."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        rows.append(MARK.sub("", ln))
    return [
        f"{row[:50]}: {f}"
        for row in rows
        for f in NUMBER.findall(re.sub(r"`[^`]*`", "", row))
        if not backed(f, record)
    ]


CITATION = re.compile(r"benchmarks/(?:results/)?[\w.]+\.md")
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d{2,}")


def unbacked_near_citations(page: Path) -> list[str]:
    """Decimal figures of ``page`` that sit in a paragraph citing a results page (or in a
    table right after such a paragraph) and that the cited page does not hold."""
    blocks = re.split(r"\n\s*\n", MARK.sub("", page.read_text(encoding="utf-8")))
    found: list[str] = []
    before: list[str] = []
    for block in blocks:
        cited = CITATION.findall(block)
        use = cited or (before if block.lstrip().startswith("|") else [])
        if use:
            source = "".join(
                (ROOT / c).read_text(encoding="utf-8") for c in use if (ROOT / c).is_file()
            )
            figures = DECIMAL.findall(re.sub(r"`[^`]*`", "", block))
            found += [f"{f} is not in {', '.join(use)}" for f in figures if not backed(f, source)]
        before = cited or before
    return found


def unchecked_figures(page: Path) -> list[str]:
    """Decimal figures of ``page`` that nothing checks: outside figure markers, code blocks
    (run outputs, checked by test_docs_examples.py) and paragraphs citing a results page."""
    text = MARK.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found: list[str] = []
    before: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        cited = CITATION.findall(block)
        if not (cited or (before and block.lstrip().startswith("|"))):
            found += DECIMAL.findall(re.sub(r"`[^`]*`", "", block))
        before = cited or before
    return found


RUN_PREFIX = "sample."


def sample_figures(summary: Path) -> dict[str, Any]:
    """The ``sample.*`` figures from a sample run's ``eval/tables/summary.parquet``: the
    shipped default's turn and session evidence recall@5 on the labelled questions."""
    import pyarrow.parquet as pq

    rows = pq.read_table(summary).to_pylist()
    out: dict[str, Any] = {}
    for level in ("turn", "session"):
        row = next(
            r
            for r in rows
            if r["config"] == "shipped default"
            and r["split"] == "test"
            and r["qtype"] == "all"
            and r["level"] == level
            and r["metric"] == "evidence_recall"
            and r["k"] == 5
        )
        out[f"{RUN_PREFIX}{level}"] = (row["mean"], row["ci_lo"], row["ci_hi"])
    return out


def _selection() -> dict[str, Any]:
    from memory_pipeline.core.retrieval.config import SELECTION

    return dict(SELECTION)


def _default_key(sel: dict[str, Any]) -> str:
    """The out-of-fold row of what ships: with the reranker when the selection ships it."""
    return "cv:selected+rerank" if sel["config"].get("rerank") else "cv:selected"


def figures() -> dict[str, Any]:
    """Every figure a page may mark, by name: a number, a ``(mean, lo, hi)`` triple or text."""
    from memory_pipeline.core.evaluation.goals import GOALS, PAPER_FIGURES

    sel = _selection()
    prov = sel["provenance"]
    out: dict[str, Any] = {
        "sel.name": sel["name"].replace("beta=", "β="),
        "sel.beta": f"{sel['config']['beta']:.2f}",
        "sel.speaker_boost": f"{sel['config']['speaker_boost']:g}",
        "sel.splade": f"{sel['config']['splade']:g}",
        "sel.swept": prov["configurations_swept"],
        "sel.questions": prov["data"]["questions"],
        "sel.conversations": prov["data"]["conversations"],
    }
    rows = {"default": _default_key(sel), **CONFIGS}
    for short, key in rows.items():
        for m, metric in METRICS.items():
            out[f"sel.{short}.{m}"] = tuple(prov["figures"][key][metric])
    ans = sel["answerability"]["provenance"]["figures"]
    out["ans.auroc"] = tuple(ans["auroc"])
    out["ans.own"] = tuple(ans["own_answerable"])
    out["ans.foreign"] = tuple(ans["foreign_unanswerable"])
    ja = sel["languages"]["ja"]["provenance"]
    out["ja.name"] = sel["languages"]["ja"]["name"].replace("beta=", "β=")
    out["ja.jsquad"] = tuple(ja["jsquad"]["turn R@5"])
    out["ja.chat"] = tuple(ja["chat check"]["cv:selected turn R@5"])
    out["ja.chat_questions"] = ja["chat check"]["questions"]
    out["ja.chat_speakers"] = ja["chat check"]["speakers"]
    out["ja.previous_chat"] = tuple(ja["figures"]["Japanese default (shipped)"]["chat turn R@5"])
    goal = {(g["level"], g["qtype"]): g["target"] for g in GOALS}
    out["goal.turn"] = f"{goal[('turn', 'all')]:.2f}"
    out["goal.session"] = f"{goal[('session', 'all')]:.2f}"
    out["goal.multihop"] = f"{goal[('session', 'multi-hop')]:.2f}"
    for f in PAPER_FIGURES:
        if f["k"] != 5:
            continue
        name = "anchor.best_turn" if "best" in f["label"] else f"anchor.dragon_{f['level']}"
        out[name] = f"{f['value']:.3f}"
    return out


def _fmt(x: float) -> str:
    return f"{x:.3f}"


FORMS: dict[str, Callable[[tuple], str]] = {
    "": lambda t: f"{_fmt(t[0])} [{_fmt(t[1])}, {_fmt(t[2])}]",
    "mean": lambda t: _fmt(t[0]),
    "ci": lambda t: f"[{_fmt(t[1])}, {_fmt(t[2])}]",
    "range": lambda t: f"{_fmt(t[1])}–{_fmt(t[2])}",
}


def render(name: str, table: dict[str, Any] | None = None) -> str:
    """The text of the figure ``name`` (``key`` or ``key:form``); KeyError for an unknown one."""
    table = figures() if table is None else table
    key, _, form = name.partition(":")
    value = table[key]
    if isinstance(value, tuple):
        return FORMS[form](value)
    text = f"{value:,}" if isinstance(value, int) else str(value)
    if form == "code":
        return f"`{text}`"
    if form:
        raise KeyError(f"{name}: {form!r} applies to a (mean, lo, hi) figure only")
    return text


def rewrite(text: str, table: dict[str, Any] | None = None) -> str:
    """``text`` with every marked figure set from its record."""
    table = figures() if table is None else table

    def fill(m: re.Match) -> str:
        if m.group(1).startswith(RUN_PREFIX) and m.group(1).partition(":")[0] not in table:
            return m.group(0)  # measured by a sample run: test_docs_examples.py checks it
        return f"<!-- fig {m.group(1)} -->{render(m.group(1), table)}<!-- /fig -->"

    return MARK.sub(fill, text)


def stale(pages: list[Path] | None = None, extra: dict[str, Any] | None = None) -> list[str]:
    """``page: name shows X, the record says Y`` for every marked figure that drifted
    (``sample.*`` ones only when ``extra`` holds them)."""
    table = {**figures(), **(extra or {})}
    found = []
    for page in pages or PAGES:
        for m in MARK.finditer(page.read_text(encoding="utf-8")):
            if m.group(1).startswith(RUN_PREFIX) and m.group(1).partition(":")[0] not in table:
                continue
            try:
                want = render(m.group(1), table)
            except KeyError:
                found.append(f"{page.relative_to(ROOT)}: unknown figure {m.group(1)!r}")
                continue
            if m.group(2) != want:
                found.append(
                    f"{page.relative_to(ROOT)}: {m.group(1)} shows {m.group(2)!r}, "
                    f"the record says {want!r}"
                )
    return found


def main(argv: list[str]) -> int:
    """``--write`` sets every marked figure from its record; without it, list the stale ones."""
    if "--write" in argv:
        table = figures()
        for page in PAGES:
            text = page.read_text(encoding="utf-8")
            new = rewrite(text, table)
            if new != text:
                page.write_text(new, encoding="utf-8")
                print(f"updated {page.relative_to(ROOT)}")
        return 0
    problems = stale()
    print("\n".join(problems) or "every marked figure matches its record")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
