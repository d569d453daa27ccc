"""Where the heavy work runs: this process (default) or a Dask cluster.

The embedding and BM25 assets hand their batches to ``core/common/parallel.py``; this
resource decides which runner they get. Dask runs *inside* the asset (one Dagster run, one
backfill, the same run history), and only pure batches travel: the table store, the
content cache and the index files stay with the run, so workers need no shared disk.

- nothing configured (the default): serial, offline, nothing is started;
- ``local_workers = N``: a ``LocalCluster`` of N worker processes on 127.0.0.1 is started
  the first time an asset asks for it and closed when the run ends;
- ``scheduler_address`` (``MEMORY_PIPELINE_DASK_SCHEDULER``, e.g. ``tcp://dask:8786``):
  connect to an existing cluster (production); the run only closes its client.

Why not ``dagster-dask``'s executor: it runs each op in a worker, but our heavy assets are
single ops over a whole date range, so it would move one op, not split its work, and each
op in a worker would need the run's storage and cache (measured in benchmarks/README.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from memory_pipeline.core.common.parallel import runner_workers

SCHEDULER_ENV = "MEMORY_PIPELINE_DASK_SCHEDULER"
WORKERS_ENV = "MEMORY_PIPELINE_DASK_WORKERS"
RESOURCE_KEY = "dask"


class DaskResource(dg.ConfigurableResource):
    """The task runner of the heavy assets: none (serial), a local cluster, or a scheduler.

    ``scheduler_address`` wins over ``local_workers``. ``threads_per_worker`` is 1 by
    default: the models already use their own threads, and the work is CPU-bound Python.
    """

    scheduler_address: str | None = None
    local_workers: int = 0
    threads_per_worker: int = 1
    memory_limit: str = "auto"
    connect_timeout_seconds: float = 60.0

    _client: Any = PrivateAttr(default=None)
    _cluster: Any = PrivateAttr(default=None)

    @property
    def enabled(self) -> bool:
        """Whether assets get a Dask client (else they run serially in the run's process)."""
        return bool(self.scheduler_address) or self.local_workers > 0

    def runner(self) -> Any:
        """None (serial) or a ``distributed.Client``, started on first use in this run."""
        if not self.enabled:
            return None
        if self._client is None:
            from distributed import Client, LocalCluster

            timeout = f"{self.connect_timeout_seconds}s"
            if self.scheduler_address:
                self._client = Client(self.scheduler_address, timeout=timeout)
            else:
                self._cluster = LocalCluster(
                    n_workers=self.local_workers,
                    threads_per_worker=self.threads_per_worker,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    memory_limit=self.memory_limit,
                )
                self._client = Client(self._cluster, timeout=timeout)
        return self._client

    def workers(self) -> int:
        """Workers the runner has (1 when serial), for asset metadata."""
        return runner_workers(self._client) if self._client is not None else 1

    def close(self) -> None:
        """Close the client and, for ``local_workers``, the cluster and its processes."""
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()


def dask_resource(env: Mapping[str, str] | None = None) -> DaskResource:
    """The resource from the environment: a scheduler address (as an ``EnvVar``), a local
    worker count, or neither (serial, the default)."""
    from memory_pipeline.config import provider_settings  # one reader for every variable

    env = os.environ if env is None else env
    settings = provider_settings(env)  # a bad worker count: a ConfigError naming the variable
    if settings.dask_scheduler:
        return DaskResource(scheduler_address=dg.EnvVar(SCHEDULER_ENV))
    return DaskResource(local_workers=settings.dask_workers)
