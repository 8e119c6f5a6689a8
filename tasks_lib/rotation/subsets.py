"""The shared steps of rotation: parents, sampling, publication, the ledger and ``ACTIVE``.

A subset is pool-shaped (the kit writes the files and manifest of a pool of its track), plus
``subset.json`` (:class:`SubsetManifest`: seed, parents, strata) and ``lock.json`` (its files
as published, :mod:`tasks_lib.pool_lock`). Versions live at ``subsets/<subset_id>/v<N>/`` and
stay readable; ``subsets/<subset_id>/ACTIVE`` names the active one. The ledger records each
version as a ``PoolRow`` of kind ``subset`` with its parents; the version is reserved for the
subset's content hash in one transaction (:func:`tasks_lib.ledger.store.reserve_pool_version`),
so the same parents, seed, size and strata give the same version.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prefect import task
from pydantic import Field

from tasks_lib.caching import IO_RETRIES
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.pool_lock import manifest_hash, write_lock
from tasks_lib.rotation.active import ACTIVE_FILE, SUBSET_FILE
from tasks_lib.rotation.sampling import Drawn, draw
from tasks_lib.rotation.types import ActivePointer, ParentPool, SubsetManifest, SubsetRequest
from tasks_lib.storage import Storage

if TYPE_CHECKING:
    from tasks_lib.rotation.kit import PoolRotation

PUBLISHED = ("pool", "subset")
"""Ledger kinds of published versions (a reserved one is not drawn from)."""


class Parents(Frozen):
    """The parent pool versions of a rotation and their one track."""

    track: str = Field(description="Track of every parent (its kit writes the subset).")
    pools: list[ParentPool] = Field(description="Parent versions, in the order named.")


def rotation_of(track: str) -> PoolRotation:
    """The rotation part of ``track``'s kit."""
    from tasks_lib.tracks.base import kit_for

    return kit_for(track).rotation


def _published(ref: str) -> PoolRow:
    pool_id, _, version = ref.partition("@")
    rows = [r for r in store.pools(pool_id=pool_id) if r.kind in PUBLISHED
            and (not version or f"v{r.version}" == version or str(r.version) == version)]
    if not rows:
        raise InputDataError(ref, "no such pool version in the ledger (name a published pool "
                                  "by its id: ID or ID@vN)")
    return max(rows, key=lambda r: r.version)


@task(name="resolve-parents", task_run_name="resolve-parents")
def resolve_parents(pools: list[str], track: str | None = None) -> Parents:
    """``ID`` (newest published version) or ``ID@vN`` → the parent versions, checked to be of
    one track (``track``, when the caller rotates only that track's pools) and to hold the
    content the ledger recorded."""
    if not pools:
        raise InputDataError("--pools", "name at least one parent pool")
    rows = [_published(ref) for ref in pools]
    tracks = sorted({r.track for r in rows})
    if len(tracks) != 1:
        raise InputDataError("--pools", f"name pools of one track (got {', '.join(tracks)})")
    if track is not None and tracks != [track]:
        raise InputDataError(pools[0], f"is a {tracks[0]} pool, not a {track} pool (any "
                                       "track's pools rotate with medflows pool rotate)")
    out = [ParentPool(pool_id=r.pool_id, version=r.version, content_hash=r.content_hash,
                      url=r.manifest_url.rsplit("/", 1)[0]) for r in rows]
    for p in out:
        if manifest_hash(Storage(p.url)) != p.content_hash:
            raise InputDataError(p.url, f"content hash differs from the ledger's {p.pool_id} "
                                        f"v{p.version}")
    return Parents(track=tracks[0], pools=out)


def strata_fields(track: str, stratify_by: list[str] | None) -> list[str]:
    """The stratum fields to use: the kit's default, or the named ones if the kit knows them."""
    rotation = rotation_of(track)
    if stratify_by is None:
        return list(rotation.default_fields)
    unknown = [f for f in stratify_by if f not in rotation.fields]
    if unknown:
        raise InputDataError("--stratify-by", f"{', '.join(unknown)}: not a stratum field of "
                             f"{track} pools (known: {', '.join(rotation.fields) or 'none'})")
    return stratify_by


@task(name="draw-subset", task_run_name="draw-subset-seed{seed}")
def draw_subset(parents: Parents, fields: list[str], size: int, seed: int) -> Drawn:
    """The kit's units of every parent, sampled per stratum with ``seed``."""
    rotation = rotation_of(parents.track)
    return draw([u for p in parents.pools for u in rotation.units(p.url)], fields, size, seed)


def subset_root(subset_id: str, version: int) -> Storage:
    """Where version ``version`` of a subset lives in the configured storage."""
    return Storage.from_settings().child(f"subsets/{subset_id}/v{version}")


@task(name="publish-subset", task_run_name="publish-subset-{request.subset_id}", **IO_RETRIES)
def publish_subset(parents: Parents, request: SubsetRequest, drawn: Drawn) -> SubsetManifest:
    """Write a new version (or return the one with this content) and record it in the ledger."""
    if store.pools(pool_id=request.subset_id, kind="pool"):
        raise InputDataError(request.subset_id, "is the name of a constructed pool; pick "
                                                "another subset id")
    built = rotation_of(parents.track).build(request, drawn.keys)
    version = store.reserve_pool_version(request.subset_id, built.content_hash)
    root = subset_root(request.subset_id, version)
    subset = _existing(root, built.content_hash)
    if subset is None:
        built.write(root, version)
        if manifest_hash(root) != built.content_hash:
            raise RuntimeError(f"{root.root_url}: the written manifest's content hash is not "
                               "the one the kit computed")
        subset = SubsetManifest(
            subset_id=request.subset_id, version=version, content_hash=built.content_hash,
            created_at=datetime.now(UTC), seed=request.seed, size=request.size,
            stratify_by=request.stratify_by, parents=request.parents, strata=drawn.strata,
            strata_available=drawn.strata_available, n_items=built.n_items,
            url=root.root_url)
        root.write_json(SUBSET_FILE, subset)
        write_lock(root.root_url)
    store.record_pool(PoolRow(
        pool_id=subset.subset_id, version=version, track=parents.track,
        content_hash=subset.content_hash, manifest_url=root.url("manifest.json"),
        n_items=subset.n_items, kind="subset",
        parents_json=store.dumps([p.model_dump(mode="json") for p in subset.parents])))
    return subset


def _existing(root: Storage, content_hash: str) -> SubsetManifest | None:
    """The subset already written at ``root`` with this content (None: none yet)."""
    if not root.exists(SUBSET_FILE):
        return None
    subset = SubsetManifest.model_validate(root.read_json(SUBSET_FILE))
    return subset if subset.content_hash == content_hash else None


@task(name="activate-subset", task_run_name="activate-{subset.subset_id}-v{subset.version}",
      **IO_RETRIES)
def activate_subset(subset: SubsetManifest) -> ActivePointer:
    """Point ``subsets/<subset_id>/ACTIVE`` at this version (older versions stay in place)."""
    pointer = ActivePointer(version=subset.version, content_hash=subset.content_hash,
                            url=subset.url)
    Storage.from_settings().write_json(f"subsets/{subset.subset_id}/{ACTIVE_FILE}", pointer)
    return pointer


def subset_markdown(subset: SubsetManifest) -> str:
    """Artifact text: identity, parents and strata of a subset."""
    lines = [f"# Subset {subset.subset_id} v{subset.version}", "",
             f"- content hash: `{subset.content_hash}`", f"- seed: {subset.seed}, size "
             f"requested {subset.size}, drawn {subset.n_items} items",
             "- strata by: " + (", ".join(subset.stratify_by) or "none (one stratum)"),
             "- parents: " + ", ".join(f"{p.pool_id} v{p.version}" for p in subset.parents),
             f"- root: {subset.url}", "", "| stratum | drawn | available |", "|---|---:|---:|"]
    lines += [f"| {name} | {subset.strata.get(name, 0)} | {n} |"
              for name, n in subset.strata_available.items()]
    return "\n".join(lines) + "\n"
