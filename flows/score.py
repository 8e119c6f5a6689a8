"""score: recompute score cards offline from stored runs; append to the ledger.

One flow for every track and every kind of run (QA replays, live agents, uploaded submissions,
research cells): it reads only storage and the ledger, scores runs in chunks (one step per chunk,
so the work dominates orchestration) and skips runs already scored under the current evaluator
version, so a retried or re-run flow resumes where it stopped.
"""

from __future__ import annotations

from prefect import flow, task

from flows import compose
from tasks_lib.caching import IO_RETRIES
from tasks_lib.errors import InputDataError
from tasks_lib.records import ScoreCard
from tasks_lib.scoring import chunks, is_scorable, score_chunk, select_runs

compose()  # every kit registered, also when a deployment loads this module

CHUNK = 64
"""Runs per scoring step."""


@task(name="score-chunk", task_run_name="score-{label}", **IO_RETRIES)
def score_chunk_step(run_ids: list[str], label: str, full: bool = False) -> list[ScoreCard]:
    """Score a chunk of runs (each skipped if already scored under this evaluator version).

    Returns the cards without their per-case rows unless ``full`` (those stay on the stored
    cards, ``runs/<run_id>/scores/<evaluator_version>.json``), so orchestration stays cheap.
    """
    cards = score_chunk(run_ids)
    return cards if full else [c.summary() for c in cards]


@flow(name="score-runs", flow_run_name="score-runs", log_prints=True)
def score_runs(run_ids: list[str] | None = None, task_id: str | None = None,
               pool: str | None = None, chunk_size: int = CHUNK) -> list[ScoreCard]:
    """Score the named runs, a task's runs, a pool version's runs, or every run; returns the
    cards without per-case rows (read the stored card for those)."""
    ids = [r.run_id for r in select_runs(run_ids, task_id, pool) if is_scorable(r)]
    parts = chunks(ids, chunk_size)
    labels = [f"{p[0]}+{len(p) - 1}" for p in parts]
    if len(parts) == 1:  # one chunk: run it in the flow's thread (no task-runner hop)
        cards = score_chunk_step(parts[0], labels[0])
    else:
        cards = [c for part in score_chunk_step.map(parts, labels).result() for c in part]
    print(f"scored {len(cards)} runs")
    return cards


@flow(name="score-run", flow_run_name="score-{run_id}", log_prints=True)
def score_run(run_id: str) -> ScoreCard:
    """Score one stored run (append-only: a run already scored under this evaluator version
    returns its stored card)."""
    card = score_chunk_step([run_id], run_id, full=True)
    print(f"{run_id}: task_score={card[0].task_score} ({card[0].evaluator_version})")
    return card[0]


def score_qa(pool: str, run_ids: list[str] | None = None) -> list[ScoreCard]:
    """Score every stored run on a QA pool version (former entry point; = ``score_runs``)."""
    return score_runs(run_ids=run_ids, pool=None if run_ids else pool)


@task(name="register-upload", task_run_name="upload-{task_id}", **IO_RETRIES)
def register_upload_step(task_id: str, submission: str, pool: str | None) -> str:
    """Store a submission folder as an upload run of the task's pool version; its run id. Only
    a usable version is accepted (audited, unchanged since it was locked)."""
    from pathlib import Path

    from tasks_lib.imaging.pool import latest_pool_url, load_task, read_manifest
    from tasks_lib.pool_lock import require_usable
    from tasks_lib.uploads import register_upload

    card = load_task(task_id)
    pool_url = pool or latest_pool_url(task_id)
    m = read_manifest(pool_url)
    if m.task_id != task_id or m.track != card.track:
        raise InputDataError(pool_url, f"this is a pool of task {m.task_id!r} "
                                       f"({m.track.value}), not of {task_id!r}; pass that "
                                       f"task's pool (or none for its newest version)")
    if pool:
        require_usable(pool_url)  # latest_pool_url checks the newest version itself
    return register_upload(task_id, Path(submission), pool_url, m.task_id, m.version,
                           m.content_hash, card.track.value,
                           wanted=[c.output for c in m.cases]).run_id


@flow(name="score-submission", flow_run_name="score-{task_id}", log_prints=True)
def score_submission(task_id: str, submission: str, pool: str | None = None) -> ScoreCard:
    """Score one submission folder of an imaging task (upload mode): store it as a run of the
    task's newest pool version (or ``pool``), then score it like any run."""
    run_id = register_upload_step(task_id, submission, pool)
    card = score_chunk_step([run_id], run_id, full=True)[0]
    print(f"{task_id}: run {run_id} task_score={card.task_score} s4={card.s4} s5={card.s5}")
    return card
