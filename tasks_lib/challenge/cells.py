"""Research cells on challenge cards: the product score of a cell's submission (grade against
the pool's private answers with the card's metrics, then place it on the human leaderboard)
and the scripted baseline's method.

The placement lands on the score card twice: machine-readable in ``groups`` (``leaderboard``:
N, mean position, percentile, medal code and the illustrative flag; ``positions``: metric →
position) and as notes (with the medal thresholds and the illustrative note), so the cell
report and the matrix report show it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import Field

from evaluators.core import InvalidSubmissionError, Track
from tasks_lib.challenge.grade import grade_submission
from tasks_lib.challenge.pool import ILLUSTRATIVE
from tasks_lib.challenge.rank import RankReport, rank_graded
from tasks_lib.domain import Frozen
from tasks_lib.records import ScoreCard
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits
from tasks_lib.taskspec import TaskSpec

MEDALS = (("gold", 0.10), ("silver", 0.20), ("bronze", 0.40))
"""Kaggle's medal bands for competitions with fewer than 100 teams (the rule MLE-bench uses):
a mean leaderboard position within the top 10 % / 20 % / 40 % of the N human entries (at least
the first position for gold)."""
MEDAL_CODE = {"gold": 1.0, "silver": 2.0, "bronze": 3.0, "none": 0.0}
"""How the medal is stored in the score card's numeric ``groups``."""


class Placement(Frozen):
    """Where a graded submission lands among the human entries."""

    rank: RankReport = Field(description="Per-metric positions, mean position, percentile.")
    thresholds: dict[str, float] = Field(description="Medal → largest mean position that wins it.")
    medal: str = Field(description="gold / silver / bronze / none.")


def medal_thresholds(n_competitors: int) -> dict[str, float]:
    """Medal → the largest mean position (1 = first) that earns it among ``n_competitors``."""
    return {name: max(1.0, float(math.floor(share * n_competitors))) for name, share in MEDALS}


def place(challenge: str, metrics: dict[str, float] | None) -> Placement:
    """Rank ``metrics`` on the challenge's leaderboard (None = invalid: last, no medal)."""
    rank = rank_graded(challenge, metrics)
    thresholds = medal_thresholds(rank.n_competitors)
    medal = "none"
    if rank.mean_rank is not None:
        medal = next((m for m, limit in thresholds.items() if rank.mean_rank <= limit), "none")
    return Placement(rank=rank, thresholds=thresholds, medal=medal)


def placement_notes(placement: Placement, illustrative: bool = True) -> list[str]:
    """Human-readable lines of a placement (with the rule and, on a synthetic pool, the
    illustrative note)."""
    r = placement.rank
    bands = ", ".join(f"{m} ≤ {v:g}" for m, v in placement.thresholds.items())
    mean = "last (invalid)" if r.mean_rank is None else f"{r.mean_rank:g}"
    positions = ", ".join(f"{m} {p}" for m, p in r.positions.items()) or "none"
    return [f"leaderboard percentile {r.percentile:.4f} (mean rank {mean}, N = "
            f"{r.n_competitors} human entries; positions: {positions})",
            f"medal: {placement.medal} (mean position bands: {bands}; rule: Kaggle < 100 "
            "teams)", *([ILLUSTRATIVE] if illustrative else [])]


def grade_card(card: TaskSpec, pool_dir: Path, submission: Path, run_id: str | None,
               pool_hash: str, evaluator_version: str,
               limits: SubmissionLimits = DEFAULT_LIMITS) -> ScoreCard:
    """Grade ``submission`` against ``pool_dir/private`` (what the evaluator sandbox computes;
    it reads the card, the pool and the submission only).

    An invalid submission is scored, never raised: no metrics, task score None, S4 = S5 = 0.
    A valid one has S4 = S5 = 1 (every case graded; grading is all-or-nothing).
    """
    try:
        metrics, _ = grade_submission(card, submission, pool_dir / "private", limits)
        invalid = None
    except InvalidSubmissionError as exc:
        metrics, invalid = {}, str(exc)
    stage = 0.0 if invalid else 1.0
    return ScoreCard(
        task_id=card.task_id, track=Track.CHALLENGE, evaluator_version=evaluator_version,
        pool_hash=pool_hash, run_id=run_id, primary_metric=card.primary_metric,
        task_score=metrics.get(card.primary_metric), metrics=metrics, s4=stage, s5=stage,
        invalid_reason=invalid)


def is_illustrative(pool_dir: Path) -> bool:
    """Whether a pool's placement is illustrative: any case not from an official release
    (:data:`tasks_lib.challenge.prepare.ORIGIN`), or no manifest to tell."""
    from tasks_lib.challenge.prepare import ORIGIN

    path = pool_dir / "manifest.json"
    if not path.is_file():
        return True
    cases = json.loads(path.read_text(encoding="utf-8")).get("cases") or [{}]
    return not all(str(c.get("origin", "")).startswith(ORIGIN) for c in cases)


def with_placement(scored: ScoreCard, illustrative: bool = True) -> ScoreCard:
    """The graded card placed on the human leaderboard (host side: the leaderboard is data the
    evaluator sandbox does not mount): ``groups`` and notes; invalid → last, no medal."""
    placement = place(scored.task_id, None if scored.invalid_reason else scored.metrics)
    r = placement.rank
    board = {"n_competitors": float(r.n_competitors), "percentile": r.percentile,
             "medal": MEDAL_CODE[placement.medal], "illustrative": float(illustrative)}
    if r.mean_rank is not None:
        board["mean_rank"] = r.mean_rank
    groups = {**scored.groups, "leaderboard": board,
              "positions": {m: float(p) for m, p in r.positions.items()}}
    return scored.model_copy(update={"groups": groups,
                                     "notes": [*scored.notes,
                                                       *placement_notes(placement,
                                                                        illustrative)]})


def score_challenge(card: TaskSpec, pool_dir: Path, submission: Path, run_id: str | None,
                    pool_hash: str, evaluator_version: str,
                    limits: SubmissionLimits = DEFAULT_LIMITS) -> ScoreCard:
    """Grade ``submission`` and place it on the leaderboard (:func:`grade_card`,
    :func:`with_placement`)."""
    return with_placement(grade_card(card, pool_dir, submission, run_id, pool_hash,
                                     evaluator_version, limits), is_illustrative(pool_dir))


RECIPE = '''\
"""Challenge baseline: the public sample submission (already in the challenge's layout),
checked on the validation split with the local metric, then submitted."""
import csv, os, shutil, subprocess, sys

SUB = "/workspace/submission"
if sys.argv[1:] == ["--pilot"]:
    out = subprocess.run([sys.executable, "/public/local_metric.py",
                          "/public/validation/sample_submission"], capture_output=True, text=True)
    print("local metric (validation):", out.stdout.strip() or out.stderr[-2000:])
    sys.exit(out.returncode)
if os.path.exists(SUB):
    shutil.rmtree(SUB)
shutil.copytree("/public/sample_submission", SUB)
with open(os.path.join(SUB, "submission.csv"), newline="") as fh:
    rows = list(csv.DictReader(fh))
print(len(rows), "rows; columns", list(rows[0]) if rows else [])
'''
"""The scripted baseline's ``method.py`` on a challenge pool."""
