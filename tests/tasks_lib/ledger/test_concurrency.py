"""8 writer processes × 500 rows each (250 runs, each upserted then scored), plus 25 runs and 25
score keys all eight race for (the same run upserted by every writer, then one score key): nothing
is lost, nothing is duplicated and no caller sees an exception, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tasks_lib.ledger import store

N_PROC, N_RUNS, SHARED_EVERY = 8, 250, 10
"""Writers, runs per writer (2 rows each: run + score), a shared run every this many."""

WORKER = """
import json, sys, time
from pathlib import Path
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
url, go = sys.argv[1], Path(sys.argv[5])
proc, n, every = (int(a) for a in sys.argv[2:5])
store.get_engine(url)
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
own = shared = 0
for i in range(n):
    run_id = f"w{proc}-{i:03d}"
    store.upsert_run(RunRow(run_id=run_id, agent_id=f"agent-{proc}", task_id="t",
                            tier="standard", status="completed", turns=i), url)
    own += store.append_score(ScoreRow(run_id=run_id, evaluator_version="ev/1",
                                       task_score=i / n), url)
    if i % every == 0:  # every writer upserts the same run, then races for its one score key
        store.upsert_run(RunRow(run_id=f"shared-{i:03d}", agent_id="shared", task_id="t",
                                tier="standard", status="completed", turns=proc), url)
        shared += store.append_score(ScoreRow(run_id=f"shared-{i:03d}",
                                              evaluator_version="ev/1", task_score=float(proc)),
                                     url)
print(json.dumps({"own": own, "shared": shared}))
"""


@pytest.mark.slow
def test_eight_writers_lose_and_duplicate_nothing(ledger_url: str, tmp_path: Path) -> None:
    store.get_engine(ledger_url)  # migrate once, before the writers start
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, ledger_url, str(p), str(N_RUNS),
                               str(SHARED_EVERY), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in range(N_PROC)]
    time.sleep(1.0)
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=150)
        assert p.returncode == 0, err[-3000:]  # any exception raised to a caller fails here
        outs.append(json.loads(out.strip().splitlines()[-1]))

    n_shared = len(range(0, N_RUNS, SHARED_EVERY))
    assert [o["own"] for o in outs] == [N_RUNS] * N_PROC
    assert sum(o["shared"] for o in outs) == n_shared  # exactly one writer won each shared key
    with store.get_engine(ledger_url).connect() as conn:
        runs_per_agent = dict(conn.execute(text(
            "SELECT agent_id, COUNT(*) FROM runs GROUP BY agent_id")).all())
        turns_per_run = dict(conn.execute(text("SELECT run_id, turns FROM runs")).all())
        n_scores = conn.execute(text("SELECT COUNT(*) FROM scores")).scalar_one()
        scored = {r for (r,) in conn.execute(text("SELECT run_id FROM scores"))}
        dup_keys = conn.execute(text(
            "SELECT COUNT(*) FROM (SELECT run_id, evaluator_version FROM scores "
            "GROUP BY run_id, evaluator_version HAVING COUNT(*) > 1) d")).scalar_one()
    assert runs_per_agent == {**{f"agent-{p}": N_RUNS for p in range(N_PROC)},
                              "shared": n_shared}
    assert all(turns_per_run[f"w{p}-{i:03d}"] == i for p in range(N_PROC) for i in range(N_RUNS))
    assert {turns_per_run[f"shared-{i:03d}"] for i in range(0, N_RUNS, SHARED_EVERY)} \
        <= set(range(N_PROC))  # the last writer's fields, never a mix or a loss
    assert n_scores == N_PROC * N_RUNS + n_shared == len(scored)
    assert dup_keys == 0
