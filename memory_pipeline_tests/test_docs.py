"""Docs that promise things are kept honest: commands, schema, SQL views."""

from __future__ import annotations

import re

from memory_pipeline.core.common.catalog import views_sql
from memory_pipeline.core.common.schema import MESSAGES
from memory_pipeline.core.indexes.bm25 import search_sql
from memory_pipeline_tests.docfigs import NUMBER as _NUMBER
from memory_pipeline_tests.docfigs import backed as _backed
from memory_pipeline_tests.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    """The commands of the README's first code block, in order."""
    block = re.search(r"```(?:bash|sh)\n(.*?)```", README, re.S)
    assert block, "README must open with a code block of commands"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_opens_with_two_commands():
    commands = readme_commands()
    assert len(commands) == 2
    assert "memory-pipeline run" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert readme_commands()[1] in ci


def test_readme_is_a_users_page():
    """The README stays short; measurement history and internal references live elsewhere."""
    assert len(README.splitlines()) <= 300
    for banned in (r"\bissue \d", r"\bstop \d", r"\.\./shared"):
        assert not re.search(banned, README, flags=re.I), banned


def test_docs_site_builds_strictly(tmp_path):
    """mkdocs build --strict: a broken link or a page missing from the nav fails it."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_docs_document_every_message_column():
    page = doc("pipeline.md")
    for name in MESSAGES.names:
        assert f"`{name}`" in page, name


def test_sql_views_file_matches_the_code():
    assert (ROOT / "sql" / "views.sql").read_text(encoding="utf-8") == views_sql()


def test_sql_bm25_search_file_is_the_packaged_query():
    """sql/bm25_search.sql is a copy for readers; the package ships (and runs) its own."""
    assert (ROOT / "sql" / "bm25_search.sql").read_text(encoding="utf-8") == search_sql()


def test_memories_page_dossier_excerpt_is_a_valid_dossier():
    from memory_pipeline.core.memories.dossier import (
        cited_sessions,
        missing_sections,
        uncited_bullets,
    )

    text = doc("memories.md")
    start = text.index("```markdown\n# Dossier:") + len("```markdown\n")
    excerpt = text[start : text.index("```", start)]
    assert not missing_sections(excerpt)
    assert not uncited_bullets(excerpt)
    assert cited_sessions(excerpt)


def test_architecture_page_lists_the_core_packages_in_dag_order():
    """One paragraph per core package, in the layer order the architecture test enforces,
    and every package of the tree is there (a new package needs its paragraph)."""
    from memory_pipeline_tests.test_architecture import LAYERS

    page = doc("architecture.md")
    section = page[: page.index("\n## Tests and CI")]
    named = re.findall(r"^- \*\*`core/(\w+)/`\*\*", section, flags=re.M)
    on_disk = sorted(
        p.name
        for p in (ROOT / "memory_pipeline" / "core").iterdir()
        if (p / "__init__.py").is_file()
    )
    assert named == list(LAYERS)
    assert sorted(named) == on_disk


def test_readme_quality_table_quotes_the_recorded_selection() -> None:
    """The README's "default" row is the packaged selection's out-of-fold figures (with the
    reranker when the selection ships it), so the docs cannot drift from the default."""
    from memory_pipeline.core.retrieval.config import SELECTION

    figures = SELECTION["provenance"]["figures"]
    key = "cv:selected+rerank" if SELECTION["config"].get("rerank") else "cv:selected"
    row = next(line for line in README.splitlines() if line.startswith("| **default**"))
    assert f"`{SELECTION['name'].replace('beta=', 'β=')}`" in row
    for metric in (
        "turn evidence_recall@5 [all]",
        "session evidence_recall@5 [all]",
        "session evidence_recall@5 [multi-hop]",
    ):
        mean, lo, hi = figures[key][metric]
        assert f"{mean:.3f} [{lo:.3f}, {hi:.3f}]" in row.replace("**", ""), metric


def _named_paths(text: str) -> list[str]:
    """The files and folders a page names in backticks (``x.py``, ``core/x/``, ``a/b.sql``)."""
    return re.findall(r"`([\w./-]+(?:\.py|\.sql|\.json|/))`", text)


def _exists(name: str, scopes: list, bare_in: int | None = None) -> bool:
    """``a/b.py`` relative to one of ``scopes``; a bare ``b.py`` anywhere under them (under
    the first ``bare_in`` of them only, when given)."""
    if "/" in name.rstrip("/"):
        return any((s / name).exists() for s in scopes)
    return any(next(s.rglob(name.rstrip("/")), None) is not None for s in scopes[:bare_in])


def test_architecture_page_names_only_what_exists() -> None:
    """Every module, package or file the architecture page names is in the tree: a core
    package's paragraph names files of that package, the rest files of the repository."""
    page = doc("architecture.md")
    pkg = ROOT / "memory_pipeline"
    everywhere = [pkg, ROOT / "memory_pipeline_tests", ROOT]
    missing = []
    for para in re.split(r"\n(?=- \*\*`core/)|\n\n", page):
        head = re.match(r"- \*\*`core/(\w+)/`\*\*", para)
        scopes = [pkg / "core" / head.group(1), pkg / "core", pkg] if head else everywhere
        bare_in = 1 if head else None  # a core paragraph's modules are its package's
        missing += [n for n in _named_paths(para) if not _exists(n, scopes, bare_in)]
    assert not missing, f"docs/architecture.md names what the tree lacks: {missing}"


def test_architecture_page_names_every_reader() -> None:
    from memory_pipeline.core.ingest.sources import READERS

    page = doc("architecture.md")
    ingest = page[page.index("- **`core/ingest/`**") : page.index("- **`core/sessions/`**")]
    assert not [k for k in READERS if f"`{k}`" not in ingest], "a reader is missing"


def test_architecture_check_finds_a_missing_module() -> None:
    pkg = ROOT / "memory_pipeline"
    assert _exists("searcher.py", [pkg / "core" / "retrieval"])
    assert not _exists("searcher.py", [pkg / "core" / "indexes", pkg], bare_in=1)
    assert _exists("core/indexes/", [pkg])
    assert not _exists("no_such_module.py", [pkg])
    assert not _exists("core/nowhere/", [pkg])
    assert _named_paths("the `splade.py` channel, `sources/` and `a/b.sql`") == [
        "splade.py", "sources/", "a/b.sql",
    ]


def test_references_cite_what_the_project_uses() -> None:
    """docs/references.md names the datasets, papers and models the evaluation and the
    defaults rest on, each dataset with its licence, and every runtime dependency of
    pyproject.toml (a new dependency needs its line and licence)."""
    import tomllib

    page = doc("references.md")
    for name in (
        "LoCoMo", "RealPersonaChat", "JSQuAD", "JGLUE", "LINE paper", "SPLADE",
        "Universal Sentence Encoder", "MiniLM", "multilingual-e5-small", "BM25", "bm25s",
        "Sudachi", "Alonso", "LongMemEval",
    ):
        assert name in page, name
    for dataset, licence in (
        ("LoCoMo", "CC BY-NC 4.0"), ("RealPersonaChat", "CC BY-SA 4.0"), ("JSQuAD", "CC BY-SA"),
    ):
        row = next(ln for ln in page.splitlines() if ln.startswith(f"| **{dataset}**"))
        assert licence in row, dataset
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0] for d in deps["dependencies"]]
    flat = page.lower().replace("_", "-")
    missing = [n for n in names if n.lower().replace("_", "-") not in flat]
    assert not missing, f"runtime dependencies missing from docs/references.md: {missing}"
    notice = (ROOT / "memory_pipeline" / "core" / "indexes" / "splade" / "NOTICE").read_text()
    assert "Apache-2.0" in notice and "splade-tiny" in page


def test_benchmark_figures_are_the_results_pages() -> None:
    """Every figure in docs/benchmarks.md's "current result" column is in the results page the
    row cites (``benchmarks/results/*.md``; else ``benchmarks/README.md``, where each
    measurement is recorded with its command), or the docs page the row links."""
    page = doc("benchmarks.md")
    rows = [ln for ln in page.splitlines() if ln.startswith("| ") and ln.count("|") >= 4]
    problems = []
    for row in rows[1:]:  # the header row apart
        result = [c.strip() for c in row.split("|")[1:-1]][2]
        cited = re.findall(r"benchmarks/(?:results/)?[\w.]+\.md", result)
        linked = re.findall(r"\]\((\w[\w-]*\.md)\)", result)
        missing_pages = [c for c in cited if not (ROOT / c).is_file()]
        problems += [f"{row[:40]}: cites a missing page {c}" for c in missing_pages]
        sources = [ROOT / c for c in cited] or [ROOT / "benchmarks" / "README.md"]
        source = "".join(p.read_text(encoding="utf-8") for p in sources if p.is_file())
        source += "".join(doc(name) for name in linked)
        text = re.sub(r"`[^`]*`|\([^()]*\.md\)|\]\([^)]*\)", "", result)
        problems += [
            f"{row[:40]}: {f} is not in {[str(p.relative_to(ROOT)) for p in sources]}"
            for f in _NUMBER.findall(text)
            if not _backed(f, source)
        ]
    assert not problems, "\n".join(problems)


def test_rounded_figures_are_backed_only_by_what_rounds_to_them() -> None:
    assert _backed("0.672", "turn R@5 0.6716 [0.63, 0.71]")
    assert _backed("18.2", "11.70 / 18.16")
    assert not _backed("0.673", "turn R@5 0.6716")
    assert not _backed("936", "900 s")
