"""Central validation, de-duplication, partition assignment and conservation."""

from __future__ import annotations

import datetime as dt

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import QuarantineRecord
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import audit_table, messages_table, quarantine_table
from memory_pipeline.core.quality import checks as quality
from memory_pipeline_tests.factories import msg

START = dt.date(2024, 3, 1)


def bad_file(day: dt.date | None) -> QuarantineRecord:
    return QuarantineRecord(
        source="test",
        source_file="x.json",
        source_line=3,
        record_ref="x.json",
        conversation_id="c1",
        partition_date=day,
        reason=R.R_MALFORMED_JSON,
        detail="Expecting value: line 3 column 1",
    )


def test_each_bad_kind_is_quarantined_with_reason_and_location():
    records = [
        msg("2024-03-01 10:00", "ok", order=0),
        msg("2024-03-01 10:01", "   ", order=1),
        msg("2024-03-01 10:02", "x" * (R.MAX_MESSAGE_CHARS + 1), order=2),
        msg("2024-03-01 10:03", "?", order=3, type_="hologram"),
        msg("2024-03-01 10:00", "ok", order=0),  # exact duplicate of the first
        msg("2024-02-28 10:00", "too early", order=5),
        bad_file(None),
    ]
    result = ingest(records, start_date=START)
    assert [m.text for _, m in result.messages] == ["ok"]
    reasons = sorted(q.reason for q in result.quarantine)
    assert reasons == sorted(
        [
            R.R_EMPTY_TEXT,
            R.R_TOO_LARGE,
            R.R_UNKNOWN_TYPE,
            R.R_DUPLICATE,
            R.R_OUT_OF_RANGE,
            R.R_MALFORMED_JSON,
        ]
    )
    for q in result.quarantine:
        assert q.source_file and q.record_ref and q.partition_date == START
        assert "x" * 50 not in q.detail and "too early" not in q.detail  # no text in details
    dup = next(q for q in result.quarantine if q.reason == R.R_DUPLICATE)
    assert dup.detail == f"duplicate of {result.messages[0][0]}"


def test_same_text_at_other_position_is_not_a_duplicate():
    result = ingest(
        [
            msg("2024-03-01 10:00", "[sticker]", order=0),
            msg("2024-03-01 10:00", "[sticker]", order=1),
        ],
        start_date=START,
    )
    assert len(result.messages) == 2 and not result.quarantine


def test_sticker_without_text_gets_a_placeholder():
    result = ingest([msg("2024-03-01 10:00", "", type_="sticker")], start_date=START)
    assert result.messages[0][1].text == "[sticker]"


def test_conservation_per_partition_and_date_filter():
    records = [
        msg("2024-03-01 10:00", "a", order=0),
        msg("2024-03-02 10:00", "b", order=1),
        msg("2024-03-02 10:01", "", order=2),
        bad_file(dt.date(2024, 3, 2)),
    ]
    only_2nd = ingest(records, start_date=START, dates=[dt.date(2024, 3, 2)])
    assert [m.text for _, m in only_2nd.messages] == ["b"]
    rows = only_2nd.audit_rows()
    assert rows == [
        {
            "partition_date": dt.date(2024, 3, 2),
            "source": "test",
            "records_read": 3,
            "ingested": 1,
            "quarantined": 2,
        }
    ]
    ok, meta = quality.conservation(
        audit_table(rows), messages_table(only_2nd.messages), quarantine_table(only_2nd.quarantine)
    )
    assert ok, meta
    # drop a quarantined row on the way to storage: the check must notice
    ok, meta = quality.conservation(
        audit_table(rows),
        messages_table(only_2nd.messages),
        quarantine_table(only_2nd.quarantine[:1]),
    )
    assert not ok and meta["mismatched_partitions"]


def test_message_ids_stable_and_unique():
    records = [msg("2024-03-01 10:00", str(i), order=i) for i in range(100)]
    a = [mid for mid, _ in ingest(records, start_date=START).messages]
    b = [mid for mid, _ in ingest(list(reversed(records)), start_date=START).messages]
    assert a == b and len(set(a)) == 100


def test_forgotten_records_are_counted_as_quarantined_without_text(tmp_path):
    import datetime as _dt

    from memory_pipeline.core.common import records as R
    from memory_pipeline.core.common.forget_list import load_forget_list
    from memory_pipeline.core.ingest.columnar import ingest
    from memory_pipeline.core.ingest.normalize import audit_table, quarantine_table

    forget = load_forget_list(tmp_path, create=True)
    forget.add("conversation", "c1", _dt.date(2024, 3, 15))
    records = [
        msg("2024-03-01 10:00", "a secret about the trip", conv="c1"),
        msg("2024-03-01 10:01", "", conv="c1", order=1),  # would be empty_text
        msg("2024-03-01 10:02", "kept", conv="c2"),
    ]
    result = ingest(records, start_date=_dt.date(2024, 3, 1), forget=forget)
    assert [m.conversation_id for _, m in result.messages] == ["c2"]
    q = quarantine_table(result.quarantine).to_pylist()
    assert [r["reason"] for r in q] == [R.R_FORGOTTEN, R.R_FORGOTTEN]
    assert {r["raw"] for r in q} == {""} and {r["conversation_id"] for r in q} == {""}
    assert len({r["quarantine_id"] for r in q}) == 2
    [audit] = audit_table(result.audit_rows()).to_pylist()
    assert audit["records_read"] == 3 == audit["ingested"] + audit["quarantined"]


def test_records_past_retention_are_counted_as_quarantined_without_text(tmp_path):
    from memory_pipeline.core.common.forget_list import ensure_salt, load_forget_list
    from memory_pipeline.core.ingest.normalize import audit_table, messages_table, quarantine_table

    records = [
        msg("2024-03-01 10:00", "an old secret about the trip", order=0),
        msg("2024-03-02 10:00", "another old one", order=1),
        msg("2024-03-05 10:00", "kept", order=2),
    ]
    ensure_salt(tmp_path)
    forget = load_forget_list(tmp_path)
    result = ingest(records, start_date=START, retain_from=dt.date(2024, 3, 4), forget=forget)
    assert [m.text for _, m in result.messages] == ["kept"]
    q = quarantine_table(result.quarantine).to_pylist()
    assert [r["reason"] for r in q] == [R.R_EXPIRED, R.R_EXPIRED]
    assert all("secret" not in str(v) and "old one" not in str(v) for r in q for v in r.values())
    # placed in the first kept partition, and read = ingested + quarantined still holds
    assert {r["partition_date"] for r in q} == {dt.date(2024, 3, 4)}
    ok, meta = quality.conservation(
        audit_table(result.audit_rows()),
        messages_table(result.messages),
        quarantine_table(result.quarantine),
    )
    assert ok, meta
    assert ingest(records, start_date=START).messages.__len__() == 3  # off: nothing expires


def test_expired_refs_are_salted_like_forgotten_ones(tmp_path):
    """An expired row's record_ref is a keyed hash of its position, not a plain hash anyone
    holding the old export could recompute (issue 13)."""
    from hashlib import blake2b

    from memory_pipeline.core.common.forget_list import (
        ensure_salt,
        load_forget_list,
        salted_hash,
    )

    old = msg("2024-03-01 10:00", "an old secret", order=0)
    parts = (old.source, old.conversation_id, old.source_file, old.source_ref)
    salt = ensure_salt(tmp_path)
    assert salt and ensure_salt(tmp_path) == salt  # persisted: a re-run hashes alike
    forget = load_forget_list(tmp_path)
    assert forget.salt == salt

    def expired_ref(f) -> str:
        result = ingest([old], start_date=START, retain_from=dt.date(2024, 3, 4), forget=f)
        [row] = result.quarantine
        return row.record_ref

    ref = expired_ref(forget)
    assert ref.startswith("expired:")
    unsalted = {
        blake2b("\x1f".join(parts).encode(), digest_size=16).hexdigest(),  # the old ref
        salted_hash(b"", "expired", *parts),
    }
    assert ref.removeprefix("expired:") not in unsalted
    assert ref == salted_hash(salt, "expired", *parts).join(("expired:", ""))
    assert expired_ref(load_forget_list(tmp_path)) == ref  # stable for the folder
    other = tmp_path / "other"
    ensure_salt(other)
    assert expired_ref(load_forget_list(other)) != ref  # meaningless in another folder
    with pytest.raises(ValueError, match="salt"):
        ingest([old], start_date=START, retain_from=dt.date(2024, 3, 4))
    with pytest.raises(ValueError, match="salt"):
        expired_ref(load_forget_list(tmp_path / "no-salt-yet"))
