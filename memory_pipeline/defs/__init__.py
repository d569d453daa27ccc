"""The thin Dagster shell: assets read inputs, call ``memory_pipeline.core``, write, report."""

import warnings

import dagster as dg

# single-run backfill policies and non-existent upstream partitions are "beta" in the pinned
# dagster 1.13.27 and central to our partitioning; the pin protects us, the warning adds noise.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
