"""The owners proof's search probe picks a line the search can find by its words alone.

Two owners of the 60-owner proof run got no hit for their probe: the probe was the longest
line of their first chunk, and those lines held a time expression that ``search`` parses as
a hard filter (「夜」: hours 18-4, for sessions in the afternoon; 「8年前」: the year 2014,
for 2022 sessions), so every chunk was filtered out. The probe must skip such lines (and
lines with fewer than 3 content tokens).
"""

from __future__ import annotations

import datetime as dt

from benchmarks.bench_owners_proof import MIN_PROBE_TOKENS, _term
from memory_pipeline.core.indexes.tokenize import CjkBigramTokenizer
from memory_pipeline.core.retrieval.timeexpr import parse_query

NOW = dt.datetime(2022, 8, 23, 15, 41)


def _has_time(text: str) -> bool:
    return bool(parse_query(text, now=NOW, speakers=["BH", "AN"]).filters)


TOKENIZE = CjkBigramTokenizer().tokenize

# bh's first chunk in the proof run, shortened: the longest line names 「夜」
CHUNK_BH = "\n".join([
    "[2022-08-08 14:31] BH: よろしくお願いします！",
    "[2022-08-08 14:32] AN: ソーメンいいですね。暑い日にぴったりです。",
    "[2022-08-08 14:32] BH: そうですね。オムライスは夜にしか作ったことないです。"
    "ちょっと面倒だと思ってしまいます。",
    "[2022-08-08 14:33] AN: 我が家は今夏休み中なので、子供の好きな食べモノを作る日々です。",
])
# bn's: 「8年前」
CHUNK_BN = "\n".join([
    "[2022-08-08 21:43] BN: はい。",
    "[2022-08-08 21:44] BN: そうなんですね。私も8年前くらいまで、夫と社宅にいました。"
    "懐かしいなぁ。",
    "[2022-08-08 21:45] CD: 社宅の近くに大きな公園があって、犬の散歩によく行きました。",
])


def test_the_probe_skips_a_line_with_a_time_expression() -> None:
    for chunk in (CHUNK_BH, CHUNK_BN):
        longest = max(
            (ln.split(": ", 1)[1] for ln in chunk.splitlines()), key=len
        )[:40]
        assert _has_time(longest)  # the old choice: filtered out by the search itself
        term = _term([chunk], TOKENIZE, _has_time)
        assert term in chunk
        assert not _has_time(term)
        assert len(TOKENIZE(term)) >= MIN_PROBE_TOKENS


def test_the_probe_skips_a_line_of_too_few_tokens_and_looks_past_the_first_chunk() -> None:
    first = "[2022-08-08 14:31] BH: 昨日の夜のことです。\n[2022-08-08 14:31] BH: はい"
    line = "山登りに行くのが好きで、頂上からの景色が最高です。富士山にもいつか登りたいです。"
    second = f"[2022-08-09 10:00] BH: {line}"
    assert len(TOKENIZE("はい")) < MIN_PROBE_TOKENS
    assert _term([first, second], TOKENIZE, _has_time) == line[:40]


def test_no_line_qualifies_falls_back_to_the_longest_line() -> None:
    chunk = "[2022-08-08 14:31] BH: 昨日の夜\n[2022-08-08 14:31] BH: はい"
    assert _term([chunk], TOKENIZE, _has_time) == "昨日の夜"
