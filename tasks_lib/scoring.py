"""The one scoring path: a run's stored submission (and trace) → score card → ledger.

``score_run`` (flows/score.py) calls :func:`score_chunk`; it reads only storage and the ledger:
``runs/<run_id>/run.json`` says which kit scores the run and which pool version it used; the
kit computes the product score (metrics, S4/S5); research cells add the judged stages S1–S3,
Agentic/Overall and error codes (:mod:`tasks_lib.harness.rescore`). Cards are stored under
``runs/<run_id>/scores/<evaluator_version>.json`` and summarised in an append-only score row.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from fsspec.implementations.local import LocalFileSystem

from evaluators.core import InputDataError, InvalidSubmissionError, RunStatus
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
from tasks_lib.pool_lock import PoolUnusableError, verify_pool
from tasks_lib.records import (
    SUBMISSION,
    RunRecord,
    ScoreCard,
    card_key,
    read_card,
    read_run,
    run_store,
    write_card,
    write_run,
)
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for


def ledger_run_row(run: RunRecord) -> RunRow:
    """The ledger's row of a run record."""
    return RunRow(
        run_id=run.run_id, agent_id=run.agent.agent_id, task_id=run.task_id,
        tier=run.tier.value, replicate=run.replicate, track=run.track.value,
        model=run.agent.model, method=run.agent.method, pool_id=run.pool_id,
        pool_version=run.pool_version, status=run.status.value, n_items=run.n_items,
        n_answered=run.n_answered, item_time_s=run.item_time_s, turns=run.turns,
        wall_time_s=run.wall_time_s, input_tokens=run.input_tokens,
        output_tokens=run.output_tokens, cost_usd=run.cost_usd,
        submission_url=run_store(run.run_id).url(SUBMISSION),
        trace_url=run_store(run.run_id).url("trace") if run.has_trace else None)


def record_run(run: RunRecord) -> None:
    """Store ``run.json`` and upsert the ledger's run row (execute's last act)."""
    write_run(run)
    store.upsert_run(ledger_run_row(run))


def load_run(run_id: str) -> RunRecord:
    """A run known to the ledger, read from storage; an unknown id is the user's mistake."""
    if not store.runs(run_id=run_id):
        raise InputDataError("run id", f"no run {run_id!r} in the ledger (see: medflows runs "
                                       "list)")
    if not run_store(run_id).exists("run.json"):
        raise InputDataError(run_store(run_id).url("run.json"), "run record missing from "
                                                                "storage")
    return read_run(run_id)


@contextmanager
def local_folder(folder: Storage) -> Iterator[Path]:
    """A local path with the folder's files (the folder itself when storage is local)."""
    if isinstance(folder.fs, LocalFileSystem):
        yield Path(folder.root_path)
        return
    with tempfile.TemporaryDirectory(prefix="medflows-sub-") as tmp:
        if folder.fs.exists(folder.root_path):
            folder.fs.get(folder.root_path.rstrip("/") + "/", tmp, recursive=True)
        yield Path(tmp)


def evaluator_version(run: RunRecord) -> str:
    """The version a fresh scoring of ``run`` is tagged with (the score row's key)."""
    version = kit_for(run.track).evaluator_version
    if run.has_trace:
        from tasks_lib.harness.rescore import cell_evaluator_version

        return cell_evaluator_version(run, version)
    return version


def compute_card(run: RunRecord, verified: set[tuple[str, str]] | None = None) -> ScoreCard:
    """Score the stored submission (and trace) of ``run``; nothing is written.

    The run's pool version is checked against its lock first (:func:`tasks_lib.pool_lock.
    verify_pool`), so a changed reference is refused, never scored. An upload refused as a whole
    when it was stored (status ``invalid``, the reasons in ``violations``:
    :mod:`tasks_lib.uploads`) is invalid with those reasons.

    Args:
        run: The run to score.
        verified: ``(pool_url, pool_hash)`` pairs already verified by this caller (a chunk of
            runs on one pool verifies it once); this run's pool is added.

    Raises:
        PoolUnusableError: the pool is not the content the run was made on, or a locked file
            changed (named).
        InvalidSubmissionError: the upload was refused when stored.
    """
    key = (run.pool_url, run.pool_hash)
    if verified is None or key not in verified:
        verify_pool(*key)
        if verified is not None:
            verified.add(key)
    if run.status is RunStatus.INVALID and not run.has_trace:
        raise InvalidSubmissionError("; ".join(run.violations) or run.error
                                     or "the submission was refused when it was stored")
    submission = run_store(run.run_id).child(SUBMISSION)
    with local_folder(submission) as folder:
        if run.has_trace:
            from tasks_lib.harness.rescore import score_cell

            return score_cell(run, folder)
        return kit_for(run.track).score(run, folder)


def invalid_card(run: RunRecord, version: str, reason: str) -> ScoreCard:
    """The card of a submission a kit refused as a whole (the agent's fault): no metrics, the
    reason recorded, so the run still gets its score row."""
    return ScoreCard(task_id=run.task_id, track=run.track, evaluator_version=version,
                     pool_hash=run.pool_hash, run_id=run.run_id, task_score=None, metrics={},
                     invalid_reason=reason)


def score_row(card: ScoreCard, url: str) -> ScoreRow:
    """The ledger summary of a score card."""
    assert card.run_id is not None
    return ScoreRow(
        run_id=card.run_id, evaluator_version=card.evaluator_version, task_score=card.task_score,
        primary_metric=card.primary_metric, coverage=card.coverage,
        metrics_json=store.dumps(card.metrics), groups_json=store.dumps(card.groups),
        stages_json=store.dumps(card.stages), agentic=card.agentic, overall=card.overall,
        invalid_reason=card.invalid_reason,
        error_codes=store.dumps([c.value for c in card.coding.fired] if card.coding else []),
        card_url=url)


SCORING_REFUSED = "scoring refused: "
"""Prefix of the reason recorded on a run (``error``) whose pool scoring refused; cleared when
the run is scored."""


def score_one(run_id: str, verified: set[tuple[str, str]] | None = None) -> ScoreCard:
    """Score a run unless its current evaluator version is already in the ledger (append-only:
    the stored card is returned then); store the card and append the score row. A run whose
    pool changed since it was locked is not scored: the reason is recorded on the run
    (``error``, prefixed :data:`SCORING_REFUSED`) and the error raised. ``verified``: as for
    :func:`compute_card`."""
    run = load_run(run_id)
    if run.status is RunStatus.ERROR:
        raise InputDataError(run_id, f"the run ended in error and left nothing to score: "
                                     f"{run.error or 'no reason recorded'}")
    version = evaluator_version(run)
    if store.score_exists(run_id, version) and run_store(run_id).exists(card_key(version)):
        return read_card(run_id, version)
    try:
        card = compute_card(run, verified)
    except InvalidSubmissionError as exc:  # a kit refused the whole submission
        card = invalid_card(run, version, str(exc))
    except PoolUnusableError as exc:
        if run.error is None or run.error.startswith(SCORING_REFUSED):
            record_run(run.model_copy(update={"error": f"{SCORING_REFUSED}{exc}"}))
        raise
    if run.error and run.error.startswith(SCORING_REFUSED):
        record_run(run.model_copy(update={"error": None}))
    card = card.finite().model_copy(update={"run_id": run_id,
                                            "agent_id": run.agent.agent_id})
    store.append_score(score_row(card, write_card(card)))
    return card


def score_chunk(run_ids: list[str]) -> list[ScoreCard]:
    """Score several runs in one step (work dominates orchestration); each is resumable. Each
    pool version is verified against its lock once per chunk, and the runs a kit scores on Dask
    share one cluster (started at the first such run: ~10 s of CPU per LocalCluster)."""
    from tasks_lib.compute import shared_dask  # here: it imports distributed

    verified: set[tuple[str, str]] = set()
    with shared_dask():
        return [score_one(r, verified) for r in run_ids]


def is_scorable(run: RunRow) -> bool:
    """Runs that ended in error left nothing to score (their reason stays on the run row)."""
    return run.status != RunStatus.ERROR.value


def chunks(items: list[str], size: int) -> list[list[str]]:
    """``items`` in consecutive chunks of at most ``size``."""
    return [items[i:i + size] for i in range(0, len(items), size)]


class PoolVersion(NamedTuple):
    """Which pool version a pool root holds."""

    pool_id: str
    version: int


def pool_version(pool: str) -> PoolVersion:
    """Id and version of the pool (QA pool, rotation subset or imaging pool) at ``pool`` (a root
    URL or ``active:<subset_id>``)."""
    from tasks_lib.rotation import resolve_pool

    root = Storage(resolve_pool(pool))
    if not root.exists("manifest.json"):
        raise InputDataError(root.url("manifest.json"), "no pool here (build one with medflows "
                                                        "pool build …)")
    data = root.read_json("manifest.json")
    pool_id = data.get("pool_id") or data.get("subset_id") or data.get("task_id")
    if not isinstance(pool_id, str) or not isinstance(data.get("version"), int):
        raise InputDataError(root.url("manifest.json"), "not a pool manifest (no id/version)")
    return PoolVersion(pool_id, int(data["version"]))


def select_runs(run_ids: list[str] | None = None, task_id: str | None = None,
                pool: str | None = None) -> list[RunRow]:
    """Ledger rows of the runs named, of a task, of a pool version, or all; sorted by agent."""
    if run_ids:
        rows = [r for rid in run_ids for r in store.runs(run_id=rid)]
        missing = sorted(set(run_ids) - {r.run_id for r in rows})
        if missing:
            raise InputDataError("run id", f"not in the ledger: {', '.join(missing)} (see: "
                                           "medflows runs list)")
    elif pool:
        found = pool_version(pool)
        rows = store.runs(pool_id=found.pool_id, pool_version=found.version)
    elif task_id:
        rows = store.runs(task_id=task_id)
    else:
        rows = store.runs()
    return sorted(rows, key=lambda r: (r.agent_id, r.task_id, r.tier, r.replicate, r.run_id))
