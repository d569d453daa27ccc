"""The README's picture of the asset graph, drawn from the definitions (never by hand).

``test_asset_graph.py`` regenerates it from ``build_definitions`` of the shipped config and
compares it with the block between the ``asset-graph`` markers, so a new asset or
edge cannot leave an old picture behind. ``python -m memory_pipeline_tests.asset_picture
--write`` rewrites the block from the reviewed snapshot (``snapshots/asset_graph.json``).

The picture is a Mermaid flowchart (GitHub and most Markdown viewers draw it; as text it reads
as a list of edges): one box per Dagster group, daily-partitioned assets as rectangles, the
others rounded, and the transitive reduction of the dependencies — every arrow is a real
input, and an input implied by a longer path (the warehouse reads every table) is left to
that path so the picture stays readable.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from memory_pipeline_tests.paths import ROOT

README = ROOT / "README.md"
PAGES = [README, ROOT / "docs" / "pipeline.md"]  # the pages that show the picture
SNAPSHOT = ROOT / "memory_pipeline_tests" / "snapshots" / "asset_graph.json"
BLOCK = re.compile(
    r"(<!-- asset-graph: generated[^>]*-->\n)```mermaid\n.*?```\n", re.S
)


def _order(deps: dict[str, set[str]]) -> list[str]:
    """A topological order, ties by name (deterministic)."""
    done: list[str] = []
    left = dict(deps)
    while left:
        ready = sorted(a for a, ds in left.items() if not (ds - set(done) - {a}))
        if not ready:
            raise ValueError(f"a cycle among {sorted(left)}")
        done.extend(ready)
        for a in ready:
            del left[a]
    return done


def reduced_edges(deps: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(upstream, downstream) pairs of the transitive reduction (self-dependencies apart)."""
    order = _order(deps)
    reach: dict[str, set[str]] = {}
    for a in order:
        r: set[str] = set()
        for d in deps[a] - {a}:
            r |= {d} | reach[d]
        reach[a] = r
    return [
        (d, a)
        for a in order
        for d in sorted(deps[a] - {a})
        if not any(d in reach[o] for o in deps[a] - {a, d})
    ]


def mermaid(assets: dict[str, dict[str, Any]]) -> str:
    """The flowchart of a graph snapshot (``test_asset_graph.graph_snapshot``'s ``assets``)."""
    deps = {name: set(a["deps"]) for name, a in assets.items()}
    order = _order(deps)
    groups: dict[str, list[str]] = {}
    for name in order:
        groups.setdefault(assets[name]["group"], []).append(name)
    lines = ["flowchart LR"]
    for group, names in groups.items():
        lines.append(f"  subgraph group_{group} [{group}]")  # own id: a group may share a name
        lines += [f"    {n}" if assets[n]["partitions"] else f"    {n}({n})" for n in names]
        lines.append("  end")
    fan: dict[str, list[str]] = {}  # one line per upstream: `a --> b & c`
    for up, down in reduced_edges(deps):
        fan.setdefault(up, []).append(down)
    for up, downs in fan.items():
        lines.append(f"  {up} --> {' & '.join(downs)}")
    for name in order:
        if name in deps[name]:
            lines.append(f"  {name} -->|previous day| {name}")
    return "\n".join(lines) + "\n"


def block(assets: dict[str, dict[str, Any]]) -> str:
    return f"```mermaid\n{mermaid(assets)}```\n"


def readme_block(text: str) -> str:
    """A page's current picture (the fenced block after the marker)."""
    m = BLOCK.search(text)
    if not m:
        raise ValueError("no '<!-- asset-graph: generated ... -->' block")
    return m.group(0)[len(m.group(1)) :]


def main(argv: list[str]) -> int:
    assets = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["assets"]
    if "--write" not in argv:
        print(mermaid(assets), end="")
        return 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        new = BLOCK.sub(lambda m: m.group(1) + block(assets), text)
        page.write_text(new, encoding="utf-8")
        state = "rewritten" if new != text else "unchanged"
        print(f"{page.relative_to(ROOT)}: asset graph {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
