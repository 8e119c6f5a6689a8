"""The QA kit's part of rotation: a unit is a question (``dataset/realidx``), stratified by
dataset and ``meta_info`` (a missing one is ``-``); a subset is a QA pool of the drawn
questions, their references and the parents' exemplars of the drawn datasets."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime

from tasks_lib.domain import Track
from tasks_lib.pool_format import MANIFEST
from tasks_lib.qa.pool import FILES, LoadedPool, load_pool, pool_files
from tasks_lib.qa.types import DatasetEntry, Exemplar, PoolManifest, PublicQAItem, QAReference
from tasks_lib.rotation.kit import PoolRotation
from tasks_lib.rotation.types import BuiltSubset, SubsetRequest, Unit
from tasks_lib.storage import Storage

SUBSET_FILES = {k: FILES[k] for k in ("public_items", "exemplars", "references")}


def _key(item: PublicQAItem) -> str:
    return f"{item.dataset}/{item.realidx}"


class QARotation(PoolRotation):
    """Questions by dataset and meta_info."""

    fields = ("dataset", "meta_info")
    default_fields = ("dataset", "meta_info")

    def units(self, pool_url: str) -> list[Unit]:
        """Every question of the pool."""
        return [Unit(_key(it), {"dataset": it.dataset, "meta_info": it.meta_info or "-"})
                for it in load_pool(Storage(pool_url)).items]

    def build(self, request: SubsetRequest, keys: frozenset[str]) -> BuiltSubset:
        """The drawn questions in parent order (first parent holding a key wins)."""
        pools = [load_pool(Storage(p.url)) for p in request.parents]
        items: list[PublicQAItem] = []
        refs: list[QAReference] = []
        available: Counter[str] = Counter()
        seen: set[str] = set()
        for pool in pools:
            for it in pool.items:
                if _key(it) not in seen:
                    seen.add(_key(it))
                    available[it.dataset] += 1
                    if _key(it) in keys:
                        items.append(it)
                        refs.append(pool.references[_key(it)])
        files = pool_files(items, refs, _exemplars(pools, {it.dataset for it in items}))
        digest = files.digest

        def write(root: Storage, version: int) -> None:
            for key, data in files.content.items():
                root.write_bytes(key, data)
            root.write_json(MANIFEST, _manifest(request, version, digest, items, available))

        return BuiltSubset(digest, len(items), write)


def _exemplars(pools: list[LoadedPool], datasets: set[str]) -> list[Exemplar]:
    out: list[Exemplar] = []
    for pool in pools:
        out += [e for ex in pool.exemplars.values() for e in ex
                if e.dataset in datasets and e not in out]
    return out


def _manifest(request: SubsetRequest, version: int, digest: str, items: list[PublicQAItem],
              available: Counter[str]) -> PoolManifest:
    """The ``manifest.json`` that lets the QA flows treat the subset as a pool."""
    per_dataset: dict[str, list[str]] = defaultdict(list)
    for it in items:
        per_dataset[it.dataset].append(it.realidx)
    return PoolManifest(
        pool_id=request.subset_id, version=version, content_hash=digest,
        created_at=datetime.now(UTC), track=Track.QA.value, cards=list(per_dataset),
        parents=[f"{p.pool_id}@v{p.version}" for p in request.parents],
        selection={"rule": "rotation", "seed": request.seed, "size": request.size,
                   "stratify_by": request.stratify_by,
                   "parents": [f"{p.pool_id}@v{p.version}" for p in request.parents]},
        datasets={ds: DatasetEntry(n_items=len(ids), realidx=ids, n_ingested=available[ds],
                                   n_rejected=0, n_hard=available[ds], n_withheld=0)
                  for ds, ids in per_dataset.items()},
        deid={}, deid_items=[], meld={"inherited_from_parents": True}, review=None,
        files={**SUBSET_FILES, "subset": "subset.json"})
