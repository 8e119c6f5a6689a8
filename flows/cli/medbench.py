"""``medflows pool build medbench``, ``medflows medbench rotate``, ``medflows execute medbench``,
``score medbench``, ``report medbench``, ``medflows medbench export-ratings`` / ``calibrate``:
the MedBench v4 item bank, API mode and the judge's human calibration (commands register on the
groups of :mod:`flows.cli.groups`; docs/medbench.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from evaluators.vocabulary import Track
from flows.cli.groups import (
    build_app,
    execute_app,
    location,
    medbench_app,
    report_app,
    score_app,
    split_list,
    user_errors,
)
from flows.cli.output import echo_json
from flows.cli.routing import BUILD_ROUTES, EXECUTE_ROUTES, Route
from tasks_lib.errors import InputDataError

if TYPE_CHECKING:
    from tasks_lib.records import RunRecord

BUILD_ROUTES.add("medbench", Route(("pool", "build", "medbench"),
                                   lambda: [Track.MEDBENCH.value], "--tasks", many=True))
EXECUTE_ROUTES.add("medbench", Route(("execute", "medbench"), lambda: [Track.MEDBENCH.value]))


@build_app.command("medbench")
@user_errors()
def build_medbench(
    out: str = typer.Option(None, help="Pool root folder/URL (default: pools/<pool-id>/vN in "
                                       "the storage root)."),
    pool_id: str = typer.Option("medbench-bank", help="Pool name."),
    tasks: str = typer.Option(None, help="Comma-separated MedBench task ids (default: every "
                                         "card under datasets/medbench/)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the full summary (tasks with "
                                                       "dimension, specialty, answer type)."),
) -> None:
    """Build the MedBench-style item bank (construct DAG: build → write → exploit audit →
    ledger) from the cards under datasets/medbench/; prints JSON."""
    from flows.medbench import construct_medbench
    from tasks_lib.medbench.items import read_manifest
    from tasks_lib.medbench.pool import card_ids

    ids = card_ids(split_list(tasks))
    url = construct_medbench(pool_id, ids, location(out) if out else None, audit_override)
    m = read_manifest(url)
    summary: dict[str, object] = {"pool_id": m.pool_id, "version": m.version, "url": url,
                                  "n_items": m.n_items, "n_tasks": len(m.tasks),
                                  "content_hash": m.content_hash}
    if as_json:
        summary["tasks"] = {t: e.model_dump(mode="json") for t, e in m.tasks.items()}
        summary["dimensions"] = sorted({e.dimension.value for e in m.tasks.values()})
    echo_json(summary)


@medbench_app.command("rotate")
@user_errors()
def rotate_medbench_cmd(
    pool: str = typer.Option("medbench-bank", help="Parent MedBench pool: ID (newest) or "
                                                   "ID@vN."),
    size: int = typer.Option(60, min=0, help="Base questions in the subset (shuffles of a "
                                             "question come with it; small strata stay whole)."),
    seed: int = typer.Option(None, help="Sampling seed (default: quarter of today, YYYYQ)."),
    subset_id: str = typer.Option("medbench-rotation", help="Subset name (runs and scores name "
                                                            "it; use active:<name>)."),
    activate: bool = typer.Option(True, help="Make the subset the active one."),
) -> None:
    """Draw a version-locked subset of a MedBench pool stratified across tasks and specialties
    (the rotation machinery of `medflows pool rotate`); prints JSON."""
    from flows.medbench import rotate_medbench
    from tasks_lib.medbench.items import read_manifest
    from tasks_lib.rotation import SUBSET_FILE, SubsetManifest
    from tasks_lib.storage import Storage

    url = rotate_medbench(pool, size, seed, subset_id, activate)
    subset = SubsetManifest.model_validate(Storage(url).read_json(SUBSET_FILE))
    m = read_manifest(url)
    echo_json({"subset_id": subset.subset_id, "version": subset.version, "seed": subset.seed,
               "content_hash": subset.content_hash, "n_items": subset.n_items, "url": url,
               "parents": [f"{p.pool_id}@v{p.version}" for p in subset.parents],
               "strata": subset.strata,
               "tasks": {t: e.n_items for t, e in m.tasks.items()}})


@execute_app.command("medbench")
@user_errors()
def execute_medbench_cmd(
    pool: str = typer.Option(..., help="MedBench pool root, or active:<subset_id>."),
    agents: str = typer.Option(None, help="Comma-separated catalog agent ids "
                                          "(datasets/agents.yaml)."),
    model: str = typer.Option(None, help="Or any litellm model string (API mode)."),
    api_base: str = typer.Option(None, help="OpenAI-compatible URL for --model."),
    replicates: int = typer.Option(3, min=1, help="Runs per agent (the paper: 3)."),
    replicate: int = typer.Option(0, min=0, help="First replicate index."),
    max_cost_usd: float = typer.Option(None, help="Cost budget per run (USD)."),
    max_connections: int = typer.Option(None, min=1, help="Concurrent calls per endpoint."),
    rpm: int = typer.Option(None, min=1, help="Requests-per-minute cap."),
    tpm: int = typer.Option(None, min=1, help="Tokens-per-minute cap."),
    cache: bool = typer.Option(True, help="Use the call cache."),
    score: bool = typer.Option(False, "--score", help="Score the runs right away."),
    endpoint: list[int] = typer.Option(
        None, "--endpoint", help="Registered endpoint id (repeatable): each one is a "
        "version-locked evaluation (one run, scored right away)."),
) -> None:
    """API mode: call catalog agents, an ad hoc --model (unlocked developer runs) or registered
    endpoints (--endpoint: version-locked submissions) on the randomized items of a MedBench
    pool or the active subset (T 0.7, 512 tokens); prints JSON."""
    from flows.medbench import execute_medbench
    from tasks_lib.medbench.accounts import RateLimited

    try:
        runs = execute_medbench(location(pool), split_list(agents), model, api_base,
                                replicates, replicate, max_cost_usd, max_connections, rpm, tpm,
                                cache, list(endpoint or []))
    except RateLimited as exc:
        raise InputDataError("--endpoint", f"{exc} (evaluations admitted before the refusal "
                                           "were run and scored)") from None
    rows = [_run_row(r) for r in runs]
    scored = [r.run_id for r in runs if score or "endpoint_id" in r.agent.params]
    if scored:
        from flows.score import score_runs

        cards = {c.run_id: c for c in score_runs(run_ids=scored)}
        for row in rows:
            if row["run_id"] in cards:
                row["overall"] = cards[str(row["run_id"])].task_score
    echo_json(rows)


def _run_row(run: RunRecord) -> dict[str, object]:
    """One run of ``execute medbench`` (with its lock when it is an endpoint evaluation)."""
    row: dict[str, object] = {
        "run_id": run.run_id, "agent_id": run.agent.agent_id, "replicate": run.replicate,
        "status": run.status.value, "n_items": run.n_items, "n_answered": run.n_answered,
        "cost_usd": run.cost_usd, "end": run.end}
    if "endpoint_id" in run.agent.params:
        from tasks_lib.ledger import medbench as ledger

        lock = ledger.submissions(run_id=run.run_id)
        row["endpoint_id"] = run.agent.params["endpoint_id"]
        row["submission_version"] = lock[0].version if lock else None
    return row


@score_app.command("medbench")
@user_errors()
def score_medbench_cmd(pool: str = typer.Option(..., help="MedBench pool root, or "
                                                          "active:<subset_id>.")) -> None:
    """Score every stored run on a MedBench pool version (the one score flow); prints JSON."""
    from flows.score import score_runs

    cards = score_runs(pool=location(pool))
    echo_json([{"run_id": c.run_id, "agent_id": c.agent_id, "overall": c.task_score,
                "evaluator_version": c.evaluator_version, "metrics": c.metrics}
               for c in cards])


@report_app.command("medbench")
@user_errors(kits=False)
def report_medbench_cmd(
    pool: str = typer.Option(None, help="MedBench pool root, or active:<subset_id> (with "
                                        "--pair: needed for agent ids)."),
    evaluator_version: str = typer.Option(None, help="Show this evaluator version's rows."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    pair: tuple[str, str] | None = typer.Option(
        None, "--pair", metavar="BASE AGENT",
        help="Compare two runs on the same items (run ids, or agent ids: their newest scored "
             "run on --pool): per dimension and overall, agent − base with a paired bootstrap "
             "95 % CI and p, Holm over the dimensions (docs/report.md)."),
    html: str = typer.Option(None, "--html", metavar="DIR",
                             help="With --pair: also write the pair page and the two runs' "
                                  "pages as a static site in DIR."),
    resamples: int = typer.Option(None, min=100, help="With --pair: bootstrap resamples "
                                                      "(default 2000)."),
    seed: int = typer.Option(None, help="With --pair: seed of the resampling (default 20231)."),
) -> None:
    """MedBench view (alias kept beside ``medflows report --pool POOL``): overall, dimensions
    and tasks (mean ± SD over replicates) and the judge's κ, from the ledger's score rows,
    ranked by the one rule of every board; writes report.md/report.json under
    reports/medbench/; recorded as a ``report-medbench`` flow run with its artifact when a
    Prefect API is configured (no server is started for a report). With ``--pair BASE AGENT``:
    the paired comparison of two runs (a base model and an agent on its backbone) instead."""
    if pair is not None:
        _report_pair(pair, pool, evaluator_version, as_json, html, resamples, seed)
        return
    if html or resamples is not None or seed is not None:
        raise InputDataError("--html/--resamples/--seed", "apply to --pair BASE AGENT only "
                                                          "(the pool report: medflows report "
                                                          "--pool P --html DIR)")
    if pool is None:
        raise InputDataError("--pool", "give --pool POOL (or --pair BASE AGENT)")
    from tasks_lib.medbench.report import build_report, to_markdown, write_report
    from tasks_lib.report.build import prefect_api_configured

    if prefect_api_configured():
        from flows.medbench import report_medbench

        url = report_medbench(location(pool), evaluator_version)
        report = build_report(location(pool), evaluator_version)
    else:
        report = build_report(location(pool), evaluator_version)
        url = write_report(report)
    if as_json:
        echo_json({"markdown": url, **report.model_dump(mode="json")})
    else:
        typer.echo(to_markdown(report))


def _report_pair(pair: tuple[str, str], pool: str | None, evaluator_version: str | None,
                 as_json: bool, html: str | None, resamples: int | None,
                 seed: int | None) -> None:
    """``report medbench --pair BASE AGENT``: warnings on stderr, the report on stdout."""
    from evaluators.significance import DEFAULT
    from tasks_lib.medbench.report_pair import build_pair
    from tasks_lib.medbench.report_pair_view import to_markdown, write_html

    changes = {k: v for k, v in (("n_resamples", resamples), ("seed", seed)) if v is not None}
    report = build_pair(pair[0], pair[1], location(pool) if pool else None, evaluator_version,
                        DEFAULT.model_copy(update=changes))
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    page = write_html(report, html) if html else None
    if as_json:
        echo_json({**report.model_dump(mode="json"), **({"html": str(page)} if page else {})})
        return
    typer.echo(to_markdown(report), nl=False)
    if page:
        typer.echo(f"html: {page}")


@medbench_app.command("export-ratings")
@user_errors()
def export_ratings_cmd(
    run_id: str = typer.Argument(..., help="A scored MedBench run (see: medflows runs list)."),
    out: Path = typer.Option(..., help="Ratings CSV to write (its .judge.json sidecar too)."),
    share: float = typer.Option(0.2, min=0.01, max=1.0, help="Share of judged items per task."),
    raters: int = typer.Option(3, min=1, help="Rater slots per item."),
    seed: int = typer.Option(0, help="Sampling seed."),
) -> None:
    """Export ~20 % of a run's judged items per task for human rating (a CSV physicians fill
    in: one row per item and rater, 0-5 with the same rubric); prints JSON."""
    from tasks_lib.medbench.calibration import export_ratings, sidecar_path

    side = export_ratings(run_id, out, share, raters, seed)
    echo_json({"ratings": str(out), "judge": str(sidecar_path(out)),
               "judge_model": side.judge_model, "n_items": len(side.items),
               "raters_per_item": raters})


@medbench_app.command("calibrate")
@user_errors()
def calibrate_cmd(
    ratings: Path = typer.Argument(..., help="Filled-in ratings CSV (item_id, rater_id, score; "
                                             "from export-ratings)."),
    judge: Path = typer.Option(None, help="Judge sidecar (default: RATINGS.judge.json)."),
    aggregate: str = typer.Option("majority", help="majority | mean of the raters."),
    weighted: bool = typer.Option(False, help="Quadratic-weighted κ decides the status."),
    threshold: float = typer.Option(0.82, help="κ needed to call a judge calibrated."),
    min_items: int = typer.Option(30, min=1, help="Items needed to call a judge calibrated."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (default: a table)."),
) -> None:
    """Raw agreement and Cohen's κ of the judge against the human raters, per task and rubric
    (kept in the calibration history per judge model and rubric version)."""
    from evaluators.judges.medbench_calibration import Aggregation
    from tasks_lib.medbench.calibration import calibrate

    try:
        rule = Aggregation(aggregate)
    except ValueError:
        raise InputDataError("--aggregate", "majority or mean") from None
    rows = calibrate(ratings, judge, rule, weighted, threshold, min_items)
    if as_json:
        echo_json([r.model_dump(mode="json") for r in rows])
        return
    for r in rows:
        kappa = "nan" if r.kappa is None else f"{r.kappa:.4f}"
        typer.echo(f"{r.task_id}/{r.rubric_id} n={r.n} p_o={r.p_o:.4f} kappa={kappa} "
                   f"{r.status}")
