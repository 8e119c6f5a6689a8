"""How much does Prefect orchestration cost when scoring? Reference: the same scoring
functions in a plain Python loop.

Builds the hard pool and replays every (model, method) of ``predictions/hard.csv.gz`` (the demo's
workload; not timed), then scores all runs, in one process, on the same stored submissions:

1. the ``score-runs`` flow (chunked steps, card storage, ledger writes; the temporary Prefect
   server is already running) with the CLI's Prefect settings (no flow-run heartbeats, see
   ``tasks_lib/orchestration.py``) and, for reference, with Prefect's default heartbeats, and
2. :func:`tasks_lib.scoring.score_one` per run in a plain Python loop.

Score rows are deleted before each pass so both do the same work. Best of ``REPEATS``. Ends with
``RESULT overhead=<flow/loop> …``. Run: ``make bench``.
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

REPEATS = 7


def main() -> None:
    from sqlmodel import delete

    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.pipeline import HARD_MODELS
    from flows.score import score_runs
    from tasks_lib.ledger import store
    from tasks_lib.ledger.tables import ScoreRow
    from tasks_lib.orchestration import cli_flow_settings
    from tasks_lib.qa.replay_report import default_source
    from tasks_lib.scoring import score_one

    source = default_source()
    published = construct_qa(pool_id="bench", source=source, models=HARD_MODELS, meld=False,
                             auto_approve=True)
    runs = execute_qa(pool=published.url, replay=f"{source}/predictions/hard.csv.gz")
    run_ids = [r.run_id for r in runs]
    n_answers = sum(r.n_answered or 0 for r in runs)

    def clear() -> None:
        with store.session() as s:
            s.exec(delete(ScoreRow))  # type: ignore[call-overload]

    def timed_flow() -> float:
        clear()
        started = time.perf_counter()
        score_runs(pool=published.url)
        return time.perf_counter() - started

    def timed_loop() -> float:
        clear()
        started = time.perf_counter()
        for run_id in run_ids:
            score_one(run_id)
        return time.perf_counter() - started

    timed_flow()  # warm-up: first imports, first connections
    flow_times, beat_times, loop_times = [], [], []
    for i in range(REPEATS):  # interleaved, order alternating: the machine's noise hits all three
        if i % 2:
            loop_times.append(timed_loop())
        with cli_flow_settings():
            flow_times.append(timed_flow())
        beat_times.append(timed_flow())
        if not i % 2:
            loop_times.append(timed_loop())

    flow_s, beat_s, loop_s = min(flow_times), min(beat_times), min(loop_times)
    print(f"runs scored: {len(runs)} ({n_answers} answers from hard.csv.gz)")
    print(f"score flow (CLI settings):         {flow_s:8.2f} s (best of {REPEATS})")
    print(f"score flow (Prefect's heartbeats): {beat_s:8.2f} s (best of {REPEATS})")
    print(f"plain loop:                        {loop_s:8.2f} s (best of {REPEATS})")
    print(f"RESULT overhead={flow_s / loop_s:.2f} overhead_with_heartbeats={beat_s / loop_s:.2f} "
          f"flow_s={flow_s:.2f} loop_s={loop_s:.2f} runs={len(runs)}")


if __name__ == "__main__":
    main()
