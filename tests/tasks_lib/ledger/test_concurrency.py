"""4 writer processes × 250 score rows each, plus 25 keys all four race for: nothing is lost and
nothing is duplicated, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow

N_PROC, N_ROWS, SHARED_EVERY = 4, 250, 10

WORKER = """
import json, sys, time
from pathlib import Path
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import ScoreRow
url, go = sys.argv[1], Path(sys.argv[5])
proc, n, every = (int(a) for a in sys.argv[2:5])
store.get_engine(url)
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
own = shared = 0
for i in range(n):
    own += store.append_score(ScoreRow(run_id=f"run-{i:03d}", evaluator_version=f"ev-{proc}",
                                       task_score=i / n), url)
    if i % every == 0:
        shared += store.append_score(ScoreRow(run_id=f"run-{i:03d}", evaluator_version="shared",
                                              task_score=float(proc)), url)
print(json.dumps({"own": own, "shared": shared}))
"""


@pytest.mark.slow
def test_four_writers_lose_and_duplicate_nothing(ledger_url: str, tmp_path: Path) -> None:
    for i in range(N_ROWS):
        store.upsert_run(RunRow(run_id=f"run-{i:03d}", agent_id="a", task_id="t",
                                tier="standard", status="completed"), ledger_url)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, ledger_url, str(p), str(N_ROWS),
                               str(SHARED_EVERY), str(go)], stdout=subprocess.PIPE, text=True)
             for p in range(N_PROC)]
    time.sleep(1.0)
    go.touch()
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=150)
        assert p.returncode == 0
        outs.append(json.loads(out.strip().splitlines()[-1]))

    n_shared = len(range(0, N_ROWS, SHARED_EVERY))
    assert [o["own"] for o in outs] == [N_ROWS] * N_PROC
    assert sum(o["shared"] for o in outs) == n_shared
    with store.get_engine(ledger_url).connect() as conn:
        per_version = dict(conn.execute(text(
            "SELECT evaluator_version, COUNT(*) FROM scores GROUP BY evaluator_version")).all())
        dup_keys = conn.execute(text(
            "SELECT COUNT(*) FROM (SELECT run_id, evaluator_version FROM scores "
            "GROUP BY run_id, evaluator_version HAVING COUNT(*) > 1) d")).scalar_one()
    assert per_version == {**{f"ev-{p}": N_ROWS for p in range(N_PROC)}, "shared": n_shared}
    assert dup_keys == 0
