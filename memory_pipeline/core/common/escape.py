"""Escaping of chat-derived text for documents a viewer renders (Markdown pages, HTML).

Chat text is written by other people: a contact name, a sender or a message may hold
``<script>``, ``<img onerror=…>``, ``[x](javascript:…)`` or an HTML comment. Markdown passes
raw HTML through, so a dossier that copied such text verbatim would run it in any viewer
that renders HTML (an editor preview, a static site, a notebook). Every place where chat
text enters a rendered document goes through one of these helpers:

- :func:`escape_markdown` for Markdown: ``<`` and ``>`` become ``&lt;`` / ``&gt;`` (entities
  work in every Markdown dialect, unlike ``\\<``, which the original Markdown.pl leaves as
  a backslash before live HTML), an ``&`` that would start an entity becomes ``&amp;``,
  ``[`` / ``]``, the backtick and the backslash are backslash-escaped, so no link, image,
  reference definition, autolink, tag or code span (where entities would show as typed)
  can form; line breaks become spaces (one bullet stays one
  line, so chat text cannot start a heading or a fake citation line). Everything else is
  kept, so the text stays readable: ``R&D``, ``a < b`` rendered, ``*``, ``_``, URLs.
- :func:`escape_html` for HTML (``html.escape`` with quotes, for text and attributes).

:func:`unsafe_markup` lists what in a whole Markdown document could render as HTML or a
link; it guards text that was not built through :func:`escape_markdown` (a model's rewrite
of a page) and lets tests check a rendered page.
"""

from __future__ import annotations

import html
import re

__all__ = ["escape_html", "escape_markdown", "unsafe_markup"]

# Line breaks of every kind (CommonMark itself only knows \n and \r; the others are folded
# too so a viewer with a wider notion of "line" cannot see a new block either).
_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
# An "&" that a renderer would read as an entity (&lt; &#60; &#x3c;); a lone "&" is literal.
_ENTITY_START = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
_MD_CHARS = {"\\": "\\\\", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "`": "\\`"}
_MD_SPECIAL = re.compile(r"[\\<>\[\]`]")
_MD_CELL = {**_MD_CHARS, "|": "\\|"}
_MD_CELL_SPECIAL = re.compile(r"[\\<>\[\]`|]")


def escape_markdown(text: object, *, table_cell: bool = False) -> str:
    """``text`` as inert Markdown inline text: it renders as the same characters and can
    create no HTML, link, image or block structure. ``table_cell`` also escapes ``|``."""
    s = _BREAKS.sub(" ", str(text))
    s = _ENTITY_START.sub("&amp;", s)
    if table_cell:
        return _MD_CELL_SPECIAL.sub(lambda m: _MD_CELL[m.group()], s)
    return _MD_SPECIAL.sub(lambda m: _MD_CHARS[m.group()], s)


def escape_html(text: object) -> str:
    """``text`` for HTML element content or a quoted attribute value."""
    return html.escape(str(text), quote=True)


# What a Markdown renderer could turn into HTML or a link from the source text: a tag, a
# closing tag, a comment / declaration / processing instruction, an autolink (all start
# "<" + letter, "/", "!" or "?"), and the "]" that closes a link or image text before its
# destination ("](", a reference "][" or a reference definition "]:"). A character preceded
# by an odd number of backslashes is escaped and does not count.
_UNESCAPED = r"(?<!\\)(?:\\\\)*"
_UNSAFE = re.compile(rf"{_UNESCAPED}(?:<[A-Za-z/!?]|\][(\[:])")


def unsafe_markup(markdown: str) -> list[str]:
    """The markup snippets in ``markdown`` that would render as raw HTML or as a link/image
    (empty for a page built with :func:`escape_markdown` around every chat text, whose only
    brackets are its own citations ``[sessions: …]`` at line ends)."""
    found = []
    for m in _UNSAFE.finditer(markdown):
        start = max(0, markdown.rfind("\n", 0, m.start()) + 1, m.start() - 20)
        found.append(markdown[start : m.end() + 20].split("\n", 1)[0])
    return found
