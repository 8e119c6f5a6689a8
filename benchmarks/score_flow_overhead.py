"""How much does Prefect orchestration cost when scoring? (issue: QA walking skeleton)

Builds the hard pool and replays every (model, method) of ``predictions/hard.csv.gz`` (not timed),
then scores all runs twice, in one process, on the same stored submissions:

1. the ``score-qa`` flow (steps, result persistence, ledger writes, temporary Prefect server
   already running), and
2. the same step functions (``score_run.fn`` then ``record_score.fn``) in a plain Python loop.

Score rows are deleted between the two so both do the same ledger inserts. Prints both wall times
and their ratio. Run: ``make bench`` (or ``.venv/bin/python benchmarks/score_flow_overhead.py``).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

_TMP = Path(tempfile.mkdtemp(prefix="medflows-bench-"))
os.environ.update({
    "MEDFLOWS_STORAGE_URL": str(_TMP / "storage"),
    "MEDFLOWS_LEDGER_URL": f"sqlite:///{_TMP / 'ledger.db'}",
    "MEDFLOWS_RESULTS_DIR": str(_TMP / "results"),
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_LOGGING_LEVEL": "WARNING",
})


def main() -> None:
    from sqlmodel import delete

    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.pipeline import HARD_MODELS
    from flows.score import score_qa
    from tasks_lib.ledger import store
    from tasks_lib.ledger.tables import ScoreRow
    from tasks_lib.qa.replay_report import default_source
    from tasks_lib.qa.run_steps import record_score, score_run

    source = default_source()
    published = construct_qa(pool_id="bench", source=source, models=HARD_MODELS, meld=False,
                             auto_approve=True)
    pool, pool_hash = published.url, published.manifest.content_hash
    runs = execute_qa(pool=pool, replay=f"{source}/predictions/hard.csv.gz")
    n_answers = sum(r.n_answered for r in runs)

    started = time.perf_counter()
    score_qa(pool=pool)
    flow_s = time.perf_counter() - started

    with store.session() as s:
        s.exec(delete(ScoreRow))  # type: ignore[call-overload]
    started = time.perf_counter()
    for run in runs:
        record_score.fn(score_run.fn(run, pool, pool_hash))
    loop_s = time.perf_counter() - started

    print(f"runs scored: {len(runs)} ({n_answers} answers from hard.csv.gz)")
    print(f"score flow:  {flow_s:8.2f} s")
    print(f"plain loop:  {loop_s:8.2f} s")
    print(f"ratio flow/loop: {flow_s / loop_s:.1f}x")


if __name__ == "__main__":
    main()
