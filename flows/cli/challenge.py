"""``medflows challenge``: list cards, rank against human leaderboards, grade, judge."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer

from evaluators.ranking import RankingInputError, round_half_up
from evaluators.registry import UnknownNameError
from flows.cli.groups import app, fail
from tasks_lib.errors import InputDataError, InvalidSubmissionError

challenge_app = typer.Typer(no_args_is_help=True,
                            help="Challenge track (ReX-MLE): leaderboard ranking, grading, judge.")
app.add_typer(challenge_app, name="challenge")

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn bad-input errors into one clear line on stderr and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InputDataError, UnknownNameError, RankingInputError,
                InvalidSubmissionError) as exc:
            raise fail(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def _pct(value: float) -> str:
    return f"{round_half_up(value * 100, 1):.1f} %"


@challenge_app.command("list")
@user_errors
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the challenge cards with their ranked metrics."""
    import json

    from tasks_lib.challenge.card import list_challenges, load_challenge

    cards = [load_challenge(c) for c in list_challenges()]
    if as_json:
        typer.echo(json.dumps([{"challenge": c.task_id, "task_type": c.task_type.value,
                                "metrics": c.metric_names, "gradable": c.gradable}
                               for c in cards], indent=2))
        return
    for c in cards:
        graded = "gradable" if c.gradable else "rank-only"
        typer.echo(f"{c.task_id:22} {c.task_type.value:25} {graded:9} {', '.join(c.metric_names)}")


@challenge_app.command("rank")
@user_errors
def rank_cmd(
    challenge: str = typer.Option(..., help="Challenge id (see `medflows challenge list`)."),
    metrics_json: str = typer.Option(None, help='JSON object {"<leaderboard column>": value}.'),
    failed: bool = typer.Option(False, "--failed", help="The submission failed: percentile 0."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Place one submission's metric values among the challenge's human competitors."""
    from tasks_lib.challenge.rank import parse_metrics_json, rank_one

    if failed == (metrics_json is not None):
        raise fail("give exactly one of --metrics-json and --failed")
    report = rank_one(challenge, None if failed else parse_metrics_json(metrics_json))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    typer.echo(f"{report.challenge}: N={report.n_competitors}")
    for name, pos in report.positions.items():
        typer.echo(f"  {name:24} position {pos}")
    mean = "failed" if report.mean_rank is None else f"{report.mean_rank:g}"
    typer.echo(f"  mean rank {mean}, percentile {_pct(report.percentile)}")


@challenge_app.command("benchmark-rank")
@user_errors
def benchmark_rank_cmd(
    results: Path = typer.Option(..., help='JSON list of {"challenge", "metrics" | "failed"}.'),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Rank every attempted challenge and average the percentiles (failures count 0)."""
    from tasks_lib.challenge.rank import rank_benchmark, read_results

    report = rank_benchmark(read_results(results))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    for r in report.challenges:
        mean = "failed" if r.mean_rank is None else f"{r.mean_rank:g}"
        typer.echo(f"{r.challenge:22} N={r.n_competitors:<3} mean rank {mean:8} "
                   f"percentile {_pct(r.percentile)}")
    typer.echo(f"benchmark rank {_pct(report.benchmark_rank)}")
