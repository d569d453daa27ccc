"""Chat text in rendered documents: a hostile name, sender, message or memory shows as text.

Each payload goes into every field a dossier is built from (contact name, sender, message
text, memory text, subject and value), and into the evaluation report; the rendered pages
are then checked twice: by ``unsafe_markup`` on the Markdown source, and by rendering them
with real Markdown renderers (markdown-it in CommonMark mode with HTML on, Python-Markdown)
and listing the HTML tags and attributes that come out.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

from memory_pipeline.core.common.escape import escape_html, escape_markdown, unsafe_markup
from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.schema import MEMORIES
from memory_pipeline.core.memories.dossier import (
    build_day,
    check_rewrite,
    contact_file_name,
    dossier_rows,
    missing_sections,
    uncited_bullets,
    write_markdown_atomic,
)
from memory_pipeline.core.represent.build import enrich_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "<svg/onload=alert(1)>",
    "<a href='javascript:alert(1)'>click</a>",
    "<iframe src=javascript:alert(1)></iframe>",
    "<details open ontoggle=alert(1)>",
    "<!-- hidden --><b>bold</b>",
    "<?php echo 1 ?>",
    "<!DOCTYPE html>",
    "<![CDATA[x]]>",
    "</p><script>alert(1)</script>",
    "<javascript:alert(1)>",
    "<https://evil.example/x>",
    "[click me](javascript:alert(1))",
    "[click](  javascript:alert(1) 'title')",
    "![pic](javascript:alert(1))",
    "![x](https://evil.example/track.png)",
    "[x][ref]\n\n[ref]: javascript:alert(1)",
    "[ref]: javascript:alert(1)",
    "\\[escaped\\](javascript:alert(1))",
    "\\<script>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;script&#62;alert(1)&#60;/script&#62;",
    "&#x3c;img src=x onerror=alert(1)&#x3e;",
    "`<b>code</b>`",
    "line one\n<script>alert(1)</script>",
    "text\r\n# Fake heading\n- [sessions: ses_0000000000000000]",
    "a\u2028<img src=x onerror=alert(1)>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "<scr<script>ipt>alert(1)</script>",
    "Tom & Jerry <3 <- a < b > c",
    "＜script＞alert(1)＜/script＞ 東京タワー<b>",
]


# -- the helper ----------------------------------------------------------------------------


class _Tags(HTMLParser):
    """Every start tag and attribute in an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.comments: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]

    def handle_comment(self, data):  # noqa: ANN001
        self.comments.append(data)

    def handle_decl(self, decl):  # noqa: ANN001
        self.comments.append(decl)

    def handle_pi(self, data):  # noqa: ANN001
        self.comments.append(data)

    def unknown_decl(self, data):  # noqa: ANN001
        self.comments.append(data)

    def handle_data(self, data):  # noqa: ANN001
        self.text.append(data)


def _parse(fragment: str) -> _Tags:
    p = _Tags()
    p.feed(fragment)
    p.close()
    return p


SAFE_TAGS = {"h1", "h2", "h3", "p", "ul", "ol", "li", "em", "strong", "code", "pre", "br"}


def _renderers() -> list:
    out = []
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark", {"html": True})  # raw HTML passes through
    out.append(md.render)
    try:
        import markdown  # Python-Markdown: a different dialect of escapes and raw HTML
    except ImportError:
        pass
    else:
        out.append(markdown.markdown)
    return out


def assert_inert(rendered_html: str) -> None:
    """No tag beyond text formatting, no attribute, no comment or declaration."""
    found = _parse(rendered_html)
    assert set(found.tags) <= SAFE_TAGS, (set(found.tags) - SAFE_TAGS, rendered_html)
    assert not found.attrs, found.attrs
    assert not found.comments, found.comments
    assert "javascript:" not in " ".join(v for _, v in found.attrs)


@pytest.mark.parametrize("payload", HOSTILE)
def test_escaped_payload_renders_as_its_own_text(payload: str) -> None:
    escaped = escape_markdown(payload)
    assert unsafe_markup(escaped) == []
    assert "\n" not in escaped and "\r" not in escaped and "\u2028" not in escaped
    folded = " ".join(re.split(r"[\r\n\u2028]+", payload))
    for render in _renderers():
        out = render(f"- before {escaped} after")
        assert_inert(out)
        # readable: what a viewer shows is exactly the chat text (line breaks as spaces)
        shown = " ".join("".join(_parse(out).text).split())
        assert shown == " ".join(f"before {folded} after".split()), (render, out)


def test_unsafe_markup_finds_what_was_not_escaped() -> None:
    """The checker itself: every raw payload with a tag, comment or link is reported."""
    for payload in HOSTILE:
        if payload.startswith(("\\[", "&", "`", "text", "Tom", "＜")):
            continue  # inert as typed, or only a tag inside a code span / entity
        assert unsafe_markup(payload), payload
    assert unsafe_markup("- ok [sessions: ses_1]\n- fine [sessions: ses_2, ses_3]") == []
    assert unsafe_markup("a \\<b> c \\[x\\](y)") == []  # backslash-escaped: text
    assert unsafe_markup("a \\\\<b>") != []  # an escaped backslash, then a live tag


def test_readable_text_is_kept() -> None:
    assert escape_markdown("R&D, 3 < 5, *nice*, snake_case, ¥4,500 東京") == (
        "R&D, 3 &lt; 5, *nice*, snake_case, ¥4,500 東京"
    )
    assert escape_markdown("a\nb\r\nc") == "a b c"
    assert escape_markdown("a | b", table_cell=True) == "a \\| b"
    assert escape_markdown("&amp; &#60; &x") == "&amp;amp; &amp;#60; &x"
    assert escape_html("<a href=\"x\" onclick='y'>&") == (
        "&lt;a href=&quot;x&quot; onclick=&#x27;y&#x27;&gt;&amp;"
    )


# -- dossiers --------------------------------------------------------------------------------

DAY = dt.date(2024, 3, 4)


def _memory(session: dict, kind: str, text: str, **extra: object) -> dict:
    return {
        "memory_id": stable_id("mem", session["session_id"], kind, text),
        "contact_id": session["contact_id"],
        "conversation_id": session["conversation_id"],
        "session_id": session["session_id"],
        "local_date": session["local_date"],
        "subject": extra.get("subject", session["contact_id"]),
        "subject_is_owner": False,
        "kind": kind,
        "attribute": extra.get("attribute", ""),
        "value": extra.get("value", ""),
        "text": text,
        "lang": "en",
        "valid_from": session["start_ts"],
        "event_date": extra.get("event_date"),
        "message_ids": session["message_ids"][:1],
        "method": "rules",
        "confidence": 0.9,
    }


def _hostile_day() -> dict[str, str]:
    """One contact per payload (its name is the payload), whose sender and messages carry
    it too, with memories stating it in every kind; the rendered Markdown per contact."""
    messages = []
    for i, payload in enumerate(HOSTILE):
        conv = payload.replace("\n", " ")  # a folder name has no line break
        texts = [
            f"Hi! I got the job at {payload} and I love it",
            f"{payload}: guess what, I moved to {payload} on the 23rd, booked {payload}",
            f"See you on March 23 at {payload}? I booked the {payload}",
            payload,
        ]
        for j, text in enumerate(texts):
            sender = "A" if j % 2 == 0 else payload
            messages.append(msg(f"2024-03-04 10:{j:02d}", text, sender, conv, order=i * 10 + j))
    messages_t = table(*messages)
    sessions = sessionize(messages_t, 30)
    enrichment = enrich_sessions(sessions, messages_t)
    memories = []
    for s in sessions.to_pylist():
        p = s["contact_id"]
        memories += [
            _memory(s, "fact", f"{p} works at {p}", attribute="employer", value=p),
            _memory(s, "fact", f"{p} lives in {p}", attribute="residence", value=p, subject=p),
            _memory(s, "preference", f"{p} loves {p}"),
            _memory(s, "event", f"{p} started at {p}", event_date=DAY),
            _memory(s, "plan", f"Trip to {p}", event_date=dt.date(2024, 3, 23)),
            _memory(s, "plan", f"{p} sends {p}", subject="<b onmouseover=alert(1)>x</b>"),
            _memory(s, "relationship", p),
        ]
    memories_t = pa.Table.from_pylist(memories, schema=MEMORIES)
    states = build_day({}, DAY, sessions, messages_t, enrichment, memories_t)
    assert len(states) == len(HOSTILE)
    rows = dossier_rows(states, DAY).to_pylist()
    return {r["contact_id"]: r["markdown"] for r in rows}


@pytest.fixture(scope="module")
def hostile_pages() -> dict[str, str]:
    return _hostile_day()


def test_dossier_pages_hold_no_live_markup(hostile_pages: dict[str, str]) -> None:
    for contact, page in hostile_pages.items():
        assert unsafe_markup(page) == [], (contact, page)
        assert missing_sections(page) == [] and uncited_bullets(page) == [], page
        for render in _renderers():
            assert_inert(render(page))


def test_dossier_pages_still_show_the_payload_as_text(hostile_pages: dict[str, str]) -> None:
    """Escaped, not dropped: the viewer shows the contact's name as it was written."""
    render = _renderers()[0]
    for contact, page in hostile_pages.items():
        shown = html.unescape(re.sub(r"<[^>]+>", "", render(page)))
        name = " ".join(contact.split()).replace("[sessions:", "(sessions:")  # as _clean does
        assert f"Dossier: {name}"[:60] in " ".join(shown.split()), (contact, shown)


def test_dossier_file_names_of_hostile_contacts(tmp_path: Path) -> None:
    folder = tmp_path / "dossiers"
    names = [
        *HOSTILE,
        "../../etc/x",
        "..",
        "/etc/passwd",
        "a/../../b",
        "C:\\Windows\\x",
        "x\x00y",
        "ｘ／ｙ",
        ".hidden",
        "x.md/../y",
    ]
    for name in names:
        path = write_markdown_atomic(folder, name, "# page\n")
        assert path.parent == folder, (name, path)
        assert re.fullmatch(r"[\w-]+\.md", path.name), (name, path.name)
    assert len(list(folder.iterdir())) == len(set(names))
    assert all(contact_file_name(n) == contact_file_name(n) for n in names)


@pytest.mark.parametrize(
    "injected",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1))",
        "![x](https://evil.example/p.png)",
        "<!-- x -->",
    ],
)
def test_a_rewrite_that_brings_back_markup_is_refused(
    hostile_pages: dict[str, str], injected: str
) -> None:
    """A model rewriting an escaped page may turn ``&lt;script&gt;`` back into a tag; the
    rewrite check refuses it (and the caller keeps the rule page)."""
    page = next(iter(hostile_pages.values()))
    lines = page.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("- ") and "[sessions:" in ln)
    lines[i] = lines[i].replace("- ", f"- {injected} ", 1)
    rewritten = "\n".join(lines) + "\n"
    assert check_rewrite(page, page) == []
    assert any(p.startswith("raw markup:") for p in check_rewrite(page, rewritten))


# -- evaluation report ------------------------------------------------------------------------


def _report(folder: Path, texts: list[str]) -> tuple[str, str]:
    from memory_pipeline.core.evaluation.report import write_report

    failures = [
        {
            "config": "cfg",
            "question_id": f"q{i}",
            "corpus_id": text,
            "qtype": text,
            "question": text,
            "level": "session",
            "found_at_5": False,
            "found_at_10": False,
            "found_at_20": False,
        }
        for i, text in enumerate(texts)
    ]
    counts = {"questions": 3, "excluded": 1, "unresolved_ids": 0}
    questions = [{"corpus_id": t, "qtype": t, **counts} for t in texts]
    tables = {
        "failures": pa.Table.from_pylist(failures),
        "questions_report": pa.Table.from_pylist(questions),
    }
    meta = {"title": texts[0], "dataset": texts[1], "selected_config": "cfg", "notes": texts}
    html_path, md_path = write_report(tables, meta, folder)
    return html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")


def test_evaluation_report_escapes_hostile_questions(tmp_path: Path) -> None:
    """The report of hostile questions has exactly the tags of the same report with plain
    questions (HTML and the Markdown rendered): the payloads added none."""
    plain = [f"question {i}" for i in range(len(HOSTILE))]
    html_plain, md_plain = _report(tmp_path / "plain", plain)
    html_bad, md_bad = _report(tmp_path / "bad", HOSTILE)
    assert "alert(1)" in html_bad and "alert(1)" in md_bad  # shown, not dropped
    assert _parse(html_bad).tags == _parse(html_plain).tags
    assert not [v for _, v in _parse(html_bad).attrs if "javascript:" in v]
    for render in _renderers():
        bad, good = _parse(render(md_bad)), _parse(render(md_plain))
        assert bad.tags == good.tags and bad.attrs == good.attrs and not bad.comments
