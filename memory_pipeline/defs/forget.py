"""Forgetting a contact from Dagster, the CLI and the API: purge, then rebuild what was dropped.

The purge itself is ``core/privacy/forget.py``. What it deletes but other contacts still need
(every index version, the unpartitioned derived tables, the storage report, the evaluation
tables, the warehouse) is rebuilt here from the cleaned tables by the ordinary stages, so
search works again and nothing rebuilt can contain the forgotten contact
(``defs/forget_run.py``; the job leaves that to ``refresh_warehouse``).
"""

import dagster as dg

from memory_pipeline.config import PipelineConfig, owner_config
from memory_pipeline.core.privacy.forget import ForgetPlan, apply_forget, plan_forget
from memory_pipeline.defs.resources import PipelineResource

FORGET_JOB = "forget_contact"


def plan_for(cfg: PipelineConfig, contact: str) -> ForgetPlan:
    """What forgetting ``contact`` removes under ``cfg``'s folders (changes nothing but an
    older output's migration: its forget list has to be in the state before one is added)."""
    from memory_pipeline.state import prepare_state

    prepare_state(cfg)
    return plan_forget(
        cfg.storage_root,
        contact,
        dossier_dir=cfg.dossiers_path,
        cache_path=cfg.cache_path,
        work_dir=cfg.output_dir,
        state_dir=cfg.state_root,
        inbox=cfg.inbox_path,
    )


@dg.op(
    config_schema={
        "contact": dg.Field(str, description="contact_id or display name"),
        "owner": dg.Field(
            str, is_required=False, description="whose contact (several owners: required)"
        ),
    },
    description="Forget a contact everywhere (tables, index versions, cache, dossier file) "
    "and put them on the forget list; then run refresh_warehouse to rebuild the indexes.",
)
def forget_contact_op(context: dg.OpExecutionContext, pipeline: PipelineResource) -> None:
    try:
        cfg = owner_config(pipeline.cfg, context.op_config.get("owner"))
    except ValueError as exc:  # the owner is missing among several, or unknown
        raise dg.Failure(description=str(exc)) from None
    plan = plan_for(cfg, context.op_config["contact"])
    apply_forget(plan)
    # counts only: no name, no text in the event log
    context.log.info(
        f"forgot {len(plan.conversations)} conversations: {sum(plan.rows.values())} rows, "
        f"{len(plan.index_versions)} index versions, {plan.cache_entries} cache entries"
    )


@dg.job(
    name=FORGET_JOB,
    description="Forget one contact (run config: ops.forget_contact_op.config.contact), "
    "durably: ingest skips them from now on. Rebuild the indexes with refresh_warehouse.",
)
def forget_contact_job() -> None:
    forget_contact_op()
