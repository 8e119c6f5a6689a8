"""Build and publish a MedBench pool version (layout: :mod:`tasks_lib.medbench.items`).

The construct flow (``flows/medbench.py``) calls :func:`build_tasks` (every card of
``datasets/medbench/`` or the ones named), :func:`publish` (write the version) and, once the
exploit audit passed, :func:`record` (ledger). Same inputs ⇒ same content hash ⇒ same version.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime

from evaluators.core import InputDataError, Track
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.medbench import bank_imaging  # noqa: F401  (registers the imaging builders)
from tasks_lib.medbench.bank import BUILDERS, BuiltTask
from tasks_lib.medbench.items import (
    AUDIT,
    IMAGES,
    MANIFEST,
    PUBLIC_ITEMS,
    REFERENCES,
    AnswerType,
    Dimension,
    MedBenchManifest,
    PublicItem,
    Reference,
    TaskEntry,
)
from tasks_lib.sources import MedBenchSource
from tasks_lib.storage import Storage
from tasks_lib.taskspec import list_cards, load_card

DEFAULT_POOL = "medbench-bank"


def build_task(task_id: str) -> tuple[TaskEntry, BuiltTask]:
    """Build one card's items; its manifest entry."""
    card = load_card(Track.MEDBENCH, task_id)
    src = card.source
    if not isinstance(src, MedBenchSource):
        raise InputDataError(task_id, "a MedBench card needs source.kind medbench_bank")
    built = BUILDERS.get(src.builder)(card, src)
    if not built.items:
        raise InputDataError(task_id, "the builder made no items")
    specialties = Counter(it.specialty for it in built.items)
    entry = TaskEntry(dimension=Dimension(src.dimension),
                      specialty=specialties.most_common(1)[0][0],
                      answer_type=AnswerType(src.answer_type), metrics=card.metric_names,
                      n_items=len(built.items), source=built.source,
                      judge_weights=src.judge_weights)
    return entry, built


def content_hash(items: list[PublicItem], refs: list[Reference], images: dict[str, bytes]) -> str:
    """sha256 over public items, references (in order) and image bytes (by name)."""
    h = hashlib.sha256()
    for item, ref in zip(items, refs, strict=True):
        row = {"public": item.model_dump(mode="json"), "private": ref.model_dump(mode="json")}
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode() + b"\n")
    for name in sorted(images):
        h.update(name.encode() + hashlib.sha256(images[name]).digest())
    return h.hexdigest()


def version_root(pool_id: str, digest: str, out: str | None) -> tuple[Storage, int]:
    """Where the version with this content lives (an existing one is reused) and its number."""
    version = store.reserve_pool_version(pool_id, digest)
    root = Storage(out) if out else Storage.from_settings().child(f"pools/{pool_id}/v{version}")
    return root, version


def write_pool(root: Storage, manifest: MedBenchManifest, items: list[PublicItem],
               refs: list[Reference], images: dict[str, bytes]) -> None:
    """Write the files of one version (public view, private references, manifest)."""
    root.write_jsonl(PUBLIC_ITEMS, items)
    root.write_jsonl(REFERENCES, refs)
    for name, data in images.items():
        root.write_bytes(f"{IMAGES}/{name}", data)
    root.write_json(f"{AUDIT}/build.json", {"tasks": {t: e.source
                                                      for t, e in manifest.tasks.items()}})
    root.write_json(MANIFEST, manifest)


def publish(pool_id: str, out: str | None, tasks: dict[str, tuple[TaskEntry, BuiltTask]],
            seed: int, notes: list[str] | None = None,
            parents: list[str] | None = None) -> tuple[str, MedBenchManifest]:
    """Write a pool (or subset) version; returns its root URL and manifest."""
    items = [it for _, b in tasks.values() for it in b.items]
    refs = [r for _, b in tasks.values() for r in b.references]
    images = {k: v for _, b in tasks.values() for k, v in b.images.items()}
    digest = content_hash(items, refs, images)
    root, version = version_root(pool_id, digest, out)
    if root.exists(MANIFEST):
        existing = MedBenchManifest.model_validate(root.read_json(MANIFEST))
        if existing.content_hash == digest and existing.version == version:
            return root.root_url, existing  # same content: the version stays byte-identical
    manifest = MedBenchManifest(
        pool_id=pool_id, version=version, content_hash=digest, created_at=datetime.now(UTC),
        seed=seed, tasks={t: e for t, (e, _) in tasks.items()}, n_items=len(items),
        parents=parents or [], notes=notes or [])
    write_pool(root, manifest, items, refs, images)
    return root.root_url, manifest


def record(url: str, manifest: MedBenchManifest, kind: str = "pool") -> None:
    """Ledger the version (after its audit)."""
    store.record_pool(PoolRow(
        pool_id=manifest.pool_id, version=manifest.version, track=Track.MEDBENCH.value,
        content_hash=manifest.content_hash, manifest_url=f"{url.rstrip('/')}/{MANIFEST}",
        n_items=manifest.n_items, kind=kind, parents_json=store.dumps(
            [{"pool": p} for p in manifest.parents])))


def card_ids(tasks: list[str] | None) -> list[str]:
    """The MedBench cards to build (all by default); an unknown one lists the known ones."""
    known = list_cards(Track.MEDBENCH)
    for t in tasks or []:
        if t not in known:
            raise InputDataError("--tasks", f"unknown MedBench task {t!r}; known: "
                                            f"{', '.join(known)}")
    return tasks or known
