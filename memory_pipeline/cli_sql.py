"""The ``sql`` and ``tokenize`` commands: read-only looks at the warehouse and the index."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory_pipeline.cli_common import EXIT_NO_MATCH, EXIT_OK, EXIT_USAGE, _owner_cfg
from memory_pipeline.config import ConfigError, PipelineConfig
from memory_pipeline.core.common import fs


def _published_index(cfg: PipelineConfig, representation: str):
    """The published BM25 index of ``representation`` (its tokenizer and vocabulary)."""
    from memory_pipeline.core.common.representations import REPRESENTATIONS
    from memory_pipeline.core.indexes.bm25 import load_index
    from memory_pipeline.core.indexes.publish import current_version
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    if representation not in REPRESENTATIONS:
        raise ConfigError(
            f"unknown representation {representation!r}; known: {', '.join(REPRESENTATIONS)}"
        )
    version = current_version(cfg.storage_root)
    if version is None or not (version / "bm25" / representation).is_dir():
        raise IndexNotBuilt(
            f"no BM25 index under {fs.join(cfg.storage_root, 'indexes')}: run `memory-pipeline run`"
        )
    return load_index(version / "bm25" / representation)


def cmd_tokenize(args: argparse.Namespace) -> int:
    """The query's tokens as the published index makes them: ``$tokens`` of bm25_search.sql."""
    import json

    from memory_pipeline.core.indexes.bm25 import query_tokens
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    try:
        cfg = _owner_cfg(args)
        index = _published_index(cfg, args.representation)
    except (IndexNotBuilt, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    tokens = query_tokens(index, args.text)
    print(json.dumps(tokens, ensure_ascii=False))
    return EXIT_OK if tokens else EXIT_NO_MATCH


def _sql_param(text: str) -> tuple[str, object]:
    """``name=value``: the value as JSON when it parses (5, 0.5, ["a"]), else the string."""
    import json

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip().lstrip("$"), json.loads(value)
    except ValueError:
        return name.strip().lstrip("$"), value


def cmd_sql(args: argparse.Namespace) -> int:
    """One SELECT on the warehouse, e.g. sql/bm25_search.sql with ``--query``: the query is
    tokenized by the published index into ``$tokens``. Read-only and confined to the
    project's tables by ``catalog.connect`` (docs/security.md, "SQL surface")."""
    import json

    import duckdb

    from memory_pipeline.core.common.catalog import StatementRefused, connect
    from memory_pipeline.core.indexes.bm25 import query_tokens
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    if (args.statement is None) == (args.file is None):
        print("error: give one SQL statement or --file", file=sys.stderr)
        return EXIT_USAGE
    if args.file is not None:
        try:
            statement = Path(args.file).read_text(encoding="utf-8")
        except OSError as exc:
            print(f"error: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    else:
        statement = args.statement
    try:
        cfg = _owner_cfg(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    params = dict(args.param)
    try:
        if args.query is not None:
            rep = str(params.get("representation", "raw_text"))
            params["tokens"] = query_tokens(_published_index(cfg, rep), args.query)
        if not cfg.warehouse_path.is_file():
            raise IndexNotBuilt(f"no warehouse at {cfg.warehouse_path}: run `memory-pipeline run`")
    except IndexNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        con = connect(cfg.warehouse_path)
    except (duckdb.Error, OSError) as exc:
        print(f"error: cannot open {cfg.warehouse_path}: {_first_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        cur = con.execute(statement, params or None)
        columns = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    except (duckdb.Error, StatementRefused) as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        con.close()
    if args.json:
        out = [dict(zip(columns, r, strict=True)) for r in rows]
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
    else:
        print("\t".join(columns))
        for r in rows:
            print("\t".join("" if v is None else str(v) for v in r))
    return EXIT_OK


def _first_line(exc: BaseException) -> str:
    """An error's first non-empty line (DuckDB appends the statement and a caret)."""
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
