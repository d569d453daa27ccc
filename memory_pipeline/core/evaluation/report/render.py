"""Rendering the report's blocks as one self-contained HTML page (inline CSS, no
JavaScript) and as Markdown; every text from the tables is escaped here.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memory_pipeline.core.common.escape import escape_markdown
from memory_pipeline.core.evaluation.report.model import (
    _P,
    _Cell,
    _Code,
    _Details,
    _Img,
    _List,
    _Section,
    _Sub,
    _Table,
)

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
