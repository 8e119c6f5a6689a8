"""One exploit audit for every kind of pool (issue 22): every registered kit's pool goes through
the same five checks, each run or reported "not applicable" with its reason; the kit's null
agents and the pool's public sample submission (``kit.baselines``) stay at or below their floors
and the perfect submission above them; a sample submission copied from the references is
flagged; the challenge pools' public samples are format examples that cannot place or medal."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from support.imaging_pools import build_pool
from support.ops_support import publish_test_pool

from tasks_lib.audit import audit_pool
from tasks_lib.audits.baselines import PERFECT, SAMPLE
from tasks_lib.audits.pool import floors
from tasks_lib.audits.report import CHECKS, AuditReport, Finding
from tasks_lib.challenge.card import list_challenges
from tasks_lib.tracks.base import KITS

MEDBENCH_TASKS = ["medqa-choice", "medqa-open", "dicom-string", "lesion-boxes"]
IMAGING = {"segmentation": "brain-tissue-seg", "enhancement": "ldct-denoise",
           "detection": "brain-lesion-det", "vqa": "brain-lesion-vqa",
           "report_generation": "brain-lesion-report"}


def _imaging(track: str) -> Callable[[Path], str]:
    return lambda root: build_pool(IMAGING[track], root)[0]


def _qa(root: Path) -> str:
    return publish_test_pool("audit-kits-qa", {"medqa": 24, "medbullets": 16}).url


def _challenge(root: Path) -> str:
    from tasks_lib.challenge.pool import publish_challenge_pool

    return publish_challenge_pool("ldct-iqa", str(root / "challenge" / "v1"))[0]


def _rwe(root: Path) -> str:
    """Two studies on the test process's study cluster (their database on the study server)."""
    from tests.tasks_lib.rwe.pool_support import small_pool

    return small_pool(root / "rwe" / "v1")


def _medbench(root: Path) -> str:
    from tasks_lib.medbench.pool import build_task, publish

    return publish("mb-audit-kits", str(root / "mb" / "v1"),
                   {t: build_task(t) for t in MEDBENCH_TASKS}, seed=0)[0]


BUILDERS: dict[str, Callable[[Path], str]] = {
    "qa": _qa, "challenge": _challenge, "medbench": _medbench, "rwe": _rwe,
    **{track: _imaging(track) for track in IMAGING}}


def _finding(report: AuditReport, check: str) -> Finding:
    return next(f for f in report.findings if f.check == check)


def test_every_registered_kit_is_audited_here() -> None:
    assert set(BUILDERS) == set(KITS.names())


@pytest.mark.parametrize("track", sorted(KITS.names()))
def test_every_probe_runs_on_every_kind_of_pool(track: str, tmp_path: Path) -> None:
    report = audit_pool(BUILDERS[track](tmp_path), judge_model="rules", sandbox=False)
    assert report.track.value == track
    assert [f.check for f in report.findings] == list(CHECKS)
    assert report.clean, report.to_json()
    for f in report.findings:  # each probe ran, or says why it did not
        assert f.passed or f.evidence, f
        assert all("could not run" not in e for e in f.evidence), f
        assert f.check != "egress" or f.evidence == ["skipped: no sandbox (--no-sandbox)"]
    injection = _finding(report, "judge_injection")
    assert injection.rule.startswith("4 injected payloads") or \
        injection.evidence[0].startswith(f"not applicable: the {track} kit has no stage rubric")
    nulls = _finding(report, "null_agents")
    assert nulls.passed and f"{PERFECT}=" in nulls.rule
    if SAMPLE in floors()[track]:  # the track's pools publish a sample: it was scored
        assert f"{SAMPLE}=" in nulls.rule


def _placement(pool: Path, card_id: str) -> dict[str, float]:
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.cells import score_challenge

    scored = score_challenge(load_challenge(card_id), pool, pool / "public" / "sample_submission",
                             None, "h", "audit")
    return dict(scored.groups["leaderboard"])


MEASURED = ("isles22", "ldct-iqa")
"""Where a copied sample placed before (bronze at percentile 0.75; gold); every other card is
checked in the slow run."""


@pytest.mark.parametrize("card_id", [c if c in MEASURED else pytest.param(c, marks=pytest.mark.slow)
                                     for c in list_challenges()])
def test_a_copied_challenge_sample_cannot_place_or_medal(card_id: str, tmp_path: Path) -> None:
    """The public sample of every challenge pool is a format example (zero masks, zero values,
    no objects): copying it never medals nor places in the top half of the leaderboard."""
    from tasks_lib.challenge.pool import publish_challenge_pool

    pool = Path(publish_challenge_pool(card_id, str(tmp_path / "v1"))[0])
    board = _placement(pool, card_id)
    assert board["medal"] == 0.0
    assert board["percentile"] <= float(floors()["challenge"]["sample"]["floor"])
    sample = pd.read_csv(pool / "public" / "sample_submission" / "submission.csv")
    answers = pd.read_csv(pool / "private" / "test_labels.csv")
    assert list(sample.columns) == list(answers.columns)
    assert list(sample.iloc[:, 0]) == list(answers.iloc[:, 0])  # same cases, same layout


def test_a_sample_copied_from_the_references_is_flagged(tmp_path: Path) -> None:
    from tasks_lib.challenge.pool import publish_challenge_pool

    pool = Path(publish_challenge_pool("ldct-iqa", str(tmp_path / "v1"))[0])
    sample = pool / "public" / "sample_submission"
    shutil.rmtree(sample)
    sample.mkdir()
    shutil.copy(pool / "private" / "test_labels.csv", sample / "submission.csv")
    report = audit_pool(str(pool), judge_model="rules", sandbox=False)
    assert not report.clean
    nulls = _finding(report, "null_agents")
    assert not nulls.passed and nulls.severity.value == "error"
    assert any(e.startswith(f"{SAMPLE} scores 1.0000 > floor 0.5000") for e in nulls.evidence)
