"""map_tasks on the serial runner and on a real 2-worker LocalCluster (127.0.0.1).

The cluster tests check what the distributed build relies on: results in input order
whatever order the workers finish in, a worker's exception re-raised as itself, and the
work units the pipeline ships (tokenizer batches, local-model embedding batches) giving
exactly the serial output.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from memory_pipeline.core.common.parallel import batched, imap_tasks, map_tasks, runner_workers
from memory_pipeline.core.indexes.tokenize import ParallelTokenizer, get_tokenizer


def _slow_square(x: int) -> tuple[int, int]:
    """Square, finishing in *reverse* order of x (early items sleep longest), with the pid."""
    time.sleep(0.02 * (10 - x % 10))
    return x * x, os.getpid()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise KeyError("three")
    return x


def test_serial_runner_is_plain_map_and_lazy() -> None:
    seen: list[int] = []

    def record(x: int) -> int:
        seen.append(x)
        return x + 1

    it = imap_tasks(record, [1, 2, 3])
    assert seen == []  # nothing runs before it is consumed
    assert next(it) == 2 and seen == [1]
    assert map_tasks(record, [5, 6]) == [6, 7]
    assert map_tasks(record, []) == []
    assert runner_workers(None) == 1


def test_batched_cuts_consecutive_slices() -> None:
    assert batched(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert batched([], 3) == []
    with pytest.raises(ValueError):
        batched([1], 0)


def test_runner_must_be_a_client() -> None:
    with pytest.raises(TypeError, match="distributed.Client"):
        map_tasks(str, [1], runner=object())


@pytest.fixture(scope="module")
def client():
    """Two worker processes on 127.0.0.1, closed at the end of the module."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    c = distributed.Client(cluster, timeout="60s")
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_cluster_results_in_input_order_from_both_workers(client) -> None:
    items = list(range(20))
    out = map_tasks(_slow_square, items, runner=client)
    assert [v for v, _ in out] == [x * x for x in items]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids  # computed in the worker processes
    assert len(pids) == 2
    assert runner_workers(client) == 2


def test_cluster_reraises_the_task_error_and_cancels_the_rest(client) -> None:
    with pytest.raises(KeyError, match="three"):
        map_tasks(_fail_on_three, list(range(6)), runner=client)
    assert map_tasks(_fail_on_three, [1, 2], runner=client) == [1, 2]  # client still usable


def test_parallel_tokenizer_equals_serial_on_mixed_text(client) -> None:
    texts = [
        "今日は新宿駅で友達と引っ越しの話をした",
        "We talked about moving to Shinjuku next month",
        "",
        "Yukiも来週ＢＢＱに来るって",
        "明日のランチ、どこにする？ sushi or ramen?",
    ] * 9  # 45 texts: 7 batches of 7 with the batch size below, the last one short
    for name in ("sudachi", "english", "regex"):
        tok = get_tokenizer(name)
        par = ParallelTokenizer(tok, client, batch=7)
        assert par.name == tok.name and par.params == tok.params
        assert par.tokenize_many(texts) == tok.tokenize_many(texts)


def test_local_model_batches_give_the_same_bits_on_workers(client, tmp_path) -> None:
    from memory_pipeline.core.represent.cache import ContentCache, cached_embed
    from memory_pipeline.core.represent.providers.factory import make_embedder

    texts = [f"message {i}: we should meet at the station at {i % 12} pm" for i in range(40)]
    serial_embedder = make_embedder("local")  # the default local model
    serial_embedder.max_batch = 8  # 5 batches, so order across workers matters
    dask_embedder = make_embedder("local")
    dask_embedder.max_batch = 8
    with ContentCache(tmp_path / "a.sqlite") as a, ContentCache(tmp_path / "b.sqlite") as b:
        serial = cached_embed(a, serial_embedder, texts)
        dask = cached_embed(b, dask_embedder, texts, runner=client)
        assert serial_embedder.calls == dask_embedder.calls == 5
        assert np.array_equal(serial.vectors, dask.vectors)
        assert serial.truncated == dask.truncated and serial.errors == dask.errors
        # the driver committed every batch the workers computed
        again = cached_embed(b, dask_embedder, texts, runner=client)
        assert again.hit_mask.all() and dask_embedder.calls == 5
