"""Calibration from a ratings CSV (several raters per item) against hand-computed κ; history."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tasks_lib.errors import InputDataError
from tasks_lib.medbench.calibration import (
    JudgedItem,
    JudgeSidecar,
    calibrate,
    kappa_views,
    sidecar_path,
)

JUDGE = [5, 4, 4, 3, 0, 2, 5, 1, 3, 4]
HUMAN = [5, 4, 3, 3, 0, 2, 5, 2, 3, 4]


def _write(tmp: Path, judge: list[int], version: str = "general_qa-1",
           model: str = "judge-a", name: str = "ratings.csv") -> Path:
    items = {f"i{k}": JudgedItem(task_id="taskA" if k < 5 else "taskB",
                                 rubric_id="general_qa" if k < 5 else "medication",
                                 rubric_version=version if k < 5 else "medication-1",
                                 judge_score=judge[k]) for k in range(10)}
    path = tmp / name
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task_id", "item_id", "rater_id", "score"])
        for k, h in enumerate(HUMAN):  # majority of three raters = HUMAN[k]
            for r, s in enumerate([h, h, (h + 1) % 6]):
                w.writerow([items[f"i{k}"].task_id, f"i{k}", f"r{r}", s])
            w.writerow([items[f"i{k}"].task_id, f"i{k}", "r9", ""])  # an empty slot is skipped
    sidecar_path(path).write_text(JudgeSidecar(run_id="run", evaluator_version="medbench/1",
                                               judge_model=model, items=items)
                                  .model_dump_json())
    return path


def test_kappa_per_task_rubric_and_overall(tmp_path: Path, private_storage: Path) -> None:
    rows = {(r.task_id, r.rubric_id): r for r in calibrate(_write(tmp_path, JUDGE), min_items=5)}
    overall = rows[("*", "*")]
    assert overall.n == 10 and overall.p_o == pytest.approx(0.8)
    assert overall.kappa == pytest.approx(0.7531, abs=1e-4) and overall.status == "uncalibrated"
    assert overall.raters_per_item == 3
    a = rows[("taskA", "general_qa")]  # p_e = 6/25, κ = 0.56/0.76
    assert a.kappa == pytest.approx(0.56 / 0.76) and a.n == 5
    b = rows[("taskB", "medication")]  # p_e = 5/25, κ = 0.6/0.8
    assert b.kappa == pytest.approx(0.75)


def test_perfect_judge_is_calibrated_and_a_drop_after_a_rubric_change_shows(
        tmp_path: Path, private_storage: Path) -> None:
    first = {r.task_id: r for r in calibrate(_write(tmp_path, HUMAN, name="a.csv"),
                                             min_items=5)}
    assert first["taskA"].kappa == pytest.approx(1.0) and first["taskA"].status == "calibrated"
    calibrate(_write(tmp_path, JUDGE, version="general_qa-2", name="b.csv"), min_items=5)
    view = kappa_views()["taskA/general_qa"]
    assert view.latest.rubric_version == "general_qa-2"
    assert view.previous is not None and view.previous.rubric_version == "general_qa-1"
    assert view.drop == pytest.approx(1 - 0.56 / 0.76)
    assert kappa_views()["taskB/medication"].previous is None  # same rubric version and model


def test_bad_score_names_file_and_line(tmp_path: Path, private_storage: Path) -> None:
    path = _write(tmp_path, JUDGE)
    text = path.read_text().splitlines()
    text[3] = "taskA,i0,r2,4.5"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(InputDataError, match=r"ratings.csv:4: score '4.5' is not an integer"):
        calibrate(path)


def test_calibrate_cli_json_and_one_error_line(tmp_path: Path, private_storage: Path) -> None:
    import json

    from typer.testing import CliRunner

    from flows.cli import medbench  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    path = _write(tmp_path, JUDGE)
    result = CliRunner().invoke(app, ["medbench", "calibrate", str(path), "--json",
                                      "--min-items", "5"])
    assert result.exit_code == 0, result.output
    rows = {(r["task_id"], r["rubric_id"]): r for r in json.loads(result.stdout)}
    assert abs(rows[("*", "*")]["kappa"] - 0.7531) < 1e-4
    assert rows[("taskB", "medication")]["status"] == "uncalibrated"
    bad = CliRunner().invoke(app, ["medbench", "calibrate", str(tmp_path / "none.csv")])
    assert bad.exit_code == 2 and bad.output.startswith("error: ")
    assert len(bad.output.strip().splitlines()) == 1
