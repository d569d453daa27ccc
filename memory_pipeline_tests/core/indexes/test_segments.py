"""The dense matrix in monthly segments (core/indexes/segments.py): a refresh decodes only the
changed days, takes unchanged months over as hard links, and writes the same files as a full
rebuild."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.core.indexes import hnsw as H
from memory_pipeline.core.indexes.publish import build_dense
from memory_pipeline.core.indexes.segments import (
    SEGMENTS_FILE,
    DensePart,
    SegmentedMatrix,
    load_matrix,
)

DIM = 16
THRESHOLD = 50  # small enough that every build here has a graph


def _day_table(day: str, n: int, seed: int, rep: str = "summary") -> pa.Table:
    """``n`` chunks of ``day`` (every 4th in two pieces), unsorted, random unit vectors."""
    rng = np.random.default_rng(seed)
    rows = [(f"{day}-c{i:03d}", p) for i in range(n) for p in range(1 + (i % 4 == 0))]
    rows = [rows[i] for i in rng.permutation(len(rows))]  # stored order is not sorted
    x = rng.standard_normal((len(rows), DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return pa.table(
        {
            "chunk_id": [c for c, _ in rows],
            "representation": [rep] * len(rows),
            "piece": pa.array([p for _, p in rows], pa.int32()),
            "provider": ["test"] * len(rows),
            "model": ["m"] * len(rows),
            "dim": [DIM] * len(rows),
            "vector": pa.array(x.tolist(), pa.list_(pa.float32())),
        }
    )


class Store:
    """Partitions with a content digest and a count of the loads (what was decoded)."""

    def __init__(self, tables: dict[str, pa.Table]) -> None:
        self.tables = dict(tables)
        self.loads: list[str] = []

    def parts(self) -> list[DensePart]:
        def digest(t: pa.Table) -> str:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, t.schema) as w:
                w.write_table(t)
            return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()

        def loader(day: str):
            def load() -> pa.Table:
                self.loads.append(day)
                return self.tables[day]

            return load

        return [DensePart(d, digest(t), loader(d)) for d, t in sorted(self.tables.items())]


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``dense`` but the graph and the pieces it lacks (which depend on
    the build history) and the metadata that records it, with its sha256."""
    dense = folder / "dense"
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dense.iterdir())
        if not p.name.endswith((".usearch", H.PENDING_SUFFIX)) and p.name != "meta.json"
    }


# chunks per day and seed: a night's change stays under the graph's full-rebuild shares
DAYS = {
    "2022-07-30": (200, 1),
    "2022-07-31": (250, 2),
    "2022-08-01": (300, 3),
    "2022-08-02": (15, 4),
    "2022-09-10": (100, 5),
}


def _store() -> Store:
    return Store({d: _day_table(d, n, s) for d, (n, s) in DAYS.items()})


def test_a_refresh_decodes_only_changed_days_and_equals_a_full_rebuild(tmp_path):
    store = _store()
    v1 = tmp_path / "v1"
    s1 = build_dense(store.parts(), v1, THRESHOLD)
    assert s1["dense_days_decoded"] == 5 and s1["dense_segments_written"] == 3
    index = json.loads((v1 / "dense" / SEGMENTS_FILE).read_text())
    assert [s["file"].split(".")[1] for s in index["reps"]["summary"]] == [
        "2022-07",
        "2022-08",
        "2022-09",
    ]
    # a night: 2022-08-02 rewritten (re-chunked), 2022-09-11 new
    store.tables["2022-08-02"] = _day_table("2022-08-02", 16, 40)
    store.tables["2022-09-11"] = _day_table("2022-09-11", 12, 41)
    store.loads.clear()
    v2 = tmp_path / "v2"
    before = _files(v1)
    s2 = build_dense(store.parts(), v2, THRESHOLD, previous=v1)
    assert sorted(store.loads) == ["2022-08-02", "2022-09-11"]  # nothing else decoded
    assert (s2["dense_segments_linked"], s2["dense_segments_written"]) == (1, 2)
    assert _files(v1) == before  # the previous version is only read
    july = next(p for p in (v2 / "dense").iterdir() if ".2022-07." in p.name)
    assert july.stat().st_ino == (v1 / "dense" / july.name).stat().st_ino  # a hard link
    meta = json.loads((v2 / "dense" / "meta.json").read_text())["summary"]
    # 16 chunks, every 4th in two pieces, for each new or rewritten day
    old_aug2, new_aug2, sep11 = 15 + 4, 16 + 4, 12 + 3
    # a small change: the graph's merge is deferred, the new pieces listed beside it
    assert (meta["ann"]["build"], meta["ann"]["pending"]) == ("deferred", new_aug2 + sep11)
    assert (meta["ann"]["added"], meta["ann"]["removed"]) == (new_aug2 + sep11, old_aug2)
    # any build order equals a full rebuild: the same segment files, ids and keys
    scratch = tmp_path / "scratch"
    build_dense(store.parts(), scratch, THRESHOLD)
    assert _files(v2) == _files(scratch)
    # the matrix read back is every day's rows in date order, each day in (chunk, piece) order
    want, want_ids = [], []
    for day in sorted(store.tables):
        t = store.tables[day].sort_by([("chunk_id", "ascending"), ("piece", "ascending")])
        want.append(np.array(t.column("vector").to_pylist(), dtype=np.float32))
        want_ids += t.column("chunk_id").to_pylist()
    matrix = load_matrix(v2 / "dense", "summary")
    assert isinstance(matrix, SegmentedMatrix) and len(matrix) == meta["count"]
    assert np.array_equal(np.asarray(matrix), np.concatenate(want))
    ids = json.loads((v2 / "dense" / "summary.ids.json").read_text())
    assert ids == want_ids


def test_a_night_without_change_links_every_segment(tmp_path):
    store = _store()
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    build_dense(store.parts(), v1, THRESHOLD)
    store.loads.clear()
    s2 = build_dense(store.parts(), v2, THRESHOLD, previous=v1)
    assert store.loads == [] and s2["dense_days_decoded"] == 0
    assert (s2["dense_segments_linked"], s2["dense_segments_written"]) == (3, 0)
    meta = json.loads((v2 / "dense" / "meta.json").read_text())["summary"]
    assert (meta["ann"]["build"], meta["ann"]["added"], meta["ann"]["removed"]) == (
        "deferred",
        0,
        0,
    )
    assert _files(v2) == _files(v1)
    graph = v2 / "dense" / "summary.usearch"  # nothing to merge: the graph is linked too
    assert graph.stat().st_ino == (v1 / "dense" / "summary.usearch").stat().st_ino


def test_a_changed_vector_under_the_same_key_is_replaced_in_the_graph(tmp_path):
    store = _store()
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    build_dense(store.parts(), v1, THRESHOLD)
    t = store.tables["2022-08-01"]
    vectors = np.array(t.column("vector").to_pylist(), dtype=np.float32)
    vectors[0] = -vectors[0]  # one chunk re-embedded: same chunk_id and piece, new vector
    store.tables["2022-08-01"] = t.set_column(
        t.column_names.index("vector"),
        "vector",
        pa.array(vectors.tolist(), t.schema.field("vector").type),
    )
    build_dense(store.parts(), v2, THRESHOLD, previous=v1)
    ann = json.loads((v2 / "dense" / "meta.json").read_text())["summary"]["ann"]
    assert (ann["added"], ann["removed"]) == (1, 1)


def test_a_previous_version_with_a_missing_segment_is_decoded_again(tmp_path):
    store = _store()
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    build_dense(store.parts(), v1, THRESHOLD)
    next((v1 / "dense").glob("summary.2022-08.*.npy")).unlink()
    store.loads.clear()
    s2 = build_dense(store.parts(), v2, THRESHOLD, previous=v1)
    assert sorted(store.loads) == sorted(DAYS) and s2["dense_segments_linked"] == 0
    scratch = tmp_path / "scratch"
    build_dense(store.parts(), scratch, THRESHOLD)
    assert _files(v2) == _files(scratch)


def test_a_chunk_in_two_partitions_falls_back_to_one_sorted_segment(tmp_path):
    a = _day_table("2022-07-30", 5, 1)
    b = _day_table("2022-08-01", 5, 2)
    # the same chunk id in both days (a data defect): its rows would not be consecutive
    b = b.set_column(0, "chunk_id", pa.array(["2022-07-30-c000"] * b.num_rows))
    b = b.set_column(2, "piece", pa.array(list(range(10, 10 + b.num_rows)), pa.int32()))
    stats = build_dense(Store({"2022-07-30": a, "2022-08-01": b}).parts(), tmp_path, 10_000)
    dense = tmp_path / "dense"
    assert [p.name for p in dense.glob("summary*.npy") if "keys" not in p.name] == ["summary.npy"]
    ids = json.loads((dense / "summary.ids.json").read_text())
    assert ids == sorted(ids) and stats["summary_vectors"] == a.num_rows + b.num_rows


def test_segmented_matrix_reads_like_one_array():
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((n, 4)).astype(np.float32) for n in (3, 0, 5, 2)]
    whole = np.concatenate(parts)
    m = SegmentedMatrix(parts, 4)
    q = rng.standard_normal(4).astype(np.float32)
    assert m.shape == whole.shape and len(m) == 10
    assert np.allclose(m @ q, whole @ q)
    rows = np.array([9, 0, 4, 3, 3, 7])
    assert np.array_equal(m[rows], whole[rows]) and np.array_equal(m[5], whole[5])
    assert np.array_equal(np.asarray(m), whole)
    with pytest.raises(IndexError):
        m[np.array([10])]


def test_keys_match_the_piece_keys_of_the_rows(tmp_path):
    store = _store()
    build_dense(store.parts(), tmp_path, THRESHOLD)
    dense = tmp_path / "dense"
    ids = json.loads((dense / "summary.ids.json").read_text())
    keys = np.load(dense / f"summary{H.KEYS_SUFFIX}")
    pieces = [i - ids.index(c) for i, c in enumerate(ids)]
    assert np.array_equal(keys, H.piece_keys(ids, pieces))


# ------------------------------------------------------ whole-column helpers vs their references


def _grouped_reference(ids: list[str]) -> bool:
    runs = 1 + sum(1 for a, b in zip(ids, ids[1:], strict=False) if a != b) if ids else 0
    return runs == len(set(ids))


def _split_reference(ids: list[str]) -> int:
    return sum(
        1 for i in range(1, len(ids)) if ids[i] == ids[i - 1] and (i == 1 or ids[i - 2] != ids[i])
    )


@pytest.mark.parametrize("seed", range(40))
def test_grouped_and_split_count_equal_the_row_by_row_references(seed: int) -> None:
    """The refresh counts runs of piece ids on whole columns; the row-by-row loops they
    replaced are the reference (short lists, repeats, runs at both ends, interleavings)."""
    from memory_pipeline.core.indexes.publish_dense import _split_chunks
    from memory_pipeline.core.indexes.segments import _grouped

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 12))
    ids = [f"c{int(rng.integers(0, 4))}" for _ in range(n)]
    if seed % 3 == 0:  # grouped on purpose: each id's pieces consecutive
        ids = sorted(ids)
    assert _grouped(ids) == _grouped_reference(ids)
    assert _split_chunks(ids) == _split_reference(ids)


def test_save_rows_writes_the_bytes_np_save_writes(tmp_path: Path) -> None:
    """A segment is written block by block (memory-mapped and float64 blocks included,
    empty ones too): byte for byte the file concatenate + astype + np.save wrote."""
    from memory_pipeline.core.indexes.segments import _save_rows

    rng = np.random.default_rng(7)
    np.save(tmp_path / "m.npy", rng.random((5, 8), dtype=np.float32))
    mapped = np.load(tmp_path / "m.npy", mmap_mode="r")
    for blocks in (
        [mapped, rng.random((3, 8)), np.zeros((0, 8), np.float32)],
        [np.zeros((0, 8), np.float32)],
        [rng.random((300, 8), dtype=np.float32)[::2]],  # not contiguous
    ):
        _save_rows(tmp_path / "a.npy", blocks, 8)
        np.save(tmp_path / "b.npy", np.concatenate(blocks).astype(np.float32))
        assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


def test_sorted_by_keeps_a_sorted_table_and_sorts_any_other() -> None:
    """``sorted_by`` returns the table itself when it is in order (no copy of the texts)
    and exactly ``sort_by`` otherwise (unsorted, ties, nulls, empty)."""
    from memory_pipeline.core.indexes.publish import sorted_by

    ordered = pa.table({"k": ["a", "b", "b", "c"], "v": [1, 2, 3, 4]})
    assert sorted_by(ordered, "k") is ordered
    for table in (
        pa.table({"k": ["b", "a", "c", "a"], "v": [1, 2, 3, 4]}),
        pa.table({"k": ["a", None, "b"], "v": [1, 2, 3]}),
        pa.table({"k": [None], "v": [1]}),
        pa.table({"k": pa.array([], pa.string()), "v": pa.array([], pa.int64())}),
    ):
        assert sorted_by(table, "k").equals(table.sort_by("k"))
