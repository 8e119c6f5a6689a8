"""kill -9 of ``medflows medbench upload`` at each step of an upload (predictions stored but not
admitted; admitted but no run record; while scoring), then the same file uploaded again: one
version, scored, one upload charged (issue 21, point 4).

The upload runs in its own process whose step of interest is replaced by one that prints
``HANGING`` and sleeps; the test kills it with SIGKILL there, checks what was left, and uploads
the same file again with the CLI under the Prefect test harness."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.medbench_pool import OVERALL, answers_for, write_pool
from typer.testing import CliRunner

import flows.score  # noqa: F401  (Prefect's log handlers keep the streams of their import)
from flows.cli import medbench_upload_mode  # noqa: F401
from flows.cli.groups import app
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.medbench import accounts
from tasks_lib.medbench.splits import make_split
from tasks_lib.settings import PROJECT_ROOT
from tasks_lib.storage import Storage

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

HANG = """
import sys, time
import {module} as target

def hang(*args, **kwargs):
    print("HANGING", flush=True)
    time.sleep(600)

setattr(target, "{attr}", hang)
from flows.cli import main
main()
"""
POINTS = {
    "before-admission": ("tasks_lib.ledger.medbench", "admit"),
    "before-run-record": ("tasks_lib.medbench.submissions", "_record"),
    "while-scoring": ("flows.score", "score_run"),
}


def _killed_upload(point: str, args: list[str]) -> None:
    from prefect.settings import PREFECT_API_URL

    module, attr = POINTS[point]
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    proc = subprocess.Popen([sys.executable, "-c", HANG.format(module=module, attr=attr),
                             *args], cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "HANGING", (line, proc.stderr.read() if proc.stderr else "")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("point", sorted(POINTS))
def test_kill_9_then_the_same_file_again_is_one_scored_version(point: str,
                                                               tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    name = "kill" + uuid.uuid4().hex[:6]
    accounts.ensure_submitter(name)
    split = make_split(pool, name, seed=5)
    preds = tmp_path / "preds.jsonl"
    preds.write_text(answers_for([json.loads(i.model_dump_json()) for i in split.items]))
    args = ["medbench", "upload", str(preds), "--submitter", name, "--model-version", "v1",
            "--json"]

    _killed_upload(point, args)
    left = ledger.submissions(submitter=name)
    charged = [e for e in ledger.rate_events(name) if e.kind == "upload" and not e.refused]
    if point == "before-admission":
        assert left == [] and charged == []
    else:
        [row] = left
        assert row.version == 1 and len(charged) == 1
        assert bool(store.runs(run_id=row.run_id)) == (point == "while-scoring")
        assert store.scores_for([row.run_id]) == []

    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output[-3000:]
    sub = json.loads(out.stdout)["submission"]
    assert sub["version"] == 1 and sub["scored"]
    assert sub["task_score"] == pytest.approx(OVERALL)
    [row] = ledger.submissions(submitter=name)
    assert row.run_id == sub["run_id"] and len(store.scores_for([row.run_id])) == 1
    charged = [e for e in ledger.rate_events(name) if e.kind == "upload" and not e.refused]
    assert len(charged) == 1
