"""Imaging pools on storage, versioned like every pool: ``pools/<task_id>/vN/`` holds
``public/...`` (agent view), ``private/...`` (references) and ``manifest.json``.

A build whose content equals a published version reuses that version; anything else becomes the
next version. Execute and score never build a pool: a missing one is the user's to build.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import ValidationError

from evaluators.core import InputDataError, UnknownNameError
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, PoolManifest
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.pool_lock import require_usable
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec

MANIFEST = "manifest.json"


def load_task(task_id: str) -> TaskSpec:
    """The card of an imaging task, whatever its track: a shipped card (where its kit keeps
    them), else the stored card of an ingested folder (``medflows pool build imaging --from``);
    unknown ids list the known ones."""
    from tasks_lib.imaging.registry import imaging_kit, imaging_tracks

    kits = [imaging_kit(t) for t in imaging_tracks()]
    for kit in kits:
        card = kit.card(task_id)
        if card is not None:
            return card
    raise UnknownNameError("task", task_id, sorted(t for kit in kits for t in kit.task_ids()))


def card_digest(card: TaskSpec) -> str:
    """SHA-256 of the card's canonical JSON."""
    return hashlib.sha256(card.model_dump_json().encode()).hexdigest()


def content_hash(artifacts: list[Artifact]) -> str:
    """SHA-256 over every pool file (key + bytes), in key order."""
    digest = hashlib.sha256()
    for art in sorted(artifacts, key=lambda a: (a.visibility.value, a.key)):
        key = f"{art.visibility.value}/{art.key}"
        digest.update(key.encode() + b"\0" + hashlib.sha256(art.data).digest())
    return digest.hexdigest()


def version_for(task_id: str, digest: str) -> int:
    """The version with this content, else the next version number, reserved in the ledger
    (:func:`tasks_lib.ledger.store.reserve_pool_version`)."""
    return store.reserve_pool_version(task_id, digest)


def versioned_url(task_id: str, version: int) -> str:
    """``pools/<task_id>/v<version>`` under the storage root."""
    return Storage.from_settings().url(f"pools/{task_id}/v{version}")


def latest_pool_url(task_id: str) -> str:
    """Root URL of the newest published version of ``task_id``'s pool, checked usable
    (:func:`tasks_lib.pool_lock.require_usable`).

    Raises:
        InputDataError: no version was built (names the command that builds one).
        PoolUnusableError: the version is not audited or changed since it was locked.
    """
    rows = store.pools(pool_id=task_id, kind="pool")
    if not rows:
        raise InputDataError(f"pool {task_id}", "not built yet; build it with: medflows pool "
                                                f"build --task {task_id}")
    newest = max(rows, key=lambda r: r.version)
    url = newest.manifest_url.removesuffix(f"/{MANIFEST}")
    require_usable(url)
    return url


def brief(card: TaskSpec, cases: list[CaseEntry]) -> str:
    """The public brief: what to do, the input/output layout, the expected case ids."""
    ids = "\n".join(f"- `{c.case_id}` → `{c.output}`" for c in cases)
    return (f"# {card.title}\n\n{card.description.strip()}\n\n## Inputs\n\n{card.io.inputs.strip()}"
            f"\n\n## Submission layout\n\n{card.io.outputs.strip()}\n\n## Expected cases\n\n"
            f"{ids}\n")


def write_pool(pool_url: str, card: TaskSpec, artifacts: list[Artifact], cases: list[CaseEntry],
               labels: list[int], classes: dict[int, str], deid: DeidRecord,
               version: int = 1) -> PoolManifest:
    """Write every artifact under its prefix, then the manifest (last, so a pool is complete)."""
    pool = Storage(pool_url)
    for art in artifacts:
        pool.write_bytes(f"{art.visibility.value}/{art.key}", art.data)
    pool.write_text("public/brief.md", brief(card, cases))
    manifest = PoolManifest(task_id=card.task_id, track=card.track, version=version,
                            card_digest=card_digest(card), content_hash=content_hash(artifacts),
                            cases=cases, labels=labels, classes=classes, deid=deid)
    pool.write_json(MANIFEST, manifest)
    return manifest


def record_pool(pool_url: str, manifest: PoolManifest) -> None:
    """Ledger the published version (idempotent for the same content)."""
    store.record_pool(PoolRow(pool_id=manifest.task_id, version=manifest.version,
                              track=manifest.track.value, content_hash=manifest.content_hash,
                              manifest_url=f"{pool_url.rstrip('/')}/{MANIFEST}",
                              n_items=len(manifest.cases)))


def read_manifest(pool_url: str) -> PoolManifest:
    """The manifest of a built pool (a missing one names the build command)."""
    pool = Storage(pool_url)
    if not pool.exists(MANIFEST):
        raise InputDataError(pool.url(MANIFEST), "no pool here; build one with: medflows pool "
                                                 "build --task TASK")
    text = pool.read_text(MANIFEST)
    try:
        return PoolManifest.model_validate_json(text)
    except ValidationError:
        try:
            data = json.loads(text)
        except ValueError:
            data = {}
        found = data if isinstance(data, dict) else {}
        raise InputDataError(pool.url(MANIFEST), "not an imaging pool: its manifest names "
                             f"{found.get('pool_id') or found.get('task_id')!r} of track "
                             f"{found.get('track')!r}") from None
