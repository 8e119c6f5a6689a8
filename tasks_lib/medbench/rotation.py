"""The MedBench kit's part of rotation: a unit is a *base* item (the option shuffles of one
question, ``<base>#s<k>``, are drawn together), stratified by task and specialty; a subset is a
MedBench pool (its ``manifest.json`` a :class:`MedBenchManifest` naming its parents) of the drawn
items, their references and the images they need, so every MedBench step runs on it unchanged.

Sampling, seeding, version locking, publication and ``ACTIVE`` are the shared rotation's
(:mod:`tasks_lib.rotation`). Departure from spec §7's [M] quota algorithm (minimum m, cap c,
≤ 50 % overlap with the previous cycle): the project's rotation rule (water-filling, ranks by
``sha256(seed:base_id)``) is used instead; a fresh quarterly seed re-draws every stratum larger
than its share.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from tasks_lib.medbench import pool as mbpool
from tasks_lib.medbench.bank import BuiltTask
from tasks_lib.medbench.items import (
    IMAGES,
    MANIFEST,
    MedBenchManifest,
    PublicItem,
    TaskEntry,
    base_id,
    read_manifest,
    read_public_items,
    read_references,
)
from tasks_lib.rotation.kit import PoolRotation
from tasks_lib.rotation.types import BuiltSubset, SubsetRequest, Unit
from tasks_lib.storage import Storage

Tasks = dict[str, tuple[TaskEntry, BuiltTask]]


def units_of(items: list[PublicItem]) -> list[Unit]:
    """One unit per base item (the sampler counts a repeated key once: its shuffles)."""
    return [Unit(base_id(it.item_id), {"task": it.task_id, "specialty": it.specialty})
            for it in items]


class MedBenchRotation(PoolRotation):
    """Base items by task and specialty."""

    fields = ("task", "specialty")
    default_fields = ("task", "specialty")

    def units(self, pool_url: str) -> list[Unit]:
        """One unit per base item of the pool."""
        return units_of(read_public_items(pool_url))

    def build(self, request: SubsetRequest, keys: frozenset[str]) -> BuiltSubset:
        """The parents' tasks restricted to the drawn base items (first parent wins)."""
        tasks: Tasks = {}
        taken: set[str] = set()
        for parent in request.parents:
            _add_tasks(tasks, parent.url, keys - taken)
            taken |= {base_id(it.item_id) for _, b in tasks.values() for it in b.items}
        items = [it for _, b in tasks.values() for it in b.items]
        refs = [r for _, b in tasks.values() for r in b.references]
        images = {k: v for _, b in tasks.values() for k, v in b.images.items()}
        entries = {t: e for t, (e, _) in tasks.items()}
        files = mbpool.pool_files(items, refs, images, entries)
        digest = files.digest

        def write(root: Storage, version: int) -> None:
            manifest = MedBenchManifest(
                pool_id=request.subset_id, version=version, content_hash=digest,
                created_at=datetime.now(UTC), cards=list(entries),
                parents=[f"{p.pool_id}@v{p.version}" for p in request.parents],
                seed=request.seed, tasks=entries, n_items=len(items),
                notes=[f"rotation subset (strata: {'/'.join(request.stratify_by) or 'none'})"])
            for key, data in {**files.content, **files.provenance}.items():
                root.write_bytes(key, data)
            root.write_json(MANIFEST, manifest)

        return BuiltSubset(digest, len(items), write)


def _add_tasks(tasks: Tasks, url: str, chosen: frozenset[str] | set[str]) -> None:
    """Add the parent's items of the ``chosen`` base ids to ``tasks`` (images copied)."""
    parent = read_manifest(url)
    refs = read_references(url)
    root = Storage(url)
    by_task: dict[str, list[PublicItem]] = defaultdict(list)
    for it in read_public_items(url):
        if base_id(it.item_id) in chosen:
            by_task[it.task_id].append(it)
    for task_id, items in by_task.items():
        old_entry, old = tasks.get(task_id, (parent.tasks[task_id], BuiltTask([], [], {}, "")))
        merged = [*old.items, *items]
        images = {**old.images, **{it.image.removeprefix(f"{IMAGES}/"): root.read_bytes(it.image)
                                   for it in items if it.image}}
        entry = old_entry.model_copy(update={"n_items": len(merged)})
        tasks[task_id] = (entry, BuiltTask(merged, [*old.references,
                                                    *(refs[it.item_id] for it in items)],
                                           images, entry.source))
