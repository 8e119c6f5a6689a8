"""Imaging pools on storage: ``DIR/public/...`` (agent view), ``DIR/private/...`` (references),
``DIR/manifest.json``; task-card lookup across the imaging tracks."""

from __future__ import annotations

import hashlib

from evaluators.registry import UnknownNameError
from tasks_lib.domain import Track
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, PoolManifest
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec, cards_dir, list_cards, load_card

IMAGING_TRACKS = (Track.SEGMENTATION, Track.ENHANCEMENT, Track.DETECTION, Track.VQA,
                  Track.REPORT_GENERATION)
MANIFEST = "manifest.json"


def imaging_task_ids() -> list[str]:
    """Every imaging task id shipped in ``datasets/``."""
    return [tid for track in IMAGING_TRACKS for tid in list_cards(track)]


def load_task(task_id: str) -> TaskSpec:
    """The card of an imaging task, whatever its track; unknown ids list the known ones."""
    for track in IMAGING_TRACKS:
        if (cards_dir(track) / task_id / "task.yaml").is_file():
            return load_card(track, task_id)
    raise UnknownNameError("imaging task", task_id, imaging_task_ids())


def card_digest(card: TaskSpec) -> str:
    """SHA-256 of the card's canonical JSON."""
    return hashlib.sha256(card.model_dump_json().encode()).hexdigest()


def default_pool_url(task_id: str) -> str:
    """Where a task's pool lives when no ``--pool``/``--out`` is given."""
    return Storage.from_settings().url(f"pools/imaging/{task_id}")


def brief(card: TaskSpec, cases: list[CaseEntry]) -> str:
    """The public brief: what to do, the input/output layout, the expected case ids."""
    ids = "\n".join(f"- `{c.case_id}` → `{c.output}`" for c in cases)
    return (f"# {card.title}\n\n{card.description.strip()}\n\n## Inputs\n\n{card.io.inputs.strip()}"
            f"\n\n## Submission layout\n\n{card.io.outputs.strip()}\n\n## Expected cases\n\n"
            f"{ids}\n")


def write_pool(pool_url: str, card: TaskSpec, artifacts: list[Artifact], cases: list[CaseEntry],
               labels: list[int], classes: dict[int, str], deid: DeidRecord) -> PoolManifest:
    """Write every artifact under its prefix, then the manifest (last, so a pool is complete)."""
    store = Storage(pool_url)
    digest = hashlib.sha256()
    for art in sorted(artifacts, key=lambda a: (a.visibility.value, a.key)):
        key = f"{art.visibility.value}/{art.key}"
        store.write_bytes(key, art.data)
        digest.update(key.encode() + b"\0" + hashlib.sha256(art.data).digest())
    store.write_text("public/brief.md", brief(card, cases))
    manifest = PoolManifest(task_id=card.task_id, track=card.track, card_digest=card_digest(card),
                            content_hash=digest.hexdigest(), cases=cases, labels=labels,
                            classes=classes, deid=deid)
    store.write_json(MANIFEST, manifest)
    return manifest


def read_manifest(pool_url: str) -> PoolManifest:
    """The manifest of a built pool."""
    return PoolManifest.model_validate_json(Storage(pool_url).read_text(MANIFEST))


def pool_exists(pool_url: str) -> bool:
    """Whether a complete pool (manifest written) exists at ``pool_url``."""
    return Storage(pool_url).exists(MANIFEST)
