"""Property test (issue 13): random bytes and mutated real exports, fed to every reader.

The promise checked for every input: reading never raises anything but a ``SourceError`` (a
named whole-input problem), and only where a lone input is unusable as a whole (a LoCoMo file
that is not JSON, a RealPersonaChat file with no dialogue); an export beside a good one never
fails the source and never hides the good one; whatever is read, records read = ingested +
quarantined, and the ids and tables build (no string a UTF-8 encoder rejects survives).
Bounded (``max_examples`` per reader, no deadline) so the suite stays fast on 2 cores.
"""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_pipeline.core.common.records import Message, SourceError
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import messages_table, quarantine_table
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline_tests._env import shared_data_dir
from memory_pipeline_tests.paths import FIXTURES, SAMPLE

START = dt.date(2000, 1, 1)
PROFILE = settings(
    max_examples=60,
    deadline=None,
    database=None,  # no .hypothesis folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _rpc_lines() -> list[bytes]:
    """Real dialogue lines: the fixture's, plus a few of the shared corpus when present."""
    lines = (FIXTURES / "rpc" / "dialogues.jsonl").read_bytes().splitlines()[:4]
    shared = shared_data_dir() / "realpersonachat" / "dialogues.jsonl.gz"
    if shared.is_file():
        with gzip.open(shared, "rb") as fh:
            lines += [line.rstrip(b"\n") for line in itertools.islice(fh, 6)]
    return lines


JSON_SEEDS = [p.read_bytes() for p in sorted((SAMPLE / "line_json").glob("*/*.json"))[:6]]
TXT_SEEDS = [p.read_bytes() for p in sorted((SAMPLE / "line_txt").glob("*.txt"))]
RPC_SEEDS = _rpc_lines()
LOCOMO_SEED = (FIXTURES / "locomo" / "locomo_mini.json").read_bytes()
# Bytes that break parsers in interesting ways: escapes, quotes, separators, legacy encodings.
NASTY = [b"\\ud800", b"\\udfff", b'"', b"\t", b"\n", b"\r", b"\xff", b"\x82\xa0", b"\x00", b"25:61"]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A real export with a few byte-level edits, or plain random bytes."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=400))
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "delete", "flip", "truncate"]))
        if op == "insert":
            data[at:at] = draw(st.sampled_from(NASTY) | st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif op == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[at:]
    return bytes(data)


def _check(kind: str, path: Path, *, may_fail: bool) -> list:
    """Read the source; assert conservation and that ids and tables build.

    The corpora are read in benchmark mode (no owner): every dialogue, whoever speaks.
    """
    owner = "Yuki" if kind.startswith("line_") else None
    spec = SourceSpec(name="p", kind=kind, path=path, timezone="Asia/Tokyo", owner=owner)
    try:
        recs = list(read_source(spec))
    except SourceError:
        assert may_fail, "a bad file beside a good one failed the whole source"
        return []
    res = ingest(recs, start_date=START)
    assert sum(res.read_counts.values()) == len(recs)
    assert len(res.messages) + len(res.quarantine) == len(recs)
    messages_table(res.messages)
    quarantine_table(res.quarantine)
    return recs


def _messages(recs: list, source_file: str) -> int:
    return sum(1 for r in recs if isinstance(r, Message) and r.source_file == source_file)


@PROFILE
@given(mutated(JSON_SEEDS))
def test_line_json_never_fails_and_keeps_the_good_neighbour(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        chat = Path(tmp) / "chat"
        chat.mkdir()
        (chat / "2024-03-01.json").write_bytes(JSON_SEEDS[0])
        (chat / "2024-03-02.json").write_bytes(data)
        recs = _check("line_json", Path(tmp), may_fail=False)
        assert _messages(recs, "chat/2024-03-01.json") > 0


@PROFILE
@given(mutated(TXT_SEEDS))
def test_line_txt_never_fails_and_keeps_the_good_neighbour(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "good.txt").write_bytes(TXT_SEEDS[0])
        (Path(tmp) / "mutated.txt").write_bytes(data)
        recs = _check("line_txt", Path(tmp), may_fail=False)
        assert _messages(recs, "good.txt") > 0


@PROFILE
@given(st.lists(mutated(RPC_SEEDS), min_size=1, max_size=3))
def test_realpersonachat_never_fails_after_a_good_dialogue(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dialogues.jsonl.gz"
        path.write_bytes(gzip.compress(b"\n".join([RPC_SEEDS[0], *lines]) + b"\n"))
        recs = _check("realpersonachat", path, may_fail=False)
        assert recs


@PROFILE
@given(mutated([LOCOMO_SEED]))
def test_locomo_raises_only_source_errors(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "locomo.json"
        path.write_bytes(data)
        _check("locomo", path, may_fail=True)
