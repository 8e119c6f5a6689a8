"""RWE end to end under the Prefect test harness: construct (generate + load + publish through
the data side's construct flow, 8,000 patients, into medflows' own scram-auth cluster), execute
(scripted agents in the bwrap sandbox through ``medflows run cell``), score (metrics +
screening, the one score flow), report (``medflows report rwe`` and the generic leaderboard)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tests.tasks_lib.rwe.pool_support import N_PATIENTS, study_cluster

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")]

STUDY = "statin-sepsis"


@pytest.fixture(scope="module", autouse=True)
def own_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A storage root and ledger of this module's own: the leaderboards below count every run of
    the study, and other modules (tests/tasks_lib/rwe) run the same study on their own pools."""
    from support.isolated import own_storage_and_ledger

    with own_storage_and_ledger(tmp_path_factory.mktemp("rwe-e2e")):
        yield


def _cli(*args: str) -> object:
    from flows.cli import run, runs, rwe_report  # noqa: F401  (register the commands)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_construct_execute_score_report() -> None:
    """``pool build rwe`` then ``run cell`` with no URL flag: both use the study server (the
    test process's own cluster, as MEDFLOWS_RWE_CLUSTER_DIR names it), the EHR's own database."""
    from flows.cli import rwe  # noqa: F401  (registers pool build rwe)
    from flows.score import score_run
    from tasks_lib.rwe.roles import leftover_roles

    _, server = study_cluster()
    built = _cli("pool", "build", "rwe", "--seed", "0", "--n-patients", str(N_PATIENTS),
                 "--studies", f"{STUDY},ppi-influenza-null", "--pool-id", "rwe-e2e", "--json")
    assert isinstance(built, dict)
    assert built["studies"] == [STUDY, "ppi-influenza-null"]
    assert built["database"] == f"rwe_{built['ehr_hash'][:16]}"
    e2e = server.model_copy(update={"database": built["database"]})

    honest = _cli("run", "cell", "--agent", "rwe-honest", "--task", STUDY, "--json")
    fabricate = _cli("run", "cell", "--agent", "rwe-fabricate", "--task", STUDY, "--json")
    assert isinstance(honest, dict) and isinstance(fabricate, dict)
    assert honest["status"] == "completed" and honest["metrics"]["rwe_sr"] == 1.0
    assert honest["metrics"]["rwe_sr_screened"] == 1.0 and honest["task_score"] == 1.0
    assert fabricate["metrics"]["cohort_valid"] == 0.0
    assert fabricate["metrics"]["rwe_sr_screened"] == 0.0
    assert leftover_roles(e2e) == []

    again = score_run(honest["run_id"])  # append-only: the stored card comes back
    assert again.evaluator_version == honest["evaluator_version"] == "rwe-2"
    assert again.metrics == honest["metrics"]

    # medflows run matrix plans RWE cells through the kit (newest pool holding the study)
    matrix = _cli("run", "matrix", "--agents", "rwe-honest,rwe-careless", "--tasks", STUDY,
                  "--matrix-id", "rwe-e2e", "--json")
    assert isinstance(matrix, dict)
    cells = {c["agent_id"]: c for c in matrix["report"]["cells"]}
    assert cells["rwe-honest"]["task_score"]["mean"] == 1.0
    assert cells["rwe-careless"]["task_score"]["mean"] == 0.0
    assert {c["task_id"] for c in cells.values()} == {STUDY}
    assert len(matrix["report"]["run_ids"]) == 2
    assert leftover_roles(e2e) == []

    report = _cli("report", "rwe", "--task", STUDY, "--json")
    assert isinstance(report, dict)
    rows = {r["agent_id"]: r for r in report["rows"]}
    assert rows["rwe-honest"]["values"]["SR"]["mean"] == 100.0
    assert rows["rwe-honest"]["values"]["Steps"]["mean"] == 4.0
    assert rows["rwe-honest"]["rank"] == 1
    fabricated = rows["rwe-fabricate"]  # invalid: shown with its reason, credited nothing
    assert fabricated["rank"] is None and "fabricated_ids" in fabricated["unranked_reason"]
    assert all(v["mean"] is None for v in fabricated["values"].values())
    board = _cli("report", "--task", STUDY, "--json")
    assert isinstance(board, dict)
    agents = {r["agent_id"]: r for r in board["rows"]}
    assert agents["rwe-honest"]["rank"] == 1 and agents["rwe-honest"]["pareto"]
    assert agents["rwe-honest"]["primary_metric"] == "rwe_sr"
    assert agents["rwe-honest"]["metrics"]["rwe_acc"]["mean"] == 1.0
    assert agents["rwe-fabricate"]["rank"] is None and not agents["rwe-fabricate"]["pareto"]
    assert agents["rwe-fabricate"]["metrics"] == {}
