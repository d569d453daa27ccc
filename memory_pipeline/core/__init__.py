"""Pure pipeline logic: no Dagster import anywhere below this package.

Everything here works on plain Python records and Arrow tables so it can be unit-tested
and benchmarked directly; the Dagster layer only reads inputs, calls these functions and
writes outputs.
"""
