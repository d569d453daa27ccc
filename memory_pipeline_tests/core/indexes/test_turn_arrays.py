"""The turn layout's arrays, computed at publish (Arrow / numpy) and stored: the same as the
loop a load ran before (``turn_layout`` + ``derive_turn_chunks``), and a stale, old or damaged
folder is never read."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.core.indexes.turn_arrays import (
    LAYOUT_META,
    compute_turn_arrays,
    derive_turn_chunks,
    load_turn_arrays,
    turn_layout,
    write_turn_arrays,
)


def _random_chunks(seed: int) -> pa.Table:
    """Sessions cut into overlapping windows (stride below the size: a message in up to
    three windows), ids of mixed length and script, chunk ids that do not sort like the
    sessions, a chunk_index out of row order, a message listed twice in one chunk, one
    listed by two sessions, and an empty chunk."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(int(rng.integers(1, 12))):
        sid = f"{'sé'[s % 2]}{rng.integers(0, 10 ** rng.integers(1, 6))}"
        n = int(rng.integers(1, 14))
        mids = [f"m{s}_{i}{'ü' * (i % 3)}" for i in range(n)]
        size, stride = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        for k, lo in enumerate(range(0, n, stride)):
            rows.append((sid, k, mids[lo : lo + size]))
    if len(rows) > 2:
        rows[0][2].append(rows[0][2][0] if rows[0][2] else "dup")  # twice in one chunk
        rows[-1][2].insert(0, rows[0][2][0] if rows[0][2] else "x")  # listed by two sessions
    rows.append(("zz-empty", 0, []))
    order = rng.permutation(len(rows))
    chunk_ids = [f"c{rng.integers(0, 10**9):09d}-{i}" for i in range(len(rows))]
    return pa.table(
        {
            "chunk_id": chunk_ids,
            "session_id": [rows[i][0] for i in order],
            "chunk_index": [rows[i][1] for i in order],
            "message_ids": [rows[i][2] for i in order],
        }
    ).sort_by("chunk_id")


def _assert_same(chunks: pa.Table) -> None:
    layout = turn_layout(chunks)
    want = derive_turn_chunks(layout)
    arrays = compute_turn_arrays(chunks)
    got_layout, got = arrays.layout(), arrays.chunks()
    assert got_layout.message_ids == layout.message_ids
    assert got_layout.session_ids == layout.session_ids
    assert list(got_layout.chunk_rows) == layout.chunk_rows
    for name in ("position", "session_length"):
        a, b = getattr(got_layout, name), getattr(layout, name)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), name
    assert got.extra_chunks == want.extra_chunks
    for name in ("session_code", "first_chunk", "last_chunk", "pair_chunk", "pair_turn"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), name


@pytest.mark.parametrize("seed", range(60))
def test_the_arrays_equal_the_loop_on_random_windows(seed):
    _assert_same(_random_chunks(seed))


def test_the_arrays_of_small_cases_equal_the_loop():
    table = pa.table(
        {
            "chunk_id": ["a", "b", "c", "d"],
            "session_id": ["B", "A", "A", "A"],
            "chunk_index": [0, 2, 0, 1],
            "message_ids": [["m9", "m1"], ["m3", "m4"], ["m1", "m2"], ["m2", "m3", "m2"]],
        }
    )
    _assert_same(table)
    _assert_same(table.slice(0, 0))  # no chunks
    _assert_same(table.slice(0, 1))
    nulls = table.set_column(2, "chunk_index", pa.array([0, None, 0, 1], pa.int64()))
    with pytest.raises(TypeError):  # the loop cannot order a null index; nor is it guessed
        compute_turn_arrays(nulls)


def test_stored_arrays_load_and_a_stale_or_old_folder_is_not_read(tmp_path):
    chunks = _random_chunks(5)
    folder = tmp_path / "layout"
    stats = write_turn_arrays(folder, chunks.sort_by("session_id"))  # any row order
    assert stats == {"turn_layout_stored": True}
    ids = chunks.column("chunk_id")
    got = load_turn_arrays(folder, ids)
    assert got is not None
    want = compute_turn_arrays(chunks)
    assert got.message_ids == want.message_ids and got.session_names == want.session_names
    assert got.pair_turn.tolist() == want.pair_turn.tolist()
    # other chunk rows than the ones the arrays were computed from: derived instead
    assert load_turn_arrays(folder, ids.slice(1)) is None
    assert load_turn_arrays(folder, pa.array(list(reversed(ids.to_pylist())))) is None
    meta = json.loads((folder / LAYOUT_META).read_text(encoding="utf-8"))
    (folder / LAYOUT_META).write_text(json.dumps(meta | {"format": 99}), encoding="utf-8")
    assert load_turn_arrays(folder, ids) is None  # a format this code does not read
    (folder / LAYOUT_META).write_text(json.dumps(meta), encoding="utf-8")
    assert load_turn_arrays(folder, ids) is not None
    np.save(folder / "pair_turn.npy", np.zeros(1, np.int64))  # damaged: wrong length
    assert load_turn_arrays(folder, ids) is None
    (folder / "pair_turn.npy").unlink()
    assert load_turn_arrays(folder, ids) is None
    assert load_turn_arrays(tmp_path / "older", ids) is None  # published before them


def test_codes_not_in_first_seen_order_are_renumbered(monkeypatch):
    """Arrow's dictionary encoding numbers values in order of appearance (checked, not
    assumed): the path taken should it not, gives the same arrays."""
    from memory_pipeline.core.indexes import turn_arrays as TA

    monkeypatch.setattr(TA, "_first_seen_order", lambda codes: False)
    for seed in range(10):
        _assert_same(_random_chunks(seed))


def test_a_load_reuses_the_turn_index_ids_when_the_files_are_the_same(tmp_path):
    """The stored ids are written as the turn index writes its doc ids: a load takes the
    index's list (no second parse) when the bytes agree, and parses its own otherwise."""
    from memory_pipeline.core.indexes.bm25 import build_index

    chunks = _random_chunks(7)
    folder = tmp_path / "layout"
    write_turn_arrays(folder, chunks)
    ids = chunks.column("chunk_id")
    layout_ids = compute_turn_arrays(chunks).message_ids
    for order, same in ((layout_ids, True), (layout_ids[::-1], False)):
        index = build_index(order, ["x"] * len(order), "regex")
        saved = index.save(tmp_path / f"turn_{same}")
        got = load_turn_arrays(folder, ids, index.doc_ids, saved / "doc_ids.json")
        assert got.message_ids == layout_ids and (got.message_ids is index.doc_ids) == same
    assert load_turn_arrays(folder, ids, index.doc_ids, tmp_path / "none").message_ids == layout_ids
