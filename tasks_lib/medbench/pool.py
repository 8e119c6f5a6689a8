"""Build and publish a MedBench pool version (layout: :mod:`tasks_lib.medbench.items`).

The construct flow (``flows/medbench.py``) calls :func:`build_task` per card (every card of
``datasets/medbench/`` or the ones named), :func:`publish` (write the version) and the shared
tail (:func:`tasks_lib.pool_publish.publish_version`: exploit audit, ledger). Same inputs ⇒ same
content hash ⇒ same version.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

from evaluators.core import InputDataError, Track
from tasks_lib.medbench import (  # noqa: F401  (register the imaging/multimodal/agent builders)
    bank_agent,
    bank_agent_gen,
    bank_imaging,
    bank_multimodal,
    bank_series,
)
from tasks_lib.medbench.bank import BUILDERS, BuiltTask
from tasks_lib.medbench.items import (
    AUDIT,
    IMAGES,
    PUBLIC_ITEMS,
    REFERENCES,
    AnswerType,
    Dimension,
    MedBenchManifest,
    PublicItem,
    Reference,
    TaskEntry,
)
from tasks_lib.pool_format import PoolFiles, jsonl_bytes
from tasks_lib.pool_publish import write_version
from tasks_lib.sources import MedBenchSource
from tasks_lib.taskspec import list_cards, load_card

DEFAULT_POOL = "medbench-bank"
BANK_NOTE = ("MedBench-style stand-in built by medflows from data it holds (MedAgentsBench "
             "questions, pydicom sample headers and pixels, scikit-image sample images, nilearn's "
             "MNI152 template, the imaging tracks' generators, hand-written safety items and "
             "teaching tables); not MedBench data.")
"""The note every bank's manifest carries."""


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
                      judge_weights=src.judge_weights, dataset=src.dataset)
    return entry, built


def pool_files(items: list[PublicItem], refs: list[Reference], images: dict[str, bytes],
               tasks: dict[str, TaskEntry]) -> PoolFiles:
    """The files of a MedBench pool or subset version: public items and images, private
    references (hashed); the build notes (``audit/build.json``, not hashed)."""
    build = {"tasks": {t: e.source for t, e in tasks.items()}}
    return PoolFiles(
        content={PUBLIC_ITEMS: jsonl_bytes(items), REFERENCES: jsonl_bytes(refs),
                 **{f"{IMAGES}/{name}": data for name, data in images.items()}},
        provenance={f"{AUDIT}/build.json": json.dumps(build, indent=2, sort_keys=True,
                                                      ensure_ascii=False).encode()})


def publish(pool_id: str, out: str | None, tasks: dict[str, tuple[TaskEntry, BuiltTask]],
            seed: int, notes: list[str] | None = None,
            parents: list[str] | None = None) -> tuple[str, MedBenchManifest]:
    """Write a pool version (:func:`tasks_lib.pool_publish.write_version`; the same content is
    the same version, left byte-identical); returns its root URL and manifest."""
    items = [it for _, b in tasks.values() for it in b.items]
    refs = [r for _, b in tasks.values() for r in b.references]
    images = {k: v for _, b in tasks.values() for k, v in b.images.items()}
    entries = {t: e for t, (e, _) in tasks.items()}

    def manifest(version: int, digest: str) -> MedBenchManifest:
        return MedBenchManifest(
            pool_id=pool_id, version=version, content_hash=digest, created_at=datetime.now(UTC),
            cards=list(entries), parents=parents or [], seed=seed, tasks=entries,
            n_items=len(items), notes=notes or [])

    return write_version(pool_id, pool_files(items, refs, images, entries), manifest, out)


def card_ids(tasks: list[str] | None) -> list[str]:
    """The MedBench cards to build (all by default); an unknown one lists the known ones."""
    known = list_cards(Track.MEDBENCH)
    for t in tasks or []:
        if t not in known:
            raise InputDataError("--tasks", f"unknown MedBench task {t!r}; known: "
                                            f"{', '.join(known)}")
    return tasks or known
