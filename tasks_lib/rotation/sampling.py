"""Seeded, stratified sampling of units (pure: no storage, no ledger).

Strata are the cells of the chosen fields (no field: one stratum, ``all``). The size is shared
by water-filling: strata smaller than the fair share are taken whole, the rest get equal shares
(strata are filled from the smallest, so an integer-division remainder goes to the larger
strata; ties by name). Inside a stratum, units are ranked by ``sha256(seed:key)``, so the same
inputs always give the same subset and growing a stratum barely changes what is drawn.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import date
from typing import NamedTuple

from tasks_lib.errors import InputDataError
from tasks_lib.rotation.types import Unit

ONE_STRATUM = "all"
"""The stratum name when no field is chosen."""


class Drawn(NamedTuple):
    """The sample: which units, and how the strata were filled."""

    keys: frozenset[str]
    """Keys of the drawn units."""
    strata: dict[str, int]
    """Stratum → units drawn (strata with none drawn left out)."""
    strata_available: dict[str, int]
    """Stratum → units available."""


def quarter_seed(day: date) -> int:
    """The default seed of a scheduled rotation: ``YYYYQ`` (2027-01-01 → 20271)."""
    return day.year * 10 + (day.month - 1) // 3 + 1


def stratum_of(unit: Unit, fields: list[str]) -> str:
    """The unit's values of ``fields`` joined by ``/`` (``all`` without fields)."""
    return "/".join(unit.strata[f] for f in fields) or ONE_STRATUM


def allocate(available: dict[str, int], size: int) -> dict[str, int]:
    """Units to draw per stratum: small strata whole, large ones equal shares summing to ``size``.

    Args:
        available: Stratum → units available (positive).
        size: Units wanted in total; everything is drawn when it exceeds the total.

    Returns:
        Stratum → units to draw, with ``sum == min(size, sum(available))``. Strata are filled
        smallest first, each with ``min(available, remaining // strata_left)``.
    """
    if size < 0:
        raise InputDataError("size", f"must be ≥ 0, got {size}")
    out: dict[str, int] = {}
    remaining, order = size, sorted(available, key=lambda s: (available[s], s))
    for i, name in enumerate(order):
        share = remaining // (len(order) - i)
        out[name] = min(available[name], share)
        remaining -= out[name]
    return out


def rank(seed: int, key: str) -> str:
    """The order of a unit inside its stratum under ``seed``."""
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def draw(units: list[Unit], fields: list[str], size: int, seed: int) -> Drawn:
    """The stratified, seeded sample of ``units`` (duplicate keys count once)."""
    by_stratum: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for u in units:
        if u.key not in seen:
            seen.add(u.key)
            by_stratum[stratum_of(u, fields)].append(u.key)
    quota = allocate({s: len(v) for s, v in by_stratum.items()}, size)
    chosen: set[str] = set()
    for name, keys in by_stratum.items():
        chosen.update(sorted(keys, key=lambda k: rank(seed, k))[:quota[name]])
    return Drawn(keys=frozenset(chosen),
                 strata={s: n for s, n in sorted(quota.items()) if n},
                 strata_available={s: len(v) for s, v in sorted(by_stratum.items())})
