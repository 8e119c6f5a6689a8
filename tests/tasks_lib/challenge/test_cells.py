"""Challenge pools and cell scoring: the pool's layout and audit, the local metric (public
validation split only, never a private file), the placement on the human leaderboard."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

CHALLENGE = "ldct-iqa"  # fastest synthetic case; leaderboard: 6 entries, best score 2.7427


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tasks_lib.challenge.pool import publish_challenge_pool

    out = tmp_path_factory.mktemp("challenge-pool") / "v1"
    url, manifest = publish_challenge_pool(CHALLENGE, str(out))
    assert Path(url) == out and manifest.track.value == "challenge"
    return out


def _official(sub: pd.DataFrame, ref: pd.DataFrame) -> float:
    """LDCT-IQA's score, |PLCC| + |SROCC| + |KROCC|, with SciPy on the id-aligned columns."""
    both = ref.merge(sub, on="image_id", suffixes=("_ref", "_sub"))
    x, y = both["quality_score_sub"], both["quality_score_ref"]
    return float(abs(stats.pearsonr(x, y)[0]) + abs(stats.spearmanr(x, y)[0])
                 + abs(stats.kendalltau(x, y)[0]))


def test_pool_layout_keeps_test_answers_private(pool: Path) -> None:
    public = {p.relative_to(pool / "public").as_posix() for p in (pool / "public").rglob("*")
              if p.is_file()}
    assert {"brief.md", "local_metric.py", "local_metric/card.json",
            "sample_submission/submission.csv", "validation/reference/test_labels.csv",
            "validation/sample_submission/submission.csv"} <= public
    assert (pool / "private" / "test_labels.csv").is_file()
    test_ids = pd.read_csv(pool / "private" / "test_labels.csv")["image_id"].tolist()
    assert sorted(p.stem for p in (pool / "public" / "images").glob("*.png")) == test_ids
    private = (pool / "private" / "test_labels.csv").read_bytes()
    assert all((pool / "public" / k).read_bytes() != private for k in public)
    manifest = json.loads((pool / "manifest.json").read_text())
    assert [c["case_id"] for c in manifest["cases"]] == test_ids
    assert "Illustrative" in (pool / "public" / "brief.md").read_text()


def test_local_metric_grades_validation_and_never_opens_private(pool: Path,
                                                                tmp_path: Path) -> None:
    """Run from a copy of the public view with an audit hook on every open(): the script's
    value is the official score of the validation sample against the public validation
    answers, and no opened path lies in the pool (its private/ folder is still there)."""
    public = tmp_path / "public"
    shutil.copytree(pool / "public", public)
    opened_log = tmp_path / "opened.json"
    wrapper = (
        "import json, runpy, sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda e, a: opened.append(str(a[0])) if e == 'open' and a and "
        "isinstance(a[0], (str, bytes)) else None)\n"
        f"sys.argv = [{str(public / 'local_metric.py')!r}, "
        f"{str(public / 'validation' / 'sample_submission')!r}]\n"
        "try:\n"
        "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "finally:\n"
        f"    open({str(opened_log)!r}, 'w').write(json.dumps(opened))\n")
    out = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    expected = _official(pd.read_csv(public / "validation" / "sample_submission" /
                                     "submission.csv"),
                         pd.read_csv(public / "validation" / "reference" / "test_labels.csv"))
    assert result["split"] == "validation" and result["n_cases"] == 8
    assert result["metrics"]["score"] == pytest.approx(expected, abs=1e-9)
    opened = json.loads(opened_log.read_text())
    assert any("validation/reference/test_labels.csv" in p for p in opened)
    assert not [p for p in opened if str(pool) in p or "/private" in p]


def test_challenge_score_places_on_the_leaderboard(pool: Path, tmp_path: Path) -> None:
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.cells import MEDAL_CODE, medal_thresholds, score_challenge

    card = load_challenge(CHALLENGE)
    answers = pd.read_csv(pool / "private" / "test_labels.csv")
    sample = tmp_path / "noisy"  # the answers with a fixed perturbation (the public sample is
    sample.mkdir()               # a format example of uninformative values)
    noisy = answers.assign(quality_score=answers["quality_score"]
                           + [0.9, -0.7, 0.4, -0.2, 0.8, -0.9, 0.3, -0.5][:len(answers)])
    noisy.to_csv(sample / "submission.csv", index=False)
    scored = score_challenge(card, pool, sample, "r1", "h", "challenge-2")
    expected = _official(noisy, answers)
    assert scored.task_score == pytest.approx(expected, abs=1e-9)
    # Hand-placed among the 6 human scores (2.7427 … 2.5671, higher is better).
    humans = [2.7427, 2.6843, 2.6719, 2.655, 2.6202, 2.5671]
    position = 1 + sum(h > expected for h in humans)
    board = scored.groups["leaderboard"]
    assert scored.groups["positions"] == {"score": float(position)}
    assert board["mean_rank"] == position and board["n_competitors"] == 6
    assert board["percentile"] == pytest.approx(1 - (position - 1) / 6)
    assert board["illustrative"] == 1.0 and scored.s4 == scored.s5 == 1.0
    medal = "gold" if position <= 1 else "bronze" if position <= 2 else "none"
    assert board["medal"] == MEDAL_CODE[medal]
    assert any(n.startswith(f"medal: {medal}") for n in scored.notes)
    assert any(n.startswith("illustrative") for n in scored.notes)

    empty = tmp_path / "empty"
    empty.mkdir()
    invalid = score_challenge(card, pool, empty, "r2", "h", "challenge-2")
    assert invalid.invalid_reason and invalid.metrics == {} and invalid.task_score is None
    assert invalid.groups["leaderboard"]["percentile"] == 0.0 and invalid.s5 == 0.0
    assert invalid.groups["leaderboard"]["medal"] == 0.0

    # Kaggle's bands (< 100 teams): top 10 % / 20 % / 40 %, at least the first place.
    assert medal_thresholds(6) == {"gold": 1.0, "silver": 1.0, "bronze": 2.0}
    assert medal_thresholds(50) == {"gold": 5.0, "silver": 10.0, "bronze": 20.0}


def test_audit_is_clean_and_catches_a_leak(pool: Path, tmp_path: Path) -> None:
    from tasks_lib.audit import audit_pool

    report = audit_pool(str(pool), judge_model="rules", sandbox=False)
    checks = {f.check: f for f in report.findings}
    assert report.clean, [f for f in report.findings if not f.passed]
    assert checks["null_agents"].passed and checks["grader_tampering"].passed
    leaky = tmp_path / "leaky"
    shutil.copytree(pool, leaky)
    shutil.copy(leaky / "private" / "test_labels.csv", leaky / "public" / "notes.csv")
    found = {f.check: f for f in audit_pool(str(leaky), judge_model="rules",
                                            sandbox=False).findings}["answer_key"]
    assert not found.passed
    assert any("public/notes.csv: byte-identical" in e for e in found.evidence)


def test_kit_serves_challenge_cards_to_the_harness() -> None:
    from tasks_lib.harness.scripted import baseline_steps
    from tasks_lib.tracks.base import find_card

    assert find_card(CHALLENGE).track.value == "challenge"
    with pytest.raises(Exception, match="nope"):
        find_card("nope")
    steps = baseline_steps("challenge")
    assert any("local_metric.py" in code for _, _, code in steps)


def test_build_command_refuses_an_unknown_challenge() -> None:
    from typer.testing import CliRunner

    import flows.cli.challenge  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    result = CliRunner().invoke(app, ["pool", "build", "challenge", "--task", "nope"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and "ldct-iqa" in result.stderr


def test_file_column_card_pool_prefixes_validation_ids(tmp_path: Path) -> None:
    """Card whose answers are files: the validation split's ids, files and CSV paths carry
    ``val_`` (no file is shared with the test answers), the audit is clean, and both splits
    grade."""
    from tasks_lib.audit import audit_pool
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.cells import score_challenge
    from tasks_lib.challenge.grade import grade_submission
    from tasks_lib.challenge.pool import publish_challenge_pool

    url, _ = publish_challenge_pool("puma-track1-task1", str(tmp_path / "v1"))
    pool = Path(url)
    ref = pd.read_csv(pool / "public" / "validation" / "reference" / "test_labels.csv")
    test = pd.read_csv(pool / "private" / "test_labels.csv")
    assert all(i.startswith("val_") for i in ref.iloc[:, 0])
    assert not set(ref.iloc[:, 0]) & set(test.iloc[:, 0])
    assert all(Path(p).name.startswith("val_") and (pool / "public" / "validation" /
                                                   "reference" / p).is_file()
               for p in ref.iloc[:, 1])
    assert audit_pool(url, judge_model="rules", sandbox=False).clean
    card = load_challenge("puma-track1-task1")
    metrics, n = grade_submission(card, pool / "public" / "validation" / "sample_submission",
                                  pool / "public" / "validation" / "reference")
    assert n == len(ref) and 0 < metrics["dice"] < 1
    scored = score_challenge(card, pool, pool / "public" / "sample_submission", "r", "h", "v")
    assert scored.invalid_reason is None and scored.task_score == 0  # a format example


def test_cell_without_a_pool_names_the_challenge_build_command() -> None:
    from tasks_lib.errors import InputDataError
    from tasks_lib.harness.environment import local_pool_dir

    with pytest.raises(InputDataError, match="medflows pool build --task seg_a"):
        local_pool_dir("seg_a")


def test_generic_audit_dispatches_to_the_challenge_checks(pool: Path) -> None:
    from tasks_lib.audit import audit_pool

    report = audit_pool(str(pool))
    assert report.clean and report.track.value == "challenge"
    assert [f.check for f in report.findings][:3] == ["null_agents", "answer_key",
                                                      "grader_tampering"]
