"""score: recompute score cards offline from stored submissions; append to the ledger."""

from __future__ import annotations

from prefect import flow, unmapped

from tasks_lib.imaging.types import ScoreCard
from tasks_lib.qa.planning import find_runs, read_manifest
from tasks_lib.qa.report import publish_leaderboard
from tasks_lib.qa.run_steps import record_score, score_run
from tasks_lib.qa.scoring import QAScoreCard


@flow(name="score-qa", flow_run_name="score-qa", log_prints=True)
def score_qa(pool: str, run_ids: list[str] | None = None) -> list[QAScoreCard]:
    """Score every stored run on the pool (or the given run ids); leaderboard artifact."""
    manifest = read_manifest(pool)
    runs = find_runs(manifest, run_ids)
    cards: list[QAScoreCard] = score_run.map(runs, unmapped(pool),
                                             unmapped(manifest.content_hash)).result()
    record_score.map(cards).result()
    publish_leaderboard(runs, cards, f"{manifest.pool_id}-v{manifest.version}")
    print(f"scored {len(cards)} runs on {manifest.pool_id} v{manifest.version}")
    return cards


@flow(name="score-submission", flow_run_name="score-{task_id}", log_prints=True)
def score_submission(task_id: str, submission: str, pool: str | None = None,
                     use_dask: bool | None = None, run_id: str | None = None) -> ScoreCard:
    """Score one submission folder of an imaging task (builds the default pool if absent).

    validate (GX) → per-case metrics (Dask for volumes) → dataset metrics → policy, S4/S5 → store
    → ledger (when ``run_id`` names a run already in the ledger).
    """
    from flows.construct import ensure_imaging_pool
    from tasks_lib.imaging import steps as imaging
    from tasks_lib.imaging.pool import load_task

    card = load_task(task_id)
    pool_url = ensure_imaging_pool(task_id, pool)
    manifest = imaging.load_manifest(pool_url)
    rows = imaging.inspect(submission, manifest)
    validation = imaging.validate(card.track.value, rows)
    dask = card.policy.dask if use_dask is None else use_dask
    per_case = imaging.case_metrics(card, submission, pool_url, manifest, rows, dask)
    extra = imaging.dataset_metrics(submission, pool_url, manifest, rows)
    card_out = imaging.assemble(card, manifest, rows, per_case, extra, validation)
    url = imaging.store_card(card_out, submission, rows)
    imaging.publish_artifact(card_out)
    if run_id:
        imaging.record_score(card_out, run_id, url)
    print(f"{task_id}: task_score={card_out.task_score:.4f} s4={card_out.s4} s5={card_out.s5} "
          f"({url})")
    return card_out
