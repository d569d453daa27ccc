"""The Timeline's memoized render equals comparing every statement with each one shown
before it, render after render, whatever a day adds, drops or replaces."""

from __future__ import annotations

import random

import pytest

from memory_pipeline.core.common.escape import escape_markdown
from memory_pipeline.core.memories import dossier_timeline as tl
from memory_pipeline.core.memories.dossier_render import render_markdown
from memory_pipeline.core.memories.dossier_state import NEAR_DUPLICATE, DossierState
from memory_pipeline.core.memories.dossier_words import _cite, _words

# A small vocabulary, so that equal texts, one inside another and near duplicates are common;
# names, dates and small words (set aside by the comparison), Japanese, and Markdown to escape.
_WORDS = "moved Kyoto job Hikari design started new flat cat adopted marathon ran".split()
_EXTRA = ["Maria", "Yuki", "and", "the", "today", "on 9 March 2024", "*really*", "<b>"]
_JA = ["京都に引っ越した", "新しい仕事", "猫を飼い始めた", "マラソン"]


def _reference(state: DossierState) -> list[str]:
    """The Timeline as it was computed before the memo: each kept statement compared with
    every one shown before it (``_near_duplicate`` as it was, written out)."""
    out: list[str] = []
    said: list[str] = []
    for e in state.timeline:
        a = _words(state, e["text"])
        if a and any(
            b and (a <= b or b <= a or len(a & b) / len(a | b) >= NEAR_DUPLICATE)
            for b in (_words(state, s) for s in said)
        ):
            continue
        said.append(e["text"])
        line = f"- {escape_markdown(e['date'])} — {escape_markdown(e['text'])}"
        out.append(f"{line} {_cite([e['session_id']])}")
    return out


def _text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(_JA) + rng.choice(["", "。", "した"])
    if roll < 0.15:
        return " ".join(rng.sample(_EXTRA[:5], 2))  # names and small words: no words left
    words = rng.sample(_WORDS, rng.randint(1, 6))
    words += rng.sample(_EXTRA, rng.randint(0, 2))
    rng.shuffle(words)
    return " ".join(words)


def _entry(rng: random.Random, day: int, k: int) -> dict:
    month, dom = divmod(day, 28)
    return {
        "period": f"{2020 + month // 12}-{month % 12 + 1:02d}",
        "date": f"{2020 + month // 12}-{month % 12 + 1:02d}-{dom + 1:02d}",
        "session_id": f"ses_{day:010d}{rng.randrange(4):010d}",
        "start_us": day * 1000 + k,
        "rank": k,
        "text": _text(rng),
    }


def _days(seed: int, n_days: int = 260):
    """(contact, timeline) day by day for three contacts: entries added at the end, the
    oldest ones dropped, some dropped or replaced anywhere, and now and then a new speaker
    (the names the comparison sets aside change) or the owner's name learned."""
    rng = random.Random(seed)
    timelines: dict[str, list[dict]] = {c: [] for c in ("Maria", "健太", "Sam")}
    people: dict[str, tuple[list[str], str]] = {c: ([c], "") for c in timelines}
    for day in range(n_days):
        contact = rng.choice(sorted(timelines))
        entries = timelines[contact]
        entries += [_entry(rng, day, k) for k in range(rng.randint(0, 6))]
        roll = rng.random()
        if roll < 0.15 and entries:  # months leave the window
            del entries[: rng.randint(1, max(1, len(entries) // 4))]
        elif roll < 0.3 and entries:  # one entry goes (a month's budget, a forgotten session)
            del entries[rng.randrange(len(entries))]
        elif roll < 0.4 and entries:  # one entry's statement is another now
            i = rng.randrange(len(entries))
            entries[i] = {**entries[i], "text": _text(rng)}
        elif roll < 0.45 and entries:  # a copy of an entry, elsewhere in the list
            entries.insert(rng.randrange(len(entries) + 1), dict(rng.choice(entries)))
        speakers, owner = people[contact]
        if rng.random() < 0.03:
            speakers = sorted({*speakers, rng.choice(["Yuki", "Ana", "Maria"])})
        if rng.random() < 0.03:
            owner = rng.choice(["Yuki", "Alex"])
        people[contact] = (speakers, owner)
        state = DossierState(
            contact_id=contact,
            name=contact,
            last_updated="2030-01-01",
            owner_name=owner,
            speakers=list(speakers),
            timeline=[dict(e) for e in entries],
        )
        yield state


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_memoized_timeline_equals_the_straightforward_one_day_by_day(seed, monkeypatch):
    monkeypatch.setattr(tl, "_MEMOS", type(tl._MEMOS)())
    shown = 0
    for state in _days(seed):
        expected = _reference(state)
        assert tl._timeline_bullets(state) == expected
        assert tl._timeline_bullets(state) == expected  # the same list again
        shown += len(expected)
    assert shown > 1000  # the lists were long enough to mean something


def test_a_cold_memo_an_evicted_one_and_an_older_state_give_the_same_page(monkeypatch):
    """The page does not depend on what the process rendered before: a fresh memo, one that
    keeps a single contact (every other contact evicts it), and going back to an older
    state of a contact after a newer one all give the straightforward page."""
    states = list(_days(3, n_days=120))
    monkeypatch.setattr(tl, "_MEMOS", type(tl._MEMOS)())
    warm = [render_markdown(s) for s in states]
    monkeypatch.setattr(tl, "MEMO_CONTACTS", 1)
    evicting = [render_markdown(s) for s in states]
    backwards = [render_markdown(s) for s in reversed(states)][::-1]
    monkeypatch.setattr(tl, "_MEMOS", type(tl._MEMOS)())
    cold = []
    for s in states:
        tl._MEMOS.clear()
        cold.append(render_markdown(s))
    assert warm == evicting == backwards == cold
    for s, page in zip(states, warm, strict=True):
        assert "\n".join(_reference(s)) in page
    assert len(tl._MEMOS) <= 1
