"""Outputs on S3-compatible object storage, against a real S3 server on 127.0.0.1 (moto).

What must hold on object storage as on disk: a partition write is all-or-nothing (an
encoding failure or a connection cut mid-upload leaves the old object and nothing else), an
index version becomes visible only when its pointer is written last, the Dagster build of
the sample produces the same tables as on disk, search answers from S3 as from disk, and
forgetting a contact removes their bytes from every object (and every local copy).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import memory_pipeline
from memory_pipeline.config import ConfigError, load_config, parse_config, with_output
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import storage as storage_mod
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.indexes import publish as P
from memory_pipeline.core.retrieval.searcher import Searcher
from memory_pipeline.defs.resources import ObjectStoreResource
from memory_pipeline_tests.defs.test_forget_pipeline import (
    CONTACT,
    DAYS,
    _full_build,
    _project,
    scan,
)
from memory_pipeline_tests.pipeline_helpers import Runner
from memory_pipeline_tests.s3_server import CutProxy, S3Server  # s3: conftest.py


@pytest.fixture
def bucket(s3: S3Server, request) -> str:
    """A fresh prefix per test in one bucket: s3://tests/<test name>."""
    fs.configure_s3(s3.options())
    return f"{s3.bucket('tests')}/{request.node.name}"


def _keys(s3: S3Server, uri: str) -> dict[str, int]:
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    return s3.objects(bucket, prefix)


def _day(i: int) -> dt.date:
    return dt.date(2024, 3, 1) + dt.timedelta(days=i)


def _raw(n: int, tag: str) -> pa.Table:
    schema = T.RAW_MESSAGES.schema
    assert schema is not None
    cols = {}
    for f in schema:
        if f.name == "message_id":
            cols[f.name] = pa.array([f"{tag}-{i}" for i in range(n)], f.type)
        elif f.name == "text":
            cols[f.name] = pa.array([f"{tag} text {i}" for i in range(n)], f.type)
        else:
            cols[f.name] = pa.nulls(n, f.type)
    return pa.table(cols, schema=schema)


# -- the filesystem layer and the table store -------------------------------------------


def test_store_round_trip_on_s3(s3, bucket):
    store = TableStore(bucket)
    assert store.dates(T.RAW_MESSAGES) == [] and not store.has(T.RAW_MESSAGES, _day(0))
    store.write(T.RAW_MESSAGES, _raw(3, "a"), _day(0))
    store.write(T.RAW_MESSAGES, _raw(2, "b"), _day(2))
    assert isinstance(store.path(T.RAW_MESSAGES, _day(0)), str)
    assert store.path(T.RAW_MESSAGES, _day(0)).startswith("s3://tests/")
    assert store.dates(T.RAW_MESSAGES) == [_day(0), _day(2)]
    assert store.has(T.RAW_MESSAGES, _day(2)) and not store.has(T.RAW_MESSAGES, _day(1))
    got = store.read(T.RAW_MESSAGES)
    assert got.schema == T.RAW_MESSAGES.schema
    assert got["message_id"].to_pylist() == ["a-0", "a-1", "a-2", "b-0", "b-1"]
    assert store.read(T.RAW_MESSAGES, [_day(2), _day(5)], columns=["text"]).num_rows == 2
    keys = _keys(s3, bucket)
    assert sorted(k.rsplit("/", 1)[-1] for k in keys if k.endswith(".parquet")) == [
        "2024-03-01.parquet",
        "2024-03-03.parquet",
    ]
    assert [n for _, n in store.files(T.RAW_MESSAGES)] == [
        keys[k] for k in sorted(keys) if k.endswith(".parquet")
    ]
    assert store.delete(T.RAW_MESSAGES, _day(0)) and not store.delete(T.RAW_MESSAGES, _day(0))
    assert store.dates(T.RAW_MESSAGES) == [_day(2)]


def test_an_encoding_failure_leaves_the_old_partition_and_no_other_object(s3, bucket, monkeypatch):
    store = TableStore(bucket)
    store.write(T.RAW_MESSAGES, _raw(3, "old"), _day(0))
    before = _keys(s3, bucket)
    real = pq.write_table

    def half_then_fail(table, where, **kw):
        real(table.slice(0, 1), where, **kw)  # some bytes are out...
        raise OSError("disk full while encoding")  # ...then the writer dies

    monkeypatch.setattr(storage_mod.pq, "write_table", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        store.write(T.RAW_MESSAGES, _raw(5, "new"), _day(0))
    monkeypatch.undo()
    assert _keys(s3, bucket) == before
    assert store.read(T.RAW_MESSAGES)["message_id"].to_pylist() == ["old-0", "old-1", "old-2"]


@pytest.mark.parametrize("path", ["single_put", "temp_and_copy"])
def test_a_connection_cut_mid_upload_leaves_the_old_object(s3, bucket, monkeypatch, path):
    """A TCP proxy drops the connection after 4 kB of a 300 kB upload, on every retry:
    the write fails and the old object is still the whole object under its name, whether
    the payload goes as one stream or through a temp key and a server-side copy."""
    if path == "temp_and_copy":
        monkeypatch.setattr(fs, "SINGLE_PUT_MAX", 1024)
    store = TableStore(bucket)
    store.write(T.RAW_MESSAGES, _raw(3, "old"), _day(0))
    before = _keys(s3, bucket)
    proxy = CutProxy(s3.endpoint, limit=4096)
    try:
        fs.configure_s3(s3.options(proxy.endpoint))
        proxy.cut = True
        big = _raw(3000, "new-" + "x" * 80)
        with pytest.raises(OSError):
            store.write(T.RAW_MESSAGES, big, _day(0))
        proxy.cut = False
        # the temp key of the copy path was removed (through the same proxy, uncut)
        assert _keys(s3, bucket) == before
        assert store.read(T.RAW_MESSAGES).num_rows == 3
        store.write(T.RAW_MESSAGES, big, _day(0))  # the network is back: the write lands
        assert store.read(T.RAW_MESSAGES).num_rows == 3000
    finally:
        proxy.close()
        fs.configure_s3(s3.options())


def test_text_and_tree_helpers(s3, bucket, tmp_path):
    fs.write_text_atomic(fs.join(bucket, "a", "x.txt"), "één")
    assert fs.read_text(fs.join(bucket, "a", "x.txt")) == "één"
    with pytest.raises(FileNotFoundError):
        fs.read_text(fs.join(bucket, "a", "missing.txt"))
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "t" / "sub" / "m.npy").write_bytes(b"\x00" * 10)
    (tmp_path / "t" / "top.json").write_text("{}")
    sent = fs.upload_tree(tmp_path / "t", fs.join(bucket, "tree"))
    assert sent == [("sub/m.npy", 10), ("top.json", 2)]
    assert fs.list_dirs(bucket) == ["a", "tree"]
    got = fs.download_tree(fs.join(bucket, "tree"), tmp_path / "back")
    assert got == sent and (tmp_path / "back" / "sub" / "m.npy").read_bytes() == b"\x00" * 10
    fs.delete_tree(fs.join(bucket, "tree"))
    assert not fs.exists(fs.join(bucket, "tree")) and fs.exists(fs.join(bucket, "a"))


# -- publishing index versions ------------------------------------------------------------


def _version(root: str, files: dict[str, bytes]) -> Path:
    v = P.new_version(root)
    for rel, data in files.items():
        (v / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / rel).write_bytes(data)
    return v


def _fresh_reader(root: str) -> None:
    """Forget this process's local copies: the next read downloads from the store."""
    shutil.rmtree(fs.cache_dir(root) / "versions", ignore_errors=True)


def test_publish_writes_the_pointer_last_and_readers_follow_it(s3, bucket):
    output = bucket
    root = P.index_root(output)
    assert P.current_version(output) is None
    v1 = _version(root, {"bm25/raw_text/a.json": b"one", "chunks.parquet": b"1" * 20})
    P.publish(root, v1)
    _fresh_reader(root)
    got = P.current_version(output)
    assert got is not None and got.name == v1.name
    assert (got / "bm25" / "raw_text" / "a.json").read_bytes() == b"one"
    manifest = json.loads(fs.read_text(fs.join(root, v1.name, P.MANIFEST)))
    assert manifest["files"] == {"bm25/raw_text/a.json": 3, "chunks.parquet": 20}
    assert fs.read_text(fs.join(root, P.CURRENT)) == v1.name


def test_a_publish_interrupted_before_the_pointer_leaves_the_old_version_visible(
    s3, bucket, monkeypatch
):
    root = P.index_root(bucket)
    v1 = _version(root, {"chunks.parquet": b"v1"})
    P.publish(root, v1)
    v2 = _version(root, {"chunks.parquet": b"v2", "dense/raw_text.npy": b"2" * 100})
    real = fs.write_text_atomic

    def crash_at_pointer(location, text):
        if str(location).endswith("/" + P.CURRENT):
            raise OSError("killed before the pointer")
        real(location, text)

    monkeypatch.setattr(fs, "write_text_atomic", crash_at_pointer)
    with pytest.raises(OSError, match="before the pointer"):
        P.publish(root, v2)
    monkeypatch.undo()
    # v2 is fully uploaded (manifest too) but CURRENT still names v1
    assert fs.is_file(fs.join(root, v2.name, P.MANIFEST))
    _fresh_reader(root)
    got = P.current_version(bucket)
    assert got is not None and got.name == v1.name
    assert (got / "chunks.parquet").read_bytes() == b"v1"


def test_an_upload_cut_halfway_is_never_read(s3, bucket, monkeypatch):
    root = P.index_root(bucket)
    P.publish(root, _version(root, {"chunks.parquet": b"v1"}))
    v2 = _version(root, {"a.bin": b"a", "b.bin": b"b", "c.bin": b"c"})
    real, calls = fs._put, []

    def die_on_second_file(filesystem, path, data):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("connection reset")
        real(filesystem, path, data)

    monkeypatch.setattr(fs, "_put", die_on_second_file)
    with pytest.raises(OSError, match="reset"):
        P.publish(root, v2)
    monkeypatch.undo()
    assert fs.is_file(fs.join(root, v2.name, "a.bin"))  # a partial version is in the store
    assert not fs.is_file(fs.join(root, v2.name, P.MANIFEST))
    _fresh_reader(root)
    assert (P.current_version(bucket) / "chunks.parquet").read_bytes() == b"v1"
    # even a pointer naming it (a bug, a hand edit) does not make it readable
    fs.write_text_atomic(fs.join(root, P.CURRENT), v2.name)
    _fresh_reader(root)
    assert P.current_version(bucket) is None


def test_a_copy_that_does_not_match_the_manifest_is_refused(s3, bucket):
    root = P.index_root(bucket)
    v1 = _version(root, {"chunks.parquet": b"v1"})
    P.publish(root, v1)
    fs.write_bytes_atomic(fs.join(root, v1.name, "chunks.parquet"), b"tampered!")
    _fresh_reader(root)
    with pytest.raises(OSError, match="does not match its manifest"):
        P.current_version(bucket)
    assert not (fs.cache_dir(root) / "versions" / v1.name).exists()


def test_publish_keeps_the_last_two_complete_versions(s3, bucket):
    root = P.index_root(bucket)
    names = []
    for i in range(4):
        v = _version(root, {"chunks.parquet": str(i).encode()})
        names.append(v.name)
        P.publish(root, v)
    assert fs.list_dirs(root) == sorted(names[-2:])
    # the local copies follow: only what is published stays on this machine
    assert sorted(p.name for p in (fs.cache_dir(root) / "versions").iterdir()) == sorted(names[-2:])


def test_local_publish_is_unchanged(tmp_path):
    root = P.index_root(tmp_path)
    assert isinstance(root, Path)
    v1 = P.new_version(root)
    assert v1.parent == root  # built in place, no staging folder
    P.publish(root, v1)
    assert (root / P.CURRENT).read_text() == v1.name
    assert not (root / v1.name / P.MANIFEST).exists()
    assert P.current_version(tmp_path) == v1


# -- configuration and the Dagster resource -----------------------------------------------


def _raw_config(output: str, **extra: str) -> dict:
    return {
        "pipeline": {
            "owner": "Yuki",
            "timezone": "Asia/Tokyo",
            "start_date": "2024-03-01",
            "output_dir": output,
            **extra,
        },
        "sources": [{"name": "s", "kind": "line_json", "path": "."}],
    }


def test_config_reads_an_s3_output_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(fs.CACHE_ENV, str(tmp_path / "cache"))
    cfg = parse_config(_raw_config("s3://bucket/some/prefix/"), base_dir=tmp_path)
    assert cfg.output_uri == "s3://bucket/some/prefix"
    assert cfg.storage_root == "s3://bucket/some/prefix"
    assert cfg.output_dir.is_relative_to(tmp_path / "cache")  # the local working folder
    assert cfg.warehouse_path.parent == cfg.output_dir
    assert cfg.dossiers_path == "s3://bucket/some/prefix/dossiers"
    work = parse_config(_raw_config("s3://bucket/p", work_dir="w"), base_dir=tmp_path)
    assert work.output_dir == (tmp_path / "w").resolve()
    env = {"MEMORY_PIPELINE_OUTPUT_DIR": "s3://other/x"}
    assert parse_config(_raw_config("out"), base_dir=tmp_path, env=env).output_uri == (
        "s3://other/x"
    )
    local = parse_config(_raw_config("out"), base_dir=tmp_path)
    assert local.output_uri is None and local.storage_root == (tmp_path / "out").resolve()
    assert local.dossiers_path == (tmp_path / "dossiers").resolve()
    with pytest.raises(ConfigError, match=r"output_dir: 's3://B_ad/x' does not name a valid"):
        parse_config(_raw_config("s3://B_ad/x"), base_dir=tmp_path)
    assert with_output(local, "s3://bkt/q").storage_root == "s3://bkt/q"
    assert with_output(with_output(local, "s3://bkt/q"), tmp_path / "o").output_uri is None


def test_object_store_resource_takes_env_vars_only_when_set():
    empty = ObjectStoreResource.from_env({})
    assert empty.options() == fs.S3Options()
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "k"}
    res = ObjectStoreResource.from_env(env)
    # the fields are EnvVars (resolved by Dagster at run time, never stored as values)
    assert isinstance(res.endpoint_url, dg.EnvVar)
    assert isinstance(res.access_key_id, dg.EnvVar) and res.secret_access_key is None


# -- the whole pipeline on S3 -------------------------------------------------------------


class S3Build:
    """The sample built through Dagster with its output on s3://sample/<name>."""

    def __init__(self, s3: S3Server, root: Path, name: str) -> None:
        self.uri = f"{s3.bucket('sample')}/{name}"
        # in memory: no test here reads the run history, and storing a build's events in
        # SQLite files costs about as much as the build (the assets never read the instance)
        self.instance = dg.DagsterInstance.ephemeral()
        self.config = _project(root, without_sam=False)
        # the configuration names the bucket, as a deployment's would
        text = self.config.read_text(encoding="utf-8")
        assert 'output_dir = "data/output"' in text
        self.config.write_text(
            text.replace(
                'output_dir = "data/output"',
                f'output_dir = "{self.uri}"\nwork_dir = "work"',
            ),
            encoding="utf-8",
        )
        self.runner = Runner(self.config, self.uri)
        self.cfg = self.runner.cfg
        self.s3 = s3

    def mirror(self, dest: Path) -> Path:
        """Every object of the build's prefix, downloaded as files (to scan them)."""
        shutil.rmtree(dest, ignore_errors=True)
        fs.download_tree(self.uri, dest)
        return dest


@pytest.fixture(scope="module")
def built(s3, tmp_path_factory):
    """The sample on local disk and on S3, both built by the same Dagster stages (each build
    with an in-memory instance of its own, see ``S3Build``)."""
    local_root = tmp_path_factory.mktemp("local")
    local = Runner(_project(local_root, without_sam=False), local_root / "data" / "output")
    _full_build(local, dg.DagsterInstance.ephemeral())
    remote = S3Build(s3, tmp_path_factory.mktemp("remote"), "run1")
    _full_build(remote.runner, remote.instance)
    return local, remote


def test_the_s3_build_produces_the_same_tables_as_on_disk(built):
    local, remote = built
    assert remote.cfg.output_uri == remote.uri == load_config(remote.config).output_uri
    assert remote.cfg.output_dir == remote.config.parent / "work"
    want, got = local.tables(), remote.runner.tables()
    assert set(want) == set(got) and "raw_messages" in got and "dossiers" in got
    for name, t in want.items():
        assert got[name].equals(t), name
    # nothing of record landed in the local working folder
    assert not (remote.cfg.output_dir / "parquet").exists()
    assert not (remote.cfg.output_dir / "indexes").exists()


def test_the_s3_build_keeps_its_record_in_the_bucket(built):
    _, remote = built
    keys = _keys(remote.s3, remote.uri)
    prefix = remote.uri[len("s3://sample/") :]
    assert f"{prefix}/indexes/CURRENT" in keys
    assert any(k.startswith(f"{prefix}/parquet/raw_messages/2024-03-") for k in keys)
    assert any(k.startswith(f"{prefix}/dossiers/") and k.endswith(".md") for k in keys)
    # no temp object survived a successful build
    assert not [k for k in keys if k.rsplit("/", 1)[-1].startswith(".")]
    # the storage report sized the objects in the bucket
    report = TableStore(remote.uri).read(T.STORAGE_REPORT).to_pylist()
    raw = next(r for r in report if r["component"] == "raw_messages (parquet)")
    assert raw["bytes"] == sum(
        n for k, n in keys.items() if k.startswith(f"{prefix}/parquet/raw_messages/")
    )


def test_the_warehouse_of_an_s3_build_holds_tables(built):
    from memory_pipeline.core.common.catalog import connect

    local, remote = built
    con = connect(remote.cfg.warehouse_path)
    try:
        kinds = dict(
            con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall()
        )
        n = con.execute("SELECT count(*) FROM raw_messages").fetchone()[0]
    finally:
        con.close()
    assert kinds["raw_messages"] == "BASE TABLE"
    assert n == local.store.read(T.RAW_MESSAGES).num_rows


def test_search_answers_from_s3_as_from_disk(built):
    local, remote = built
    for query in ("ramen", "誕生日"):
        want = memory_pipeline.search(query, config=local.cfg.config_path, output_dir=None)
        got = memory_pipeline.search(query, config=remote.config, output_dir=remote.uri)
        assert [h.chunk_id for h in got.chunks] == [h.chunk_id for h in want.chunks], query
        assert got.chunks, query
    # a reader with no local copy downloads the published version and answers the same
    _fresh_reader(P.index_root(remote.uri))
    s = Searcher(remote.uri)
    assert s.version.is_relative_to(fs.cache_dir(P.index_root(remote.uri)))
    assert s.chunk_ids == Searcher(local.cfg.output_dir).chunk_ids


def test_forget_removes_the_contacts_bytes_from_s3(built, tmp_path):
    _, remote = built
    msgs = remote.runner.store.read(T.RAW_MESSAGES)
    msgs = msgs.filter(pc.equal(msgs["type"], "text"))
    texts = set(msgs.filter(pc.equal(msgs["contact_id"], CONTACT))["text"].to_pylist())
    assert len(texts) > 5
    local_copies = fs.cache_dir(P.index_root(remote.uri))
    roots = [remote.mirror(tmp_path / "before"), remote.cfg.output_dir, local_copies]
    before = scan(roots, texts)
    assert any("/parquet/raw_messages/" in f for f in before)
    assert any("/indexes/v-" in f for f in before)
    dossier = fs.join(remote.cfg.dossiers_path, f"{CONTACT}.md")
    assert fs.is_file(dossier)

    lines = memory_pipeline.forget(CONTACT, config=remote.config, output_dir=remote.uri)
    assert any("table raw_messages" in line for line in lines)
    after = scan([remote.mirror(tmp_path / "after"), remote.cfg.output_dir, local_copies], texts)
    assert after == {}
    assert not fs.is_file(dossier)
    # the rebuild published a new version on S3 and search works again without them
    hits = memory_pipeline.search("ramen", config=remote.config, output_dir=remote.uri).chunks
    assert hits and all(h.contact_id != CONTACT for h in hits)
    # the forget list is state: beside the output on the store (s3://sample/state), not in it
    assert fs.is_file(fs.join(remote.cfg.state_root, "privacy", "forget_list.json"))
    assert not fs.is_file(fs.join(remote.uri, "privacy", "forget_list.json"))
    # a re-run over the same exports keeps them out (the forget list is read from S3)
    remote.runner.run(["raw_messages", "quarantine", "ingest_audit"], DAYS)
    again = remote.runner.store.read(T.RAW_MESSAGES)
    assert CONTACT not in set(again["contact_id"].to_pylist())


def test_the_cli_and_api_refuse_a_bad_bucket_in_one_line(tmp_path, monkeypatch):
    cfg_file = tmp_path / "memory_pipeline.toml"
    (tmp_path / "src").mkdir()
    cfg_file.write_text(
        '[pipeline]\nowner = "Y"\ntimezone = "UTC"\nstart_date = "2024-03-01"\n'
        'output_dir = "s3://NO/x"\n[[sources]]\nname = "s"\nkind = "line_json"\npath = "src"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_config(cfg_file)
    assert "output_dir" in str(err.value) and "Traceback" not in str(err.value)


def test_retention_purges_old_objects_and_every_index_version(s3, bucket, tmp_path):
    from memory_pipeline.core.privacy import retention

    store = TableStore(bucket)
    for i in range(4):
        store.write(T.RAW_MESSAGES, _raw(2, f"day{i}"), _day(i))
    dossiers = fs.join(bucket, "dossiers")
    fs.write_text_atomic(fs.join(dossiers, "Sam.md"), "# Sam\nquotes an old message\n")
    root = P.index_root(bucket)
    P.publish(root, _version(root, {"chunks.parquet": b"old texts"}))
    (tmp_path / "warehouse.duckdb").write_bytes(b"derived")
    entry = retention.purge_expired(bucket, 2, dossier_dir=dossiers, on=_day(4), work_dir=tmp_path)
    assert entry is not None and entry["dates"] == [_day(0).isoformat(), _day(1).isoformat()]
    assert store.dates(T.RAW_MESSAGES) == [_day(2), _day(3)]
    keys = _keys(s3, bucket)
    assert not [k for k in keys if "/indexes/" in k]  # every version and CURRENT
    assert not [k for k in keys if k.endswith(".md")]
    assert not (tmp_path / "warehouse.duckdb").exists()
    assert not (fs.cache_dir(root) / "versions").exists()  # no local copy either
    assert retention.retention_log(bucket) == [entry]  # the log is on the store
