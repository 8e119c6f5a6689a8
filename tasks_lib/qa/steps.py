"""Construct steps of the QA track: ingest → de-identify → normalize → difficulty-filter → MELD
screen → (expert review, in the flow) → write the pool version (the shared tail audits and
publishes it: :func:`tasks_lib.pool_publish.publish_version`)."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, datetime
from typing import NamedTuple

from prefect import get_run_logger, task

from tasks_lib.caching import IO_RETRIES, cached
from tasks_lib.domain import SelectionRule, Track
from tasks_lib.llm import LiteLLMCompletion
from tasks_lib.pool_publish import write_version
from tasks_lib.qa import deid, difficulty, meld
from tasks_lib.qa.ingest import Ingested, normalize_item, qa_source, read_questions
from tasks_lib.qa.pool import FILES, exemplar, pool_files, public_view, reference
from tasks_lib.qa.predictions import load_predictions
from tasks_lib.qa.types import (
    DatasetEntry,
    DeidRecord,
    Difficulty,
    Exemplar,
    MeldRecord,
    PHIType,
    PoolManifest,
    PublishedPool,
    QAItem,
    Reject,
    ReviewRecord,
    ReviewVerdict,
)
from tasks_lib.taskspec import TaskSpec, load_card, resolve_data_path


def file_digest(path: str) -> str:
    """sha256 of a file's bytes: part of step inputs so a changed source invalidates the cache."""
    import fsspec

    h = hashlib.sha256()
    with fsspec.open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class DatasetSource(NamedTuple):
    """A card resolved to concrete files and their digests."""

    card: TaskSpec
    questions: str
    questions_digest: str
    train: str | None
    stratify_field: str


@task(name="resolve-card", task_run_name="resolve-card-{dataset}")
def resolve_card(dataset: str, source: str) -> DatasetSource:
    """Load a dataset card and locate its files under ``source`` (unknown ids list known ones)."""
    card = load_card(Track.QA, dataset)
    qa = qa_source(card)
    questions = resolve_data_path(qa.questions, source)
    train = resolve_data_path(qa.train, source) if qa.train else None
    return DatasetSource(card, questions, file_digest(questions), train, qa.stratify_field)


@task(name="ingest", task_run_name="ingest-{dataset}",
      **cached(modules=("tasks_lib.qa.ingest", "tasks_lib.qa.bounded_io",
                        "tasks_lib.qa.question_lines", "tasks_lib.qa.types")))
def ingest(dataset: str, questions: str, questions_digest: str) -> Ingested:
    """Read the question file; bad lines become rejects with file, line and reason."""
    return read_questions(dataset, questions)


class Deidentified(NamedTuple):
    """Items with PHI replaced and what was replaced."""

    items: list[QAItem]
    records: list[DeidRecord]


@task(name="de-identify", task_run_name="de-identify-{dataset}",
      **cached(modules=("tasks_lib.qa.deid", "tasks_lib.qa.types")))
def deidentify(dataset: str, items: list[QAItem]) -> Deidentified:
    """Scrub PHI from question, options and answer text; count replacements per item and type."""
    out, records = [], []
    for it in items:
        scrubbed, counts = deid.scrub_item(it)
        out.append(scrubbed)
        if counts:
            records.append(DeidRecord(key=it.key, counts=dict(counts)))
    return Deidentified(out, records)


class Normalized(NamedTuple):
    """Items that passed normalization and those rejected."""

    items: list[QAItem]
    rejects: list[Reject]


@task(name="normalize", task_run_name="normalize-{dataset}",
      **cached(modules=("tasks_lib.qa.ingest", "tasks_lib.qa.types")))
def normalize(dataset: str, items: list[QAItem], source: str) -> Normalized:
    """Trim whitespace; reject items whose answer is not one of the options."""
    kept: list[QAItem] = []
    rejects: list[Reject] = []
    for it in items:
        result = normalize_item(it, source)
        if isinstance(result, Reject):
            rejects.append(result)
        else:
            kept.append(result)
    return Normalized(kept, rejects)


@task(name="difficulty-filter", task_run_name="difficulty-filter-{dataset}",
      **cached(modules=("tasks_lib.qa.difficulty", "tasks_lib.qa.predictions",
                        "tasks_lib.qa.types")))
def difficulty_filter(
    dataset: str, items: list[QAItem], predictions: str, predictions_digest: str,
    models: list[str] | None, rule: SelectionRule, per_dataset: int, threshold: float, seed: int,
    stratify_field: str,
) -> list[Difficulty]:
    """k/N per item from recorded predictions, then select hard items per the rule."""
    frame = load_predictions(predictions, models)
    frame = frame[frame["dataset"] == dataset]
    counts = difficulty.count_correct(items, frame)
    known = {it.realidx for it in items}
    unmatched = int((~frame["realidx"].isin(known)).sum())
    if unmatched:
        get_run_logger().warning(
            "%s: %d prediction rows name items not in the dataset; ignored", dataset, unmatched)
    return difficulty.select_hard(items, counts, rule=rule, per_dataset=per_dataset,
                                  threshold=threshold, seed=seed, stratify_field=stratify_field)


@task(name="meld-screen", task_run_name="meld-screen-{dataset}",
      **cached(modules=("tasks_lib.qa.meld", "tasks_lib.llm", "tasks_lib.llm_limits",
                        "tasks_lib.llm_scope", "tasks_lib.qa.types"), **IO_RETRIES))
def meld_screen(dataset: str, items: list[QAItem], models: list[str], threshold: float
                ) -> list[MeldRecord]:
    """Ask each screening model to continue each question's first half (through the call
    layer, as many at once as the endpoint's connection limit allows)."""
    door = LiteLLMCompletion()
    return meld.screen(items, models, door, threshold, max_workers=door.max_connections)


@task(name="select-exemplars", task_run_name="select-exemplars-{dataset}")
def select_exemplars(dataset: str, train: str | None, test_items: list[QAItem],
                     pool_keys: set[str], n: int = 5) -> list[Exemplar]:
    """First ``n`` train items; without a train file, the first ``n`` test items not in the pool."""
    source = read_questions(dataset, train).items if train else test_items
    chosen = [it for it in source if it.key not in pool_keys][:n]
    return [exemplar(deid.scrub_item(it)[0]) for it in chosen]


class DatasetBuild(NamedTuple):
    """Everything construct learned about one dataset."""

    dataset: str
    n_ingested: int
    selected: list[QAItem]
    rejects: list[Reject]
    difficulty: list[Difficulty]
    deid: list[DeidRecord]
    exemplars: list[Exemplar]


@task(name="publish-pool", task_run_name="publish-{pool_id}", **IO_RETRIES)
def publish_pool(
    pool_id: str, out: str | None, builds: list[DatasetBuild], meld_records: list[MeldRecord],
    review: ReviewRecord | None, selection: dict[str, str | int | float | list[str] | None],
) -> PublishedPool:
    """Write the public view, private references, audit files and manifest as version N
    (:func:`tasks_lib.pool_publish.write_version`; the tail
    :func:`tasks_lib.pool_publish.publish_version` ledgers it once its exploit audit passed)."""
    withheld = {k for k, v in (review.decisions if review else {}).items()
                if v is ReviewVerdict.REJECT}
    items = [it for b in builds for it in b.selected if it.key not in withheld]
    deid_items = [r for b in builds for r in b.deid if r.key in {it.key for it in items}]
    deid_totals: Counter[PHIType] = Counter()
    for r in deid_items:
        deid_totals.update(r.counts)
    files = pool_files(
        [public_view(it) for it in items], [reference(it) for it in items],
        [e for b in builds for e in b.exemplars],
        provenance={"rejects": [r for b in builds for r in b.rejects],
                    "difficulty": [d for b in builds for d in b.difficulty if d.hard],
                    "meld": meld_records})

    def manifest(version: int, digest: str) -> PoolManifest:
        return PoolManifest(
            pool_id=pool_id, version=version, content_hash=digest, created_at=datetime.now(UTC),
            track=Track.QA.value, cards=[b.dataset for b in builds], selection=selection,
            datasets={
                b.dataset: DatasetEntry(
                    n_items=sum(1 for it in b.selected if it.key not in withheld),
                    realidx=[it.realidx for it in b.selected if it.key not in withheld],
                    n_ingested=b.n_ingested, n_rejected=len(b.rejects),
                    n_hard=sum(d.hard for d in b.difficulty),
                    n_withheld=sum(1 for it in b.selected if it.key in withheld),
                )
                for b in builds
            },
            deid=dict(deid_totals), deid_items=deid_items,
            meld={"screened": bool(meld_records), "probes": len(meld_records),
                  "flagged": len({r.key for r in meld_records if r.flagged})},
            review=review, files=FILES,
        )

    url, written = write_version(pool_id, files, manifest, out)
    return PublishedPool(url=url, manifest=written)


def n_items(manifest: PoolManifest) -> int:
    """Items of a QA pool (the ledger's ``n_items``)."""
    return sum(d.n_items for d in manifest.datasets.values())
