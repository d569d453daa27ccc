"""The evaluation's selection as a reviewable record: what ``search()`` uses by default.

The packaged ``core/retrieval/selection.json`` is the default search configuration with its
provenance (the data it was measured on, the protocol, the figures with CIs). An evaluation
run never changes it: it writes a *proposed* record beside its report and prints the diff
against the packaged one; ``memory-pipeline eval --accept-selection`` copies the proposal
into the package, where it is reviewed like any other change.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_pipeline.core.retrieval import config as retrieval_config

SCHEMA_VERSION = 1


def file_digest(path: Path) -> str:
    """sha256 of a file: which data a selection was measured on."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def propose(meta: Mapping[str, Any], data: Path, command: str) -> dict[str, Any] | None:
    """The selection record of one evaluation (None when it ran no cross-validation)."""
    cv = meta.get("cv")
    if not cv:
        return None
    return {
        "schema": SCHEMA_VERSION,
        "name": cv["selected"],
        "config": dict(cv["selected_config"]),
        "provenance": {
            "data": {
                "file": data.name,
                "sha256": file_digest(data),
                "conversations": cv["conversations"],
                "questions": meta.get("questions"),
            },
            "protocol": cv["protocol"],
            "selection_metric": cv["selection_metric"],
            "configurations_swept": meta.get("configurations"),
            "folds": cv["folds"],
            "figures": cv["figures"],
            "command": command,
            "date": dt.date.today().isoformat(),
        },
    }


# Parts of the record that other evaluations select (the answerability model, calibrated by
# benchmarks/calibrate_answerability.py; the other languages' defaults, by their own dev data):
# a LoCoMo evaluation proposes the English search configuration only, so it keeps these as
# the packaged record has them instead of dropping them on --accept-selection.
KEPT_FROM_CURRENT = ("answerability", "languages")
# provenance of components chosen by their own cross-validation (the SPLADE weight the sweep
# only switches on or off), kept beside a new selection's own provenance
KEPT_PROVENANCE = ("splade",)


def carry_over(proposed: Mapping[str, Any], current: Mapping[str, Any] | None) -> dict[str, Any]:
    """``proposed`` with the :data:`KEPT_FROM_CURRENT` parts of ``current`` it lacks."""
    out = dict(proposed)
    for key in KEPT_FROM_CURRENT:
        if current and key in current and key not in out:
            out[key] = current[key]
    old = (current or {}).get("provenance") or {}
    kept = {k: old[k] for k in KEPT_PROVENANCE if k in old}
    if kept and isinstance(out.get("provenance"), Mapping):
        out["provenance"] = {**kept, **out["provenance"]}
    return out


def render(record: Mapping[str, Any]) -> str:
    """The record as the package stores it (stable key order, one trailing newline)."""
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"


def diff(current: Mapping[str, Any] | None, proposed: Mapping[str, Any]) -> str:
    """A unified diff from the packaged record to the proposal ("" when only the date differs)."""

    def comparable(r: Mapping[str, Any] | None) -> str:
        if r is None:
            return ""
        r = json.loads(json.dumps(r))
        r.get("provenance", {}).pop("date", None)
        return render(r)

    if comparable(current) == comparable(proposed):
        return ""
    return "".join(
        difflib.unified_diff(
            render(current).splitlines(keepends=True) if current else [],
            render(proposed).splitlines(keepends=True),
            "packaged selection.json",
            "proposed selection.json",
        )
    )


def packaged_path() -> Path:
    """Where the packaged record lives (a source checkout's file, when accepting one)."""
    return Path(retrieval_config.__file__).with_name(retrieval_config.SELECTION_FILE)
