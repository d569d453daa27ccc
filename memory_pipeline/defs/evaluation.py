"""evaluation: retrieval quality of the published indexes, with confidence intervals.

The asset scores the index it sits on, nothing else: on the pipeline's own data it always
scores templated time queries (gold = the sessions in the window), and with
``[evaluation] questions`` the user's labelled JSONL questions. The LoCoMo benchmark needs a
corpus of its own built by the whole pipeline, so it is the CLI command
``memory-pipeline eval`` (``memory_pipeline/eval_runner.py``), never a nested build inside
this asset.
"""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.indexes.publish import current_version
from memory_pipeline.defs.helpers import asset_info, code_version
from memory_pipeline.defs.indexes import BM25, TIME_META, VECTORS
from memory_pipeline.defs.owner_fanout import inputs_fingerprint, per_owner
from memory_pipeline.defs.resources import PipelineResource

EVALUATION = dg.AssetKey("evaluation")


def write_tables(tables: dict[str, pa.Table], out: Path) -> None:
    """Parquet per table and a DuckDB file with a view per table.

    Shared by this asset and ``memory-pipeline eval``, so both outputs are read the same way
    (``eval_<table>`` views over ``<out>/tables/<table>.parquet``).
    """
    import duckdb

    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        pq.write_table(table, folder / f"{name}.parquet")
    db = out / "evaluation.duckdb"
    db.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    try:
        for name in tables:
            path = (folder / f"{name}.parquet").resolve().as_posix()
            con.execute(f"CREATE VIEW eval_{name} AS SELECT * FROM read_parquet('{path}')")
    finally:
        con.close()


@dg.asset(
    key=EVALUATION,
    deps=[BM25, VECTORS, TIME_META],
    group_name="evaluation",
    description="Retrieval metrics (Recall/hit/MRR/nDCG@K) of the published indexes on "
    "templated time queries and the [evaluation] questions (the shipped config: the sample's "
    "labelled questions in English and Japanese), with bootstrap CIs; tables and report.html "
    "under <output>/eval/. LoCoMo is `memory-pipeline eval`.",
    **asset_info(
        "evaluation",
        ("python", "parquet", "html"),
        "memory_pipeline.defs.evaluation",
        "memory_pipeline.core.evaluation",
    ),
)
@per_owner(inputs_fingerprint((T.SESSIONS,), lambda scope: _eval_settings(scope.cfg)))
def evaluation(context: dg.AssetExecutionContext, pipeline: PipelineResource):
    from memory_pipeline.core.evaluation.evalsets import generate_time_queries, load_jsonl_questions
    from memory_pipeline.core.evaluation.evaluate import run_evaluation
    from memory_pipeline.core.retrieval.searcher import Searcher

    cfg, store = pipeline.cfg, pipeline.store
    out = cfg.output_dir / "eval"
    searcher = Searcher(cfg.storage_root)
    questions, notes = [], []
    if cfg.eval_questions:
        questions, report = load_jsonl_questions(cfg.eval_questions)
        notes.append(f"{len(questions)} labelled questions from {cfg.eval_questions}")
        for error in report.errors:
            context.log.warning(f"evaluation: skipped {error}")
    if cfg.eval_locomo:
        # the benchmark builds its own corpus; running it here would nest a whole pipeline
        # build for another configuration inside this run
        context.log.warning(
            "[evaluation] locomo is scored by `memory-pipeline eval`, not by this asset"
        )
    sessions = store.read(T.SESSIONS)
    if sessions.num_rows == 0:
        # every record quarantined (or no input at all): say so once, then write the same
        # tables with 0 rows so readers and the warehouse views still open them
        context.log.warning("evaluation: 0 sessions in the corpus (0 messages ingested)")
    time_questions = generate_time_queries(sessions)
    run = run_evaluation(
        searcher,
        questions,
        dense_reps=list(cfg.dense_representations) if questions else [],
        time_questions=time_questions,
        log=context.log.info,
    )
    metadata: dict = {
        "time_queries": len(time_questions),
        "questions": len(questions),
        "sessions": sessions.num_rows,
    }
    write_tables(run.tables, out)
    summary = run.tables["summary"]
    for row in summary.to_pylist():
        if row["config"] == "time_filters" and row["qtype"] == "all":
            metadata["time_query_recall"] = round(row["mean"], 4)
            metadata["time_query_recall_ci"] = f"[{row['ci_lo']:.3f}, {row['ci_hi']:.3f}]"
    if questions:
        metadata.update(_labelled_metrics(run.tables["summary"], run.meta))
    html = _write_report(run, questions, cfg, out)
    metadata["tables"] = dg.MetadataValue.path(str(out / "tables"))
    metadata["report"] = dg.MetadataValue.path(str(html))
    return dg.MaterializeResult(metadata=metadata)


def _eval_settings(cfg) -> str | None:
    """An owner's evaluation scores their published index: rebuild when it changed."""
    version = current_version(cfg.storage_root)
    if version is None or not (cfg.output_dir / "eval").is_dir():
        return None
    return f"{version.name}|{code_version('memory_pipeline.defs.evaluation')}"


def _labelled_metrics(summary: pa.Table, meta: dict) -> dict:
    """The shipped default's headline on the labelled questions (all of them: the default
    was not chosen on them), with its CI, the configuration per language, and the
    configuration the dev split would select (absent on a corpus too small to split)."""
    headline = str(meta.get("headline_config") or meta.get("selected_config") or "")
    out: dict = {
        "default_config": "; ".join(
            f"{lang}: {used['config']}" for lang, used in (meta.get("shipped") or {}).items()
        ),
    }
    if not meta.get("small_corpus"):
        out["selected_config"] = str(meta.get("selected_config") or "")
    for row in summary.to_pylist():
        if (
            row.get("config") == headline
            and row.get("split") == "all"
            and row.get("qtype") == "all"
            and row.get("metric") == "evidence_recall"
            and row.get("k") == 5
            and row.get("level") in ("turn", "session")
        ):
            key = f"{row['level']}_recall@5"
            out[key] = round(row["mean"], 4)
            out[f"{key}_ci"] = f"[{row['ci_lo']:.3f}, {row['ci_hi']:.3f}]"
    return out


def _write_report(run, questions: list, cfg, out: Path) -> Path:
    """report.html / report.md over the run's tables, naming what was scored."""
    import datetime as dt

    from memory_pipeline.core.evaluation.goals import GOALS, PAPER_FIGURES
    from memory_pipeline.core.evaluation.report import write_report

    meta = {
        **run.meta,
        # LoCoMo's goals and the papers' figures: a reference point for the user's own data
        "goals": GOALS,
        "goals_source": "the goals of the LoCoMo evaluation",
        "paper_figures": PAPER_FIGURES,
        "title": "memory_pipeline retrieval evaluation — this pipeline's own data",
        "dataset": f"{cfg.eval_questions.name if cfg.eval_questions else 'no labelled questions'}"
        f" ({len(questions)} labelled questions) + templated time queries",
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "memory-pipeline run (asset `evaluation`)",
    }
    html, _md = write_report(run.tables, meta, out)
    return html
