"""The verb-first CLI: `pool build --task`, `execute --pool` and `score --run|--pool` find the
kit from the card or the ledger and forward to the per-protocol command, which stays as an alias
printing the same JSON."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke, invoke_json
from support.paths import QA_SOURCE

pytestmark = pytest.mark.usefixtures("prefect_harness")
HARD = str(QA_SOURCE / "predictions" / "hard.csv.gz")
QA_OPTIONS = ["--source", str(QA_SOURCE), "--models", "gpt-4o,o3-mini,DeepSeek-R1",
              "--per-dataset", "4", "--no-meld", "--auto-approve"]
SAME_BUILD = ("content_hash", "n_cases", "task_id", "track", "datasets", "rejected")
"""Summary fields two builds of the same card and options must share."""


@pytest.fixture(scope="module", autouse=True)
def _prefect_logs_to_the_real_stderr(prefect_harness: None) -> None:
    """Configure Prefect's console log handler before any `CliRunner` call: configured inside
    one, it keeps that call's closed stream and the next command's flow fails on it."""
    from prefect.logging.configuration import setup_logging

    setup_logging()


def _same_build(alias: dict[str, Any], verb: dict[str, Any]) -> None:
    assert {k: alias.get(k) for k in SAME_BUILD} == {k: verb.get(k) for k in SAME_BUILD}
    assert alias["content_hash"]


@pytest.fixture(scope="module")
def qa_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A QA pool built by the verb and by the alias: the same pool."""
    root = tmp_path_factory.mktemp("verb-qa")
    verb = invoke_json("pool", "build", "--task", "medqa", "--pool-id", "verb-qa", "--out",
                       str(root / "verb"), *QA_OPTIONS)
    alias = invoke_json("pool", "build", "qa", "--datasets", "medqa", "--pool-id", "verb-qa-alias",
                        "--out", str(root / "alias"), *QA_OPTIONS)
    _same_build(alias, verb)
    assert verb["datasets"] == {"medqa": 4}
    return str(verb["manifest"]).removesuffix("/manifest.json")


def test_build_by_task_equals_the_imaging_alias(tmp_path: Path) -> None:
    verb = invoke_json("pool", "build", "--task", "brain-lesion-vqa", "--out", str(tmp_path / "v"),
                       "--json")
    alias = invoke_json("pool", "build", "imaging", "--task", "brain-lesion-vqa", "--out",
                        str(tmp_path / "a"), "--json")
    _same_build(alias, verb)
    assert verb["track"] == "vqa"


def test_build_by_task_equals_the_challenge_alias(tmp_path: Path) -> None:
    verb = invoke_json("pool", "build", "--task", "ldct-iqa", "--out", str(tmp_path / "v"),
                       "--json")
    alias = invoke_json("pool", "build", "challenge", "--task", "ldct-iqa", "--out",
                        str(tmp_path / "a"), "--json")
    _same_build(alias, verb)
    assert verb["track"] == "challenge" and verb["cases"] == alias["cases"]


@pytest.mark.parametrize(("args", "says"), [
    (["pool", "build", "--task", "no-such-task"], "known task ids: "),
    (["pool", "build", "--task", "medqa,ldct-iqa"], "name tasks of one kit"),
    (["pool", "build", "--task", "ldct-iqa,isles22"], "one pool per task id"),
    (["pool", "build", "--task", "ldct-iqa", "--meld-threshold", "0.5"],
     "--meld-threshold: not an option"),
    (["pool", "build", "--seed", "1"], "give --task"),
    (["score", "--run", "a", "--pool", "b"], "exactly one of --run, --pool and --task"),
    (["score", "--run", "no-such-run"], "in the ledger (see: medflows runs list)"),
])
def test_user_mistakes_are_one_error_line(args: list[str], says: str) -> None:
    out = invoke(*args)
    assert out.exit_code == 2, out.output
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], lines


def test_every_shipped_kit_has_one_build_and_one_execute_route() -> None:
    from flows.cli.routing import BUILD_ROUTES, EXECUTE_ROUTES, route_for
    from tasks_lib.errors import InputDataError
    from tasks_lib.tracks.base import KITS

    invoke("--help")  # registers every command module's routes
    for kit in KITS.names():
        assert route_for(BUILD_ROUTES, kit).task_option
        assert route_for(EXECUTE_ROUTES, kit).path[0] == "execute"
    with pytest.raises(InputDataError, match="no pool build route serves this kit"):
        route_for(BUILD_ROUTES, "no-such-kit")


def test_execute_by_pool_replays_and_score_by_run_appends_a_row(qa_pool: str) -> None:
    from tasks_lib.ledger import store

    runs = invoke_json("execute", "--pool", qa_pool, "--replay", HARD, "--replay-models", "gpt-4o",
                       "--replay-methods", "zero_shot", "--no-progress")
    assert [r["agent_id"] for r in runs] == ["replay:gpt-4o@zero_shot"]
    run_id = runs[0]["run_id"]
    assert store.scores_for([run_id]) == []
    card = invoke_json("score", "--run", run_id, "--json")
    assert card == invoke_json("score", "run", run_id, "--json")  # the alias prints the same card
    assert [r.evaluator_version for r in store.scores_for([run_id])] == [
        card["evaluator_version"]]
    rows = invoke_json("score", "--pool", qa_pool)
    assert [(r["run_id"], r["task_score"]) for r in rows] == [(run_id, card["task_score"])]
    assert invoke_json("score", "qa", "--pool", qa_pool)[0]["accuracy_macro"] == card["task_score"]
    assert len(store.scores_for([run_id])) == 1  # append-only: same version, no second row


def test_execute_alias_and_unused_option(qa_pool: str) -> None:
    runs = invoke_json("execute", "qa", "--pool", qa_pool, "--replay", HARD, "--replay-models",
                       "o3-mini", "--replay-methods", "zero_shot", "--no-progress")
    assert [r["agent_id"] for r in runs] == ["replay:o3-mini@zero_shot"]
    out = invoke("execute", "--pool", qa_pool, "--tiers", "lite")
    assert out.exit_code == 2 and "--tiers: not an option" in out.stderr
    assert "`medflows execute qa` takes" in out.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap sandbox not installed")
def test_execute_by_pool_runs_a_research_cell(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted agent and an external agent (agents/example-llm, one model call through its
    run's proxy) as research cells of the one execute flow."""
    from support.openai_server import FakeOpenAIServer

    from tasks_lib.records import read_run
    from tasks_lib.settings import reset_settings

    built = invoke_json("pool", "build", "--task", "ldct-iqa", "--json")
    pool = str(built["manifest"]).removesuffix("/manifest.json")
    external = "external:example-llm@gpt-4o-mini"
    with FakeOpenAIServer(lambda body: "Copy the sample submission.") as provider:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", provider.base_url)
        reset_settings()
        result = invoke_json("execute", "--pool", pool, "--agents",
                             f"scripted-baseline,{external}")
        assert len(provider.requests) == 1  # the external agent's one call, via its proxy
    reset_settings()
    cells = sorted(result["report"]["cells"], key=lambda c: c["agent_id"])
    assert [(c["agent_id"], c["task_id"], c["status"]) for c in cells] == [
        (external, "ldct-iqa", {"completed": 1}),
        ("scripted-baseline", "ldct-iqa", {"completed": 1})]
    by_agent = {c["agent_id"]: c for c in cells}
    for run_id in result["report"]["run_ids"]:
        again = invoke_json("score", "--run", run_id, "--json")
        cell = by_agent[read_run(run_id).agent.agent_id]
        assert again["task_score"] == pytest.approx(cell["task_score"]["mean"])
    other = invoke("execute", "--pool", pool, "--agents", "scripted-baseline",
                   "--task", "isles22")
    assert other.exit_code == 2 and "isles22 not in this pool" in other.stderr
