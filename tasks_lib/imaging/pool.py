"""Imaging pools on storage, versioned like every pool: ``pools/<task_id>/vN/`` holds
``public/...`` (agent view), ``private/...`` (references) and ``manifest.json``.

The format is the shared one (:mod:`tasks_lib.pool_format`): a build whose content equals a
published version reuses that version; anything else becomes the next version. Execute and
score never build a pool: a missing one is the user's to build.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from evaluators.core import InputDataError, UnknownNameError
from tasks_lib import pool_format
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, PoolManifest
from tasks_lib.ledger import store
from tasks_lib.pool_format import MANIFEST, PoolFiles
from tasks_lib.pool_lock import require_usable
from tasks_lib.taskspec import TaskSpec


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


def artifact_files(artifacts: list[Artifact]) -> dict[str, bytes]:
    """Pool key (``public/…``, ``private/…``) → bytes of every artifact."""
    return {f"{art.visibility.value}/{art.key}": art.data for art in artifacts}


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


def write_pool(card: TaskSpec, artifacts: list[Artifact], cases: list[CaseEntry],
               labels: list[int], classes: dict[int, str], deid: DeidRecord,
               out: str | None = None) -> tuple[str, PoolManifest]:
    """Write the artifacts and the public brief as the version of this content
    (:func:`tasks_lib.pool_publish.write_version`: ``out`` or ``pools/<task_id>/vN``, manifest
    last); returns its root URL and manifest."""
    from tasks_lib.pool_publish import write_version  # Prefect: not for the evaluator's imports

    files = PoolFiles(content={**artifact_files(artifacts),
                               "public/brief.md": brief(card, cases).encode()})

    def manifest(version: int, digest: str) -> PoolManifest:
        return PoolManifest(pool_id=card.task_id, task_id=card.task_id, track=card.track,
                            version=version, created_at=datetime.now(UTC),
                            cards=[card.task_id], card_digest=card_digest(card),
                            content_hash=digest, cases=cases, labels=labels, classes=classes,
                            deid=deid)

    return write_version(card.task_id, files, manifest, out)


def read_manifest(pool_url: str) -> PoolManifest:
    """The manifest of a built imaging (or challenge) pool (a missing one names the build
    command; another track's names its pool and track)."""
    return pool_format.read_manifest(pool_url, PoolManifest)
