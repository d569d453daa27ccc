"""One person across apps: the ``[[contacts]]`` table maps names, phones, e-mails and handles
from any source to one contact id.

Why: each reader names the other person the way its app does (LINE and WhatsApp by display
name, iMessage and SMS by phone number or e-mail, Telegram or Discord by a handle), so Maria's
LINE chat and her WhatsApp chat were two contacts: two dossiers, two ``--contact`` values for
search, forget and retention. The ingest step (core/ingest/columnar.py) replaces every
``contact_id`` a contact lists with that contact's id; without the table nothing changes.

Matching: a name by ``match_key`` (NFC, case and surrounding spaces ignored, as ``forget``
matches), an e-mail case-insensitively, a handle case-insensitively with or without a leading
``@``, a phone number by its digits: equal digits, or one number's national form (leading
zeros dropped, at least 8 digits) ending the other's (``090-1234-5678`` is
``+81 90 1234 5678``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.names import match_key

_NOT_DIGIT = re.compile(r"\D")
_PHONE = re.compile(r"^\+?[0-9 ()./\-\u2010-\u2015\u00a0]{6,}$")
_MIN_NATIONAL = 8


@dataclass(frozen=True)
class ContactSpec:
    """One ``[[contacts]]`` entry: the id every listed spelling maps to."""

    id: str
    names: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    handles: tuple[str, ...] = ()


def phone_digits(value: str) -> str | None:
    """The digits of ``value`` when it is written like a phone number, else None."""
    value = value.strip()
    return _NOT_DIGIT.sub("", value) if _PHONE.match(value) else None


def _handle(value: str) -> str:
    return match_key(value).removeprefix("@")


class ContactBook:
    """The ``[[contacts]]`` entries as a lookup from any spelling to a contact id."""

    def __init__(self, contacts: Iterable[ContactSpec] = ()) -> None:
        self.contacts = tuple(contacts)
        self._names: dict[str, str] = {}
        self._emails: dict[str, str] = {}
        self._handles: dict[str, str] = {}
        self._phones: dict[str, str] = {}  # digits -> id
        self._national: dict[str, str] = {}  # digits without leading zeros -> id
        for c in self.contacts:
            self._names[match_key(c.id)] = c.id
            for n in c.names:
                self._names[match_key(n)] = c.id
            for e in c.emails:
                self._emails[match_key(e)] = c.id
            for h in c.handles:
                self._handles[_handle(h)] = c.id
            for p in c.phones:
                digits = _NOT_DIGIT.sub("", p)
                if digits:
                    self._phones[digits] = c.id
                    national = digits.lstrip("0")
                    if len(national) >= _MIN_NATIONAL:
                        self._national[national] = c.id

    def __bool__(self) -> bool:
        return bool(self.contacts)

    def resolve(self, value: str | None) -> str | None:
        """The contact id ``value`` (a contact_id a reader wrote) belongs to, or None."""
        if not value:
            return None
        key = match_key(value)
        for table in (self._names, self._emails):
            if key in table:
                return table[key]
        if _handle(value) in self._handles:
            return self._handles[_handle(value)]
        digits = phone_digits(value)
        if not digits:
            return None
        if digits in self._phones:
            return self._phones[digits]
        national = digits.lstrip("0")
        for known, cid in self._national.items():
            if digits.endswith(known) or (
                len(national) >= _MIN_NATIONAL and known.endswith(national)
            ):
                return cid
        return None

    def map_column(self, values: pa.ChunkedArray | pa.Array) -> pa.Array:
        """``values`` (a contact_id column) with every listed spelling replaced by its id;
        each distinct value is resolved once."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        enc = pc.dictionary_encode(values)
        dictionary = enc.dictionary.to_pylist()
        mapped = [(self.resolve(v) or v) if v is not None else None for v in dictionary]
        if mapped == dictionary:
            return values
        return pa.array(mapped, values.type).take(enc.indices)

    def map_table(self, table: pa.Table) -> pa.Table:
        """``table`` with its ``contact_id`` column mapped (unchanged without contacts)."""
        if not self.contacts or "contact_id" not in table.schema.names or not table.num_rows:
            return table
        i = table.schema.get_field_index("contact_id")
        return table.set_column(i, "contact_id", self.map_column(table.column(i)))

    def digest(self) -> str:
        """A hash of the table ("" without one): what a cache entry scrubbed with it records."""
        if not self.contacts:
            return ""
        doc = [[c.id, c.names, c.phones, c.emails, c.handles] for c in self.contacts]
        blob = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode()
        return hashlib.blake2b(blob, digest_size=10).hexdigest()
