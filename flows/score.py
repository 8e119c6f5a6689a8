"""score: recompute score cards offline from stored submissions; append to the ledger."""

from __future__ import annotations

from prefect import flow, unmapped

from tasks_lib.qa.planning import find_runs, read_manifest
from tasks_lib.qa.run_steps import score_run
from tasks_lib.qa.scoring import QAScoreCard


@flow(name="score-qa", flow_run_name="score-qa", log_prints=True)
def score_qa(pool: str, run_ids: list[str] | None = None) -> list[QAScoreCard]:
    """Score every stored run on the pool (or the given run ids)."""
    manifest = read_manifest(pool)
    runs = find_runs(manifest, run_ids)
    cards: list[QAScoreCard] = score_run.map(runs, unmapped(pool),
                                             unmapped(manifest.content_hash)).result()
    print(f"scored {len(cards)} runs on {manifest.pool_id} v{manifest.version}")
    return cards
