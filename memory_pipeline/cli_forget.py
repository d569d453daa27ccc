"""The ``forget`` command: remove a contact's or a message's records and rebuild."""

from __future__ import annotations

import argparse
import sys

from memory_pipeline.cli_common import EXIT_USAGE, _instance_home, _writing, load_config
from memory_pipeline.config import PipelineConfig, owner_config


def cmd_forget(args: argparse.Namespace) -> int:
    """Forget a contact everywhere (dry run unless --yes), or list what is forgotten."""
    from memory_pipeline.core.privacy.forget import forgotten_entries
    from memory_pipeline.state import prepare_state

    deployment = load_config(args.config)
    prepare_state(deployment)
    try:
        cfg = owner_config(deployment, args.owner)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        entries = forgotten_entries(cfg.state_root)
        for e in entries:
            print(f"{e['forgotten_on']}  {e['kind']:<12}  {e['hash']}")
        print(f"{len(entries)} forgotten (salted hashes; names and texts are never stored)")
        return 0
    if not args.contact:
        print("error: forget needs --contact NAME (or: forget list)", file=sys.stderr)
        return 2
    if not args.yes:  # a dry run writes nothing: no need to wait for a run
        return _forget(args, cfg, deployment)
    with _writing(deployment, args.wait):
        return _forget(args, cfg, deployment)


def _forget(args: argparse.Namespace, cfg: PipelineConfig, deployment: PipelineConfig) -> int:
    from memory_pipeline.core.privacy.forget import UnknownContact, apply_forget
    from memory_pipeline.defs.forget import plan_for
    from memory_pipeline.defs.forget_run import rebuild_after_forget

    try:
        plan = plan_for(cfg, args.contact)
    except UnknownContact as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(plan.summary_lines()))
    if not args.yes:
        print("dry run: nothing was changed; pass --yes to forget")
        return 0
    import dagster as dg

    apply_forget(plan)
    _instance_home(deployment)
    # the whole deployment's rebuild: only this owner's inputs changed, so only they rebuild
    ok = rebuild_after_forget(deployment, dg.DagsterInstance.get())
    print(
        f"forgotten; the forget list in {cfg.state_root} keeps them out of every future run, "
        "even after the output is deleted"
    )
    if not ok:
        print("error: rebuilding the indexes failed: run `memory-pipeline run`", file=sys.stderr)
        return 1
    return 0
