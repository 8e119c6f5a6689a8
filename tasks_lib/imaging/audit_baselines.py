"""The imaging kits' baseline submissions for the exploit audit and the golden tests: no
submission, the ``empty`` and ``constant`` baselines (:mod:`tasks_lib.imaging.baselines`), the
pool's public sample submission, and ``perfect``; floors from ``datasets/audit/floors.yaml``."""

from __future__ import annotations

from pathlib import Path

from tasks_lib.audits.baselines import (
    CONSTANT,
    EMPTY,
    Baseline,
    floored,
    no_submission,
    perfect,
    public_sample,
)
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.pool import read_manifest


def imaging_baselines(track: str, pool_url: str, out: Path) -> list[Baseline]:
    """Every baseline of the imaging pool at ``pool_url`` (``track``'s floors)."""
    m = read_manifest(pool_url)

    def write(kind: BaselineKind) -> Path:
        return write_submission(baseline_files(kind, pool_url, m), out / kind.value)

    return [no_submission(track, out),
            floored(track, "empty", EMPTY, write(BaselineKind.EMPTY)),
            floored(track, "constant", CONSTANT, write(BaselineKind.CONSTANT)),
            *public_sample(track, pool_url, out),
            perfect(write(BaselineKind.PERFECT))]
