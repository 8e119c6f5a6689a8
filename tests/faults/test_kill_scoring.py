"""``kill -9`` of ``medflows score qa`` while it scores a pool's runs, then a re-run: every run has
exactly one score row and a stored card identical to a fresh, uninterrupted scoring.

The killed command is a real process; the re-run is the same command in this process
(``support.cli``: no second CLI start). (That the killed CLI's temporary Prefect server does not
outlive it: test_orphan_server.py.)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import invoke
from support.paths import QA_SOURCE

from flows.pipeline import HARD_MODELS

MEDFLOWS = str(Path(sys.executable).parent / "medflows")
DATASETS, PER_DATASET = ["medqa", "pubmedqa", "medbullets"], 25
"""A small hard pool (quick to build); scoring its 37 replayed runs still takes seconds."""
KILL_AFTER = 5
"""Score rows in the ledger when the CLI is killed."""


@pytest.fixture(scope="module")
def replayed_pool(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[str, list[str]]:
    """The hard QA pool with every recorded (model, method) replayed on it: (url, run ids)."""
    from flows.construct import construct_qa
    from flows.execute import execute_qa

    out = tmp_path_factory.mktemp("fault-kill") / "pool"
    hard = str(QA_SOURCE / "predictions" / "hard.csv.gz")
    published = construct_qa(pool_id="fault-kill", datasets=DATASETS, source=str(QA_SOURCE),
                             predictions=hard, models=HARD_MODELS, per_dataset=PER_DATASET,
                             meld=False, auto_approve=True, out=str(out))
    runs = execute_qa(pool=published.url, replay=hard)
    return published.url, [r.run_id for r in runs]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """CLI processes the test starts; their process groups are killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _score_rows(ledger: Path, run_ids: list[str]) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=30) as conn:
        marks = ",".join("?" * len(run_ids))
        return int(conn.execute(f"SELECT COUNT(*) FROM scores WHERE run_id IN ({marks})",
                                run_ids).fetchone()[0])


@pytest.mark.slow
def test_kill_9_mid_scoring_then_rerun(replayed_pool: tuple[str, list[str]], tmp_path: Path,
                                       started: list[subprocess.Popen[bytes]]) -> None:
    from prefect.settings import PREFECT_API_URL
    from sqlalchemy.engine import make_url

    from tasks_lib.ledger import store
    from tasks_lib.records import ScoreCard, read_card, read_run
    from tasks_lib.scoring import compute_card, evaluator_version
    from tasks_lib.settings import get_settings

    url, run_ids = replayed_pool
    ledger = Path(str(make_url(get_settings().ledger_url).database))
    assert _score_rows(ledger, run_ids) == 0
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    with (tmp_path / "killed.log").open("wb") as log:
        cli = subprocess.Popen([MEDFLOWS, "score", "qa", "--pool", url], env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    started.append(cli)

    deadline = time.monotonic() + 240
    while _score_rows(ledger, run_ids) < KILL_AFTER:
        assert cli.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "scoring never started"
        time.sleep(0.02)
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait(timeout=30)
    at_kill = _score_rows(ledger, run_ids)
    assert 0 < at_kill < len(run_ids), f"the kill did not land mid-way ({at_kill} scored)"
    print(f"killed with {at_kill} of {len(run_ids)} runs scored")

    from prefect.logging.configuration import setup_logging

    # Configured inside a CliRunner call, Prefect's console handler would keep its closed stream.
    setup_logging()
    rerun = invoke("score", "qa", "--pool", url)
    assert rerun.exit_code == 0, rerun.output[-3000:]
    printed = {c["run_id"]: c["task_score"]
               for c in json.loads(rerun.stdout[rerun.stdout.index("["):])}
    assert sorted(printed) == sorted(run_ids)

    rows = store.scores_for(run_ids)
    assert sorted((r.run_id, r.evaluator_version) for r in rows) == sorted(
        (rid, evaluator_version(read_run(rid))) for rid in run_ids)  # one row per key
    for rid in run_ids:
        run = read_run(rid)
        fresh = compute_card(run).model_copy(update={"run_id": rid,
                                                      "agent_id": run.agent.agent_id})
        stored = read_card(rid, evaluator_version(run))
        assert stored == ScoreCard.model_validate_json(fresh.model_dump_json()), rid
        assert printed[rid] == stored.task_score
    assert {r.run_id: r.task_score for r in rows} == printed
