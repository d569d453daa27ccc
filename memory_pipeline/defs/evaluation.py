"""evaluation: retrieval quality of the published indexes, with confidence intervals.

On the pipeline's own data it always scores templated time queries (gold = the sessions in
the window); with ``[evaluation] questions`` it scores the user's labelled JSONL questions,
and with ``[evaluation] locomo`` it also runs the LoCoMo benchmark in its own corpus folder.
"""

from pathlib import Path

import dagster as dg

from memory_pipeline.defs.indexes import BM25, TIME_META, VECTORS
from memory_pipeline.defs.resources import PipelineResource

EVALUATION = dg.AssetKey("evaluation")


@dg.asset(
    key=EVALUATION,
    deps=[BM25, VECTORS, TIME_META],
    group_name="evaluation",
    description="Retrieval metrics (Recall/hit/MRR/nDCG@K, LoCoMo evidence recall) with "
    "bootstrap CIs; tables + HTML/Markdown report under <output>/eval/.",
)
def evaluation(context: dg.AssetExecutionContext, pipeline: PipelineResource):
    from memory_pipeline.core.evaluation.evalsets import generate_time_queries, load_jsonl_questions
    from memory_pipeline.core.evaluation.evaluate import run_evaluation
    from memory_pipeline.core.retrieval.searcher import Searcher
    from memory_pipeline.eval_runner import evaluate_locomo, write_tables

    cfg, store = pipeline.cfg, pipeline.store
    out = cfg.output_dir / "eval"
    searcher = Searcher(cfg.output_dir)
    questions, notes = [], []
    if cfg.eval_questions:
        questions, report = load_jsonl_questions(cfg.eval_questions)
        notes.append(f"{len(questions)} labelled questions from {cfg.eval_questions}")
    time_questions = generate_time_queries(store.read("sessions"))
    run = run_evaluation(
        searcher,
        questions,
        dense_reps=list(cfg.dense_representations) if questions else [],
        time_questions=time_questions,
        log=context.log.info,
    )
    metadata: dict = {"time_queries": len(time_questions), "questions": len(questions)}
    write_tables(run.tables, out)
    summary = run.tables["summary"]
    for row in summary.to_pylist():
        if row["config"] == "time_filters" and row["qtype"] == "all":
            metadata["time_query_recall"] = round(row["mean"], 4)
            metadata["time_query_recall_ci"] = f"[{row['ci_lo']:.3f}, {row['ci_hi']:.3f}]"
    if cfg.eval_locomo:
        meta = evaluate_locomo(Path(cfg.eval_locomo), out / "locomo", log=context.log.info)
        metadata["locomo_selected"] = meta["selected_config"]
        if "report_html" in meta:
            metadata["locomo_report"] = dg.MetadataValue.path(meta["report_html"])
    metadata["tables"] = dg.MetadataValue.path(str(out / "tables"))
    return dg.MaterializeResult(metadata=metadata)
