"""A sixth track from one folder (issue 22): the test-only ``toy_slides`` kit
(``tests/support/toy_track/``), a kit outside the tree registered through
``MEDFLOWS_KIT_MODULES``, goes through build → audit → rotate → execute (scripted agent) →
score (in the evaluator sandbox) → report → re-score with the same commands as every other
track; nothing outside its folder names it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke_json

pytestmark = [pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bwrap sandbox not installed")]
TASK = "toy-slides"


@pytest.fixture(scope="module", autouse=True)
def _toy_track(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[None]:
    """Register the toy kit for this module only (``MEDFLOWS_KIT_MODULES`` names its folder's
    package: the CLI and the evaluator sandbox import it; the setting and the registries are
    restored afterwards so later modules see the shipped kits alone), on a
    storage root and ledger of its own (the kit contract test publishes a toy pool with an
    audit override in the shared ones); configure Prefect's console log handler before any
    `CliRunner` call (see test_verb_cli.py)."""
    from prefect.logging.configuration import setup_logging
    from support.isolated import own_storage_and_ledger
    from support.kit_pools import with_test_kits

    setup_logging()
    with own_storage_and_ledger(tmp_path_factory.mktemp("toy-track")), with_test_kits():
        yield


@pytest.fixture(scope="module")
def pool() -> str:
    """The toy task's pool, built and published by the verb-first command (no alias serves
    the kit: the generic ``construct`` flow builds it)."""
    built = invoke_json("pool", "build", "--task", TASK, "--json")
    assert (built["track"], built["pool_id"], built["cards"]) == ("toy_slides", TASK, [TASK])
    return str(built["url"]).rstrip("/")


def test_the_kit_is_found_by_name_and_its_card_and_suite_beside_it() -> None:
    from evaluators.core import Track
    from tasks_lib.tracks.base import find_card, kit_for

    card = find_card(TASK)
    assert card.track is Track("toy_slides") and card.track.value == "toy_slides"
    kit = kit_for(card.track)
    assert kit.task_ids() == [TASK] and kit.suite_file is not None
    assert kit.suite_file.parent.name == "toy_track"


def test_no_alias_route_serves_the_kit() -> None:
    from support.cli import invoke

    from flows.cli.routing import BUILD_ROUTES, serves

    invoke("--help")  # registers every command module's routes
    assert not serves(BUILD_ROUTES, "toy_slides") and serves(BUILD_ROUTES, "vqa")


def test_build_is_reproducible_and_the_audit_is_clean(pool: str) -> None:
    from tasks_lib.imaging.pool import read_manifest

    m = read_manifest(pool)
    assert [c.case_id for c in m.cases] == [f"s-{n:03d}" for n in range(9)]
    assert m.classes == {0: "brick", 1: "grass", 2: "gravel"} and m.track == "toy_slides"
    again = invoke_json("pool", "build", "--task", TASK, "--json")
    assert again["content_hash"] == m.content_hash and again["version"] == m.version
    report = invoke_json("audit", "pool", pool, "--json")
    assert report["clean"] is True, report
    assert all(f["passed"] for f in report["findings"]), report["findings"]


def test_rotation_is_seeded(pool: str) -> None:
    from tasks_lib.imaging.pool import read_manifest

    version = read_manifest(pool).version

    def rotate(seed: int) -> dict[str, Any]:
        got: dict[str, Any] = invoke_json("pool", "rotate", "--pools", f"{TASK}@v{version}",
                                          "--size", "4", "--seed", str(seed), "--subset-id",
                                          "toy-rot", "--json")
        return got

    first = rotate(3)
    assert rotate(3) == first and first["n_items"] == 4 and first["version"] == 1
    kept = [c["case_id"] for c in read_manifest(first["url"]).model_dump()["cases"]]
    assert len(kept) == 4 and set(kept) < {f"s-{n:03d}" for n in range(9)}


def test_scripted_agent_score_report_and_rescore(pool: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.harness import rescore
    from tasks_lib.ledger import store
    from tasks_lib.tracks.base import kit_for

    sandboxed: list[str] = []
    real = rescore.run_evaluator

    def spy(*args: Any, **kwargs: Any) -> Any:
        sandboxed.append(args[1].run_id)
        return real(*args, **kwargs)

    monkeypatch.setattr(rescore, "run_evaluator", spy)
    result = invoke_json("execute", "--pool", pool, "--agents", "scripted-baseline")
    [cell] = result["report"]["cells"]
    assert (cell["agent_id"], cell["task_id"], cell["status"]) == (
        "scripted-baseline", TASK, {"completed": 1})
    (run_id,) = result["report"]["run_ids"]
    card = invoke_json("score", "--run", run_id, "--json")
    # scored in a fresh evaluator sandbox, which registers the kit from MEDFLOWS_KIT_MODULES
    assert kit_for("toy_slides").score_in_sandbox and run_id in sandboxed
    assert card["task_score"] == 1.0  # the nearest-example recipe labels all 9 slides right
    assert card["metrics"]["variant_balanced_accuracy"] == 1.0
    board = invoke_json("report", "--pool", pool, "--json")["rows"]
    [row] = [r for r in board if r["agent_id"] == "scripted-baseline"]
    assert (row["rank"], row["ranked"], row["pareto"], row["task_score"]) == (1, True, True, 1.0)
    assert row["primary_metric"] == "vqa_exact_match" and row["evaluator_version"] == "toy-slides-1"
    assert row["wall_time_s"] > 0 and row["cost_per_run_usd"] == 0.0
    kit = kit_for("toy_slides")
    monkeypatch.setattr(kit, "evaluator_version", "toy-slides-2")
    assert invoke_json("score", "--run", run_id, "--json")["evaluator_version"] == "toy-slides-2"
    assert [r.evaluator_version for r in store.scores_for([run_id])][-2:] == [
        "toy-slides-1", "toy-slides-2"]


def test_the_kit_baselines_score_their_hand_computed_values(pool: str, tmp_path: Path) -> None:
    """The audit's baselines (``kit.baselines``), scored as the audit scores them: slides are
    dealt round-robin over 3 classes, so one label everywhere (the constant baseline, which the
    public sample copies) is right on 1/3; no file or empty labels match nothing."""
    from tasks_lib.audits.baselines import CONSTANT, EMPTY, NONE, PERFECT, SAMPLE
    from tasks_lib.audits.pool import pool_info
    from tasks_lib.audits.scoring import score_folder
    from tasks_lib.tracks.base import kit_for

    info = pool_info(pool)
    values = {b.name: score_folder(info, b.folder, b.folder.name).task_score
              for b in kit_for("toy_slides").baselines(pool, tmp_path)}
    assert values == {PERFECT: 1.0, CONSTANT: pytest.approx(1 / 3),
                      SAMPLE: pytest.approx(1 / 3), EMPTY: 0.0, NONE: 0.0}
