"""Resources: where the configuration, the object store and the table store come from."""

import os
from functools import cached_property

import dagster as dg

from memory_pipeline.config import (
    PipelineConfig,
    load_config,
    object_store_options,
    with_output,
)
from memory_pipeline.core.common import fs
from memory_pipeline.core.common.storage import TableStore
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
    def from_env(cls, env: dict[str, str] | None = None) -> "ObjectStoreResource":
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
    def store(self) -> TableStore:
        return TableStore(self.cfg.storage_root)

    def content_cache(self) -> ContentCache:
        """The provider cache shared by every partition and run (the caller closes it)."""
        path = self.cfg.cache_path
        path.parent.mkdir(parents=True, exist_ok=True)
        return ContentCache(path)
