"""Resources: where the configuration, the object store and the table store come from, for
every owner."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import dagster as dg

from memory_pipeline.config import (
    OwnerSpec,
    PipelineConfig,
    load_config,
    object_store_options,
    with_output,
)
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import DEFAULT_OWNER_ID, OwnerStore, write_marker
from memory_pipeline.core.represent.cache import ContentCache

# the standard AWS variables (also what boto3 and pyarrow read), so one environment serves
# the pipeline, the AWS CLI and an app
OBJECT_STORE_ENV = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "region": "AWS_REGION",
}


class ObjectStoreResource(dg.ConfigurableResource):
    """Endpoint and credentials of the S3-compatible store an ``s3://`` output_dir lives on.

    Built with ``from_env()``: each field is a Dagster ``EnvVar``, so the secret is
    resolved at run time and never shown in the UI or stored in run config. Unset fields
    fall back to pyarrow's AWS credential chain. Unused for a local output_dir.
    """

    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ObjectStoreResource:
        """EnvVars for the variables that are set (an unset EnvVar fails the whole run,
        while a local output needs none of them)."""
        env = dict(os.environ) if env is None else env
        return cls(**{k: dg.EnvVar(v) for k, v in OBJECT_STORE_ENV.items() if env.get(v)})

    def options(self) -> fs.S3Options:
        """The plain values the core's filesystem layer takes."""
        return fs.S3Options(
            endpoint_url=self.endpoint_url or None,
            access_key_id=self.access_key_id or None,
            secret_access_key=self.secret_access_key or None,
            region=self.region or None,
        )


def _content_cache(cfg: PipelineConfig) -> ContentCache:
    path = cfg.cache_path
    path.parent.mkdir(parents=True, exist_ok=True)
    return ContentCache(path)


@dataclass
class OwnerScope:
    """One owner's view of the pipeline: what an asset body sees as ``pipeline``.

    ``cfg`` is the owner's configuration (their sources, their folder for every output),
    ``store`` writes and reads only their rows. ``records`` carries the owner's share of a
    fan-out source read once for everyone (ingest only). The asset bodies use ``cfg``,
    ``store`` and ``content_cache()`` exactly as on :class:`PipelineResource`, so a body is
    the same code for one owner or a million.
    """

    cfg: PipelineConfig
    records: list[Any] | None = None
    days: list[dt.date] | None = None  # the run's days this owner takes part in (None: all)
    _store: OwnerStore | None = field(default=None, repr=False)

    @property
    def owner_id(self) -> str:
        return self.cfg.owner_id

    @property
    def store(self) -> OwnerStore:
        if self._store is None:
            strict = self.cfg.root_dir is not None  # one owner of many: every file stamped
            self._store = OwnerStore(self.cfg.storage_root, self.cfg.owner_id, strict=strict)
            if strict or self.cfg.owner_id != DEFAULT_OWNER_ID:
                write_marker(self.cfg.output_dir, self.cfg.owner_id, self.cfg.owner, strict=strict)
        return self._store

    def content_cache(self) -> ContentCache:
        """The owner's provider cache (the caller closes it): caches never mix owners."""
        return _content_cache(self.cfg)


class PipelineResource(dg.ConfigurableResource):
    """The validated pipeline configuration (memory_pipeline.toml + MEMORY_PIPELINE_* env).

    ``output_dir`` overrides the configured output folder (tests point it at a tmp dir, or
    at an ``s3://`` URI, whose local working folder is then ``work_dir``).
    """

    config_file: str | None = None
    output_dir: str | None = None
    work_dir: str | None = None
    object_store: ObjectStoreResource | None = None

    @cached_property
    def cfg(self) -> PipelineConfig:
        cfg = load_config(self.config_file)
        if self.output_dir:
            cfg = with_output(cfg, self.output_dir, self.work_dir)
        if cfg.output_uri:
            # without the resource (a PipelineResource built by a test or the forget
            # rebuild) the same AWS_* variables are read directly
            store = self.object_store
            fs.configure_s3(store.options() if store else object_store_options())
        return cfg

    @property
    def store(self) -> OwnerStore:
        """The single owner's store (a multi-owner deployment: see :meth:`owner_scopes`)."""
        return OwnerScope(self.cfg).store

    def content_cache(self) -> ContentCache:
        """The provider cache shared by every partition and run (the caller closes it)."""
        return _content_cache(self.cfg)

    def scope(self, spec: OwnerSpec) -> OwnerScope:
        """The scope of one owner of a multi-owner deployment."""
        return OwnerScope(self.cfg.for_owner(spec))

    def owner_scopes(self, days: Iterable[dt.date] | None = None) -> list[OwnerScope]:
        """The owners a run works on, sorted by id.

        One owner: that owner, always. Several: every owner, or with ``days`` (a partitioned
        run) the owners with an ingested partition on those days, each with those of the days
        it takes part in: owners are data, so a day's run touches only the owners who talked
        that day. (Every stage's output of a day is empty without messages that day: a
        session belongs to the day of its first message, and all else derives from sessions.)
        """
        cfg = self.cfg
        if not cfg.multi_owner:
            return [OwnerScope(cfg)]
        scopes = [self.scope(spec) for spec in sorted(cfg.owner_specs(), key=lambda s: s.id)]
        if days is None:
            return scopes
        wanted = sorted(set(days))
        out = []
        for scope in scopes:
            stored = set(scope.store.dates(T.RAW_MESSAGES))
            mine = [d for d in wanted if d in stored]
            if mine:
                scope.days = mine
                out.append(scope)
        return out
