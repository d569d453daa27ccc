"""A small HTML element tree for the readers of HTML chat exports (imessage-exporter,
signal-export).

The exports are machine-written pages whose structure is all the reader needs: elements with
classes (``div.message``, ``span.timestamp``), their text and their media. The standard
library's tolerant ``html.parser`` builds the tree; no dependency, no network, and nothing is
ever fetched (``src``/``href`` are only read as strings). Unclosed elements are closed by the
next end tag that matches an open one, as browsers do for these simple pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset("area base br col embed hr img input link meta source track wbr".split())
SKIP = frozenset({"script", "style", "template"})
# Chat exports nest a few levels; a hostile page nesting thousands must not exhaust the
# recursion of the walks below.
MAX_DEPTH = 200
BLOCK = frozenset("p div br li tr h1 h2 h3 h4 h5 h6 blockquote pre figure".split())


@dataclass
class Node:
    """One element: its tag, attributes, classes and children (elements and text)."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    line: int = 0

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def has(self, cls: str) -> bool:
        return cls in self.classes

    def elements(self) -> Iterator[Node]:
        """The child elements, in order."""
        return (c for c in self.children if isinstance(c, Node))

    def walk(self, stop: frozenset[str] = frozenset()) -> Iterator[Node]:
        """Every element below this one, depth first; elements with a class in ``stop`` are
        yielded but not entered."""
        # iterative (pre-order): nested generators would cost the depth on every element
        stack = [iter(self.children)]
        while stack:
            c = next(stack[-1], None)
            if c is None:
                stack.pop()
            elif isinstance(c, Node):
                yield c
                if c.children and not (c.classes & stop):
                    stack.append(iter(c.children))

    def find(self, cls: str, stop: frozenset[str] = frozenset()) -> Node | None:
        """The first element below with class ``cls`` (not entering ``stop`` classes)."""
        return next((n for n in self.walk(stop) if n.has(cls)), None)

    def text(
        self,
        skip: frozenset[str] = frozenset(),
        pre: bool = False,
        skip_tags: frozenset[str] = frozenset(),
    ) -> str:
        """The visible text: ``<br>`` and block ends as newlines, runs of spaces and the
        newlines of the page's own indentation folded (``pre``: the text's own newlines and
        spaces kept, as a ``white-space: pre-wrap`` bubble shows them); elements with a
        class in ``skip`` or a tag in ``skip_tags`` left out."""
        parts: list[str] = []
        self._text(parts, skip, pre, skip_tags)
        lines = "".join(parts).split("\n")
        if not pre:
            lines = [" ".join(line.split()) for line in lines]
        out: list[str] = []
        for line in lines:
            if line.strip() or (out and out[-1].strip()):
                out.append(line)
        return "\n".join(out).strip()

    def _text(
        self, parts: list[str], skip: frozenset[str], pre: bool, skip_tags: frozenset[str]
    ) -> None:
        for c in self.children:
            if isinstance(c, str):
                parts.append(c if pre else c.replace("\n", " "))
            elif c.tag in SKIP or c.tag in skip_tags or (c.classes & skip):
                continue
            elif c.tag == "br":
                parts.append("\n")
            else:
                c._text(parts, skip, pre, skip_tags)
                if c.tag in BLOCK:
                    parts.append("\n")


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, line=self.getpos()[0])
        self.stack[-1].children.append(node)
        if tag not in VOID and len(self.stack) < MAX_DEPTH:
            self.stack.append(node)  # deeper elements become siblings: walks stay bounded

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(text: str) -> Node:
    """The element tree of an HTML page (never fails: broken markup is read leniently)."""
    b = _Builder()
    b.feed(text)
    b.close()
    return b.root
