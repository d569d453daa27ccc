"""The forget list: which contacts, conversations and source files must never come back.

It lives in the output folder (``<output>/privacy/``; through ``fs.py``, so on object
storage too and every worker honours one list) as salted hashes only: a reader of the
list learns neither names nor text, and without the salt (stored beside it, so the pipeline
can match records) a guessed name cannot be checked against another machine's list. Ingest
reads it and turns every record of a listed conversation, contact or file into a
``forgotten`` quarantine row that carries no text, no file name and no conversation id, so
re-running over the same exports never brings the person back and the conservation rule
(read = ingested + quarantined) still reconciles.

It sits in ``core/common`` because ingest (an early stage) must honour it, while the
deletion itself (``core/privacy``) runs last.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from dataclasses import dataclass, field

from memory_pipeline.core.common import fs
from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.names import match_key
from memory_pipeline.core.common.records import Message, QuarantineRecord, Record
from memory_pipeline.core.common.storage import write_text_atomic

PRIVACY_DIR = "privacy"
LIST_FILE = "forget_list.json"
SALT_FILE = "forget_salt"
KINDS = ("contact", "conversation", "file")
# Kinds matched by name (core/common/names.py: match_key), not byte for byte: a re-export that
# spells the contact in another Unicode form, case or with surrounding spaces is still them.
NAMED_KINDS = frozenset({"contact", "conversation"})
FORGOTTEN_DETAIL = "the conversation is on the forget list"


def privacy_dir(output_dir: Location) -> Location:
    """Where the forget list and its salt live."""
    return fs.join(output_dir, PRIVACY_DIR)


def salted_hash(salt: bytes, *parts: str) -> str:
    """Keyed blake2b of the parts: stable for one output folder, meaningless outside it."""
    h = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), key=salt, digest_size=16)
    return h.hexdigest()


@dataclass
class ForgetList:
    """Salted hashes of forgotten contacts, conversations and (source, file) pairs."""

    salt: bytes
    entries: list[dict] = field(default_factory=list)  # {"kind", "hash", "forgotten_on"}

    def hashes(self, kind: str) -> frozenset[str]:
        return frozenset(e["hash"] for e in self.entries if e["kind"] == kind)

    def __post_init__(self) -> None:
        self._refresh()

    def _refresh(self) -> None:
        self._contacts = self.hashes("contact")
        self._conversations = self.hashes("conversation")
        self._files = self.hashes("file")

    def __bool__(self) -> bool:
        return bool(self.entries)

    def add(self, kind: str, value: str, on: dt.date) -> bool:
        """List ``value`` (hashed); False when it was already listed."""
        if kind not in KINDS:
            raise ValueError(f"unknown forget-list kind {kind!r}")
        if self.has(kind, value):
            return False
        h = salted_hash(self.salt, kind, match_key(value) if kind in NAMED_KINDS else value)
        self.entries.append({"kind": kind, "hash": h, "forgotten_on": on.isoformat()})
        self._refresh()
        return True

    def has(self, kind: str, value: str) -> bool:
        """True when ``value`` is listed: by :func:`match_key` for names (entries written
        before names were matched that way hold the exact value, so that is checked too)."""
        hashes = {
            "contact": self._contacts,
            "conversation": self._conversations,
            "file": self._files,
        }.get(kind)
        if hashes is None:
            hashes = self.hashes(kind)
        if salted_hash(self.salt, kind, value) in hashes:
            return True
        return kind in NAMED_KINDS and salted_hash(self.salt, kind, match_key(value)) in hashes

    def forgets(self, rec: Record) -> bool:
        """True when ``rec`` belongs to a forgotten contact, conversation or source file."""
        conv = rec.conversation_id or ""
        if conv and self._conversations and self.has("conversation", conv):
            return True
        contact = getattr(rec, "contact_id", "") or ""
        if contact and self._contacts and self.has("contact", contact):
            return True
        key = file_key(rec.source, rec.source_file)
        return salted_hash(self.salt, "file", key) in self._files

    def record_ref(self, conversation_id: str, source_file: str, ref: str) -> str:
        """The forgotten row's position: a hash, so ids stay unique without naming the file."""
        return "forgotten:" + salted_hash(self.salt, "ref", conversation_id, source_file, ref)

    def expired_ref(self, source: str, conversation_id: str, source_file: str, ref: str) -> str:
        """An ``expired`` row's position, salted like a forgotten one: an unsalted hash of
        (conversation, file, line) could be confirmed by anyone holding the old export.

        Needs the folder's salt (``ensure_salt``): an empty one would be exactly that
        unsalted hash, so it is refused.
        """
        if not self.salt:
            raise ValueError("expired rows need the output folder's salt (ensure_salt)")
        parts = (source, conversation_id, source_file, ref)
        return "expired:" + salted_hash(self.salt, "expired", *parts)


def file_key(source: str, source_file: str) -> str:
    """What identifies a source file across runs."""
    return f"{source}\x1f{source_file}"


def forgotten_row(forget: ForgetList, rec: Record, day: dt.date | None) -> QuarantineRecord:
    """The text-free quarantine row a forgotten record becomes at ingest."""
    ref = rec.source_ref if isinstance(rec, Message) else rec.record_ref
    return forgotten_record(
        forget, rec.source, rec.conversation_id or "", rec.source_file, ref, day
    )


def forgotten_record(
    forget: ForgetList,
    source: str,
    conversation_id: str,
    source_file: str,
    ref: str,
    day: dt.date | None,
) -> QuarantineRecord:
    """One forgotten record: source and date only, the position hashed.

    ``forget`` builds the same row from a stored message or quarantine row as ingest builds
    from the record, so a forget followed by a re-run leaves identical tables.
    """
    return QuarantineRecord(
        source=source,
        source_file="",
        source_line=None,
        record_ref=forget.record_ref(conversation_id, source_file, ref),
        conversation_id="",
        partition_date=day,
        reason=R.R_FORGOTTEN,
        detail=FORGOTTEN_DETAIL,
        raw="",
    )


def _read(path: Location) -> str | None:
    try:
        return fs.read_text(path)
    except FileNotFoundError:
        return None


def load_forget_list(output_dir: Location, *, create: bool = False) -> ForgetList:
    """The output folder's forget list (empty, with a fresh salt only if ``create``)."""
    folder = privacy_dir(output_dir)
    salt_text = _read(fs.join(folder, SALT_FILE))
    if salt_text is not None:
        salt = bytes.fromhex(salt_text.strip())
    elif create:
        salt = secrets.token_bytes(32)
    else:
        return ForgetList(salt=b"")
    entries = []
    if (list_text := _read(fs.join(folder, LIST_FILE))) is not None:
        entries = json.loads(list_text)["entries"]
    return ForgetList(salt=salt, entries=entries)


def ensure_salt(output_dir: Location) -> bytes:
    """The output folder's salt, created (and written, atomically) when there is none yet.

    Retention's ``expired`` rows hash their positions with it even before anything is
    forgotten, and a re-run must write the same rows, so the salt has to persist.
    """
    path = fs.join(privacy_dir(output_dir), SALT_FILE)
    if (text := _read(path)) is not None:
        return bytes.fromhex(text.strip())
    salt = secrets.token_bytes(32)
    write_text_atomic(path, salt.hex())
    return salt


def save_forget_list(output_dir: Location, forget: ForgetList) -> Location:
    """Write the list and its salt atomically (the salt first: a list is useless without it)."""
    folder = privacy_dir(output_dir)
    write_text_atomic(fs.join(folder, SALT_FILE), forget.salt.hex())
    target = fs.join(folder, LIST_FILE)
    write_text_atomic(target, json.dumps({"entries": forget.entries}, indent=1, sort_keys=True))
    return target
