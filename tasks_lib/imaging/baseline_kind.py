"""The kinds of baseline submission (:mod:`tasks_lib.imaging.baselines` writes them).

Kept apart from the writers (numpy, scipy, scikit-learn) so the command line can offer the
choices of ``medflows baseline --kind`` without importing them.
"""

from __future__ import annotations

from enum import StrEnum


class BaselineKind(StrEnum):
    """Baseline submission kinds."""

    PERFECT = "perfect"
    EMPTY = "empty"
    CONSTANT = "constant"
    CLASSICAL = "classical"
