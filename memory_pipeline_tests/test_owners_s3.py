"""Many owners on object storage: the three colliding owners of test_owners_pipeline built
through Dagster with ``output_dir = "s3://owners/deployment"`` on the moto server (127.0.0.1,
the session's ``s3`` fixture).

Asserted per owner, against the objects themselves: every object under an owner's prefix
holds no other owner's secret (Parquet decoded); search over the bucket (a reader with no
local markers, the owner found by listing ``owners/``) returns only the owner's chunks; the
owner is required; forgetting a contact of one owner leaves the other owners' objects as
they were, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import memory_pipeline
from memory_pipeline.config import load_config, owner_config
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import OwnerStore, remote_owner_ids, resolve_owner_dir
from memory_pipeline_tests.defs.test_owners_pipeline import (
    CONFIG,
    DAYS,
    OWNERS,
    SECRET,
    _write_owner,
)
from memory_pipeline_tests.pipeline_helpers import Runner, build_all, write_config

pytest.importorskip("moto")


@pytest.fixture(scope="module")
def deployment(s3, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("owners_s3")
    uri = f"{s3.bucket('owners')}/deployment"
    _write_owner(root, "alice", DAYS)
    _write_owner(root, "bob", DAYS)
    _write_owner(root, "carol", DAYS[:1])
    body = CONFIG.replace('output_dir = "out"', f'output_dir = "{uri}"\nwork_dir = "work"')
    config = write_config(root, body + '\n[representations]\ndense = ["summary"]\n')
    fs.configure_s3(s3.options())
    runner = Runner(config, uri)
    build_all(runner, DAYS)
    runner.run(["storage_report"], [])
    return runner, uri, config


def _prefix(uri: str, oid: str) -> str:
    return fs.join(uri, "owners", oid)


def _objects(prefix: str, dest: Path) -> dict[str, str]:
    """Every object under ``prefix``: relative key -> its content as text (Parquet decoded)."""
    out = {}
    for rel, _ in fs.download_tree(prefix, dest):
        path = dest / rel
        if path.suffix == ".parquet":
            out[rel] = json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
        else:
            out[rel] = path.read_bytes().decode("utf-8", "replace")
    return out


def _digest(prefix: str) -> dict[str, str]:
    return {
        rel: hashlib.sha256(fs.read_bytes(fs.join(prefix, rel))).hexdigest()
        for rel, _ in fs.list_files(prefix, recursive=True)
    }


def test_the_owners_live_under_their_prefixes(deployment):
    runner, uri, _ = deployment
    assert remote_owner_ids(uri) == sorted(OWNERS)
    assert not fs.list_files(fs.join(uri, "parquet"), recursive=True)  # nothing deployment-wide
    for oid in OWNERS:
        prefix = _prefix(uri, oid)
        assert resolve_owner_dir(uri, oid) == prefix
        assert fs.is_file(fs.join(prefix, "indexes", "CURRENT"))
        report = OwnerStore(prefix, oid).read(T.STORAGE_REPORT).to_pylist()
        raw = next(r for r in report if r["component"] == "raw_messages (parquet)")
        mine = fs.list_files(fs.join(prefix, "parquet", "raw_messages"), ".parquet")
        assert raw["bytes"] == sum(size for _, size in mine) > 0  # sized per owner


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_no_object_of_an_owner_holds_another_owners_secret(deployment, oid, tmp_path):
    _, uri, _ = deployment
    texts = _objects(_prefix(uri, oid), tmp_path / oid)
    assert any("/raw_messages/" in k for k in texts) and any("indexes/" in k for k in texts)
    dump = "\n".join(texts.values())
    assert SECRET[oid] in dump  # the scan sees the owner's own secret
    for other in OWNERS:
        if other != oid:
            assert SECRET[other] not in dump, other


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_search_over_the_bucket_answers_from_the_owner_only(deployment, oid):
    _, uri, config = deployment
    own = set(OwnerStore(_prefix(uri, oid), oid).read(T.CHUNKS).column("chunk_id").to_pylist())
    for asked in OWNERS:
        # output_dir: the bucket itself, as an app reading S3 without the build's work_dir
        result = memory_pipeline.search(
            f"locker code word {SECRET[asked]}", 5, config=config, output_dir=uri, owner=oid
        )
        assert result.chunks and {h.chunk_id for h in result.chunks} <= own
        dump = json.dumps(
            [h.to_dict() if hasattr(h, "to_dict") else str(h) for h in result.chunks],
            default=str, ensure_ascii=False,
        )
        for other in OWNERS:
            if other != oid:
                assert SECRET[other] not in dump


def test_the_owner_is_required_on_s3(deployment):
    _, uri, config = deployment
    with pytest.raises(ValueError, match="3 owners .*owners: alice, bob, carol"):
        memory_pipeline.search("Kyoto", config=config, output_dir=uri)
    with pytest.raises(ValueError, match="unknown owner 'dave'"):
        memory_pipeline.search("Kyoto", config=config, output_dir=uri, owner="dave")


def test_forget_on_s3_touches_only_that_owner(deployment):
    _, uri, config = deployment
    untouched = {oid: _digest(_prefix(uri, oid)) for oid in ("bob", "carol")}
    lines = memory_pipeline.forget("Ken", config=config, owner="alice")
    assert any("table raw_messages" in line for line in lines)
    alice = OwnerStore(_prefix(uri, "alice"), "alice")
    assert set(alice.read(T.RAW_MESSAGES).column("contact_id").to_pylist()) == {"Maria"}
    for oid, digest in untouched.items():
        assert _digest(_prefix(uri, oid)) == digest, oid
    alice_state = owner_config(load_config(config), "alice").state_root  # <state>/owners/alice
    assert fs.is_file(fs.join(alice_state, "privacy", "forget_list.json"))
    hits = memory_pipeline.search("Kyoto trip", 5, config=config, output_dir=uri, owner="alice")
    assert hits.chunks and all(h.contact_id == "Maria" for h in hits.chunks)
