"""Rotation: a version-locked, stratified evaluation subset drawn from published pools of any
track (ARCHITECTURE §5: generic rotate).

A kit supplies its :class:`~tasks_lib.rotation.kit.PoolRotation` (``kit.rotation``): the units of
its pools with their stratum fields (QA: question by dataset/meta_info; MedBench: base item by
task/specialty; imaging and challenge: case; RWE: study by design) and how a pool-shaped subset
of some units is written. Sampling and seeding (:mod:`~tasks_lib.rotation.sampling`),
publication, version locking, the ledger and the ``ACTIVE`` pointer
(:mod:`~tasks_lib.rotation.subsets`) are shared; the flow is :func:`flows.rotate.rotate_pool`.
Naming a pool (a root or ``active:<subset_id>``, :mod:`~tasks_lib.rotation.active`) imports no
Prefect; the names of :mod:`~tasks_lib.rotation.subsets` (Prefect steps) load when first used.
"""

from typing import TYPE_CHECKING, Any

from tasks_lib.rotation.active import (
    ACTIVE_PREFIX,
    SUBSET_FILE,
    active_subset,
    check_subset_id,
    resolve_pool,
    subset_pool,
)
from tasks_lib.rotation.sampling import allocate, quarter_seed
from tasks_lib.rotation.types import ParentPool, SubsetManifest

if TYPE_CHECKING:
    from tasks_lib.rotation.subsets import activate_subset, subset_markdown

_STEPS = {"activate_subset", "subset_markdown"}

__all__ = ["ACTIVE_PREFIX", "SUBSET_FILE", "ParentPool", "SubsetManifest", "activate_subset",
           "active_subset", "allocate", "check_subset_id", "quarter_seed", "resolve_pool",
           "subset_markdown", "subset_pool"]


def __getattr__(name: str) -> Any:
    if name in _STEPS:
        from tasks_lib.rotation import subsets

        return getattr(subsets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
