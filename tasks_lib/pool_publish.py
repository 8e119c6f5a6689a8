"""The one writer and the one construct tail of every kit: ``kit build → validate → write vN
(:func:`write_version`) → exploit audit → publish (ledger)`` (:func:`publish_version`), on the
shared format of :mod:`tasks_lib.pool_format`.

Separate from the format so manifest types stay importable without Prefect, the ledger or the
audit (inside agent sandboxes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from prefect import task

from tasks_lib.audit import audit_gate
from tasks_lib.audits.report import GateRecord
from tasks_lib.caching import IO_RETRIES
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.pool_format import MANIFEST, PoolFiles, PoolHeader
from tasks_lib.storage import Storage

H = TypeVar("H", bound=PoolHeader)


def version_root(pool_id: str, version: int, out: str | None = None) -> Storage:
    """``out``, else ``pools/<pool_id>/v<version>`` under the storage root."""
    return Storage(out) if out else Storage.from_settings().child(f"pools/{pool_id}/v{version}")


def write_version(pool_id: str, files: PoolFiles, manifest: Callable[[int, str], H],
                  out: str | None = None) -> tuple[str, H]:
    """Reserve the version of this content, write every file and the manifest last.

    Args:
        pool_id: The pool (or subset) name the version is reserved under.
        files: The version's files.
        manifest: ``(version, content hash) →`` the manifest to write.
        out: Write here instead of ``pools/<pool_id>/v<N>``.

    Returns:
        The version's root URL and its manifest. A root already holding this version with this
        content is left untouched (its stored manifest is returned), so a rebuild changes no
        byte of a published, locked version.
    """
    digest = files.digest
    version = store.reserve_pool_version(pool_id, digest)
    where = version_root(pool_id, version, out)
    fresh = manifest(version, digest)
    stored = _stored(where, type(fresh))
    if stored is not None and (stored.content_hash, stored.version) == (digest, version):
        return where.root_url, stored
    for key, data in {**files.content, **files.provenance}.items():
        where.write_bytes(key, data)
    where.write_json(MANIFEST, fresh)
    return where.root_url, fresh


def _stored(root: Storage, model: type[H]) -> H | None:
    """The manifest already at ``root`` (None: none, or not one of ``model``)."""
    if not root.exists(MANIFEST):
        return None
    try:
        return model.model_validate(root.read_json(MANIFEST))
    except (ValueError, RecursionError):
        return None


def parent_ref(ref: str) -> dict[str, str | int]:
    """``pool_id@vN`` → ``{"pool_id", "version"}`` (the ledger's lineage entry)."""
    pool_id, sep, version = ref.rpartition("@v")
    if not sep or not version.isdigit():
        raise ValueError(f"not a pool_id@vN parent: {ref!r}")
    return {"pool_id": pool_id, "version": int(version)}


@task(name="record-pool", task_run_name="record-{manifest.pool_id}-v{manifest.version}",
      **IO_RETRIES)
def record_version(url: str, manifest: PoolHeader, n_items: int, kind: str = "pool") -> None:
    """Ledger the version (its audit passed): from now on it is published."""
    parents = [parent_ref(p) for p in manifest.parents]
    store.record_pool(PoolRow(pool_id=manifest.pool_id, version=manifest.version,
                              track=str(manifest.track), content_hash=manifest.content_hash,
                              manifest_url=Storage(url).url(MANIFEST), n_items=n_items,
                              kind=kind, parents_json=store.dumps(parents)))


def publish_version(url: str, manifest: PoolHeader, audit_override: str | None, n_items: int,
                    kind: str = "pool") -> GateRecord:
    """The construct tail after ``write vN``: the exploit audit gate (an unclean audit stops
    here unless ``audit_override`` gives a reason; both kept in ``audit.json``), then the ledger
    row that publishes the version."""
    gate = audit_gate(url, audit_override)
    record_version(url, manifest, n_items, kind)
    return gate
