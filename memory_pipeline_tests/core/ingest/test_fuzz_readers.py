"""Property test over the readers: whatever a source folder holds, ingest never raises
anything but ``SourceError`` (the documented one-line error), accounts for every file, and
its counts reconcile (records read = ingested + quarantined; for JSON day files, exactly
the records the files hold). Both ingest entrances (records, columns with the parsed-record
cache) must agree.

Inputs: random bytes, random JSON built from key/value pairs (so keys can repeat), deep
nesting, integers far beyond 64 bits, lone surrogate escapes and odd Unicode, values of the
wrong type, and LINE text exports with random line endings and damaged bytes. Derandomized,
so CI runs the same examples every time.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.ingest.sources.base import json_depth_exceeds
from memory_pipeline.core.ingest.stage import discover_dates, read_all, read_all_tables

# a failing example's repr can be large (deep nesting): not worth a warning
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

START = dt.date(2000, 1, 1)
PROFILE = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- JSON built as text, so a key may repeat ------------------------------------------------


class Obj(list):
    """An object as its (key, value) pairs, duplicates allowed."""


def dump(v: object) -> str:
    if isinstance(v, Obj):
        return "{" + ", ".join(f"{json.dumps(k)}: {dump(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dump(x) for x in v) + "]"
    if isinstance(v, Raw):
        return v.text
    return json.dumps(v, ensure_ascii=False)


class Raw:
    """JSON text inserted as is (a lone surrogate escape, a 5,000-digit number, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text


ODD_TEXT = st.text(
    st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S", "Z", "Cc", "Cf")),
    max_size=12,
) | st.sampled_from(["", " ", "ジョゼ", "ジョゼ", "ｋｅｎ", "\u2028", "\r\n", "\u200b"])
RAW = st.sampled_from(
    [
        '"\\ud800"',
        '"a\\udc00b"',
        "9" * 5000,
        "[" * 150 + "]" * 150,
        "[" * 99 + "]" * 99,
        str(2**64),
        str(-(2**63) - 1),
        "1e999",
        "-0.0",
    ]
).map(Raw)
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | ODD_TEXT
    | RAW
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(st.tuples(st.sampled_from(["a", "text", "time"]), inner), max_size=3).map(Obj)
    ),
    max_leaves=8,
)
TIME = st.sampled_from(["10:00", "23:59:59", "00:00", "25:61", "NaT", "", "7:05"]) | VALUE
ENTRY_KEYS = ["time", "sender", "text", "type", "source_order"]


@st.composite
def entry(draw) -> object:
    if draw(st.integers(0, 9)) == 0:
        return draw(VALUE)
    pairs = [
        ("time", draw(TIME)),
        ("sender", draw(ODD_TEXT | VALUE)),
        ("text", draw(ODD_TEXT | VALUE)),
    ]
    if draw(st.booleans()):
        pairs.append(("source_order", draw(st.integers(-1, 2**65) | VALUE)))
    if draw(st.booleans()):
        pairs.append((draw(st.sampled_from(ENTRY_KEYS)), draw(VALUE)))  # a repeated key
    return Obj(draw(st.permutations(pairs)))


@st.composite
def day_document(draw) -> tuple[str, int]:
    """(JSON text, the records it holds: entries of every messages array, else 1)."""
    arrays = draw(st.lists(st.lists(entry(), max_size=4), min_size=1, max_size=2))
    pairs: list = [("messages", a) for a in arrays]
    keys = st.sampled_from(["contact", "conversation_id", "timezone", "date"])
    header = ODD_TEXT | VALUE | st.just("Asia/Tokyo")
    pairs.extend((key, draw(header)) for key in draw(st.lists(keys, max_size=3)))
    pairs = draw(st.permutations(pairs))
    return dump(Obj(pairs)), sum(len(a) for a in arrays)


def line_json_count(text: str, records: int) -> int:
    """Records the file holds as the readers count them: one for a file that is not an
    object with a messages array (or too deep / unreadable), else every entry of every
    messages array, at least one (an empty file is a ``no_records`` row)."""
    if json_depth_exceeds(text):  # the documented limit (MAX_JSON_DEPTH): one row
        return 1
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return 1
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return 1
    return max(records, 1)


@st.composite
def txt_export(draw) -> bytes:
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines = [
        draw(st.sampled_from(["[LINE] Chat history with Kim", "[LINE] 健太とのトーク履歴", ""]))
    ]
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 4))
        if kind == 0:
            lines.append(draw(st.sampled_from(["2024/03/01(金)", "Sat, 3/2/2024", "0001/01/01"])))
        elif kind == 1:
            lines.append('10:01\tKim\t"two' + eol + 'lines"')
        else:
            clock = draw(st.sampled_from(["10:00", "7:05 PM", "25:61", "00:00"]))
            lines.append(f"{clock}\t{draw(ODD_TEXT)}\t{draw(ODD_TEXT)}")
    data = eol.join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\x82\xa0", b"\xe3\x81", b"\x93\xfa"]))
        data += data[at:]
    return data


# -- the invariant ----------------------------------------------------------------------------


def check(spec: SourceSpec, cache: Path, expected: int | None = None) -> None:
    """Run both entrances; only SourceError may escape; counts reconcile and agree."""
    try:
        days = sorted({START, *discover_dates([spec], START)})
    except SourceError:
        return
    got = []
    for run in (
        lambda: read_all([spec], days, START),
        lambda: read_all_tables([spec], days, START, cache_dir=cache),
        lambda: read_all_tables([spec], days, START, cache_dir=cache),  # warm
    ):
        try:
            res = run()
        except SourceError:
            got.append("SourceError")
            continue
        n_msgs = len(res.messages) if isinstance(res.messages, list) else res.messages.num_rows
        read = sum(res.read_counts.values())
        assert read == n_msgs + len(res.quarantine)
        if expected is not None:
            assert read == expected
        got.append((n_msgs, sorted(q.reason for q in res.quarantine)))
    assert got[0] == got[1] == got[2], got


def spec_for(kind: str, path: Path) -> SourceSpec:
    return SourceSpec(name="s", kind=kind, path=path, timezone="Asia/Tokyo", owner="Yuki")


@PROFILE
@given(docs=st.lists(day_document(), min_size=1, max_size=3), noise=st.binary(max_size=40))
def test_line_json_folders_never_crash_and_reconcile(docs, noise):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        (src / "chat").mkdir(parents=True)
        expected = 0
        for i, (text, records) in enumerate(docs):
            (src / "chat" / f"2024-03-0{i + 1}.json").write_text(text, "utf-8", "surrogatepass")
            expected += line_json_count(text, records)
        (src / "noise").mkdir()
        (src / "noise" / "2024-03-01.json").write_bytes(noise)
        expected += 1 if not noise.strip() or _not_records(noise) else _entries(noise)
        check(spec_for("line_json", src), Path(tmp) / "cache", expected)


def _not_records(raw: bytes) -> bool:
    if json_depth_exceeds(raw):
        return True
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return True
    return not (isinstance(doc, dict) and isinstance(doc.get("messages"), list))


def _entries(raw: bytes) -> int:
    return max(1, len(json.loads(raw)["messages"]))


@PROFILE
@given(exports=st.lists(txt_export() | st.binary(max_size=60), min_size=1, max_size=3))
def test_line_txt_folders_never_crash_and_account_for_every_file(exports):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for i, data in enumerate(exports):
            (src / f"chat{i}.txt").write_bytes(data)
        spec = spec_for("line_txt", src)
        check(spec, Path(tmp) / "cache")
        try:
            res = read_all([spec], [START, *discover_dates([spec], START)], START)
        except SourceError:
            return
        files = {m.source_file for _, m in res.messages} | {q.source_file for q in res.quarantine}
        assert files == {f"chat{i}.txt" for i in range(len(exports))}


@PROFILE
@given(
    lines=st.lists(
        st.builds(
            lambda did, utts, extra: dump(
                Obj(
                    [
                        ("dialogue_id", did),
                        ("interlocutors", ["Yuki", "B"]),
                        *extra,
                        ("utterances", utts),
                    ]
                )
            ),
            st.integers(0, 2**65) | VALUE,
            st.lists(
                st.builds(
                    lambda uid, ts, text: Obj(
                        [
                            ("utterance_id", uid),
                            ("interlocutor_id", "B"),
                            ("text", text),
                            ("timestamp", ts),
                        ]
                    ),
                    st.integers(-1, 2**65),
                    st.sampled_from(["2024-03-01T10:00:00", "0001-01-01T00:00:00", "NaT", "x"]),
                    ODD_TEXT,
                ),
                max_size=3,
            ),
            st.lists(
                st.tuples(st.sampled_from(["utterances", "x", "dialogue_id"]), VALUE), max_size=1
            ),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_realpersonachat_never_crashes_and_both_paths_agree(lines):
    import gzip

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        body = "\n".join(lines).encode("utf-8", "surrogatepass")
        (src / "dialogues.jsonl.gz").write_bytes(gzip.compress(body))
        check(spec_for("realpersonachat", src), Path(tmp) / "cache")
