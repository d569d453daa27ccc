"""The state folder of a configuration: where it is, its Dagster instance, its key file.

``core/common/state.py`` holds the rules (what is state, the format records, migrations);
this module applies them to a :class:`~memory_pipeline.config.PipelineConfig`: every owner's
(output, state) pair, the key file's and the inbox's moves, and ``DAGSTER_HOME``'s default
(``<state>/dagster``, with a ``dagster.yaml`` made from the repository's template).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import state as S
from memory_pipeline.core.common.forget_list import PRIVACY_DIR, SALT_FILE
from memory_pipeline.core.common.owners import OWNERS_DIR, valid_owner_id
from memory_pipeline.core.ingest.inbox import inbox_dir

LEGACY_KEYS = Path("service") / "keys.json"  # format 0: the key file in the output folder
LEGACY_INSTANCE = Path("data") / "dagster"  # format 0: the shipped dagster.yaml's folder
# dagster.yaml settings a generated instance gets when the config's folder has no template
DEFAULT_INSTANCE = {
    "concurrency": {
        "runs": {"max_concurrent_runs": 4},
        "pools": {"default_limit": 1, "granularity": "op"},
    },
    "run_monitoring": {
        "enabled": True,
        "start_timeout_seconds": 180,
        "max_runtime_seconds": 43200,
        "poll_interval_seconds": 60,
    },
    "telemetry": {"enabled": False},
}


def package_version() -> str:
    """The installed package's version (``0+unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memory_pipeline")
    except PackageNotFoundError:
        return "0+unknown"


def version_line() -> str:
    """What ``memory-pipeline --version`` prints."""
    return (
        f"memory-pipeline {package_version()} (output format {S.OUTPUT_FORMAT}, "
        f"state format {S.STATE_FORMAT})"
    )


def pairs(cfg: PipelineConfig) -> list[tuple[fs.Location, fs.Location]]:
    """Every (output, state) pair of ``cfg``: the deployment's, then each owner folder's."""
    out, state = cfg.storage_root, cfg.state_root
    owners = [o for o in fs.list_dirs(fs.join(out, OWNERS_DIR)) if valid_owner_id(o)]
    return [(out, state)] + [
        (fs.join(out, OWNERS_DIR, o), fs.join(state, OWNERS_DIR, o)) for o in owners
    ]


def keys_path(cfg: PipelineConfig) -> Path:
    """Where the service's key file goes by default: ``<local state>/service/keys.json``."""
    return cfg.local_state_dir / S.KEYS_FILE


def _stderr(line: str) -> None:
    print(f"note: {line}", file=sys.stderr, flush=True)


def prepare_state(
    cfg: PipelineConfig,
    *,
    writing: bool = False,
    move_keys: bool = False,
    say: Callable[[str], None] | None = _stderr,
) -> S.Prepared:
    """Migrate an older output's state files, refuse an output whose state is missing,
    stamp the format records. Raises ``StateError`` (one line); says each notice once.

    ``move_keys``: also move an older output's key file into the state (the commands that
    use the default key file: ``keys``, ``serve``, ``mcp``, ``backup``; never one given by
    ``--keys`` or ``$MEMORY_PIPELINE_KEYS``, which a server may be reading)."""
    deployment = cfg.root_dir is None
    legacy = (cfg.output_dir / LEGACY_KEYS, keys_path(cfg)) if deployment and move_keys else None
    done = S.prepare(
        pairs(cfg) if deployment else [(cfg.storage_root, cfg.state_root)],
        keys=legacy,
        writing=writing,
        version=package_version(),
    )
    done.notices.extend(migrate_inboxes(cfg))
    if say is not None:
        for line in done.notices:
            say(line)
    return done


def migrate_inboxes(cfg: PipelineConfig) -> list[str]:
    """Move each owner's inbox from the output folder (where an older release kept it) into
    their local state folder: posted messages are source data, and the output may be
    deleted. A configured ``kind = "inbox"`` source stays where it is. The notices."""
    from memory_pipeline.core.ingest.inbox import IMPLICIT, configured_inbox, migrate_inbox

    owners = [cfg.for_owner(s) for s in cfg.owner_specs()] if cfg.multi_owner else [cfg]
    notices: list[str] = []
    for c in owners:
        spec = configured_inbox(c.sources)
        if spec is not None and not spec.options.get(IMPLICIT):
            continue
        notices.extend(migrate_inbox(inbox_dir(c.output_dir), c.inbox_path))
    return notices


def check_state(cfg: PipelineConfig) -> None:
    """Refuse early (one line, ``StateError``) an output whose state is missing or foreign,
    or newer than this release: before a run reads any export. Writes nothing."""
    for output, state in pairs(cfg):
        if S.state_salt(state) is None and fs.exists(fs.join(output, PRIVACY_DIR, SALT_FILE)):
            continue  # an older output: its forget list moves into the state under the lock
        S.check(output, state)


def instance_home(cfg: PipelineConfig) -> Path:
    """DAGSTER_HOME: the variable when set, else ``<local state>/dagster`` (the run
    history, schedules and checks are state: they cannot be rebuilt). Sets the variable."""
    home = os.environ.get("DAGSTER_HOME")
    if home:
        # Dagster refuses a DAGSTER_HOME that does not exist (a traceback): make it
        Path(home).mkdir(parents=True, exist_ok=True)
        return Path(home)
    home_path = cfg.local_state_dir / S.DAGSTER_DIR
    config_dir = cfg.config_path.parent if cfg.config_path else None
    write_instance_yaml(home_path, config_dir)
    if config_dir is not None:
        copy_legacy_instance(config_dir / LEGACY_INSTANCE, home_path)
    os.environ["DAGSTER_HOME"] = str(home_path)
    return home_path


def copy_legacy_instance(
    legacy: Path, home: Path, say: Callable[[str], None] | None = _stderr
) -> bool:
    """Copy the run history of the previous default instance (``data/dagster`` beside the
    config) into the state's, once: SQLite files through the backup API (consistent even if
    a ``dg dev`` still has them open). The old folder is left for the user to delete."""
    from memory_pipeline.core.common.backup import copy_tree

    if not (legacy / "storage").is_dir() or (home / "storage").is_dir():
        return False
    copy_tree(legacy, home)
    if say is not None:
        say(f"copied the Dagster run history from {legacy} to {home} (the old folder can go)")
    return True


# The instance storage a local (SQLite) instance gets: Dagster's, with the faster event log of
# defs/dagster_sqlite.py (named here, not imported: loading the config must not load Dagster)
SQLITE_STORAGE_MODULE = "memory_pipeline.defs.dagster_sqlite"
SQLITE_STORAGE_CLASS = "SqliteStorage"


def sqlite_storage(base_dir: Path) -> dict:
    """The ``storage:`` block of a local instance whose files are in ``base_dir``."""
    return {
        "custom": {
            "module": SQLITE_STORAGE_MODULE,
            "class": SQLITE_STORAGE_CLASS,
            "config": {"base_dir": str(base_dir)},
        }
    }


def sqlite_base_dir(storage: dict) -> str | None:
    """The SQLite folder of a ``storage:`` block (Dagster's ``sqlite:`` or ours), else None
    (PostgreSQL, or another custom storage); ``""`` when the block names no folder."""
    if "sqlite" in storage:
        return (storage.get("sqlite") or {}).get("base_dir") or ""
    custom = storage.get("custom") or {}
    if custom.get("module") == SQLITE_STORAGE_MODULE:
        return (custom.get("config") or {}).get("base_dir") or ""
    return None


def write_instance_yaml(home: Path, template_dir: Path | None) -> Path:
    """``<home>/dagster.yaml``: the template's settings (``dagster.yaml`` beside the config,
    else :data:`DEFAULT_INSTANCE`) with every local storage folder inside ``home``.

    Rewritten only when it changes, so a moved or restored state folder points at itself."""
    import yaml

    template = template_dir / "dagster.yaml" if template_dir else None
    if template is not None and template.is_file():
        body = yaml.safe_load(template.read_text(encoding="utf-8")) or {}
    else:
        body = dict(DEFAULT_INSTANCE)
    storage = body.get("storage") or {"sqlite": {}}
    if sqlite_base_dir(storage) is not None:
        storage = sqlite_storage(home / "storage")
    body["storage"] = storage
    body["local_artifact_storage"] = {
        "module": "dagster._core.storage.root",
        "class": "LocalArtifactStorage",
        "config": {"base_dir": str(home)},
    }
    body["compute_logs"] = {
        "module": "dagster._core.storage.local_compute_log_manager",
        "class": "LocalComputeLogManager",
        "config": {"base_dir": str(home / "compute_logs")},
    }
    source = str(template) if template is not None and template.is_file() else "defaults"
    text = (
        f"# made by memory-pipeline from {source}; storage inside this folder (the state)\n"
        + yaml.safe_dump(body, sort_keys=False)
    )
    path = home / "dagster.yaml"
    home.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        tmp = home / ".dagster.yaml.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path
