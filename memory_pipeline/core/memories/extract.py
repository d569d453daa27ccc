"""Long-term memories from chat sessions: rule extraction, source validation, supersession.

A memory is one self-contained statement about a person (a fact, preference, plan, event,
relationship or possession) that cites the messages it came from. Extractors (the
deterministic rules here, or an LLM in ``memory_llm``) only *propose* candidates; every
candidate goes through the same source validation, so a memory can only cite messages of its
own session - hence of its own conversation and contact. Candidates that fail it are kept in
MEMORY_REJECTS for inspection and never become memories.

The rules favour precision over recall: a statement must be first person (or about a named
person) and declarative; questions, reactions ("so you live in Osaka?", 住んでるんですね),
reported speech, hypotheticals and non-text messages are skipped. Dates of plans and events
are resolved against the stating message's local time (see ``resolve_date``).

This module holds the rule extractor and the validation; its parts live beside it: the shared
types (``extract_types``), the rules per language (``extract_en``, ``extract_ja``), general
statements (``extract_statements``), sentence helpers (``extract_text``), dates
(``extract_dates``) and the timeline (``supersede``). The names other code uses are
re-exported here.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections.abc import Sequence

import pyarrow as pa

from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.schema import MEMORIES, MEMORY_REJECTS
from memory_pipeline.core.memories.extract_dates import (
    _DATE_EN,
    _DATE_JA,
    _FUTURE,
    _find_date,
    resolve_date,
)
from memory_pipeline.core.memories.extract_en import (
    _EN_AFTER_THANKS,
    _EN_DANGLING,
    _EN_EXCLAMATION,
    _EN_LEAD,
    _EN_POINTS_BACK,
    _EN_QUESTION,
    _EN_THANKS_FOR,
    _EN_TRIGGER,
    _en_attitude,
    _en_rules,
    _en_shared_photo,
    _en_statement_part,
)
from memory_pipeline.core.memories.extract_ja import (
    _AFFIRM,
    _JA_FROM_TO,
    _JA_MOVE_ANNOUNCE,
    _JA_QUESTION,
    _JA_REACTION,
    _JA_TRIGGER,
    _dated_plan,
    _ja_rules,
)
from memory_pipeline.core.memories.extract_statements import (
    _en_anaphoric,
    _en_statement,
    _en_subjectless,
    _fold_short,
    _ja_anaphoric,
    _ja_statement,
    _joined,
    _lang_of,
    _merge_statements,
)
from memory_pipeline.core.memories.extract_text import _clean, _sentences, _short
from memory_pipeline.core.memories.extract_types import (
    KINDS,
    MAX_TEXT_CHARS,
    R_BAD_KIND,
    R_EMPTY_TEXT,
    R_EXTRACTOR_ERROR,
    R_NO_SOURCE,
    R_OUTSIDE_SESSION,
    R_UNKNOWN_MESSAGE,
    RULES_METHOD,
    ChatMessage,
    MemoryCandidate,
    MemoryExtractor,
    SessionExtraction,
    SessionMessages,
    _Hit,
)
from memory_pipeline.core.memories.rewrite import (
    en_continuation_ok,
    en_resolve_dates,
    en_third_person,
)
from memory_pipeline.core.memories.rewrite_ja import (
    ja_is_remark,
    ja_statement_kind,
    ja_statement_text,
)
from memory_pipeline.core.memories.supersede import as_of, count_by_kind, supersede, supersede_rows

__all__ = [
    "ChatMessage",
    "KINDS",
    "MAX_TEXT_CHARS",
    "MemoryCandidate",
    "MemoryExtractor",
    "RULES_METHOD",
    "R_BAD_KIND",
    "R_EMPTY_TEXT",
    "R_EXTRACTOR_ERROR",
    "R_NO_SOURCE",
    "R_OUTSIDE_SESSION",
    "R_UNKNOWN_MESSAGE",
    "RuleMemoryExtractor",
    "SessionExtraction",
    "SessionMessages",
    "as_of",
    "count_by_kind",
    "extract_memories",
    "memory_id",
    "resolve_date",
    "supersede",
    "supersede_rows",
]


class RuleMemoryExtractor:
    """Deterministic EN/JA memory rules (no model, no I/O): the offline default."""

    method = RULES_METHOD

    def extract_session(self, session: SessionMessages) -> SessionExtraction:
        """Candidates for one session, in message order."""
        out: list[MemoryCandidate] = []
        msgs = session.messages
        used_move: set[str] = set()
        senders = {m.sender for m in msgs if m.sender}
        for i, msg in enumerate(msgs):
            if msg.type != "text" or not msg.text:
                continue
            text = msg.text
            lang = _lang_of(text)
            if lang == "ja":
                if not _JA_TRIGGER.search(text):
                    continue
                move = self._ja_confirmed_move(msgs, i)
                if move is not None:
                    out.append(move)
                    used_move.update(move.message_ids)
                    continue
                if msg.message_id in used_move:
                    continue
            elif not _EN_TRIGGER.search(text):
                continue
            others = senders - {msg.sender}
            other = next(iter(others)) if len(others) == 1 else None
            out.extend(self._message(msg, lang, other))
        return SessionExtraction(out)

    def _message(
        self, msg: ChatMessage, lang: str, other: str | None = None
    ) -> list[MemoryCandidate]:
        today = msg.local_ts.date()
        found: list[MemoryCandidate] = []
        cleaned = _clean(msg.text)
        sentences = _sentences(cleaned, lang)
        general: list[tuple[_Hit, str, dt.date | None, bool]] = []
        general_at: list[int] = []  # the sentence index of each ``general`` entry
        found_at: list[int] = []  # the sentence index of each ``found`` candidate
        anaphoric = _ja_anaphoric if lang == "ja" else _en_anaphoric
        last_general = -2  # index of the sentence last added to ``general``
        context: tuple[int, str] = (-2, "")  # the last sentence that could be an antecedent
        last_rule = (-2, -1)  # (sentence index, index in ``found``) of the last rule memory
        for n, raw in enumerate(sentences):
            if lang == "ja":
                s = unicodedata.normalize("NFKC", raw)
                if _JA_QUESTION.search(s) or _JA_REACTION.search(s):
                    continue
                hit = _ja_rules(s)
                if ja_is_remark(s) and (hit is None or hit.subject is None):
                    continue  # 「楽しかったね」: seeks agreement, says nothing new of the speaker
                if hit is None:
                    hit = _ja_statement(s)
                date_rx = _DATE_JA
            else:
                if _EN_THANKS_FOR.match(raw):
                    # "Thanks for having my back": a courtesy, not a statement; what follows a
                    # comma or dash ("thanks for asking, we got another cat") may be one.
                    after = _EN_AFTER_THANKS.search(raw)
                    if after is None:
                        continue
                    raw = raw[after.end() :]
                s = _EN_LEAD.sub("", raw) if raw[:1] != "I" else raw
                s = _EN_DANGLING.sub("", s)
                s = _en_subjectless(_en_statement_part(s))
                if _EN_QUESTION.search(s):
                    continue
                s = _en_shared_photo(s)
                attitude = _en_attitude(s, msg.sender, other) if other and msg.sender else None
                if attitude is not None:
                    found.append(
                        MemoryCandidate(
                            subject=msg.sender,
                            kind="relationship",
                            attribute="",
                            value="",
                            text=_short(attitude),
                            message_ids=(msg.message_id,),
                            lang=lang,
                            subject_is_owner=msg.is_owner,
                            confidence=0.6,
                        )
                    )
                    found_at.append(n)
                    continue
                hit = _en_rules(s)
                if hit is None:
                    hit = _en_statement(s)
                date_rx = _DATE_EN
                if hit is None and en_continuation_ok(s) and not _en_anaphoric(s):
                    context = (n, s)  # may name what a following "It ..." points at
                if hit is None and last_general == n - 1 and _EN_EXCLAMATION.match(s):
                    # "We went to the beach. It was awesome! The kids had a blast.": a short
                    # exclamation says nothing, but the statement goes on after it.
                    last_general = n
                    continue
                if (
                    hit is None
                    and last_general == n - 1
                    and en_continuation_ok(s)
                    and not _EN_POINTS_BACK.search(general[-1][1])
                ):
                    # "I went to the beach. The kids had a blast.": the sentence right after a
                    # statement goes on with it; kept only with it (it leans).
                    statement = en_resolve_dates(s, today)[0]
                    statement = en_third_person(statement, msg.sender, other)
                    general.append((_Hit("fact", "", "", 0.5, general=True), statement, None, True))
                    general_at.append(n)
                    last_general = n
                    continue
                if (
                    hit is None
                    and last_rule[0] == n - 1
                    and en_continuation_ok(s)
                    and not _EN_POINTS_BACK.search(found[last_rule[1]].text)
                ):
                    # "I got a puppy two weeks ago! Her name's Coco.": a rule's statement goes
                    # on in the next sentence just as a general one does.
                    more = en_third_person(en_resolve_dates(s, today)[0], msg.sender, other)
                    kept = found[last_rule[1]]
                    kept.text = _short(_joined(kept.text, more, lang))
                    last_rule = (n, last_rule[1])
                    continue
            if hit is None:
                continue
            event_date = None
            if hit.require_date and not _dated_plan(hit, s, date_rx, today, lang):
                # not a dated plan: it may still be a plain statement ("We're gonna take the
                # dogs to the park.")
                hit = _ja_statement(s) if lang == "ja" else _en_statement(s)
                if hit is None:
                    continue
            if hit.date_direction or hit.require_date:
                has_date, event_date = _find_date(date_rx, s, today, hit.date_direction or 1)
                if hit.kind == "event" and event_date is not None and event_date > today:
                    hit.kind = "plan"
            subject = hit.subject or msg.sender
            if not subject:
                continue
            if lang == "ja":
                statement = s
                if hit.kind == "plan" and len(statement) < 20 and n > 0:
                    prev = unicodedata.normalize("NFKC", sentences[n - 1])
                    # "了解!" adds nothing; "いちご送ったよ。" says what arrives; "じゃあそれで。"
                    # (points back), "美味しそう!" (an exclamation) and "楽しかったね"
                    # (a remark) say nothing about the speaker.
                    if (
                        len(prev) >= 6
                        and not _ja_anaphoric(prev)
                        and not ja_is_remark(prev)
                        and not (prev.rstrip()[-1:] in "!！" and ja_statement_kind(prev) is None)
                    ):
                        statement = prev + statement
                if hit.text:
                    statement = hit.text
                elif msg.sender:
                    statement = ja_statement_text(statement, msg.sender, other)
            else:
                statement, day = en_resolve_dates(s, today)
                if event_date is None and day is not None and hit.kind in ("event", "plan"):
                    event_date = day
                statement = en_third_person(statement, msg.sender, other) if msg.sender else s
            if hit.general:
                leans = anaphoric(s)
                if leans and not general and lang == "en" and context[0] == n - 1:
                    # "Flowers bring joy. They remind me of my wedding.": the sentence before
                    # says what "they" are; it opens the statement.
                    ctx = en_third_person(en_resolve_dates(context[1], today)[0], msg.sender, other)
                    general.append((hit, ctx, None, False))
                    general_at.append(n - 1)
                general.append((hit, statement, event_date, leans))
                general_at.append(n)
                last_general = n
                continue
            statement = _short(statement)
            if lang == "en":
                last_rule = (n, len(found))
            found_at.append(n)
            found.append(
                MemoryCandidate(
                    subject=subject,
                    kind=hit.kind,
                    attribute=hit.attribute,
                    value=hit.value,
                    text=statement,
                    message_ids=(msg.message_id,),
                    event_date=event_date,
                    lang=lang,
                    subject_is_owner=msg.is_owner if hit.subject is None else None,
                    confidence=hit.confidence,
                )
            )
        for merged in _merge_statements(general, lang, msg.sender):
            hit, statement, event_date, first = merged
            found_at.append(general_at[first])
            found.append(
                MemoryCandidate(
                    subject=msg.sender,
                    kind=hit.kind,
                    attribute="",
                    value="",
                    text=statement,
                    message_ids=(msg.message_id,),
                    event_date=event_date,
                    lang=lang,
                    subject_is_owner=msg.is_owner,
                    confidence=hit.confidence,
                )
            )
        return _fold_short(found, found_at, lang)

    @staticmethod
    def _ja_confirmed_move(msgs: Sequence[ChatMessage], i: int) -> MemoryCandidate | None:
        """健太「引っ越しの日決まった！3月20日」 Yuki「高円寺から武蔵小杉だっけ？」 健太「そう。」.

        A move announced by one sender, whose destination the other asks back and the
        announcer confirms: the residence memory cites all three messages.
        """
        ann = msgs[i]
        text = unicodedata.normalize("NFKC", ann.text)
        if not _JA_MOVE_ANNOUNCE.search(text) or _JA_QUESTION.search(text.split("!")[0]):
            return None
        today = ann.local_ts.date()
        has_date, when = _find_date(_DATE_JA, text, today, _FUTURE)
        for j in range(i + 1, min(i + 4, len(msgs))):
            q = msgs[j]
            if q.sender == ann.sender or q.type != "text":
                continue
            qt = unicodedata.normalize("NFKC", q.text)
            m = _JA_FROM_TO.search(qt)
            if m is None or not _JA_QUESTION.search(qt):
                return None
            for k in range(j + 1, min(j + 3, len(msgs))):
                a = msgs[k]
                if a.sender != ann.sender or a.type != "text":
                    continue
                if not _AFFIRM.match(unicodedata.normalize("NFKC", a.text).strip()):
                    return None
                kind = "plan" if when is not None and when > a.local_ts.date() else "event"
                when_txt = f"{when.month}月{when.day}日に" if when is not None else ""
                return MemoryCandidate(
                    subject=ann.sender,
                    kind=kind,
                    attribute="residence",
                    value=m["to"],
                    text=f"{ann.sender}: {when_txt}{m['from']}から{m['to']}へ引っ越し",
                    message_ids=(ann.message_id, q.message_id, a.message_id),
                    event_date=when if has_date else None,
                    lang="ja",
                    subject_is_owner=ann.is_owner,
                    confidence=0.8,
                )
            return None
        return None


# ----------------------------------------------------------------------------- extraction

_SESSION_COLS = ("session_id", "conversation_id", "contact_id", "local_date", "message_ids")
_MESSAGE_COLS = ("message_id", "sender", "is_owner", "ts", "local_ts", "type", "text")


def _session_inputs(
    sessions: pa.Table, messages: pa.Table
) -> tuple[list[dict], dict[str, ChatMessage]]:
    rows = sessions.select(list(_SESSION_COLS)).to_pylist()
    cols = {c: messages.column(c).to_pylist() for c in _MESSAGE_COLS if "ts" not in c}
    # Arrow's timestamp -> datetime conversion is ~6x slower than building them from ints.
    for c, tz in (("ts", dt.UTC), ("local_ts", None)):
        us = messages.column(c).cast(pa.int64()).to_pylist()
        epoch = dt.datetime(1970, 1, 1, tzinfo=tz)
        cols[c] = [None if x is None else epoch + dt.timedelta(microseconds=x) for x in us]
    by_id = {
        mid: ChatMessage(mid, sender or "", bool(own), ts, lts, typ or "", text or "")
        for mid, sender, own, ts, lts, typ, text in zip(
            *(cols[c] for c in _MESSAGE_COLS), strict=True
        )
    }
    return rows, by_id


def _validate(
    c: MemoryCandidate, known: dict[str, ChatMessage], in_session: frozenset[str]
) -> str | None:
    """Why ``c`` cannot be stored, or None: every cited message must exist in this session."""
    if not c.message_ids:
        return R_NO_SOURCE
    if any(mid not in known for mid in c.message_ids):
        return R_UNKNOWN_MESSAGE
    if any(mid not in in_session for mid in c.message_ids):
        return R_OUTSIDE_SESSION
    if c.kind not in KINDS:
        return R_BAD_KIND
    if not (c.text or "").strip():
        return R_EMPTY_TEXT
    return None


def memory_id(session_id: str, c: MemoryCandidate) -> str:
    """Content-derived id: the same statement in the same session always gets the same id."""
    return stable_id("mem", session_id, c.kind, c.attribute, c.text, *c.message_ids)


def extract_memories(
    sessions: pa.Table,
    messages: pa.Table,
    *,
    extractor: MemoryExtractor | None = None,
    owner: str | None = None,
) -> tuple[pa.Table, pa.Table]:
    """(MEMORIES, MEMORY_REJECTS) for ``sessions``; ``messages`` holds at least theirs.

    ``extractor=None`` uses the rules. Every candidate is validated against its own session
    (see ``_validate``); ``valid_from`` is the time of the latest cited message, so no
    extractor can date a memory itself. ``owner`` (a sender name) also marks memories about
    the owner that were stated by someone else. Output is sorted by session order, then the
    position of the stating message, then id; duplicate ids within a session are dropped.
    """
    extractor = extractor or RuleMemoryExtractor()
    rows, by_id = _session_inputs(sessions, messages)
    method = extractor.method
    mem: list[tuple[tuple, dict]] = []
    rej: list[tuple[tuple, dict]] = []
    for s_idx, srow in enumerate(rows):
        mids = srow["message_ids"] or []
        in_session = frozenset(mids)
        pos = {mid: k for k, mid in enumerate(mids)}
        chat = tuple(by_id[m] for m in mids if m in by_id)
        session = SessionMessages(
            srow["session_id"],
            srow["conversation_id"],
            srow["contact_id"],
            srow["local_date"],
            chat,
        )
        owners = {m.sender for m in chat if m.is_owner and m.sender}
        if owner:
            owners.add(owner)
        result = extractor.extract_session(session)
        base = {
            "session_id": session.session_id,
            "contact_id": session.contact_id,
            "local_date": session.local_date,
        }
        if result.error:
            rej.append(
                (
                    (s_idx, -1, ""),
                    {
                        **base,
                        "kind": "",
                        "text": "",
                        "message_ids": [],
                        "method": method,
                        "reason": f"{R_EXTRACTOR_ERROR}: {result.error}"[:500],
                    },
                )
            )
        seen: set[str] = set()
        for c in result.candidates:
            c.message_ids = tuple(str(x) for x in c.message_ids)
            reason = _validate(c, by_id, in_session)
            if reason is not None:
                rej.append(
                    (
                        (s_idx, len(mids), c.text or ""),
                        {
                            **base,
                            "kind": c.kind,
                            "text": c.text or "",
                            "message_ids": list(c.message_ids),
                            "method": method,
                            "reason": reason,
                        },
                    )
                )
                continue
            text = c.text.strip()[:MAX_TEXT_CHARS]
            c.text = text
            mid = memory_id(session.session_id, c)
            if mid in seen:
                continue
            seen.add(mid)
            stating = max(c.message_ids, key=lambda x: pos[x])
            is_owner = c.subject_is_owner
            if is_owner is None or (owner and c.subject == owner):
                is_owner = c.subject in owners
            mem.append(
                (
                    (s_idx, pos[stating], mid),
                    {
                        "memory_id": mid,
                        "contact_id": session.contact_id,
                        "conversation_id": session.conversation_id,
                        "session_id": session.session_id,
                        "local_date": session.local_date,
                        "subject": c.subject,
                        "subject_is_owner": bool(is_owner),
                        "kind": c.kind,
                        "attribute": c.attribute or "",
                        "value": c.value or "",
                        "text": text,
                        "lang": c.lang or _lang_of(text),
                        "valid_from": max(by_id[x].ts for x in c.message_ids),
                        "event_date": c.event_date,
                        "message_ids": sorted(c.message_ids, key=pos.__getitem__),
                        "method": method,
                        "confidence": float(c.confidence),
                    },
                )
            )
    mem.sort(key=lambda p: p[0])
    rej.sort(key=lambda p: p[0])
    return (
        pa.Table.from_pylist([r for _, r in mem], schema=MEMORIES),
        pa.Table.from_pylist([r for _, r in rej], schema=MEMORY_REJECTS),
    )
