"""Ranking glue: typed inputs/outputs around :mod:`evaluators.ranking` for cards and results."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from evaluators.ranking import ChallengeRank, benchmark_rank, rank_challenge
from tasks_lib.challenge.card import load_challenge
from tasks_lib.challenge.leaderboard import load_leaderboard
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError


class ChallengeResult(Frozen):
    """One attempted challenge: the agent's metric values, or a failure."""

    challenge: str = Field(description="Challenge id (a card under datasets/challenge/).")
    metrics: dict[str, float] | None = Field(
        default=None, description="Leaderboard column name → the agent's value."
    )
    failed: bool = Field(default=False, description="The submission failed or was invalid.")

    @model_validator(mode="after")
    def _metrics_xor_failed(self) -> ChallengeResult:
        if self.failed == (self.metrics is not None):
            raise ValueError("give either 'metrics' or 'failed': true")
        return self


class RankReport(Frozen):
    """Where one submission lands on a challenge leaderboard (the `challenge rank` output)."""

    challenge: str = Field(description="Challenge id.")
    n_competitors: int = Field(description="N, the number of human leaderboard rows.")
    positions: dict[str, int] = Field(description="Metric → position in 1..N+1 ({} if failed).")
    mean_rank: float | None = Field(description="Unrounded mean position (null if failed).")
    percentile: float = Field(ge=0, le=1, description="1 − (mean rank − 1)/N; 0 if failed.")

    @classmethod
    def of(cls, rank: ChallengeRank) -> RankReport:
        """Convert the exact evaluator result to its reported form."""
        return cls(
            challenge=rank.challenge, n_competitors=rank.n_competitors,
            positions=dict(rank.positions),
            mean_rank=None if rank.mean_rank is None else float(rank.mean_rank),
            percentile=float(rank.percentile),
        )


class BenchmarkReport(Frozen):
    """The `challenge benchmark-rank` output."""

    challenges: list[RankReport] = Field(description="One entry per result, in input order.")
    benchmark_rank: float = Field(ge=0, le=1, description="Mean percentile, failures as 0.")


def rank_exact(challenge: str, metrics: Mapping[str, float] | None) -> ChallengeRank:
    """Rank one challenge result exactly (``metrics=None`` = failed)."""
    card = load_challenge(challenge)
    return rank_challenge(card.task_id, load_leaderboard(card), metrics)


def rank_one(challenge: str, metrics: Mapping[str, float] | None) -> RankReport:
    """Rank one challenge result (``metrics=None`` = failed)."""
    return RankReport.of(rank_exact(challenge, metrics))


def rank_graded(challenge: str, metrics: Mapping[str, float] | None) -> RankReport:
    """Rank graded values: only the card's leaderboard columns are ranked (a card may grade
    secondary metrics the human leaderboard does not report)."""
    if metrics is None:
        return rank_one(challenge, None)
    columns = {c.name for c in load_leaderboard(load_challenge(challenge))}
    return rank_one(challenge, {k: v for k, v in metrics.items() if k in columns})


def rank_benchmark(results: Sequence[ChallengeResult]) -> BenchmarkReport:
    """Rank every result and average the percentiles (failures count 0)."""
    ranks = [rank_exact(r.challenge, None if r.failed else r.metrics) for r in results]
    return BenchmarkReport(
        challenges=[RankReport.of(r) for r in ranks], benchmark_rank=float(benchmark_rank(ranks))
    )


_RESULTS = TypeAdapter(list[ChallengeResult])


def read_results(path: Path) -> list[ChallengeResult]:
    """Read a results file: a JSON list of ``{"challenge", "metrics" | "failed": true}``."""
    try:
        return _RESULTS.validate_json(path.read_bytes())
    except FileNotFoundError:
        raise InputDataError(str(path), "results file not found") from None
    except ValidationError as exc:
        raise InputDataError(str(path), f"not a list of challenge results:\n{exc}") from None


def parse_metrics_json(text: str) -> dict[str, float]:
    """Parse ``--metrics-json``: a JSON object of metric name → number."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputDataError("--metrics-json", f"invalid JSON: {exc}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in raw.values()
    ):
        raise InputDataError("--metrics-json", "expected a JSON object of metric name → number")
    return {str(k): float(v) for k, v in raw.items()}
