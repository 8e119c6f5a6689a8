"""Against a real ``prefect server`` on 127.0.0.1: register the deployments, check the quarterly
rotation schedule, trigger a run through the REST API as the UI does, let a process worker run
it, and look at the deployments page in headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from support.ops_support import BIN, PrefectServer, publish_test_pool, stop

from tasks_lib.rotation import active_subset

pytestmark = pytest.mark.slow
EXPECTED = {"construct-qa/construct", "construct/construct-pool", "execute/execute-pool",
            "construct-imaging/construct-imaging",
            "rotate-pool/rotate-quarterly", "execute-qa/execute-matrix",
            "run-cell/research-cell", "run-matrix/research-matrix", "score-runs/score",
            "score-run/score-run", "score-submission/score-submission", "report/report",
            "qa-benchmark/qa-benchmark", "challenge-grade-rank/challenge-grade",
            "challenge-benchmark-rank/challenge-benchmark-rank",
            "construct-challenge/construct-challenge", "construct-medbench/construct-medbench",
            "construct-rwe/construct-rwe", "rotate-medbench/rotate-medbench-quarterly",
            "execute-medbench/execute-medbench", "report-medbench/report-medbench"}
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
# Headless Chromium in a container: no sandbox (no user namespaces as root), no GPU, no
# background networking (no update or safe-browsing calls), virtual time for the SPA to load.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--no-first-run", "--window-size=1400,900",
                  "--virtual-time-budget=30000"]


def next_quarter_start(now: datetime) -> datetime:
    """First day of the next quarter at 00:00 UTC (what ``0 0 1 */3 *`` means)."""
    for year in (now.year, now.year + 1):
        for month in (1, 4, 7, 10):
            candidate = datetime(year, month, 1, tzinfo=UTC)
            if candidate > now:
                return candidate
    raise AssertionError("unreachable")


def medflows(server: PrefectServer, *args: str) -> str:
    """``medflows ARGS`` against ``server``, in this process (the server, the worker and the
    browser are the processes under test; a CLI process each would only add its start-up)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from support.cli import invoke

    with temporary_settings({PREFECT_API_URL: server.api_url}):
        out = invoke(*args)
    assert out.exit_code == 0, out.output[-3000:]
    return out.stdout


def _api(server: PrefectServer, method: str, path: str, body: object = None) -> object:
    """One REST call; a busy server's 503 is retried a few times (2 cores, SQLite backend)."""
    for attempt in range(5):
        r = httpx.request(method, f"{server.api_url}{path}", json=body, timeout=30)
        if r.status_code != 503:
            break
        time.sleep(1 + attempt)
    r.raise_for_status()
    return r.json()


def _scheduled_runs(server: PrefectServer, deployment_id: str) -> list[dict[str, object]]:
    runs = _api(server, "POST", "/flow_runs/filter", {
        "deployments": {"id": {"any_": [deployment_id]}},
        "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
        "sort": "EXPECTED_START_TIME_ASC"})
    assert isinstance(runs, list)
    return runs


def _wait(server: PrefectServer, flow_run_id: str, log: Path) -> dict[str, object]:
    """Poll a flow run until it is final (at most 4 minutes)."""
    deadline = time.monotonic() + 240
    while True:
        run = _api(server, "GET", f"/flow_runs/{flow_run_id}")
        assert isinstance(run, dict)
        if run["state_type"] in TERMINAL:
            return run
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(1)


def test_deploy_schedule_ui_run_and_browser(prefect_server: PrefectServer, tmp_path: Path) -> None:
    applied = medflows(prefect_server, "deploy", "--apply")
    assert {line.split()[-1] for line in applied.splitlines()} == EXPECTED

    listed = {d["name"]: d for d in json.loads(medflows(prefect_server, "deploy", "--list",
                                                        "--json"))}
    assert set(listed) == EXPECTED
    rotate = listed["rotate-pool/rotate-quarterly"]
    expected_next = next_quarter_start(datetime.now(UTC))
    [schedule] = rotate["schedules"]
    assert (schedule["cron"], schedule["timezone"], schedule["active"]) == (
        "0 0 1 */3 *", "UTC", True)
    assert datetime.fromisoformat(schedule["next_run"]) == expected_next
    assert rotate["work_pool"] == "medflows-process"
    deadline = time.monotonic() + 60
    while not (runs := _scheduled_runs(prefect_server, rotate["id"])):
        assert time.monotonic() < deadline, "the server scheduled no rotation run"
        time.sleep(1)
    assert datetime.fromisoformat(str(runs[0]["expected_start_time"])) == expected_next

    # One deployment run triggered as the UI does, on a pool not published yet: the worker runs
    # it and it fails; once the pool exists a rerun sends the same flow run back to the worker,
    # which completes it (one worker-run flow process fewer than a separate successful run).
    pool_id, subset_id = f"ui-{uuid.uuid4().hex[:6]}", f"ui-sub-{uuid.uuid4().hex[:6]}"
    worker_env = {**prefect_server.env, "PREFECT_HOME": str(tmp_path / "worker-home"),
                  "PREFECT_WORKER_QUERY_SECONDS": "1"}
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool",
                               "medflows-process", "--type", "process"], env=worker_env,
                              stdout=(tmp_path / "worker.log").open("wb"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        run = _api(prefect_server, "POST", f"/deployments/{rotate['id']}/create_flow_run", {
            "parameters": {"pools": [pool_id], "size": 5, "seed": 3, "subset_id": subset_id},
            "state": {"type": "SCHEDULED", "message": "Run from the Prefect UI"}})
        assert isinstance(run, dict)
        failed = _wait(prefect_server, str(run["id"]), tmp_path / "worker.log")
        assert failed["state_type"] == "FAILED", (tmp_path / "worker.log").read_text()[-3000:]
        assert "no such pool version" in (tmp_path / "worker.log").read_text()
        publish_test_pool(pool_id, {"medqa": 6, "pubmedqa": 4})
        outcome = json.loads(medflows(prefect_server, "rerun", str(run["id"])))
        assert (outcome["where"], outcome["state"]) == ("worker", "SCHEDULED")
        retried = _wait(prefect_server, str(run["id"]), tmp_path / "worker.log")
        assert (retried["state_type"], retried["run_count"]) == ("COMPLETED", 2), \
            (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        stop(worker)
    subset = active_subset(subset_id)
    # strata medqa/step1, medqa/step2&3, pubmedqa/- share 5 items
    assert (subset.version, subset.n_items, sum(subset.strata.values())) == (1, 5, 5)
    artifacts = _api(prefect_server, "POST", "/artifacts/filter",
                     {"artifacts": {"key": {"any_": [f"subset-{subset_id}"]}}})
    assert isinstance(artifacts, list) and len(artifacts) == 1
    assert f"Subset {subset_id} v1" in str(artifacts[0]["data"])

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/system-packages.txt; make test installs)")
    def dom_of(page: str, *also: str) -> str:
        return subprocess.run([chromium, *CHROMIUM_FLAGS, "--dump-dom", *also, page],
                              capture_output=True, text=True, timeout=120).stdout

    # The list shows the first page (10 deployments, by deployment name; its DOM and its
    # screenshot from one browser run); the quarterly rotation's own page shows its schedule.
    page = f"{prefect_server.ui_url}/deployments"
    shot = tmp_path / "deployments.png"
    dom = dom_of(page, f"--screenshot={shot}")
    for name in ("challenge-grade", "construct-pool", "construct-imaging", "construct-medbench",
                 "construct-rwe", "execute-matrix", "execute-medbench"):
        assert name in dom, name
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    detail = dom_of(f"{prefect_server.ui_url}/deployments/deployment/{rotate['id']}")
    assert "rotate-quarterly" in detail and "every 3 months" in detail
