"""Read-only commands start no Prefect server (issue 26): ``report``, its aliases (``qa``,
``medbench``, ``rwe``) and ``runs list --pool`` read a private ledger in a fresh interpreter with
no Prefect API, answer right (hand-computed boards), import no Prefect and leave no
``prefect.db`` in ``PREFECT_HOME``. With a Prefect API configured (the environment, or the
active Prefect profile), ``report`` runs the ``report`` flow there and its artifacts are
recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from support.cli_child import fresh_env, run_main, run_mains
from support.isolated import own_storage_and_ledger

from evaluators.core import Track
from tasks_lib.audit import require_clean
from tasks_lib.audits.report import AuditReport, Finding, Severity
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow, RunRow, ScoreRow

TASK = "readonly-qa"
POOL_ID = "readonly-pool"
INVALID = "invalid cohort: fabricated_ids (2 row(s))"


class Ran:
    """A command run in a fresh interpreter: its output, exit code and imported modules."""

    def __init__(self, stdout: str, stderr: str, code: int, modules: list[str]) -> None:
        self.stdout, self.stderr = stdout, stderr
        self.code, self.modules = code, set(modules)

    def json(self) -> Any:
        assert self.code == 0, self.stderr[-3000:]
        return json.loads(self.stdout)

    @property
    def prefect(self) -> list[str]:
        return sorted(m for m in self.modules if m.split(".")[0] == "prefect")


def _medflows(root: Path, *args: str, **env: str) -> Ran:
    """The console script's ``main`` with ``args`` on the ledger and storage of ``root`` (no
    Prefect API unless ``env`` sets one; ``PREFECT_HOME`` is ``root/prefect-home``)."""
    done, code, modules = run_main(root / f"modules-{uuid4().hex[:8]}.json", list(args),
                                   fresh_env(root, **env))
    return Ran(done.stdout, done.stderr, code, modules)


def _medflows_in_turn(root: Path, *commands: list[str]) -> list[Ran]:
    """The console script's ``main`` with each of ``commands`` in turn in one fresh interpreter
    (as :func:`_medflows`, no Prefect API); each :class:`Ran` has the modules imported over
    all of them (none imported Prefect if their union holds none)."""
    ran, modules = run_mains(root / f"modules-{uuid4().hex[:8]}.json", list(commands),
                             fresh_env(root))
    return [Ran(r["stdout"], r["stderr"], r["code"], modules) for r in ran]


def _run(task: str, agent: str, score: float | None, *, rep: int = 0, cost: float,
         pool: bool = False, invalid: str | None = None) -> str:
    """One run row and its score row (``exact_match``) in the current ledger; its run id."""
    run_id = f"ro-{uuid4().hex[:12]}"
    store.upsert_run(RunRow(
        run_id=run_id, agent_id=agent, task_id=task, tier="lite", replicate=rep, track="qa",
        model=agent, method="zero_shot", status="completed", cost_usd=cost, n_answered=10,
        item_time_s=0.5, pool_id=POOL_ID if pool else None, pool_version=1 if pool else None))
    metrics = {} if score is None else {"exact_match": score}
    store.append_score(ScoreRow(
        run_id=run_id, evaluator_version="v1", task_score=score, primary_metric="exact_match",
        metrics_json=json.dumps(metrics), groups_json="{}", stages_json="{}",
        invalid_reason=invalid))
    return run_id


def _pool(root: Path) -> Path:
    """A published one-item pool version: manifest, a clean audit record through the publish
    gate (which locks the files), ledger row; its runs are ranked."""
    pool = root / "pool"
    pool.mkdir()
    (pool / "items.jsonl").write_text('{"id": "q1", "question": "?"}\n')
    (pool / "manifest.json").write_text(json.dumps(
        {"pool_id": POOL_ID, "version": 1, "content_hash": "ab" * 32, "track": "qa"}))
    require_clean(AuditReport(
        pool_url=str(pool), pool_id=POOL_ID, version=1, pool_hash="ab" * 32, track=Track.QA,
        created_at=datetime.now(UTC), findings=[Finding(
            check="answer_key", passed=True, severity=Severity.ERROR,
            rule="fixture: one public item, no reference file")]), None)
    store.record_pool(PoolRow(pool_id=POOL_ID, version=1, track="qa", content_hash="ab" * 32,
                              manifest_url=f"{pool}/manifest.json", n_items=1))
    return pool


@pytest.fixture
def ledger(tmp_path: Path) -> dict[str, list[str]]:
    """A private ledger: agent ``a`` (0.6, 0.8 → mean 0.7, SE 0.1, $0.02/run), ``b`` (0.5 twice,
    $0.01/run) and an invalid ``fab`` on :data:`TASK`'s pool; ``c`` (0.9) on another task."""
    with own_storage_and_ledger(tmp_path):
        _pool(tmp_path)
        ids = {"pool": [_run(TASK, "a", 0.6, cost=0.02, pool=True),
                        _run(TASK, "a", 0.8, rep=1, cost=0.02, pool=True),
                        _run(TASK, "b", 0.5, cost=0.01, pool=True),
                        _run(TASK, "b", 0.5, rep=1, cost=0.01, pool=True),
                        _run(TASK, "fab", 0.99, cost=0.001, pool=True, invalid=INVALID)],
               "other": [_run("readonly-other", "c", 0.9, cost=0.05)]}
    return ids


def _no_server(root: Path, ran: Ran) -> None:
    assert ran.prefect == [], ran.prefect[:5]
    # A temporary Prefect server creates its database in PREFECT_HOME: none was started.
    assert not (root / "prefect-home" / "prefect.db").exists()


def _check_board(rows: list[dict[str, Any]]) -> None:
    board = {r["agent_id"]: r for r in rows}
    assert [r["agent_id"] for r in rows] == ["a", "b", "fab"]  # ranked first, unranked after
    assert board["a"]["rank"] == 1 and board["a"]["task_score"] == pytest.approx(0.7)
    assert board["a"]["task_score_se"] == pytest.approx(0.1)
    assert board["b"]["rank"] == 2 and board["b"]["task_score"] == pytest.approx(0.5)
    assert board["b"]["task_score_se"] == pytest.approx(0.0)
    assert [board["a"]["pareto"], board["b"]["pareto"]] == [True, True]  # a better, b cheaper
    fab = board["fab"]
    assert fab["rank"] is None and fab["task_score"] is None and not fab["pareto"]
    assert fab["unranked_reason"] == INVALID


@pytest.mark.usefixtures("ledger")
def test_report_json_writes_the_board_without_prefect(tmp_path: Path) -> None:
    ran = _medflows(tmp_path, "report", "--task", TASK, "--json")
    got = ran.json()
    assert ran.stderr == ""
    _check_board(got["rows"])
    folder = tmp_path / "storage" / "reports" / TASK
    assert got["files"] == {"csv": str(folder / "leaderboard.csv"),
                            "markdown": str(folder / "leaderboard.md"),
                            "plot": str(folder / "cost_accuracy.png"),
                            "pairwise_json": str(folder / "pairwise.json"),
                            "pairwise_csv": str(folder / "pairwise.csv")}
    markdown = (folder / "leaderboard.md").read_text()
    assert markdown.startswith(f"# Leaderboard — {TASK}\n") and f"## {TASK} · lite" in markdown
    assert "| 1 | a | a | zero_shot | 0.7 ± 0.1 |" in markdown and INVALID in markdown
    csv = (folder / "leaderboard.csv").read_text().splitlines()
    assert len(csv) == 4 and csv[0].startswith("rank,agent_id,")
    assert (folder / "cost_accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _no_server(tmp_path, ran)


def test_report_aliases_and_the_pool_board_start_no_server(
        tmp_path: Path, ledger: dict[str, list[str]]) -> None:
    pool = str(tmp_path / "pool")
    # One interpreter for the three (each would pay the same start-up and imports).
    by_pool, alias, rwe = _medflows_in_turn(
        tmp_path, ["report", "--pool", pool, "--json"], ["report", "qa", "--pool", pool],
        ["report", "rwe", "--task", "readonly-other", "--json"])
    _check_board(by_pool.json()["rows"])
    files = by_pool.json()["files"]
    assert files["markdown"].endswith(f"reports/{POOL_ID}-v1/leaderboard.md")
    assert alias.json() == files  # the alias prints the same files
    assert rwe.json()["rows"] == []  # no RWE run on that task: nothing to show
    for ran in (by_pool, alias, rwe):
        _no_server(tmp_path, ran)


def test_runs_list_pool_reads_the_pool_version_without_prefect(
        tmp_path: Path, ledger: dict[str, list[str]]) -> None:
    ran, missing = _medflows_in_turn(
        tmp_path, ["runs", "list", "--pool", str(tmp_path / "pool"), "--json"],
        ["runs", "list", "--pool", "active:no-such-subset", "--json"])
    rows = ran.json()
    assert ran.stderr == ""
    assert sorted(r["run_id"] for r in rows) == sorted(ledger["pool"])  # not the other task's
    assert {(r["agent_id"], r["replicate"], r["task_score"]) for r in rows} == {
        ("a", 0, 0.6), ("a", 1, 0.8), ("b", 0, 0.5), ("b", 1, 0.5), ("fab", 0, 0.99)}
    assert {(r["pool_id"], r["pool_version"], r["evaluator_version"]) for r in rows} == {
        (POOL_ID, 1, "v1")}
    _no_server(tmp_path, ran)
    assert missing.code == 2 and missing.stdout == ""
    assert missing.stderr.startswith("error: ") and "no active version" in missing.stderr
    _no_server(tmp_path, missing)


def test_report_medbench_writes_its_view_without_prefect(tmp_path: Path) -> None:
    from support.medbench_pool import write_pool

    from tasks_lib.storage import Storage

    with own_storage_and_ledger(tmp_path):
        pool = write_pool(Storage(str(tmp_path / "mbpool")), pool_id="readonly-mb")
        digest = Storage(pool).read_json("manifest.json")["content_hash"]
        store.record_pool(PoolRow(pool_id="readonly-mb", version=1, track="medbench",
                                  content_hash=digest, manifest_url=f"{pool}/manifest.json",
                                  n_items=5))
        for rep, score in enumerate((80.0, 90.0)):
            run_id = f"ro-{uuid4().hex[:12]}"
            store.upsert_run(RunRow(run_id=run_id, agent_id="m", task_id="readonly-mb",
                                    tier="lite", replicate=rep, track="medbench", model="m",
                                    status="completed", pool_id="readonly-mb", pool_version=1))
            store.append_score(ScoreRow(
                run_id=run_id, evaluator_version="v1", task_score=score, primary_metric="overall",
                metrics_json=json.dumps({"overall": score, "overall/llm": score}),
                groups_json=json.dumps({"dimension/MKQA": {"score": score},
                                        "mcq": {"score": score}})))
    ran = _medflows(tmp_path, "report", "medbench", "--pool", pool, "--json")
    got = ran.json()
    [agent] = got["agents"]
    assert agent["overall"] == {"mean": 85.0, "sd": pytest.approx(50 ** 0.5), "n": 2}
    assert agent["dimensions"]["MKQA"]["mean"] == 85.0 and agent["tasks"]["mcq"]["n"] == 2
    # The hand-written pool is published with an audit override: kept, not ranked.
    assert agent["rank"] is None and not agent["ranked"] and "override" in agent["note"]
    assert got["markdown"] == str(tmp_path / "storage" / "reports" / "medbench"
                                  / "readonly-mb-v1" / "report.md")
    assert "| – | m | 85.0 ± 7.1 |" in Path(got["markdown"]).read_text()
    _no_server(tmp_path, ran)


PROFILE_CHECK = """
import sys
from tasks_lib.report.build import prefect_api_configured
print(prefect_api_configured(), "prefect" in sys.modules)
"""


@pytest.mark.parametrize(("profiles", "expected"), [
    (None, "False False"),
    ('active = "local"\n[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n',
     "True False"),
    ('active = "ephemeral"\n[profiles.ephemeral]\nPREFECT_SERVER_ALLOW_EPHEMERAL_MODE = "true"\n'
     '[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n', "False False")],
    ids=["no profiles file", "the active profile names an API", "an inactive profile does"])
def test_a_prefect_api_in_the_active_profile_counts_as_configured(
        tmp_path: Path, profiles: str | None, expected: str) -> None:
    env = fresh_env(tmp_path)
    if profiles is not None:
        home = Path(env["PREFECT_HOME"])
        home.mkdir()
        (home / "profiles.toml").write_text(profiles)
    done = subprocess.run([sys.executable, "-c", PROFILE_CHECK], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.split() == expected.split()


@pytest.mark.usefixtures("prefect_harness")
def test_with_a_prefect_api_the_report_is_recorded_as_a_flow_run(
        tmp_path: Path, ledger: dict[str, list[str]]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL

    task = TASK
    ran = _medflows(tmp_path, "report", "--task", task, "--json",
                    PREFECT_API_URL=str(PREFECT_API_URL.value()))
    _check_board(ran.json()["rows"])
    assert "prefect" in ran.modules  # the flow ran on the configured server
    assert not (tmp_path / "prefect-home" / "prefect.db").exists()  # and started none
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[f"report-{task}", f"leaderboard-{task}"])))
        runs = {client.read_flow_run(a.flow_run_id).name for a in found if a.flow_run_id}
    assert {a.key for a in found} == {f"report-{task}", f"leaderboard-{task}"}
    assert runs == {"report"}
    [markdown] = [a for a in found if a.key == f"report-{task}"]
    assert "| 1 | a | a | zero_shot | 0.7 ± 0.1 |" in str(markdown.data)
