"""Search over the published sample: API, CLI, SQL files, time queries, atomic publishing."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import numpy as np
import pytest

import memory_pipeline
from memory_pipeline import cli
from memory_pipeline.config import DEFAULT_DENSE
from memory_pipeline.core.common import catalog
from memory_pipeline.core.common.catalog import refresh_catalog
from memory_pipeline.core.indexes.bm25 import query_tokens
from memory_pipeline.core.indexes.publish import current_version, index_root, new_version
from memory_pipeline.core.indexes.segments import load_matrix
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.fusion import fold, linear_fusion, minmax, rrf
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import Runner, build_all

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
SQL = ROOT / "sql"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Runner:
    out = tmp_path_factory.mktemp("search") / "out"
    runner = Runner(ROOT / "memory_pipeline.toml", out)
    build_all(runner, DAYS)
    refresh_catalog(out / "warehouse.duckdb", out / "parquet")
    return runner


def test_fusion_by_hand():
    bm25 = [("a", 10.0), ("b", 5.0), ("c", 0.0)]
    dense = [("b", 0.9), ("d", 0.5)]
    assert minmax(bm25) == {"a": 1.0, "b": 0.5, "c": 0.0}
    # beta 0.5: a = .5*1 + .5*0 = .5 ; b = .5*.5 + .5*1 = .75 ; d = .5*0 + .5*0 = 0 ; c = 0
    assert linear_fusion(bm25, dense, 0.5) == [("b", 0.75), ("a", 0.5), ("c", 0.0), ("d", 0.0)]
    assert [d for d, _ in linear_fusion(bm25, dense, 1.0)][:2] == ["a", "b"]
    assert [d for d, _ in linear_fusion(bm25, dense, 0.0)][:2] == ["b", "a"]
    # rrf k=60: b = 1/62 + 1/61, a = 1/61, d = 1/62, c = 1/63
    fused = dict(rrf([bm25, dense], k=60))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert [d for d, _ in rrf([bm25, dense], k=60)] == ["b", "a", "d", "c"]
    assert fold([("x1", 3.0), ("y1", 2.0), ("x2", 1.0)], {"x1": "X", "x2": "X", "y1": "Y"}) == [
        ("X", 3.0),
        ("Y", 2.0),
    ]
    with pytest.raises(ValueError):
        linear_fusion(bm25, dense, 1.5)


def test_by_score_sorts_as_the_python_key_best_first_ties_by_id():
    """``fusion.by_score`` (numpy for long lists) orders exactly as ``sorted`` by (-score,
    id): ties (many equal scores, -0.0 and 0.0), prefixes of ids, non-ASCII ids."""
    from memory_pipeline.core.retrieval.fusion import by_score

    rng = np.random.default_rng(7)
    for n in (0, 5, 31, 32, 200, 1000):
        ids = [f"chk_{rng.integers(0, 10**6):06d}{'é' if i % 7 == 0 else ''}" for i in range(n)]
        ids = list(dict.fromkeys(ids + ["chk_1", "chk_10", "chk_1é"]))
        scores = rng.choice([0.0, -0.0, 0.5, 1.0 / 3, 2.0], size=len(ids)).tolist()
        pairs = list(zip(ids, scores, strict=True))
        assert by_score(pairs) == sorted(pairs, key=lambda p: (-p[1], p[0]))
    assert by_score([(1, 0.5), (2, 0.5)] * 20)[:2] == [(1, 0.5), (1, 0.5)]  # not str: Python


def test_content_query_finds_the_dog_shelter(built: Runner):
    result = memory_pipeline.search(
        "what did Maria say about the dog shelter?", k=3, output_dir=built.store.root
    )
    assert result.kind == "content_only"
    top = result.chunks[0]
    assert top.contact_id == "Maria"
    assert any("shelter" in h.text for h in top.highlights)
    assert all(h.source_ref for h in top.highlights)
    assert result.sessions and result.sessions[0].session_id == top.session_id


def test_japanese_time_only_query(built: Runner):
    result = memory_pipeline.search(
        "先週の火曜日に何を話した？",
        k=10,
        output_dir=built.store.root,
        as_of=dt.datetime(2024, 3, 13, 12, 0),
    )
    assert result.kind == "time_only"
    assert result.chunks
    assert all(h.start.startswith("2024-03-05") for h in result.chunks)
    starts = [h.start for h in result.chunks]
    assert starts == sorted(starts)  # chronological


def test_scope_filter(built: Runner):
    result = memory_pipeline.search("shelter", k=10, output_dir=built.store.root, contact="健太")
    assert all(h.contact_id == "健太" for h in result.chunks)


def test_bm25_sql_returns_the_same_top_results_as_the_api(built: Runner):
    s = memory_pipeline.searcher(output_dir=built.store.root)
    con = catalog.connect(built.store.root / "warehouse.duckdb")
    sql = (SQL / "bm25_search.sql").read_text(encoding="utf-8")
    for query in ["dog shelter blankets", "京都 旅行 新幹線", "引っ越し の 日", "Kyoto ryokan"]:
        for rep in ("raw_text", "summary", "embedding_text"):
            cfg = SearchConfig(mode="bm25", bm25_rep=rep, use_time=False, highlights=0)
            api = s.search(query, 5, cfg)
            tokens = query_tokens(s.bm25[rep], query)
            rows = con.execute(sql, {"tokens": tokens, "representation": rep, "k": 5}).fetchall()
            assert [r[0] for r in rows] == [h.chunk_id for h in api.chunks], (query, rep)
            assert np.allclose([r[1] for r in rows], [h.score for h in api.chunks], atol=1e-4)
    con.close()


def test_vector_sql_returns_the_same_top_results_as_the_api(built: Runner):
    s = memory_pipeline.searcher(output_dir=built.store.root)
    con = catalog.connect(built.store.root / "warehouse.duckdb")
    sql = (SQL / "vector_search.sql").read_text(encoding="utf-8")
    for query in ["adopting a dog", "birthday present for Misaki", "train tickets to Kyoto"]:
        for rep in sorted(s.dense_meta):  # what the build embedded (DEFAULT_DENSE)
            cfg = SearchConfig(mode="dense", dense_rep=rep, use_time=False, highlights=0)
            api = s.search(query, 5, cfg)
            vec = s.embed_query(query, rep)
            rows = con.execute(
                sql, {"query_vector": vec.tolist(), "representation": rep, "k": 5}
            ).fetchall()
            assert [r[0] for r in rows] == [h.chunk_id for h in api.chunks], (query, rep)
    con.close()
    assert sorted(s.dense_meta) == sorted(DEFAULT_DENSE)


def test_a_dense_ranking_over_vectors_the_build_did_not_make_is_a_clear_error(built: Runner):
    """Not a silent BM25-only answer: the build embeds only DEFAULT_DENSE, so a ranking by
    another representation's vectors says which ones exist and how to add it."""
    s = memory_pipeline.searcher(output_dir=built.store.root)
    says = r"'summary' has no vectors.*\[representations\] dense"
    for mode in ("dense", "hybrid"):
        with pytest.raises(ValueError, match=says):
            s.search("adopting a dog", 3, SearchConfig(mode=mode, dense_rep="summary"))
    assert s.search("adopting a dog", 3, SearchConfig(mode="bm25", bm25_rep="summary")).chunks


def test_the_default_search_on_a_build_without_its_vectors_says_so(built: Runner):
    """A deployment that embeds other representations (``dense = ["summary"]``) still gets
    answers from the default search, and the result's notes say what it ranked without."""
    from memory_pipeline.core.retrieval.searcher import Searcher

    s = Searcher(built.store.root)  # its own: the shared searcher is left as built
    plain = s.search("adopting a dog", 3)
    assert not any("without dense" in n for n in plain.notes)
    s.dense_meta = {"summary": s.dense_meta[DEFAULT_DENSE[0]]}  # as if only summary was built
    result = s.search("adopting a dog", 3)
    assert result.chunks
    said = [n for n in result.notes if "ranked without dense vectors" in n]
    assert said and "'embedding_text'" in said[0]


def test_cli_search_json(built: Runner, capsys, tmp_path):
    config = _cli_config(built, tmp_path)
    assert cli.main(["--config", str(config), "search", "Kyoto ryokan", "--k", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["chunks"]) == 2 and data["chunks"][0]["highlights"]
    assert cli.main(["--config", str(config), "search", "Kyoto ryokan", "--k", "1"]) == 0
    assert "Kyoto" in capsys.readouterr().out


def test_cli_sql_runs_bm25_search_sql_with_a_query_string(built: Runner, capsys, tmp_path):
    """`memory-pipeline sql --file sql/bm25_search.sql --query ...`: the published index
    tokenizes the query into $tokens, so the shipped SQL runs without writing Python."""
    config = _cli_config(built, tmp_path)
    s = memory_pipeline.searcher(output_dir=built.store.root)
    for query, rep in [("dog shelter blankets", "raw_text"), ("京都 旅行 新幹線", "summary")]:
        args = ["--config", str(config), "sql", "--file", str(SQL / "bm25_search.sql")]
        args += ["--query", query, "--param", f"representation={rep}", "-p", "k=5", "--json"]
        assert cli.main(args) == 0
        rows = json.loads(capsys.readouterr().out)
        api = s.search(query, 5, SearchConfig(mode="bm25", bm25_rep=rep, use_time=False))
        assert rows and [r["chunk_id"] for r in rows] == [h.chunk_id for h in api.chunks]
        assert cli.main(["--config", str(config), "tokenize", query, "--representation", rep]) == 0
        assert json.loads(capsys.readouterr().out) == query_tokens(s.bm25[rep], query)
    # plain SQL, tab-separated with a header
    args = ["--config", str(config), "sql", "SELECT count(*) AS n FROM chunks"]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.splitlines() == ["n", str(len(s.chunk_ids))]
    # bad SQL and a missing file are one-line errors
    assert cli.main(["--config", str(config), "sql", "SELECT * FROM no_such_view"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "no_such_view" in line
    assert cli.main(["--config", str(config), "sql", "--file", str(tmp_path / "none.sql")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read")
    assert cli.main(["--config", str(config), "tokenize", "zzqqxx"]) == 1  # no indexed token


def test_readers_see_the_published_version_only(built: Runner):
    out = built.store.root
    before = current_version(out)
    half_built = new_version(index_root(out))  # a run writing its next version
    (half_built / "bm25").mkdir()
    assert current_version(out) == before
    s = memory_pipeline.searcher(output_dir=out)
    assert s.version == before
    assert s.search("Kyoto", 1).chunks


def test_search_before_any_run_is_a_clear_error(tmp_path):
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    with pytest.raises(IndexNotBuilt, match="memory-pipeline run"):
        memory_pipeline.search("anything", output_dir=tmp_path)


def _cli_config(built: Runner, tmp_path) -> Path:
    config = tmp_path / "memory_pipeline.toml"
    text = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    text = text.replace('output_dir = "data/output"', f'output_dir = "{built.store.root}"')
    text = text.replace('path = "data/sample/', f'path = "{ROOT}/data/sample/')
    text = text.replace('questions = "data/sample/', f'questions = "{ROOT}/data/sample/')
    config.write_text(text, encoding="utf-8")
    return config


def test_context_api_puts_the_extracted_memory_first_within_budget(built: Runner):
    from memory_pipeline.core.context.packs import utf16_len

    pack = memory_pipeline.context("Where did Maria get a job?", 3_000, output_dir=built.store.root)
    text = pack.render()
    assert utf16_len(text) <= 3_000
    assert pack.pieces[0].kind == "memory" and "Hikari Design" in pack.pieces[0].text
    sources = [p for p in pack.pieces if p.kind != "memory"]
    assert sources and all(p.citation.session_id for p in pack.pieces)
    # the memory's source session is in the pack (memories are read with their source)
    assert pack.pieces[0].citation.session_id in {p.citation.session_id for p in sources}


def test_recall_escalates_only_when_memory_evidence_is_weak(built: Runner):
    strong = memory_pipeline.recall("Where did Maria get a job?", output_dir=built.store.root)
    assert not strong.escalated and {p.kind for p in strong.pieces} == {"memory"}
    weak = memory_pipeline.recall("What is the name of the cat?", output_dir=built.store.root)
    assert weak.escalated and weak.reason
    asked = memory_pipeline.recall(
        "Where did Maria get a job?", sources=True, output_dir=built.store.root
    )
    assert asked.escalated and any(p.kind != "memory" for p in asked.pieces)


def test_cli_context(built: Runner, capsys, tmp_path):
    config = _cli_config(built, tmp_path)
    args = ["--config", str(config), "context", "引っ越しはいつ？", "--budget", "2000"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "of 2,000 UTF-16 units" in out and "武蔵小杉" in out
    assert cli.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["utf16"] <= 2000 and data["pieces"]


def test_storage_report_accounts_for_every_layer(built: Runner):
    built.run(["storage_report"], [])
    report = {r["component"]: r for r in built.store.read("storage_report").to_pylist()}
    categories = {r["category"] for r in report.values()}
    assert {"source", "derived", "index", "vectors", "memory", "dossier"} <= categories
    sessions = built.store.read("sessions").num_rows
    raw = report["raw_messages (parquet)"]
    files = sorted((built.store.table_dir("raw_messages")).glob("*.parquet"))
    assert raw["bytes"] == sum(p.stat().st_size for p in files)
    assert raw["bytes_per_1000_sessions"] == pytest.approx(raw["bytes"] * 1000 / sessions, 0.01)
    assert report["dossier files (.md, current)"]["files"] == 4  # Maria, 健太, 家族, Sam


# -- a published version is self-contained --------------------------------------------------

STABLE_QUERIES = [
    "what did Maria say about the dog shelter?",
    "京都 旅行 新幹線",
    "先週の火曜日に何を話した？",
    "引っ越しはいつ？",
]


def _answers(out: Path) -> list[dict]:
    from memory_pipeline.core.retrieval.searcher import Searcher

    s = Searcher(out)
    as_of = dt.datetime(2024, 3, 13, 12, 0)
    return [s.search(q, 5, as_of=as_of).to_dict() for q in STABLE_QUERIES] + [
        s.search(q, 5, SearchConfig(mode="bm25", bm25_rep="summary")).to_dict()
        for q in STABLE_QUERIES
    ]


def test_a_published_version_answers_on_its_own_while_live_tables_change(built: Runner, tmp_path):
    """The daily job may re-chunk sessions (new chunk ids, other messages per chunk) and
    rewrite raw_messages before the next index build: the published version still answers,
    with the same results, and so it does with the live tables gone."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc

    from memory_pipeline.core.common.storage import TableStore

    out = tmp_path / "out"
    shutil.copytree(built.store.root, out)
    before = _answers(out)
    assert all(a["chunks"] for a in before)
    store = TableStore(out)
    for day in store.dates("chunks"):  # re-chunk: one chunk per message, new ids
        chunks = store.read("chunks", [day])
        rows = []
        for r in chunks.to_pylist():
            for n, m in enumerate(r["message_ids"]):
                rows.append({**r, "chunk_id": f"{r['chunk_id']}_{n}", "message_ids": [m]})
        store.write("chunks", pa.Table.from_pylist(rows, schema=chunks.schema), day)
    for day in store.dates("raw_messages"):  # rewritten texts
        msgs = store.read("raw_messages", [day])
        text = pc.binary_join_element_wise(msgs.column("text"), "(edited)", "")
        store.write(
            "raw_messages", msgs.set_column(msgs.schema.get_field_index("text"), "text", text), day
        )
    live = set(store.read("chunks").column("chunk_id").to_pylist())
    assert live and not live & set(memory_pipeline.searcher(output_dir=out).chunk_ids)
    assert _answers(out) == before
    shutil.rmtree(store.table_dir("chunks"))
    shutil.rmtree(store.table_dir("raw_messages"))
    assert _answers(out) == before


def test_a_version_without_lookups_is_a_clear_error(built: Runner, tmp_path):
    """A version published before versions carried their lookups is not read half from the
    live tables: rebuild it."""
    import shutil

    from memory_pipeline.core.indexes.publish import CHUNK_LOOKUP, LOOKUP_LINKS
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt, IndexOutdated, Searcher

    out = tmp_path / "out"
    shutil.copytree(built.store.root, out)
    version = current_version(out)
    assert (version / LOOKUP_LINKS).is_dir()  # a local build links the store's files
    shutil.rmtree(version / LOOKUP_LINKS)
    (version / CHUNK_LOOKUP).unlink(missing_ok=True)
    with pytest.raises(IndexOutdated, match="memory-pipeline run") as err:
        Searcher(out)
    assert isinstance(err.value, IndexNotBuilt)  # the CLI's "error: ..." path catches it


def test_searcher_lookups_agree_with_the_published_tables(built: Runner):
    s = memory_pipeline.searcher(output_dir=built.store.root)
    chunks = {r["chunk_id"]: r for r in built.store.read("chunks").to_pylist()}
    messages = {r["message_id"]: r for r in built.store.read("raw_messages").to_pylist()}
    sessions = {r["session_id"]: r for r in built.store.read("sessions").to_pylist()}
    assert set(s.chunk_ids) == set(chunks)
    assert set(s.session_ids()) == set(sessions)
    cid = sorted(chunks)[3]
    got = s.chunk(cid)
    for field in ("session_id", "chunk_index", "contact_id", "message_ids", "raw_text"):
        assert got[field] == chunks[cid][field], field
    assert s.session_of_chunk(cid) == chunks[cid]["session_id"]
    assert s.messages_of_chunk(cid) == chunks[cid]["message_ids"]
    mid = chunks[cid]["message_ids"][0]
    assert s.has_message(mid) and not s.has_message("no such message")
    assert s.message(mid)["text"] == messages[mid]["text"]
    assert s.source_refs()[mid] == messages[mid]["source_ref"]
    sid = chunks[cid]["session_id"]
    assert s.has_session(sid) and not s.has_session("no such session")
    assert s.session(sid)["contact_id"] == sessions[sid]["contact_id"]
    in_session = s.chunks_of_session(sid)
    assert cid in in_session and all(chunks[c]["session_id"] == sid for c in in_session)
    assert [chunks[c]["chunk_index"] for c in in_session] == sorted(
        chunks[c]["chunk_index"] for c in in_session
    )
    assert s.chunks_of_session("no such session") == []
    with pytest.raises(KeyError):
        s.message("no such message")


# -- SearchConfig through the API and the CLI ----------------------------------------------


def test_api_keywords_and_presets_are_the_same_search(built: Runner):
    out = built.store.root
    q = "Kyoto ryokan"
    # keywords adjust the default (its turn index, lift and reranker included); a preset or
    # a value is that configuration as given
    by_keyword = memory_pipeline.search(q, 3, output_dir=out, mode="bm25", bm25_rep="summary")
    by_default = memory_pipeline.search(
        q, 3, output_dir=out, search_config="default", mode="bm25", bm25_rep="summary"
    )
    assert by_keyword.to_dict() == by_default.to_dict()
    by_value = memory_pipeline.search(
        q, 3, output_dir=out, search_config=SearchConfig(mode="bm25", bm25_rep="summary")
    )
    by_preset = memory_pipeline.search(
        q, 3, output_dir=out, search_config="bm25", bm25_rep="summary"
    )
    assert by_value.to_dict() == by_preset.to_dict()
    assert by_keyword.mode == by_preset.mode == "bm25"
    default = memory_pipeline.search(q, 3, output_dir=out)
    assert (
        default.to_dict()
        == memory_pipeline.search(q, 3, output_dir=out, search_config="default").to_dict()
    )
    assert default.mode == "hybrid"
    linear = memory_pipeline.search(q, 10, output_dir=out, fusion="linear", beta=0.0)
    dense = memory_pipeline.search(q, 10, output_dir=out, mode="dense")
    # beta 0: the dense list decides the order (its chunks first, BM25-only ones after)
    assert [h.chunk_id for h in linear.chunks][:3] == [h.chunk_id for h in dense.chunks][:3]
    with pytest.raises(TypeError, match="unknown search option"):
        memory_pipeline.search(q, output_dir=out, bogus=1)


def test_cli_search_preset_and_flags(built: Runner, capsys, tmp_path):
    config = _cli_config(built, tmp_path)
    base = ["--config", str(config), "search", "Kyoto ryokan", "--k", "3", "--json"]
    assert cli.main([*base, "--preset", "bm25"]) == 0
    preset = json.loads(capsys.readouterr().out)
    assert cli.main([*base, "--preset", "default", "--mode", "bm25"]) == 0
    flag = json.loads(capsys.readouterr().out)
    assert cli.main([*base, "--mode", "bm25"]) == 0  # flags adjust the default preset
    assert json.loads(capsys.readouterr().out) == flag and flag["mode"] == preset["mode"] == "bm25"
    assert cli.main([*base, "--preset", "bm25", "--bm25-rep", "summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    api = memory_pipeline.search(
        "Kyoto ryokan", 3, output_dir=built.store.root, search_config="bm25", bm25_rep="summary"
    )
    assert [c["chunk_id"] for c in summary["chunks"]] == [h.chunk_id for h in api.chunks]
    ctx = ["--config", str(config), "context", "引っ越しはいつ？", "--budget", "2000", "--json"]
    assert cli.main([*ctx, "--preset", "bm25"]) == 0
    assert json.loads(capsys.readouterr().out)["utf16"] <= 2000


def test_cli_search_exit_codes_are_like_grep(built: Runner, capsys, tmp_path):
    """0 with hits, 1 without (text and --json alike), never a traceback (issue 13)."""
    config = _cli_config(built, tmp_path)
    base = ["--config", str(config), "search"]
    assert cli.main([*base, "Kyoto ryokan", "--k", "1"]) == 0
    assert "Kyoto" in capsys.readouterr().out
    none = ["zzqqxx", "--preset", "bm25"]
    assert cli.main([*base, *none]) == 1
    captured = capsys.readouterr()
    assert "no results" in captured.out and captured.err == ""
    assert cli.main([*base, *none, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["chunks"] == []
    # a known contact with nothing matching is "no match", not an input error
    assert cli.main([*base, *none, "--contact", "Maria"]) == 1


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("search", "--contact", "Nobody"),
        ("search", "--contact", "maria"),  # ids are exact: the contact is "Maria"
        ("search", "--conversation", "no-such-conversation"),
        ("context", "--contact", "Nobody"),
    ],
)
def test_cli_unknown_scope_is_a_one_line_error(
    built: Runner, capsys, tmp_path, command, flag, value
):
    config = _cli_config(built, tmp_path)
    assert cli.main(["--config", str(config), command, "Kyoto", flag, value]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith(f"error: unknown {flag} {value!r}; known: ")
    if flag == "--contact":
        assert "Maria" in line and "健太" in line  # it lists the contacts there are


# -- references to the recent messages (search(recent=...), context(recent=...), --recent) --


def test_search_resolves_references_from_the_recent_messages(built: Runner):
    recent = ["Maria told me about the dog shelter"]
    result = memory_pipeline.search(
        "what did she say about it?", k=3, output_dir=built.store.root, recent=recent
    )
    assert "Maria" in result.query and "dog shelter" in result.query
    assert "query rewritten from the recent messages" in result.notes
    top = result.chunks[0]
    assert top.contact_id == "Maria" and any("shelter" in h.text for h in top.highlights)


def test_recent_times_make_yesterday_relative_to_the_conversation(built: Runner):
    recent = [{"text": "hi", "time": "2024-03-13T12:00"}]
    result = memory_pipeline.search(
        "what did we talk about yesterday?", output_dir=built.store.root, recent=recent
    )
    assert [f["value"] for f in result.filters] == ["2024-03-12"]


def test_context_resolves_japanese_references(built: Runner):
    pack = memory_pipeline.context(
        "あれはいつ？", 2000, output_dir=built.store.root, recent=["武蔵小杉に引っ越すって"]
    )
    assert "query rewritten from the recent messages" in pack.notes
    assert "武蔵小杉" in pack.render()


def test_bad_recent_fails_before_the_index_is_opened(tmp_path):
    with pytest.raises(ValueError, match=r"recent\[0\]: 'text' must be non-empty"):
        memory_pipeline.search("what?", output_dir=tmp_path, recent=[{"text": ""}])


def test_cli_recent_strings_and_files(built: Runner, capsys, tmp_path):
    config = _cli_config(built, tmp_path)
    base = ["--config", str(config), "search", "what did she say about it?", "--json"]
    assert cli.main([*base, "--recent", "Maria told me about the dog shelter"]) == 0
    assert "dog shelter" in json.loads(capsys.readouterr().out)["query"]
    good = tmp_path / "recent.jsonl"
    good.write_text('{"text": "Maria told me about the dog shelter"}\n', encoding="utf-8")
    assert cli.main([*base, "--recent", str(good)]) == 0
    assert "dog shelter" in json.loads(capsys.readouterr().out)["query"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"fine"\n{"text": \n', encoding="utf-8")
    assert cli.main([*base, "--recent", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:2:" in err


# -- turns as first-class results ----------------------------------------------------------


def test_turn_index_ranks_turns_and_a_version_without_it_falls_back(built: Runner, tmp_path):
    """The index build publishes the turn index; a search with ``turns="index"`` returns
    turns ranked on their own (the dog-shelter message first), and on a version without
    the turn folder the same call degrades to highlights of the top chunks."""
    import shutil

    from memory_pipeline.core.indexes.turns import TURN_FOLDER
    from memory_pipeline.core.retrieval.searcher import Searcher

    cfg = SearchConfig(mode="bm25", turns="index", lift=0.3)
    s = Searcher(built.store.root)
    assert s.turn_index is not None and len(s.turn_index) > 0
    res = s.search("dog shelter", 3, cfg)
    assert res.turns and "shelter" in res.turns[0].text.lower()
    assert res.turns[0].session_id and res.turns[0].rank == 1
    assert [t.score for t in res.turns] == sorted((t.score for t in res.turns), reverse=True)
    out = tmp_path / "out"
    shutil.copytree(built.store.root, out)
    shutil.rmtree(current_version(out) / TURN_FOLDER)
    old = Searcher(out)
    assert old.turn_index is None
    fallback = old.search("dog shelter", 3, cfg)
    highlights = old.search("dog shelter", 3, SearchConfig(mode="bm25"))
    assert [t.message_id for t in fallback.turns] == [t.message_id for t in highlights.turns]
    assert [c.chunk_id for c in fallback.chunks] == [c.chunk_id for c in highlights.chunks]


def test_reranker_absent_keeps_the_unlearned_turn_ranking(built: Runner):
    from memory_pipeline.core.retrieval.searcher import Searcher

    s = Searcher(built.store.root)
    plain = SearchConfig(mode="bm25", turns="index")
    ranked = SearchConfig(mode="bm25", turns="index", rerank=True)
    s.reranker = None
    a, b = s.search("dog shelter", 5, plain), s.search("dog shelter", 5, ranked)
    assert [t.message_id for t in a.turns] == [t.message_id for t in b.turns]


def test_a_chunk_over_the_model_window_is_found_by_its_last_piece(built: Runner):
    """No silent truncation: a chunk longer than the model window has one vector per piece,
    the index records how many chunks were split, and a message from the last piece (which a
    cut at the window would have dropped) still finds its chunk by dense search alone."""
    rep = "embedding_text"
    s = memory_pipeline.searcher(output_dir=built.store.root)
    meta = s.dense_meta[rep]
    assert meta["window"] and meta["split_chunks"] > 0 and meta["count"] > meta["chunks"]
    emb = built.store.read("chunk_embeddings").to_pylist()
    split = sorted({r["chunk_id"] for r in emb if r["representation"] == rep and r["piece"]})
    assert len(split) == meta["split_chunks"]
    chunks = {r["chunk_id"]: r for r in built.store.read("chunks").to_pylist()}
    texts = {r["chunk_id"]: r[rep] for r in built.store.read("embedding_texts").to_pylist()}
    embedder = s.query_embedder(rep)
    cfg = SearchConfig(mode="dense", dense_rep=rep, use_time=False, highlights=0)
    tried = 0
    for chunk_id in split:
        last = embedder.split(texts[chunk_id])[-1]
        lines = [ln.split(": ", 1)[-1] for ln in last.splitlines() if ln.count(" ") >= 6]
        if not lines:
            continue
        tried += 1
        hits = s.search(lines[-1], 3, cfg, conversation=chunks[chunk_id]["conversation_id"])
        assert chunk_id in [h.chunk_id for h in hits.chunks], chunk_id
        if tried == 3:
            break
    assert tried > 0


def test_stored_message_tokens_and_hnsw_give_the_same_results_as_before(built: Runner, tmp_path):
    """Two speed paths of the default search against the paths they replace, on the sample:
    highlights from the stored message tokens vs tokenizing the messages per query (a copy
    without the tokens file), and dense search through the HNSW graph (a copy given one, as
    a build above ``hnsw_threshold`` makes) vs the exact scan: same hits, same order."""
    import json as _json
    import shutil

    from usearch.index import Index, ScalarKind

    from memory_pipeline.core.indexes import hnsw as H
    from memory_pipeline.core.indexes.turns import MESSAGE_TOKENS, TURN_FOLDER
    from memory_pipeline.core.retrieval.searcher import Searcher

    base = Searcher(built.store.root)
    assert base.turn_index is not None and base.turn_index.message_tokens is not None
    no_tokens = tmp_path / "no_tokens"
    shutil.copytree(built.store.root, no_tokens)
    (current_version(no_tokens) / TURN_FOLDER / MESSAGE_TOKENS).unlink()
    ann_out = tmp_path / "ann"
    shutil.copytree(built.store.root, ann_out)
    dense = current_version(ann_out) / "dense"
    meta = _json.loads((dense / "meta.json").read_text())
    for rep in meta:  # a graph as built before stable keys: row keys, no keys file
        (dense / f"{rep}{H.KEYS_SUFFIX}").unlink(missing_ok=True)
        meta[rep]["ann"] = H.save_full(
            np.asarray(load_matrix(dense, rep)), dense / f"{rep}.usearch"
        )
        meta[rep]["hnsw"] = True
        assert Index.restore(str(dense / f"{rep}.usearch")).dtype == ScalarKind.I8
    (dense / "meta.json").write_text(_json.dumps(meta))
    # the graph as build_dense now makes it: stable piece keys, mapped back via keys.npy
    keyed_out = tmp_path / "keyed"
    shutil.copytree(built.store.root, keyed_out)
    dense = current_version(keyed_out) / "dense"
    meta = _json.loads((dense / "meta.json").read_text())
    for rep in meta:
        ids = _json.loads((dense / f"{rep}.ids.json").read_text())
        pieces = [i - ids.index(c) for i, c in enumerate(ids)]  # a chunk's rows are consecutive
        keys = H.piece_keys(ids, pieces)
        np.save(dense / f"{rep}{H.KEYS_SUFFIX}", keys)
        meta[rep]["ann"] = H.save_full(
            np.asarray(load_matrix(dense, rep)), dense / f"{rep}.usearch", keys
        )
        meta[rep]["hnsw"] = True
    (dense / "meta.json").write_text(_json.dumps(meta))
    slow, ann, keyed = Searcher(no_tokens), Searcher(ann_out), Searcher(keyed_out)
    assert slow.turn_index.message_tokens is None
    rep = SearchConfig().dense_rep
    assert ann.hnsw(rep) is not None and base.hnsw(rep) is None and keyed.hnsw(rep) is not None
    assert int(np.asarray(keyed.hnsw(rep).keys).max()) >= len(keyed.dense_matrix(rep)[0])
    queries = [
        "what did Maria say about the dog shelter?",
        "dog shelter",
        "先週の火曜日に何を話した？",
        "Where did we go hiking last weekend",
        "no such words anywhere zyxw",
    ]
    for q in queries:
        want = base.search(q, 5)
        for other in (slow, ann, keyed):
            got = other.search(q, 5)
            assert [c.chunk_id for c in got.chunks] == [c.chunk_id for c in want.chunks], q
            assert [t.message_id for t in got.turns] == [t.message_id for t in want.turns], q
            assert [[(h.message_id, h.score) for h in c.highlights] for c in got.chunks] == [
                [(h.message_id, h.score) for h in c.highlights] for c in want.chunks
            ], q
        # HNSW is approximate (its graph depends on thread timing): a chunk's score is the
        # max over the pieces the graph returned, so it never exceeds the exact max-sim, the
        # top chunks are found, and the ones the exact scan ranks first score the same
        want = base.dense_ranked(q, rep, None, 50)
        exact = dict(want)
        top = [cid for cid, _ in want[:10]]
        for other in (ann, keyed):
            got = other.dense_ranked(q, rep, None, 50)
            assert all(s <= exact[cid] + 1e-6 for cid, s in got), q
            assert len(set(top) & {cid for cid, _ in got[:10]}) >= 9, q
            assert abs(dict(got)[top[0]] - exact[top[0]]) <= 1e-6, q


def test_filtered_dense_and_time_mask_equal_the_full_scan_and_the_loop(built: Runner):
    """The filtered dense search scores only the kept rows; it must rank exactly as the
    full scan with the filtered-out chunks at -inf. The vectorized time mask must equal the
    per-session ``matches_all`` loop it replaced, on the sample's sessions."""
    from memory_pipeline.core.retrieval.searcher import Searcher
    from memory_pipeline.core.retrieval.timeexpr import matches_all, parse_query

    s = Searcher(built.store.root)
    rep = SearchConfig().dense_rep
    matrix, pos = s.dense_matrix(rep)
    rng = np.random.default_rng(7)
    for q in ["dog shelter", "Where did we go hiking", "週末に何をした？"]:
        v = s.embed_query(q, rep)
        full = np.maximum.reduceat(np.asarray(matrix @ v, np.float64), s._dense_starts[rep])
        chunk_rows = pos[s._dense_starts[rep]]
        for share in (0.1, 0.3, 0.45):
            mask = rng.random(len(s.chunk_ids)) < share
            got = s.dense_ranked(q, rep, mask, 20)
            keep = mask[chunk_rows]
            want_rows = chunk_rows[keep][np.argsort(-full[keep], kind="stable")][:20]
            assert [c for c, _ in got] == [s.chunk_ids[r] for r in want_rows], (q, share)
            assert np.allclose([sc for _, sc in got], np.sort(full[keep])[::-1][:20], atol=1e-6)
        assert s.dense_ranked(q, rep, np.zeros(len(s.chunk_ids), bool), 5) == []
    now = dt.datetime(2024, 3, 13, 12, 0)
    rows = list(s._session_rows.values())
    tried = 0
    for q in ["先週の火曜日に何を話した？", "yesterday evening", "in the morning", "last week",
              "what did we talk about in the first session?"]:  # fmt: skip
        parsed = parse_query(q, now=now, speakers=s.known_speakers)
        mask, _ = s.time_mask(parsed, 0.0)
        if mask is None:
            continue
        tried += 1
        allowed = {
            r["session_id"]
            for r in rows
            if any(
                matches_all(
                    parsed.filters,
                    local_ts=ts,
                    session_index=r["session_index"],
                    n_sessions=r["sessions_in_conversation"],
                )
                for ts in (r["start_local_ts"], r["end_local_ts"])
            )
        }
        assert mask.tolist() == [sid in allowed for sid in s.session_of], q
    assert tried >= 3


def test_ivf_dense_path_scores_exactly_and_equals_the_scan_with_every_list(built: Runner, tmp_path):
    """A version given an IVF index (as a build above ``hnsw_threshold`` makes) ranks dense
    through it: every score is the exact max-sim of the pieces it scored (never above the
    exact one), and with every list probed the ranking is the exact scan's."""
    import json as _json
    import shutil

    from memory_pipeline.core.indexes.ivf import build_ivf, save_ivf
    from memory_pipeline.core.retrieval.searcher import Searcher

    out = tmp_path / "ivf"
    shutil.copytree(built.store.root, out)
    dense = current_version(out) / "dense"
    meta = _json.loads((dense / "meta.json").read_text())
    for rep in meta:
        meta[rep]["ann"] = save_ivf(build_ivf(np.asarray(load_matrix(dense, rep))), dense, rep)
    (dense / "meta.json").write_text(_json.dumps(meta))
    base, ivf = Searcher(built.store.root), Searcher(out)
    rep = SearchConfig().dense_rep
    index = ivf.ivf(rep)
    assert index is not None and base.ivf(rep) is None
    assert 1 < index.nprobe or len(index.centroids) == 1
    default = index.nprobe
    for q in ["dog shelter", "Where did we go hiking last weekend", "先週の火曜日に何を話した？"]:
        want = base.dense_ranked(q, rep, None, 30)
        got = ivf.dense_ranked(q, rep, None, 30)
        exact = dict(base.dense_ranked(q, rep, None, len(base.chunk_ids)))
        assert got and all(s <= exact[c] + 1e-6 for c, s in got), q
        index.nprobe = len(index.centroids)  # every list: the exact answer
        every = ivf.dense_ranked(q, rep, None, 30)
        index.nprobe = default
        assert [c for c, _ in every] == [c for c, _ in want], q
        assert np.allclose([s for _, s in every], [s for _, s in want], atol=1e-6), q
        # a filtered search stays exact (the index knows nothing of the filter)
        mask = np.zeros(len(base.chunk_ids), bool)
        mask[::2] = True
        assert ivf.dense_ranked(q, rep, mask, 10) == base.dense_ranked(q, rep, mask, 10)


def test_a_hard_time_filter_that_matches_no_session_says_so(built: Runner):
    """An empty answer explains itself: the sample runs in March 2024, so a question about
    2019 keeps nothing, and the note names the filter; a date inside the sample adds no such
    note."""
    empty = memory_pipeline.search(
        "what did Maria say about the dog shelter in 2019?", k=3, output_dir=built.store.root
    )
    assert empty.chunks == []
    assert any(n.startswith("time filter matched no session: ") for n in empty.notes)
    assert any("2019" in n for n in empty.notes if n.startswith("time filter matched"))
    inside = memory_pipeline.search(
        "what did Maria say about the dog shelter in March 2024?", k=3, output_dir=built.store.root
    )
    assert inside.chunks
    assert not any(n.startswith("time filter matched no session") for n in inside.notes)


def test_search_indexes_carries_the_graph_over_from_the_published_version(
    built: Runner, tmp_path, monkeypatch
):
    """The asset hands the published version to build_dense: with a graph forced on the
    sample (threshold 1), the first build (previous version without stable keys) is full,
    the next one carries it over (nothing changed: the merge is deferred and the graph file
    linked), the previous version is left as it was and search over the new version agrees
    with the exact scan."""
    import hashlib
    import shutil

    from memory_pipeline.core.retrieval.searcher import Searcher
    from memory_pipeline.defs import indexes as defs_indexes
    from memory_pipeline_tests.pipeline_helpers import INDEX_KEYS

    out = tmp_path / "out"
    shutil.copytree(built.store.root, out)
    runner = Runner(ROOT / "memory_pipeline.toml", out)
    seen = []
    real = defs_indexes.build_dense

    def forced(embeddings, folder, hnsw_threshold, **kw):
        seen.append(kw.get("previous"))
        return real(embeddings, folder, 1, **kw)

    monkeypatch.setattr(defs_indexes, "build_dense", forced)
    monkeypatch.setattr(defs_indexes, "_index_settings", lambda cfg: None)  # always build
    rep = SearchConfig().dense_rep

    def vector_meta(result) -> dict:
        [event] = [
            e
            for e in result.get_asset_materialization_events()
            if e.asset_key.to_user_string() == "vector_index"
        ]
        return {k: v.value for k, v in event.materialization.metadata.items()}

    first_prev = current_version(out)
    meta1 = vector_meta(runner.run(INDEX_KEYS, []))
    v1 = current_version(out)
    assert seen == [first_prev] and v1 != first_prev
    assert meta1[f"{rep}_ann_build"] == "full"
    assert meta1[f"{rep}_ann_full_reason"] == "previous graph has no stable keys"
    digest = {p: hashlib.sha256(p.read_bytes()).digest() for p in v1.rglob("*") if p.is_file()}
    meta2 = vector_meta(runner.run(INDEX_KEYS, []))
    assert seen[1] == v1 and current_version(out) != v1
    assert (meta2[f"{rep}_ann_build"], meta2[f"{rep}_ann_added"]) == ("deferred", 0)
    assert meta2[f"{rep}_ann_removed"] == meta2[f"{rep}_ann_pending"] == 0
    assert {p: hashlib.sha256(p.read_bytes()).digest() for p in digest} == digest
    base, ann = Searcher(built.store.root), Searcher(out)
    assert ann.hnsw(rep) is not None and ann.dense_meta[rep]["ann"]["build"] == "deferred"
    assert ann.pending_rows(rep).size == 0
    for q in ["dog shelter", "Where did we go hiking last weekend"]:
        # as the test above: the graph asked for 50 chunks finds the exact top 10
        want = base.dense_ranked(q, rep, None, 50)
        got = ann.dense_ranked(q, rep, None, 50)
        assert want[0][0] == got[0][0] and abs(want[0][1] - got[0][1]) <= 1e-6, q
        assert len({c for c, _ in want[:10]} & {c for c, _ in got[:10]}) >= 9, q


def test_the_warehouse_is_rewritten_only_when_its_views_change(built: Runner):
    """Its views read the Parquet files live: a refresh with the same tables keeps the file
    (a reader's catalog stays valid); a missing file, or a table's first file, rewrites it."""
    from memory_pipeline.core.common import catalog

    path = built.cfg.warehouse_path

    def run() -> bool:
        [mat] = built.run(["warehouse"], []).asset_materializations_for_node("warehouse")
        return mat.metadata["rewritten"].value

    run()
    stamp = path.stat().st_mtime_ns
    assert run() is False and path.stat().st_mtime_ns == stamp
    path.unlink()
    assert run() is True and path.is_file()
    con = catalog.connect(path, read_only=True)
    try:
        [(n,)] = con.execute("SELECT count(*) FROM raw_messages").fetchall()
    finally:
        con.close()
    assert n == built.store.read("raw_messages").num_rows
    assert run() is False


def test_splade_channel_english_only_and_absent_vectors_keep_the_ranking(built: Runner, tmp_path):
    """The build writes the turns' SPLADE vectors for an English corpus (with the packaged
    weights); a search with ``splade`` on reads them for an English query only, and a
    version without them ranks exactly as with the channel off."""
    import shutil
    from dataclasses import replace

    from memory_pipeline.core.indexes import splade as SP
    from memory_pipeline.core.indexes.turns import TURN_FOLDER
    from memory_pipeline.core.retrieval.searcher import Searcher

    on = SearchConfig(mode="bm25", turns="index", splade=3.0)
    off = replace(on, splade=0.0)
    s = Searcher(built.store.root)
    path = current_version(built.store.root) / TURN_FOLDER / SP.INDEX_FILE
    if s.corpus_language == "en" and SP.available():
        assert path.exists() and s.splade_index.shape[0] == len(s.turn_index)
        scores = s.splade_scores("dog shelter", None)
        assert scores is not None and scores.max() > 0
        assert s.splade_scores("犬の保護施設はどこ", None) is None  # Japanese: not applied
        assert s.search("dog shelter", 3, on).turns
    out = tmp_path / "out"
    shutil.copytree(built.store.root, out)
    (current_version(out) / TURN_FOLDER / SP.INDEX_FILE).unlink(missing_ok=True)
    old = Searcher(out)
    assert old.splade_index is None
    for q in ("dog shelter", "what did we do last week"):
        a, b = old.search(q, 5, on), old.search(q, 5, off)
        assert [t.message_id for t in a.turns] == [t.message_id for t in b.turns]
        assert [c.chunk_id for c in a.chunks] == [c.chunk_id for c in b.chunks]


PIN_QUERIES = [
    "what did Maria say about the dog shelter?",
    "when is the Kyoto trip?",
    "birthday present for Misaki",
    "train tickets to Kyoto",
    "adopting a dog",
    "引っ越しの日はいつ？",
    "京都旅行の新幹線",
    "book club next meeting",
    "what did we plan for the weekend?",
    "new job manager",
    "先週の火曜日に何を話した？",
    "restaurant reservation",
    "pottery class",
    "What instrument does she play?",
]
RANKINGS = ROOT / "memory_pipeline_tests" / "snapshots" / "default_rankings.json"


def test_the_default_search_ranks_as_pinned(built: Runner):
    """The shipped default at k = 5 (chunks, sessions, turns, answerability) on the sample's
    questions and a few more, pinned in ``snapshots/default_rankings.json``: a change in how
    search computes (SPLADE, caches, loading) must not change what it ranks.
    ``UPDATE_SNAPSHOTS=1`` rewrites the pins after an intended ranking change."""
    from memory_pipeline.core.retrieval.searcher import Searcher

    questions = [
        json.loads(line)
        for line in (ROOT / "data" / "sample" / "eval_questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    s = Searcher(built.store.root)
    got = {}
    for q, as_of in [(q["question"], q["as_of"]) for q in questions] + [
        (q, "2024-03-15T10:00") for q in PIN_QUERIES
    ]:
        r = memory_pipeline.search_with(s, q, 5, as_of=dt.datetime.fromisoformat(as_of))
        got[q] = {
            "chunks": [c.chunk_id for c in r.chunks],
            "sessions": [x.session_id for x in r.sessions],
            "turns": [t.message_id for t in r.turns],
            "confidence": round(r.confidence, 4),
        }
    text = "{\n" + ",\n".join(
        f"  {json.dumps(q, ensure_ascii=False)}: {json.dumps(v)}" for q, v in got.items()
    ) + "\n}\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        RANKINGS.write_text(text, encoding="utf-8")
    want = json.loads(RANKINGS.read_text(encoding="utf-8"))
    changed = {q: (got.get(q), w) for q, w in want.items() if got.get(q) != w}
    assert not changed, f"default rankings changed for {len(changed)} queries: {changed}"


def _without_stored_layout(built: Runner, out: Path) -> Path:
    """A copy of the sample's output whose version lacks the turn layout's arrays, as a
    version published before they were stored."""
    import shutil

    from memory_pipeline.core.indexes.turn_arrays import LAYOUT_FOLDER
    from memory_pipeline.core.indexes.turns import TURN_FOLDER

    shutil.copytree(built.store.root, out)
    shutil.rmtree(current_version(out) / TURN_FOLDER / LAYOUT_FOLDER)
    return out


TURN_ARRAYS = (
    "session_code",
    "session_starts",
    "first_chunk",
    "last_chunk",
    "pair_chunk",
    "pair_turn",
    "chunk_start",
    "chunk_session",
    "lengths",
)


def test_the_stored_turn_layout_ranks_as_the_one_derived_at_load(built: Runner, tmp_path):
    """The turn layout's arrays written at publish (memory-mapped when a version loads)
    against the same version without them (derived from the chunk lookup at load), and
    against a turn index built as before they existed (the loop, every sender and length
    read at load): the same results, ids and scores, for every ranking that reads turns
    (reranked, lifted, scoped, time-filtered, SPLADE), and the same turn index."""
    from dataclasses import replace

    from memory_pipeline.core.indexes.turn_arrays import LAYOUT_FOLDER, LAYOUT_META, CsrRows
    from memory_pipeline.core.indexes.turns import TURN_FOLDER
    from memory_pipeline.core.retrieval.searcher import DEFAULT, Searcher
    from memory_pipeline_tests.core.retrieval.test_turn_layout_search import _as_before

    folder = current_version(built.store.root) / TURN_FOLDER / LAYOUT_FOLDER
    assert (folder / LAYOUT_META).is_file()
    stored = Searcher(built.store.root)
    old_copy = _without_stored_layout(built, tmp_path / "derived")
    derived, shipped = Searcher(old_copy), _as_before(Searcher(old_copy))
    a, b, c = stored.turn_index, derived.turn_index, shipped.turn_index
    assert isinstance(a.layout.chunk_rows, CsrRows) and isinstance(b.layout.chunk_rows, list)
    texts = stored.message_ids[0][:2] + stored.message_ids[-1][:2]
    queries = PIN_QUERIES + [stored.message(m)["text"] for m in texts]
    configs = [
        DEFAULT,
        SearchConfig(mode="bm25", turns="index", lift=0.3),
        SearchConfig(mode="bm25", turns="index", rerank=True),
        SearchConfig(mode="bm25", turns="index", splade=3.0),
        replace(DEFAULT, speaker_boost=0.5),
    ]
    as_of = dt.datetime(2024, 3, 15, 10, 0)
    compared = 0
    for q in queries:
        for cfg in configs:
            for scope in ({}, {"contact": "Maria"}):
                x = stored.search(q, 8, cfg, as_of=as_of, **scope).to_dict()
                y = derived.search(q, 8, cfg, as_of=as_of, **scope).to_dict()
                z = shipped.search(q, 8, cfg, as_of=as_of, **scope).to_dict()
                assert x == y == z, (q, cfg.name, scope)
                compared += bool(x["turns"])
    assert compared > len(queries)  # turns were ranked, not only compared empty
    # the turn index itself (read after the searches: its senders and lengths in full)
    for t in (a, b):
        assert t.message_ids == c.message_ids and t.row_of == c.row_of
        assert t.layout.session_ids == c.layout.session_ids
        assert list(t.layout.chunk_rows) == c.layout.chunk_rows
        assert t.extra_chunks == c.extra_chunks and t.senders.tolist() == c.senders.tolist()
        for name in TURN_ARRAYS:
            x, y = getattr(t, name), getattr(c, name)
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), name
        for name in ("position", "session_length"):
            x, y = getattr(t.layout, name), getattr(c.layout, name)
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), name


def test_a_version_without_the_stored_turn_layout_still_loads(built: Runner, tmp_path):
    """A version published before the layout's arrays (or whose arrays do not match its
    chunk lookup) loads, derives the layout, and searches as the pinned rankings say."""
    import shutil

    from memory_pipeline.core.indexes.turn_arrays import LAYOUT_FOLDER, LAYOUT_META
    from memory_pipeline.core.indexes.turns import TURN_FOLDER
    from memory_pipeline.core.retrieval.searcher import Searcher

    want = json.loads(RANKINGS.read_text(encoding="utf-8"))
    old = _without_stored_layout(built, tmp_path / "old")
    stale = tmp_path / "stale"
    shutil.copytree(built.store.root, stale)
    meta = current_version(stale) / TURN_FOLDER / LAYOUT_FOLDER / LAYOUT_META
    meta.write_text(
        json.dumps(json.loads(meta.read_text()) | {"chunk_digest": "other"}), encoding="utf-8"
    )
    for out in (old, stale):
        s = Searcher(out)
        assert s.turn_index is not None and len(s.turn_index) > 0
        assert s.turn_index.message_tokens is not None
        for q in PIN_QUERIES[:4]:
            r = memory_pipeline.search_with(s, q, 5, as_of=dt.datetime(2024, 3, 15, 10, 0))
            assert [t.message_id for t in r.turns] == want[q]["turns"]
            assert [c.chunk_id for c in r.chunks] == want[q]["chunks"]
