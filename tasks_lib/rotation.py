"""Rotation: a version-locked, stratified evaluation subset drawn from published pools.

A subset is pool-shaped (``manifest.json``, ``public/items.jsonl``, ``public/exemplars.jsonl``,
``private/references.jsonl``) so the execute, score and report flows run on it unchanged, plus
``subset.json`` (:class:`SubsetManifest`: seed, parents, strata) and ``lock.json`` (its files as
published, :mod:`tasks_lib.pool_lock`). Versions live at
``subsets/<subset_id>/v<N>/`` and stay readable; ``subsets/<subset_id>/ACTIVE`` names the active
one. The ledger records each version as a ``PoolRow`` of kind ``subset`` with its parents.

Sampling: strata are (dataset[, meta_info]) cells. The size is shared by water-filling: strata
smaller than the fair share are taken whole, the rest get equal shares (strata are filled from
the smallest, so an integer-division remainder goes to the larger strata; ties by name). Inside a
stratum, items are ranked by ``sha256(seed:key)``, so the same inputs always give the same subset
and growing a stratum barely changes what is drawn.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import NamedTuple

from prefect import task
from pydantic import Field

from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import Frozen, Track
from tasks_lib.errors import InputDataError
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.pool_lock import require_usable, write_lock
from tasks_lib.qa.pool import FILES, load_pool
from tasks_lib.qa.types import DatasetEntry, Exemplar, PoolManifest, PublicQAItem, QAReference
from tasks_lib.storage import Storage

SUBSET_FILE = "subset.json"
ACTIVE_FILE = "ACTIVE"


class StratumField(StrEnum):
    """Item fields that define a stratum."""

    DATASET = "dataset"
    META_INFO = "meta_info"


class ParentPool(Frozen):
    """A pool version a subset was drawn from."""

    pool_id: str = Field(description="Pool name.")
    version: int = Field(description="Pool version.")
    content_hash: str = Field(description="Content hash of that version.")
    url: str = Field(description="Root URL of that version.")


class SubsetManifest(Frozen):
    """``subset.json``: what a rotation subset is and how it was drawn."""

    subset_id: str = Field(description="Subset name (the pool id runs and scores name).")
    version: int = Field(description="Subset version, 1-based; same content ⇒ same version.")
    content_hash: str = Field(description="sha256 over public items and references, in order.")
    created_at: datetime = Field(description="When this version was first published (UTC).")
    seed: int = Field(description="Sampling seed.")
    size: int = Field(description="Requested number of items.")
    stratify_by: list[StratumField] = Field(description="Fields that define a stratum.")
    parents: list[ParentPool] = Field(description="Pool versions the subset was drawn from.")
    strata: dict[str, int] = Field(description="Stratum → items drawn.")
    strata_available: dict[str, int] = Field(description="Stratum → items in the parents.")
    n_items: int = Field(description="Items in the subset.")
    url: str = Field(description="Root URL of this subset version.")


class ActivePointer(Frozen):
    """Content of ``subsets/<subset_id>/ACTIVE``."""

    version: int = Field(description="Active version.")
    content_hash: str = Field(description="Its content hash.")
    url: str = Field(description="Its root URL.")


class Candidate(NamedTuple):
    """One parent item with its reference and stratum."""

    item: PublicQAItem
    reference: QAReference
    stratum: str


class Drawn(Frozen):
    """The sampled subset, before publication."""

    items: list[PublicQAItem] = Field(description="Public items in parent order.")
    references: list[QAReference] = Field(description="References, same order.")
    exemplars: list[Exemplar] = Field(description="Parent exemplars of the drawn datasets.")
    strata: dict[str, int] = Field(description="Stratum → items drawn.")
    strata_available: dict[str, int] = Field(description="Stratum → items available.")
    content_hash: str = Field(description="sha256 over items and references.")


def quarter_seed(day: date) -> int:
    """The default seed of a scheduled rotation: ``YYYYQ`` (2027-01-01 → 20271)."""
    return day.year * 10 + (day.month - 1) // 3 + 1


def stratum_of(item: PublicQAItem, fields: list[StratumField]) -> str:
    """``dataset/meta_info`` (or the chosen fields); a missing meta_info is ``-``."""
    parts = [item.dataset if f is StratumField.DATASET else (item.meta_info or "-")
             for f in fields]
    return "/".join(parts) or "all"


def allocate(available: dict[str, int], size: int) -> dict[str, int]:
    """Items to draw per stratum: small strata whole, large ones equal shares summing to ``size``.

    Args:
        available: Stratum → items available (positive).
        size: Items wanted in total; everything is drawn when it exceeds the total.

    Returns:
        Stratum → items to draw, with ``sum == min(size, sum(available))``. Strata are filled
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


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def subset_hash(items: list[PublicQAItem], refs: list[QAReference]) -> str:
    """sha256 in the canonical form of :func:`tasks_lib.qa.pool.content_hash`."""
    h = hashlib.sha256()
    for item, ref in zip(items, refs, strict=True):
        row = {"public": item.model_dump(mode="json"), "private": ref.model_dump(mode="json")}
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def draw(candidates: list[Candidate], exemplars: list[Exemplar], size: int, seed: int) -> Drawn:
    """Stratified, seeded sample of ``candidates`` (kept in parent order)."""
    by_stratum: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        by_stratum[c.stratum].append(c)
    quota = allocate({s: len(v) for s, v in by_stratum.items()}, size)
    chosen: set[str] = set()
    for name, members in by_stratum.items():
        ranked = sorted(members, key=lambda c: _rank(seed, f"{c.item.dataset}/{c.item.realidx}"))
        chosen.update(f"{c.item.dataset}/{c.item.realidx}" for c in ranked[:quota[name]])
    picked = [c for c in candidates if f"{c.item.dataset}/{c.item.realidx}" in chosen]
    items, refs = [c.item for c in picked], [c.reference for c in picked]
    datasets = {it.dataset for it in items}
    return Drawn(items=items, references=refs,
                 exemplars=[e for e in exemplars if e.dataset in datasets],
                 strata={s: n for s, n in sorted(quota.items()) if n},
                 strata_available={s: len(v) for s, v in sorted(by_stratum.items())},
                 content_hash=subset_hash(items, refs))


@task(name="resolve-parents", task_run_name="resolve-parents")
def resolve_parents(pools: list[str]) -> list[ParentPool]:
    """``ID`` (newest version in the ledger) or ``ID@vN`` → the published pool versions."""
    out = []
    for ref in pools:
        pool_id, _, version = ref.partition("@")
        rows = [r for r in store.pools(pool_id=pool_id)
                if not version or f"v{r.version}" == version or str(r.version) == version]
        if not rows:
            raise InputDataError(ref, "no such pool version in the ledger")
        row = max(rows, key=lambda r: r.version)
        out.append(ParentPool(pool_id=row.pool_id, version=row.version,
                              content_hash=row.content_hash,
                              url=row.manifest_url.rsplit("/", 1)[0]))
    return out


@task(name="draw-subset", task_run_name="draw-subset-seed{seed}", **cached())
def draw_subset(parents: list[ParentPool], size: int, seed: int,
                stratify_by: list[StratumField]) -> Drawn:
    """Load the parent pools (checking their hashes) and draw the stratified sample."""
    candidates: list[Candidate] = []
    exemplars: list[Exemplar] = []
    seen: set[str] = set()
    for parent in parents:
        pool = load_pool(Storage(parent.url))
        if pool.manifest.content_hash != parent.content_hash:
            raise InputDataError(parent.url, f"content hash differs from the ledger's "
                                 f"{parent.pool_id} v{parent.version}")
        for item in pool.items:
            key = f"{item.dataset}/{item.realidx}"
            if key not in seen:
                seen.add(key)
                candidates.append(Candidate(item, pool.references[key],
                                            stratum_of(item, stratify_by)))
        exemplars += [e for ex in pool.exemplars.values() for e in ex if e not in exemplars]
    return draw(candidates, exemplars, size, seed)


def _pool_manifest(subset: SubsetManifest, drawn: Drawn) -> PoolManifest:
    """The ``manifest.json`` that lets the QA flows treat the subset as a pool."""
    per_dataset: dict[str, list[str]] = defaultdict(list)
    for it in drawn.items:
        per_dataset[it.dataset].append(it.realidx)
    available: dict[str, int] = defaultdict(int)
    for name, n in drawn.strata_available.items():
        available[name.split("/", 1)[0]] += n
    by_dataset = StratumField.DATASET in subset.stratify_by
    return PoolManifest(
        pool_id=subset.subset_id, version=subset.version, content_hash=subset.content_hash,
        created_at=subset.created_at, track=Track.QA.value,
        selection={"rule": "rotation", "seed": subset.seed, "size": subset.size,
                   "stratify_by": [f.value for f in subset.stratify_by],
                   "parents": [f"{p.pool_id}@v{p.version}" for p in subset.parents]},
        datasets={ds: DatasetEntry(n_items=len(ids), realidx=ids,
                                   n_ingested=available[ds] if by_dataset else len(ids),
                                   n_rejected=0, n_hard=available[ds] if by_dataset else len(ids),
                                   n_withheld=0)
                  for ds, ids in per_dataset.items()},
        deid={}, deid_items=[], meld={"inherited_from_parents": True}, review=None,
        files={**{k: FILES[k] for k in ("public_items", "exemplars", "references")},
               "subset": SUBSET_FILE},
    )


def subset_root(subset_id: str, version: int) -> Storage:
    """Where version ``version`` of a subset lives in the configured storage."""
    return Storage.from_settings().child(f"subsets/{subset_id}/v{version}")


@task(name="publish-subset", task_run_name="publish-subset-{subset_id}", **IO_RETRIES)
def publish_subset(subset_id: str, drawn: Drawn, parents: list[ParentPool], size: int, seed: int,
                   stratify_by: list[StratumField]) -> SubsetManifest:
    """Write a new version (or return the existing one with this content) and record it."""
    if store.pools(pool_id=subset_id, kind="pool"):
        raise InputDataError(subset_id, "is the name of a constructed pool; pick another subset id")
    existing = store.find_pool_by_hash(subset_id, drawn.content_hash)
    if existing is not None:
        root = Storage(existing.manifest_url.rsplit("/", 1)[0])
        if root.exists(SUBSET_FILE):
            return SubsetManifest.model_validate(root.read_json(SUBSET_FILE))
    version = existing.version if existing else store.next_pool_version(subset_id)
    root = subset_root(subset_id, version)
    subset = SubsetManifest(
        subset_id=subset_id, version=version, content_hash=drawn.content_hash,
        created_at=datetime.now(UTC), seed=seed, size=size, stratify_by=stratify_by,
        parents=parents, strata=drawn.strata, strata_available=drawn.strata_available,
        n_items=len(drawn.items), url=root.root_url)
    root.write_jsonl(FILES["public_items"], drawn.items)
    root.write_jsonl(FILES["exemplars"], drawn.exemplars)
    root.write_jsonl(FILES["references"], drawn.references)
    root.write_json(SUBSET_FILE, subset)
    root.write_json("manifest.json", _pool_manifest(subset, drawn))
    write_lock(root.root_url)
    store.record_pool(PoolRow(
        pool_id=subset_id, version=version, track=Track.QA.value, content_hash=subset.content_hash,
        manifest_url=root.url("manifest.json"), n_items=subset.n_items, kind="subset",
        parents_json=store.dumps([p.model_dump(mode="json") for p in parents])))
    return subset


@task(name="activate-subset", task_run_name="activate-{subset.subset_id}-v{subset.version}",
      **IO_RETRIES)
def activate_subset(subset: SubsetManifest) -> ActivePointer:
    """Point ``subsets/<subset_id>/ACTIVE`` at this version (older versions stay in place)."""
    pointer = ActivePointer(version=subset.version, content_hash=subset.content_hash,
                            url=subset.url)
    Storage.from_settings().write_json(f"subsets/{subset.subset_id}/{ACTIVE_FILE}", pointer)
    return pointer


def active_subset(subset_id: str) -> SubsetManifest:
    """The active version of ``subset_id`` (fails with a clear message if none is active)."""
    root = Storage.from_settings()
    key = f"subsets/{subset_id}/{ACTIVE_FILE}"
    if not root.exists(key):
        raise InputDataError(root.url(key), "no active version: run the rotate flow first")
    pointer = ActivePointer.model_validate(root.read_json(key))
    return SubsetManifest.model_validate(Storage(pointer.url).read_json(SUBSET_FILE))


ACTIVE_PREFIX = "active:"
"""``active:<subset_id>`` names the active version of a rotation subset wherever a pool is asked
for (execute, score, report): a scheduled deployment always evaluates the current quarter's
subset."""


def resolve_pool(pool: str) -> str:
    """The root URL of ``pool``: a pool root as given, or ``active:<subset_id>`` resolved through
    the subset's ACTIVE pointer; only a usable version (audited, unchanged since it was locked:
    :func:`tasks_lib.pool_lock.require_usable`) is returned."""
    url = active_subset(pool.removeprefix(ACTIVE_PREFIX)).url \
        if pool.startswith(ACTIVE_PREFIX) else pool
    require_usable(url)
    return url


def subset_markdown(subset: SubsetManifest) -> str:
    """Artifact text: identity, parents and strata of a subset."""
    lines = [f"# Subset {subset.subset_id} v{subset.version}", "",
             f"- content hash: `{subset.content_hash}`", f"- seed: {subset.seed}, size "
             f"requested {subset.size}, drawn {subset.n_items}",
             "- parents: " + ", ".join(f"{p.pool_id} v{p.version}" for p in subset.parents),
             f"- root: {subset.url}", "", "| stratum | drawn | available |", "|---|---:|---:|"]
    lines += [f"| {name} | {subset.strata.get(name, 0)} | {n} |"
              for name, n in subset.strata_available.items()]
    return "\n".join(lines) + "\n"
