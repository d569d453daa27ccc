"""Run an evaluation end to end: build a benchmark corpus through the real pipeline, score
the retrievers, write tables (Parquet + DuckDB views) and the HTML/Markdown report.

This is ``memory-pipeline eval``. The Dagster ``evaluation`` asset only scores the index it
sits on; a benchmark needs a corpus of its own, built here by ``defs.runner`` beside, never
inside, a pipeline run.

Single-owner by design: the corpus is a configuration written here (``CORPUS_CONFIG``: one
owner, a local ``output`` folder, the environment ignored), so the deployment's owners, its
``s3://`` output and its Dask settings are never read or written. Per-owner evaluation of a
multi-owner deployment is the ``evaluation`` asset, which runs for every owner whose
sessions changed (``per_owner``; reports in each owner's ``eval/``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memory_pipeline.core.common import tables as T

# the goals and the published anchors (shared with the ``evaluation`` asset's report)
from memory_pipeline.core.evaluation.goals import GOALS, PAPER_FIGURES

if TYPE_CHECKING:
    from memory_pipeline.defs.runner import Stage

CORPUS_CONFIG = """
[pipeline]
owner = "corpus"
timezone = "UTC"
start_date = "{start}"
end_date = "{end}"
output_dir = "output"

[representations]
dense = ["raw_text", "summary", "embedding_text"]  # the sweep pairs BM25 with every dense rep

[[sources]]
name = "locomo"
kind = "locomo"
path = "{path}"
owner = ""
"""


def build_corpus(locomo: Path, work: Path, log: Callable[[str], None] = print) -> Path:
    """Materialize the pipeline on a LoCoMo file in ``work``; returns the corpus config path.

    Runs the stages the evaluation reads (``corpus_stages``) through ``defs.runner``, the
    same way ``memory-pipeline run`` does, over every date the file holds.
    """
    from memory_pipeline.config import load_config, parse_config
    from memory_pipeline.core.ingest.stage import discover_dates
    from memory_pipeline.defs.build import build_assets
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import materialize_stages, stage_resources

    work.mkdir(parents=True, exist_ok=True)
    probe = parse_config(
        {
            "pipeline": {"owner": "x", "timezone": "UTC", "start_date": "1970-01-01"},
            "sources": [{"name": "locomo", "kind": "locomo", "path": str(locomo), "owner": ""}],
        },
        base_dir=work,
        env={},
    )
    dates = discover_dates(probe.sources, probe.start_date)
    config = work / "memory_pipeline.toml"
    config.write_text(
        CORPUS_CONFIG.format(start=dates[0], end=dates[-1], path=locomo.resolve().as_posix()),
        encoding="utf-8",
    )
    cfg = load_config(config, env={})
    materialize_stages(
        build_assets(cfg, days=dates),  # the days with data only (dev set: 140 of 722)
        corpus_stages(),
        days=dates,
        resources=stage_resources(PipelineResource(config_file=str(config))),
        on_done=lambda done: log(f"corpus: built {', '.join(done.stage.key_names)}"),
    )
    return config


def corpus_stages() -> list[Stage]:
    """The stages a benchmark corpus needs, in order: the table's up to the indexes, with
    memories but not dossiers (the evaluation reads memories and indexes, never dossiers)."""
    from memory_pipeline.defs.memories import MEMORIES
    from memory_pipeline.defs.runner import stage_for, stages

    return [
        *stages("ingest", "sessions", "chunks", "representations"),
        stage_for([MEMORIES]),
        *stages("indexes"),
    ]


def evaluate_locomo(
    locomo: Path,
    out: Path,
    *,
    resamples: int = 5000,
    seed: int = 0,
    log: Callable[[str], None] = print,
    realpersonachat: Path | None = None,
) -> dict:
    """LoCoMo end to end; returns the meta dict (with paths of the report and tables).

    Dossier coverage is scored on the corpus built here (LoCoMo events) and, with
    ``realpersonachat`` (the folder of dialogues.jsonl.gz + interlocutors.json), on the
    dialogues of ``RPC_OWNER`` against the personas."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.evaluation.evalsets import (
        generate_time_queries,
        load_locomo_questions,
    )
    from memory_pipeline.core.evaluation.evaluate import run_evaluation
    from memory_pipeline.core.evaluation.memory_eval import run_memory_evaluation
    from memory_pipeline.core.retrieval.searcher import Searcher
    from memory_pipeline.defs.evaluation import write_tables

    config = build_corpus(locomo, out / "corpus", log)
    cfg = load_config(config, env={})
    searcher = Searcher(cfg.output_dir)
    questions, report = load_locomo_questions(locomo)
    time_questions = generate_time_queries(TableStore(cfg.output_dir).read(T.SESSIONS), seed=seed)
    log(f"eval: {len(questions)} LoCoMo questions, {len(time_questions)} templated time queries")
    run = run_evaluation(
        searcher,
        questions,
        dense_reps=list(cfg.dense_representations),
        time_questions=time_questions,
        seed=seed,
        resamples=resamples,
        log=log,
    )
    memory = run_memory_evaluation(
        searcher, questions, run, seed=seed, resamples=resamples, log=log
    )
    tables = dict(run.tables)
    tables.update(memory.tables)
    gold_tables, gold_meta = memory_gold_tables(TableStore(cfg.output_dir), locomo, seed, resamples)
    tables.update(gold_tables)
    log(f"eval: memory extraction vs observations: {gold_meta['memory_gold_note']}")
    tables["ambiguous"], amb_meta = _ambiguous(searcher, questions, run.meta, seed, resamples)
    dossiers = _dossier_coverage(cfg.output_dir, locomo, realpersonachat, seed, resamples, log)
    tables.update(dossiers.pop("tables"))
    tables["questions_report"] = _questions_report(questions, report)
    write_tables(tables, out)
    meta = {
        **run.meta,
        **memory.meta,
        **gold_meta,
        **dossiers,
        "title": "memory_pipeline retrieval evaluation — LoCoMo",
        "dataset": f"{locomo.name} (LoCoMo, CC BY-NC 4.0, evaluation only)",
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "paper_figures": PAPER_FIGURES,
        "goals": GOALS,
        "command": f"memory-pipeline eval --locomo {locomo} --out {out}",
        "ambiguous": amb_meta,
    }
    from memory_pipeline.core.evaluation.report import write_report

    html, md = write_report(tables, meta, out)
    meta["report_html"], meta["report_md"] = str(html), str(md)
    _propose_selection(meta, locomo, out)
    return meta


def memory_gold_tables(store, locomo: Path, seed: int = 0, resamples: int = 5000):
    """(tables, meta) of the corpus memories scored against the file's observations
    (``memory_gold_summary``, ``memory_gold_per_conversation``)."""
    from memory_pipeline.core.evaluation.memory_gold import (
        load_locomo_observations,
        score_memories_against_gold,
    )

    memories = store.read(T.MEMORIES)
    messages = store.read(T.RAW_MESSAGES, columns=["message_id", "conversation_id", "source_ref"])
    observations, speakers = load_locomo_observations(locomo)
    gold = score_memories_against_gold(
        memories, messages, observations, speakers, resamples=resamples, seed=seed
    )
    by = {r["metric"]: r for r in gold.summary.to_pylist()}

    def fig(name: str) -> str:
        r = by[name]
        return f"{name} {r['mean']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]"

    note = (
        f"{len(observations)} observations, {memories.num_rows} memories; "
        f"{fig('recall')}, {fig('precision')}, {fig('memories_per_1000_messages')}"
    )
    tables = {
        "memory_gold_summary": gold.summary,
        "memory_gold_per_conversation": gold.per_conversation,
    }
    return tables, {"memory_gold_note": note}


def _ambiguous(searcher, questions, run_meta: dict, seed: int, resamples: int):
    """Ambiguous variants of the questions (``evaluation.ambiguous``) under the search the
    cross-validation selected (the dev split's selection without CV): original vs
    ambiguous vs resolved from a synthetic preceding turn."""
    from memory_pipeline.core.evaluation import evaluate as E
    from memory_pipeline.core.evaluation.ambiguous import LIMITS, evaluate_ambiguous
    from memory_pipeline.core.retrieval.config import PRESETS, SearchConfig

    cv = run_meta.get("cv") or {}
    fields = cv.get("selected_config")
    config = SearchConfig(**fields) if fields else PRESETS["default"]
    table, rows = evaluate_ambiguous(
        searcher,
        questions,
        config,
        units=E.Units(searcher),
        question_scores=E.question_scores,
        seed=seed,
        resamples=min(resamples, 2000),
    )
    variants = len({(r["question_id"], r["kind"]) for r in rows})
    return table, {"config": config.name, "variants": variants, "limits": LIMITS}
RPC_OWNER = "AA"  # the RealPersonaChat slice: this speaker's dialogues, partners as contacts


def _dossier_coverage(
    output_dir: Path,
    locomo: Path,
    realpersonachat: Path | None,
    seed: int,
    resamples: int,
    log: Callable[[str], None],
) -> dict:
    """Dossier coverage tables and meta: the corpus's dossiers folded in memory (the corpus
    has no dossier stage) against LoCoMo's event_summary, and optionally RealPersonaChat."""
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.evaluation import dossier_eval as de
    from memory_pipeline.core.sessions.stage import session_messages

    store = TableStore(output_dir)
    sessions = store.read(T.SESSIONS)
    messages = session_messages(store, sessions)
    versions = de.fold_versions(
        sessions, messages, store.read(T.SESSION_ENRICHMENT), store.read(T.MEMORIES)
    )
    run = de.event_coverage(locomo, sessions, messages, versions, seed=seed, resamples=resamples)
    de.format_summary(run, log)
    runs = [run]
    if realpersonachat is not None:
        rpc = de.persona_coverage_of_corpus(
            Path(realpersonachat), RPC_OWNER, seed=seed, resamples=resamples
        )
        de.format_summary(rpc, log)
        runs.append(rpc)
    tables: dict = {}
    for r in runs:
        for name, table in r.tables().items():
            tables[name] = table if name not in tables else _concat(tables[name], table)
    note = f"RealPersonaChat slice: the dialogues of {RPC_OWNER}." if realpersonachat else ""
    return {"tables": tables, "dossier_note": note}


def _concat(a, b):
    import pyarrow as pa

    return pa.concat_tables([a, b])


def _propose_selection(meta: dict, locomo: Path, out: Path) -> None:
    """Write the cross-validated selection beside the report and diff it against the packaged
    one (``meta["selection_diff"]``); the package file changes only on --accept-selection."""
    from memory_pipeline.core.evaluation import selection as sel
    from memory_pipeline.core.retrieval.config import SELECTION

    proposed = sel.propose(meta, locomo, f"memory-pipeline eval --locomo {locomo.name}")
    if proposed is None:
        return
    proposed = sel.carry_over(proposed, SELECTION)
    path = out / "selection.proposed.json"
    path.write_text(sel.render(proposed), encoding="utf-8")
    meta["selection_proposed"] = str(path)
    if "reranker" in meta:  # the reranker trained on every conversation, with provenance
        from memory_pipeline.core.retrieval.rerank import render_artifact

        model = dict(meta.pop("reranker"))
        model["provenance"] = {
            **model.get("provenance", {}),
            "data": proposed["provenance"]["data"],
            "command": proposed["provenance"]["command"],
            "date": proposed["provenance"]["date"],
        }
        rpath = out / "reranker.proposed.json"
        rpath.write_text(render_artifact(model), encoding="utf-8")
        meta["reranker_proposed"] = str(rpath)
    meta["selection_diff"] = sel.diff(dict(SELECTION), proposed)


def _questions_report(questions, report):
    import pyarrow as pa

    rows: dict[tuple[str, str], dict] = {}
    for q in questions:
        r = rows.setdefault(
            (q.corpus_id, q.qtype),
            {
                "corpus_id": q.corpus_id,
                "qtype": q.qtype,
                "questions": 0,
                "excluded": 0,
                "unresolved_ids": 0,
            },
        )
        r["questions"] += 1
        r["excluded"] += 0 if q.scored else 1
    for u in getattr(report, "unresolved", []):
        qid = getattr(u, "question_id", "")
        corpus = qid.split("/")[0]
        for r in rows.values():
            if r["corpus_id"] == corpus:
                r["unresolved_ids"] += 1
                break
    return pa.Table.from_pylist(list(rows.values()))
