"""The ``eval`` command: the retrieval evaluation (LoCoMo, JSQuAD) and the selection review."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from memory_pipeline.cli_common import load_config
from memory_pipeline.config import ConfigError


def _locomo_file(args: argparse.Namespace) -> Path | None:
    """--locomo, else ``[evaluation] locomo`` of the config (when a config file is found:
    the benchmark needs none; ``MEMORY_PIPELINE_EVAL_LOCOMO`` sets it too); None when neither
    names one (the file is never shipped: evaluation only, CC BY-NC)."""
    from memory_pipeline.config import find_config_file

    if args.locomo:
        return Path(args.locomo).resolve()
    try:
        config = find_config_file(args.config)
    except ConfigError:
        if args.config:
            raise
        config = None
    configured = load_config(config).eval_locomo if config else None
    return configured or None


def cmd_eval_jsquad(args: argparse.Namespace) -> int:
    """``eval --jsquad PATH``: Japanese paragraph retrieval, BM25 vs each local embedder."""
    import json

    from memory_pipeline.core.evaluation import jsquad as J
    from memory_pipeline.core.represent.providers.factory import LOCAL_MODELS, make_embedder

    path = Path(args.jsquad)
    if not path.is_file():
        print(f"error: JSQuAD file not found: {path}", file=sys.stderr)
        return 2
    models = args.models.split(",") if args.models else list(LOCAL_MODELS)
    try:
        paragraphs, questions = J.load_jsquad(path, args.max_articles)
    except J.JsquadFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from memory_pipeline.core.represent.providers.factory import MissingExtra

    t0 = time.perf_counter()
    embedders = {}
    for m in models:
        try:
            embedders[m] = make_embedder("local", m)
        except MissingExtra as exc:
            if args.models:  # asked for by name: a one-line error, not a traceback
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(f"skipped {m}: {exc}")  # the default list compares what is installed
    rows = J.run_jsquad(paragraphs, questions, embedders, resamples=args.resamples, seed=args.seed)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    md = J.render_markdown(rows, len(paragraphs), len({p.article for p in paragraphs}))
    (out / "jsquad.json").write_text(json.dumps(rows, ensure_ascii=False, indent=1), "utf-8")
    (out / "jsquad.md").write_text(md, encoding="utf-8")
    print(md)
    print(f"tables: {out / 'jsquad.json'}   done in {time.perf_counter() - t0:.0f}s")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from memory_pipeline.eval_runner import evaluate_locomo

    if args.jsquad:
        return cmd_eval_jsquad(args)
    locomo = _locomo_file(args)
    if locomo is None:
        print(
            "error: no LoCoMo file: pass --locomo FILE or set MEMORY_PIPELINE_EVAL_LOCOMO",
            file=sys.stderr,
        )
        return 2
    if not locomo.is_file():
        print(f"error: LoCoMo file not found: {locomo}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    t0 = time.perf_counter()
    rpc = Path(args.realpersonachat) if args.realpersonachat else None
    meta = evaluate_locomo(
        locomo, out, resamples=args.resamples, seed=args.seed, realpersonachat=rpc
    )
    print(f"\nselected on dev: {meta['selected_config']}  ({meta['selection_metric']})")
    print(f"questions: {meta['questions']}, configurations swept: {meta['configurations']}")
    print(f"tables: {out / 'tables'}   duckdb: {out / 'evaluation.duckdb'}")
    if "report_html" in meta:
        print(f"report: {meta['report_html']}  (and {meta['report_md']})")
    if "selection_proposed" in meta:
        _review_selection(meta, accept=args.accept_selection)
    print(f"done in {time.perf_counter() - t0:.0f}s")
    return 0


def _review_selection(meta: dict, *, accept: bool) -> None:
    """Show the cross-validated selection against the packaged default; write it into the
    package only when asked (a reviewable change, never a silent one)."""
    import shutil

    from memory_pipeline.core.evaluation.selection import packaged_path

    cv = meta["cv"]
    print(f"cross-validated selection (leave one conversation out): {cv['selected']}")
    if not meta["selection_diff"]:
        print("the packaged default search configuration is this selection: nothing to change")
        return
    print(meta["selection_diff"], end="")
    if accept:
        target = packaged_path()
        shutil.copyfile(meta["selection_proposed"], target)
        print(f"accepted: wrote {target} (review and commit it)")
        if meta.get("reranker_proposed"):
            from memory_pipeline.core.retrieval.rerank import packaged_path as reranker_path

            shutil.copyfile(meta["reranker_proposed"], reranker_path())
            print(f"accepted: wrote {reranker_path()} (review and commit it)")
    else:
        print(
            f"proposed: {meta['selection_proposed']}  (--accept-selection writes it as the default)"
        )
