"""The ``search`` and ``context`` commands and the flags they share."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from memory_pipeline.cli_common import (
    EXIT_NO_MATCH,
    EXIT_OK,
    EXIT_USAGE,
    _positive_int,
    _recent_messages,
    _unit_float,
)


def cmd_search(args: argparse.Namespace) -> int:
    import json

    from memory_pipeline import search
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    as_of = args.as_of
    try:
        recent = _recent_messages(args.recent)
        if _unknown_scope(args):
            return EXIT_USAGE
        result = search(
            args.query,
            args.k,
            config=args.config,
            contact=args.contact,
            conversation=args.conversation,
            as_of=as_of,
            search_config=_search_config(args),
            recent=recent,
            owner=args.owner,
        )
    except IndexNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a bad --recent: one line naming the file/line or item
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    found = EXIT_OK if result.chunks and result.answerable else EXIT_NO_MATCH
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=1, default=str))
        return found
    if result.chunks and not result.answerable:  # the least bad hits are not evidence
        print(f"no relevant memory (confidence {result.confidence:.2f})")
        return found
    filters = ", ".join(
        f"{f['field']} {f['op']} {f.get('value') or ''}{f.get('start') or ''}"
        f"{'..' + str(f['end']) if f.get('end') else ''}"
        for f in result.filters
    )
    print(
        f"query: {result.query!r}  [{result.kind}, {result.mode}]"
        + (f"  filters: {filters}" if filters else "")
    )
    for note in result.notes:
        print(f"  note: {note}")
    if not result.chunks:
        print("no results")
    for hit in result.chunks:
        print(
            f"\n{hit.rank}. {hit.contact_id} · {hit.start} → {hit.end} · "
            f"score {hit.score:.4f} · session {hit.session_id}"
        )
        for h in hit.highlights:
            text = h.text if len(h.text) <= 160 else h.text[:157] + "…"
            print(f"   [{h.local_ts}] {h.sender}: {text}   ({h.source_ref})")
    return found


def cmd_context(args: argparse.Namespace) -> int:
    import json

    from memory_pipeline import context, recall
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    as_of = args.as_of
    common = {
        "config": args.config,
        "contact": args.contact,
        "as_of": as_of,
        "search_config": _search_config(args),
        "owner": args.owner,
    }
    try:
        recent = _recent_messages(args.recent)
        if _unknown_scope(args):
            return EXIT_USAGE
        if args.escalate:
            if recent is not None:
                print("error: --recent is not supported with --escalate", file=sys.stderr)
                return EXIT_USAGE
            sources = True if args.sources else None
            pack = recall(
                args.question, args.budget, sources=sources, strategy=args.strategy, **common
            )
        else:
            pack = context(
                args.question, args.budget, strategy=args.strategy, recent=recent, **common
            )
    except IndexNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(pack.to_dict(), ensure_ascii=False, indent=1, default=str))
        return 0
    kinds = Counter(p.kind for p in pack.pieces)
    print(
        f"# context for {args.question!r}: {pack.utf16:,} of {pack.budget:,} UTF-16 units, "
        f"strategy {pack.strategy}, "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        + (f"; {pack.reason}" if pack.reason else "")
    )
    for note in pack.notes:
        print(f"# note: {note}")
    print()
    print(pack.render())
    return 0


def _unknown_scope(args: argparse.Namespace) -> bool:
    """Say so (one line, a few known ids) when ``--contact`` / ``--conversation`` names
    nothing in the published index: an empty answer would read as "never talked about it".
    Raises IndexNotBuilt like the search itself."""
    from memory_pipeline import searcher

    s = None
    for flag, value, column in (
        ("--contact", args.contact, "contact"),
        ("--conversation", getattr(args, "conversation", None), "conversation"),
    ):
        if value is None:
            continue
        s = s or searcher(args.config, owner=getattr(args, "owner", None))
        known = sorted({str(v) for v in getattr(s, column)})
        if value not in known:
            shown = ", ".join(known[:5]) + (f", … ({len(known)} in all)" if len(known) > 5 else "")
            print(f"error: unknown {flag} {value!r}; known: {shown or 'none'}", file=sys.stderr)
            return True
    return False


def _search_config(args: argparse.Namespace):
    """The SearchConfig of the flags: the ``--preset``, with each ranking flag given
    replacing its field (a flag left out keeps the preset's value)."""
    from memory_pipeline.core.retrieval.config import resolve

    return resolve(
        args.preset,
        mode=getattr(args, "mode", None),
        fusion=getattr(args, "fusion", None),
        beta=getattr(args, "beta", None),
        rrf_k=getattr(args, "rrf_k", None),
        bm25_rep=getattr(args, "bm25_rep", None),
        dense_rep=getattr(args, "dense_rep", None),
        use_time=False if getattr(args, "no_time", False) else None,
    )


def _add_search_flags(parser: argparse.ArgumentParser, *, ranking: bool) -> None:
    """``--preset`` (both commands) and, with ``ranking``, the flags that adjust it."""
    from memory_pipeline.core.retrieval.config import FUSIONS, MODES, PRESETS, REPRESENTATIONS

    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="default",
        help="a ranking preset (default: the evaluation's selection for the query's language)",
    )
    if not ranking:
        return
    parser.add_argument("--mode", choices=list(MODES), help="default: the preset's")
    parser.add_argument("--fusion", choices=list(FUSIONS), help="default: the preset's")
    parser.add_argument("--beta", type=_unit_float, help="linear fusion: weight of BM25 in [0, 1]")
    parser.add_argument("--rrf-k", type=_positive_int, help="RRF constant k (>= 1)")
    parser.add_argument("--bm25-rep", choices=list(REPRESENTATIONS), help="BM25 representation")
    parser.add_argument("--dense-rep", choices=list(REPRESENTATIONS), help="dense representation")
    parser.add_argument(
        "--no-time", action="store_true", help="no time filters: every query is content"
    )


def _add_recent_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recent",
        action="append",
        metavar="MESSAGE_OR_FILE",
        help="the conversation so far, to resolve 'that', 'she', あれ, あの件 (repeat it; a "
        "file holds a JSON list, JSON Lines or one message per line)",
    )
