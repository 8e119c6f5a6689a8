"""Rotation of a MedBench pool: a version-locked subset stratified across tasks and specialties.

Reuses the rotation machinery of :mod:`tasks_lib.rotation`: the water-filling quota
(:func:`~tasks_lib.rotation.allocate`: small strata whole, the rest equal shares), the
``subsets/<subset_id>/v<N>/`` layout with ``subset.json`` (:class:`SubsetManifest`) and the
``ACTIVE`` pointer, so ``active:<subset_id>`` names the active version wherever a pool is asked
for (execute, score, report), and the ledger's ``subset`` pool rows. A MedBench subset is
pool-shaped (its ``manifest.json`` is a :class:`MedBenchManifest` naming its parent), so every
MedBench step runs on it unchanged; its files are locked when written (``lock.json``,
:mod:`tasks_lib.pool_lock`) and scoring refuses a changed one.

Strata are ``task_id/specialty`` cells of *base* items: the option shuffles of one question
(``<base>#s<k>``) are drawn together. In ``subset.json`` ``stratify_by`` reads ``dataset`` (=
task) and ``meta_info`` (= specialty). Inside a stratum, base ids are ranked by
``sha256(seed:base_id)``: the same pool and seed give the same subset. Departure from spec §7's
[M] quota algorithm (minimum m, cap c, ≤ 50 % overlap with the previous cycle): the project's
existing rotation rule is used instead; a fresh quarterly seed re-draws every stratum larger
than its share.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import UTC, datetime

from evaluators.core import InputDataError, Track
from tasks_lib.ledger import store
from tasks_lib.medbench import pool as mbpool
from tasks_lib.medbench.bank import BuiltTask
from tasks_lib.medbench.items import (
    IMAGES,
    PublicItem,
    Reference,
    TaskEntry,
    base_id,
    read_manifest,
    read_public_items,
    read_references,
)
from tasks_lib.pool_lock import write_lock
from tasks_lib.rotation import (
    SUBSET_FILE,
    ParentPool,
    StratumField,
    SubsetManifest,
    allocate,
    subset_root,
)
from tasks_lib.storage import Storage


def parent_pool(ref: str) -> ParentPool:
    """``ID`` (newest) or ``ID@vN`` of a ledgered MedBench pool."""
    pool_id, _, version = ref.partition("@")
    rows = [r for r in store.pools(pool_id=pool_id, track=Track.MEDBENCH.value)
            if not version or f"v{r.version}" == version or str(r.version) == version]
    if not rows:
        raise InputDataError(ref, "no such MedBench pool version in the ledger (build one with "
                                  "medflows pool build medbench)")
    row = max(rows, key=lambda r: r.version)
    return ParentPool(pool_id=row.pool_id, version=row.version, content_hash=row.content_hash,
                      url=row.manifest_url.rsplit("/", 1)[0])


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def draw(items: list[PublicItem], size: int, seed: int) -> tuple[set[str], dict[str, int],
                                                                 dict[str, int]]:
    """Base ids drawn, stratum → drawn, stratum → available (strata = task/specialty)."""
    strata: dict[str, list[str]] = defaultdict(list)
    for it in items:
        key, base = f"{it.task_id}/{it.specialty}", base_id(it.item_id)
        if base not in strata[key]:
            strata[key].append(base)
    quota = allocate({s: len(v) for s, v in strata.items()}, size)
    chosen: set[str] = set()
    for name, bases in strata.items():
        chosen.update(sorted(bases, key=lambda b: _rank(seed, b))[:quota[name]])
    return (chosen, {s: n for s, n in sorted(quota.items()) if n},
            {s: len(v) for s, v in sorted(strata.items())})


def _subset_tasks(url: str, chosen: set[str]) -> dict[str, tuple[TaskEntry, BuiltTask]]:
    """The parent's tasks restricted to the chosen base items (images they need copied)."""
    parent = read_manifest(url)
    refs = read_references(url)
    root = Storage(url)
    out: dict[str, tuple[TaskEntry, BuiltTask]] = {}
    by_task: dict[str, list[PublicItem]] = defaultdict(list)
    for it in read_public_items(url):
        if base_id(it.item_id) in chosen:
            by_task[it.task_id].append(it)
    for task_id, items in by_task.items():
        task_refs: list[Reference] = [refs[it.item_id] for it in items]
        images = {it.image.removeprefix(f"{IMAGES}/"): root.read_bytes(it.image)
                  for it in items if it.image}
        entry = parent.tasks[task_id].model_copy(update={"n_items": len(items)})
        out[task_id] = (entry, BuiltTask(items, task_refs, images, entry.source))
    return out


def rotate(parent_ref: str, size: int, seed: int, subset_id: str) -> SubsetManifest:
    """Draw, write (or reuse the version with this content) and ledger a subset."""
    if store.pools(pool_id=subset_id, kind="pool"):
        raise InputDataError(subset_id, "is the name of a constructed pool; pick another subset "
                                        "id")
    parent = parent_pool(parent_ref)
    if read_manifest(parent.url).content_hash != parent.content_hash:
        raise InputDataError(parent.url, f"content hash differs from the ledger's "
                                         f"{parent.pool_id} v{parent.version}")
    chosen, strata, available = draw(read_public_items(parent.url), size, seed)
    tasks = _subset_tasks(parent.url, chosen)
    items = [it for _, b in tasks.values() for it in b.items]
    refs = [r for _, b in tasks.values() for r in b.references]
    images = {k: v for _, b in tasks.values() for k, v in b.images.items()}
    digest = mbpool.content_hash(items, refs, images)
    existing = store.find_pool_by_hash(subset_id, digest)
    version = existing.version if existing else store.next_pool_version(subset_id)
    root = subset_root(subset_id, version)
    url, manifest = mbpool.publish(subset_id, root.root_url, tasks, seed,
                                   notes=["rotation subset (strata: task/specialty)"],
                                   parents=[f"{parent.pool_id}@v{parent.version}"])
    subset = SubsetManifest(
        subset_id=subset_id, version=manifest.version, content_hash=digest,
        created_at=datetime.now(UTC), seed=seed, size=size,
        stratify_by=[StratumField.DATASET, StratumField.META_INFO], parents=[parent],
        strata=strata, strata_available=available, n_items=manifest.n_items, url=url)
    if not (existing and root.exists(SUBSET_FILE)):
        root.write_json(SUBSET_FILE, subset)
        write_lock(url)
    mbpool.record(url, manifest, kind="subset")
    return SubsetManifest.model_validate(root.read_json(SUBSET_FILE))
