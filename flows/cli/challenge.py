"""``medflows challenge``: list cards, rank against human leaderboards, grade, judge."""

from __future__ import annotations

from pathlib import Path

import typer

from evaluators.ranking import RankingInputError
from evaluators.rounding import round_half_up
from evaluators.vocabulary import Track
from flows.cli.groups import app, build_app, fail, location, user_errors
from flows.cli.output import echo_json, json_text
from flows.cli.routing import BUILD_ROUTES, EXECUTE_ROUTES, Route

challenge_app = typer.Typer(no_args_is_help=True,
                            help="Challenge track (ReX-MLE): leaderboard ranking, grading, judge.")
app.add_typer(challenge_app, name="challenge")
BUILD_ROUTES.add("challenge", Route(("pool", "build", "challenge"),
                                    lambda: [Track.CHALLENGE.value], "--task"))
EXECUTE_ROUTES.add("challenge", Route(("execute", "cells"), lambda: [Track.CHALLENGE.value]))

def _pct(value: float) -> str:
    return f"{round_half_up(value * 100, 1):.1f} %"


@challenge_app.command("list")
@user_errors(RankingInputError, kits=False)
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the challenge cards with their ranked metrics."""
    from tasks_lib.challenge.card import challenge_source, list_challenges, load_challenge

    cards = [load_challenge(c) for c in list_challenges()]
    kinds = {c.task_id: challenge_source(c).task_type.value for c in cards}
    if as_json:
        echo_json([{"challenge": c.task_id, "task_type": kinds[c.task_id],
                    "metrics": c.metric_names, "gradable": c.gradable} for c in cards])
        return
    for c in cards:
        graded = "gradable" if c.gradable else "rank-only"
        typer.echo(f"{c.task_id:22} {kinds[c.task_id]:25} {graded:9} {', '.join(c.metric_names)}")


@challenge_app.command("rank")
@user_errors(RankingInputError)
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
        echo_json(report)
        return
    typer.echo(f"{report.challenge}: N={report.n_competitors}")
    for name, pos in report.positions.items():
        typer.echo(f"  {name:24} position {pos}")
    mean = "failed" if report.mean_rank is None else f"{report.mean_rank:g}"
    typer.echo(f"  mean rank {mean}, percentile {_pct(report.percentile)}")


@challenge_app.command("benchmark-rank")
@user_errors(RankingInputError)
def benchmark_rank_cmd(
    results: Path = typer.Option(..., help='JSON list of {"challenge", "metrics" | "failed"}.'),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Rank every attempted challenge and average the percentiles (failures count 0)."""
    from tasks_lib.challenge.rank import rank_benchmark, read_results

    report = rank_benchmark(read_results(results))
    if as_json:
        echo_json(report)
        return
    for r in report.challenges:
        mean = "failed" if r.mean_rank is None else f"{r.mean_rank:g}"
        typer.echo(f"{r.challenge:22} N={r.n_competitors:<3} mean rank {mean:8} "
                   f"percentile {_pct(r.percentile)}")
    typer.echo(f"benchmark rank {_pct(report.benchmark_rank)}")


@challenge_app.command("judge")
@user_errors(RankingInputError)
def judge_cmd(
    trace: Path = typer.Option(..., help="conversation.json of a run, or a plain-text trace."),
    challenge: str = typer.Option(..., help="Challenge id the run attempted."),
    agent: str = typer.Option(..., help="Agent id."),
    run_id: str = typer.Option(..., help="Run id."),
    model: str = typer.Option(None, help="Judge model (default: the judge_model setting)."),
    context_tokens: int = typer.Option(16000, min=1000, help="Judge model context window."),
    out: Path = typer.Option(None, help="Also write the JSON result to this file."),
) -> None:
    """Which of the 13 winning strategies a run's trace shows evidence of (prints JSON)."""
    from tasks_lib.challenge.judge import JudgeConfig, judge_trace, read_trace
    from tasks_lib.settings import get_settings

    config = JudgeConfig(model=model or get_settings().judge_model, context_tokens=context_tokens)
    result = judge_trace(read_trace(trace), run_id=run_id, agent_id=agent, challenge=challenge,
                         config=config)
    text = json_text(result)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    typer.echo(text)
    if result.failed_sections:
        typer.echo(f"warning: sections {result.failed_sections} failed after retries; "
                   "scores cover the other sections only", err=True)


@challenge_app.command("capability")
@user_errors(RankingInputError)
def capability_cmd(
    runs: list[Path] = typer.Argument(..., help="JSON files written by `challenge judge --out`."),
    by: str = typer.Option("agent", help="agent | challenge."),
) -> None:
    """Strategy rates per agent or per challenge over judged runs (prints JSON)."""
    from pydantic import ValidationError

    from evaluators.judges.capability import GroupBy, RunCapability, aggregate

    if by not in {g.value for g in GroupBy}:
        raise fail(f"--by must be agent or challenge, got {by!r}")
    judged = []
    for path in runs:
        try:
            judged.append(RunCapability.model_validate_json(path.read_bytes()))
        except (OSError, ValidationError) as exc:
            raise fail(f"{path}: not a judged run: {exc}") from None
    echo_json([s.model_dump(mode="json") for s in aggregate(judged, GroupBy(by))])


@challenge_app.command("grade")
@user_errors(RankingInputError)
def grade_cmd(
    challenge: str = typer.Option(..., help="Challenge id (a gradable card)."),
    submission: Path = typer.Option(..., help="Folder with submission.csv and its files."),
    reference: Path = typer.Option(..., help="Private folder with test_labels.csv (or "
                                   "reference.csv) and its files."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Grade a submission folder with registered metrics and rank it on the leaderboard."""
    from tasks_lib.challenge.grade import grade_and_rank

    report = grade_and_rank(challenge, submission, reference)
    if as_json:
        echo_json(report)
        return
    if report.invalid_reason:
        typer.echo(f"{report.challenge}: INVALID submission: {report.invalid_reason}")
    for name, value in (report.metrics or {}).items():
        typer.echo(f"  {name:24} {value:.4f}  position {report.rank.positions[name]}")
    typer.echo(f"{report.challenge}: percentile {_pct(report.rank.percentile)}")


@challenge_app.command("synthetic")
@user_errors(RankingInputError)
def synthetic_cmd(
    challenge: str = typer.Option(..., help="Challenge id."),
    out: Path = typer.Option(..., help="Folder to write public/, private/, sample_submission/ "
                                       "and perfect_submission/ into (replaced)."),
    seed: int = typer.Option(0, help="Seed of the generated shapes."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Write the card's small synthetic case (inputs, answers, sample and perfect submissions)."""
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.synthetic import write_synthetic_case

    case = write_synthetic_case(load_challenge(challenge), out, seed)
    if as_json:
        echo_json(case)
        return
    typer.echo(f"{case.challenge}: {len(case.case_ids)} cases (seed {seed}) in {out}")


@build_app.command("challenge")
@user_errors()
def build_challenge(
    task: str = typer.Option(..., "--task", help="Challenge id (medflows challenge list)."),
    out: str = typer.Option(None, help="Pool root folder/URL (default: pools/<task>/vN in the "
                                       "storage root)."),
    seed: int = typer.Option(0, min=0, help="Seed of the test case (validation: seed + 1)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json."),
    as_json: bool = typer.Option(False, "--json", help="Also list the test cases."),
) -> None:
    """Build a challenge pool from the card's synthetic case (public inputs, sample submission,
    validation split with public answers, local metric; test answers private); it is published
    (ledgered) only after a clean exploit audit. Prints JSON."""
    from flows.challenge import construct_challenge
    from tasks_lib.challenge.card import load_challenge

    load_challenge(task)
    manifest = construct_challenge(task, location(out) if out else None, seed, audit_override)
    echo_json(_pool_summary(manifest, illustrative=True, full=as_json, seed=seed))


@challenge_app.command("prepare")
@user_errors()
def prepare_cmd(
    task: str = typer.Option(..., "--task", help="Challenge id (medflows challenge list)."),
    from_dir: Path = typer.Option(..., "--from", help="The official release folder, extracted "
                                  "as downloaded (docs/challenge.md: Bringing the official "
                                  "releases)."),
    out: str = typer.Option(None, help="Pool root folder/URL (default: pools/<task>/vN in the "
                                       "storage root)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json."),
    as_json: bool = typer.Option(False, "--json", help="Also list the test cases."),
) -> None:
    """Build a challenge pool from the official release: the layout is checked (a wrong one
    is refused naming the file), the cases are split as ReX-MLE splits them (80 % public with
    labels as the validation split, 20 % test with private labels), then written, audited and
    published as `pool build challenge` does. Prints JSON."""
    from flows.challenge import construct_challenge
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.prepare.catalog import reader_for

    card = load_challenge(task)
    reader_for(task).cases(card, from_dir)  # refuse a wrong layout before the flow starts
    manifest = construct_challenge(task, location(out) if out else None,
                                   audit_override=audit_override,
                                   release=str(from_dir.resolve()))
    echo_json(_pool_summary(manifest, illustrative=False, full=as_json))


def _pool_summary(manifest: str, illustrative: bool, full: bool,
                  **extra: object) -> dict[str, object]:
    """What `pool build challenge` and `challenge prepare` print (``full``: with --json, also
    the content hash, ``extra`` and the test cases)."""
    from tasks_lib.imaging.pool import read_manifest

    m = read_manifest(manifest.removesuffix("/manifest.json"))
    summary: dict[str, object] = {"task_id": m.task_id, "track": m.track.value,
                                  "version": m.version, "n_cases": len(m.cases),
                                  "manifest": manifest, "illustrative": illustrative}
    if full:
        summary |= {"content_hash": m.content_hash, **extra,
                    "cases": [c.case_id for c in m.cases]}
    return summary
