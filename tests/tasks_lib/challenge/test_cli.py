"""The acceptance commands, JSON in and out, on the real leaderboards (hand-computed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import flows.cli.challenge  # noqa: F401  (registers the group)
from flows.cli.groups import app

runner = CliRunner()


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["challenge", *args])
    return result.exit_code, result.stdout, result.stderr


def test_rank_exact_command_in_a_subprocess() -> None:
    """The acceptance command as a user types it (console script entry point)."""
    out = subprocess.run(
        [sys.executable, "-c", "from flows.cli import main; main()", "challenge", "rank",
         "--challenge", "topcow-track1-task3",
         "--metrics-json", '{"anterior_acc": 0.25, "posterior_acc": 0.9}', "--json"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    # anterior 0.25 ties three rows behind 0.87, 0.73, 0.36 -> 4; posterior 0.9 beats all -> 1
    assert json.loads(out.stdout) == {
        "challenge": "topcow-track1-task3", "n_competitors": 6,
        "positions": {"anterior_acc": 4, "posterior_acc": 1},
        "mean_rank": 2.5, "percentile": 0.75,
    }


def test_rank_lower_is_better_with_ties() -> None:
    code, out, _ = _run("rank", "--challenge", "seg_a", "--json",
                        "--metrics-json", '{"hd_50pc": 2.6125, "dsc_50pc": 0.92}')
    assert code == 0
    got = json.loads(out)
    assert got["positions"] == {"hd_50pc": 1, "dsc_50pc": 4}
    assert got["mean_rank"] == 2.5 and got["percentile"] == pytest.approx(0.85)


def test_rank_worse_than_everyone() -> None:
    code, out, _ = _run("rank", "--challenge", "seg_a", "--json",
                        "--metrics-json", '{"hd_50pc": 50, "dsc_50pc": 0.1}')
    assert code == 0
    got = json.loads(out)
    assert got["positions"] == {"hd_50pc": 11, "dsc_50pc": 11}
    assert got["mean_rank"] == 11 and got["percentile"] == 0


def test_rank_failed() -> None:
    code, out, _ = _run("rank", "--challenge", "ldct-iqa", "--failed", "--json")
    assert code == 0
    assert json.loads(out) == {"challenge": "ldct-iqa", "n_competitors": 6, "positions": {},
                               "mean_rank": None, "percentile": 0.0}


def test_rank_text_output_rounds_half_up() -> None:
    code, out, _ = _run("rank", "--challenge", "topcow-track1-task2",
                        "--metrics-json", '{"boundary_iou": 0.66, "iou": 0.74}')
    assert code == 0
    assert "mean rank 2.5, percentile 81.3 %" in out  # exact 0.8125; round() would say 81.2


@pytest.mark.parametrize(("args", "message"), [
    (["--metrics-json", '{"dice": 0.8}'],
     "missing metric(s) lesion_f1, lesion_count_diff, abs_volume_diff; known metrics: dice, "
     "lesion_f1, lesion_count_diff, abs_volume_diff"),
    (["--metrics-json", "[1, 2]"], "expected a JSON object"),
    (["--metrics-json", "{not json"], "invalid JSON"),
    (["--metrics-json", '{"dice": 0.8}', "--failed"], "exactly one of"),
    ([], "exactly one of"),
])
def test_rank_user_errors(args: list[str], message: str) -> None:
    code, _, err = _run("rank", "--challenge", "isles22", *args)
    assert code == 2 and message in err


def test_unknown_challenge_lists_known_ids() -> None:
    code, _, err = _run("rank", "--challenge", "nope", "--failed")
    assert code == 2 and "unknown challenge 'nope'" in err and "usenhance" in err


def test_benchmark_rank(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps([
        {"challenge": "topcow-track1-task3",
         "metrics": {"anterior_acc": 0.25, "posterior_acc": 0.9}},
        {"challenge": "dentex", "failed": True},
        {"challenge": "ldct-iqa", "metrics": {"score": 2.68}},
    ]))
    code, out, _ = _run("benchmark-rank", "--results", str(results), "--json")
    assert code == 0
    got = json.loads(out)
    assert [c["challenge"] for c in got["challenges"]] == ["topcow-track1-task3", "dentex",
                                                           "ldct-iqa"]
    assert got["challenges"][1] == {"challenge": "dentex", "n_competitors": 10, "positions": {},
                                    "mean_rank": None, "percentile": 0.0}
    # ldct-iqa: 2.68 is behind 2.7427 and 2.6843 -> position 3 of N=6 -> 1 - 2/6
    assert got["challenges"][2]["positions"] == {"score": 3}
    assert got["benchmark_rank"] == pytest.approx((0.75 + 0 + 2 / 3) / 3)


@pytest.mark.parametrize(("payload", "message"), [
    ([{"challenge": "ldct-iqa"}], "either 'metrics' or 'failed'"),
    ([{"challenge": "ldct-iqa", "failed": True, "metrics": {"score": 1}}], "either"),
    ({"challenge": "ldct-iqa"}, "not a list of challenge results"),
    ([{"challenge": "ldct-iqa", "failed": True}] * 2, "more than once"),
    ([], "at least one"),
])
def test_benchmark_rank_bad_results(tmp_path: Path, payload: object, message: str) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(payload))
    code, _, err = _run("benchmark-rank", "--results", str(results), "--json")
    assert code == 2 and message in err
