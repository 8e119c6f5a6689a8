"""QA commands: pool build qa, qa replay, execute/score/report qa."""

from __future__ import annotations

import typer

from evaluators.vocabulary import Track
from flows.cli.groups import (
    build_app,
    execute_app,
    location,
    qa_app,
    report_app,
    score_app,
    split_list,
    user_errors,
)
from flows.cli.output import json_text
from flows.cli.routing import BUILD_ROUTES, EXECUTE_ROUTES, Route
from tasks_lib.selection import SelectionRule

BUILD_ROUTES.add("qa", Route(("pool", "build", "qa"), lambda: [Track.QA.value], "--datasets",
                             many=True))
EXECUTE_ROUTES.add("qa", Route(("execute", "qa"), lambda: [Track.QA.value]))


@build_app.command("qa")
@user_errors()
def build_qa(
    source: str = typer.Option(None, help="Folder with questions/ and predictions/ "
                               "(default <data root>/medagentsbench)."),
    predictions: str = typer.Option(None, help="Predictions CSV for the difficulty filter "
                                    "(default SOURCE/predictions/full.csv.gz)."),
    models: str = typer.Option(None, help="Comma-separated models counted for k/N (default all)."),
    datasets: str = typer.Option(None, help="Comma-separated dataset cards (default all)."),
    select: SelectionRule = typer.Option(SelectionRule.FIRST, help="first | stratified."),
    per_dataset: int = typer.Option(100, min=1, help="Hard items kept per dataset (M)."),
    threshold: float = typer.Option(0.5, help="Hard iff k/N < threshold."),
    seed: int = typer.Option(0, help="Seed of stratified selection."),
    meld: bool = typer.Option(True, help="Run the MELD contamination screen."),
    meld_models: str = typer.Option("gpt-4o-mini", help="Comma-separated screening models."),
    meld_threshold: float = typer.Option(0.95, help="Flag items above this similarity."),
    auto_approve: bool = typer.Option(False, help="Skip the review pause (reviewer 'auto')."),
    pool_id: str = typer.Option("medagentsbench-hard", help="Pool name."),
    out: str = typer.Option(None, help="Pool root folder/URL (default in the storage root)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json (see docs/audit.md)."),
    as_json: bool = typer.Option(False, "--json", help="Also print the selection, each "
                                                       "dataset's filter counts, MELD and review."),
) -> None:
    """Build a hard multiple-choice QA pool (construct DAG; published only after a clean
    exploit audit); prints a JSON summary."""
    from flows.construct import construct_qa
    from tasks_lib.qa.ingest import check_question_files, default_source
    from tasks_lib.qa.predictions import load_predictions
    from tasks_lib.taskspec import load_card

    for dataset in split_list(datasets) or []:
        load_card(Track.QA, dataset)
    # Refuse unusable inputs here, as one error line, before a flow starts.
    check_question_files(split_list(datasets), location(source) if source else None)
    load_predictions(location(predictions) if predictions else
                     f"{location(source) if source else default_source()}/predictions/full.csv.gz",
                     split_list(models))

    published = construct_qa(
        pool_id=pool_id, datasets=split_list(datasets), source=location(source) if source else None,
        predictions=location(predictions) if predictions else None, models=split_list(models),
        select=select, per_dataset=per_dataset, threshold=threshold, seed=seed, meld=meld,
        meld_models=split_list(meld_models), meld_threshold=meld_threshold,
        auto_approve=auto_approve, out=location(out) if out else None,
        audit_override=audit_override,
    )
    m = published.manifest
    summary: dict[str, object] = {
        "pool_id": m.pool_id, "version": m.version, "content_hash": m.content_hash,
        "manifest": f"{published.url}/manifest.json",
        "datasets": {ds: d.n_items for ds, d in m.datasets.items()},
        "rejected": {ds: d.n_rejected for ds, d in m.datasets.items()}}
    if as_json:
        summary |= {"selection": m.selection, "meld": m.meld,
                    "composition": {ds: d.model_dump(mode="json") for ds, d in m.datasets.items()},
                    "review": m.review.model_dump(mode="json") if m.review else None}
    typer.echo(json_text(summary, indent=2))


@qa_app.command("replay")
@user_errors()
def qa_replay(
    predictions: str = typer.Option(..., help="Recorded predictions CSV (.csv or .csv.gz)."),
    pool: str = typer.Option(None, help="Pool root: score only its items, against its answers."),
    source: str = typer.Option(None, help="Question folder for references without --pool."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows."),
) -> None:
    """Accuracy per (dataset, model, method) group of a recorded predictions file."""
    from tasks_lib.qa.pool import load_pool
    from tasks_lib.qa.predictions import load_predictions
    from tasks_lib.qa.replay_report import card_references, replay_accuracy
    from tasks_lib.storage import Storage

    frame = load_predictions(predictions)
    refs = load_pool(Storage(location(pool))).references if pool else card_references(source)
    summary = replay_accuracy(frame, refs)
    if summary.unmatched_rows:
        typer.echo(f"note: {summary.unmatched_rows} prediction rows name items that are not "
                   f"{'in the pool' if pool else 'in any dataset card'}; not scored", err=True)
    if summary.unscored_groups:
        typer.echo(f"note: groups with no scorable item: {', '.join(summary.unscored_groups)}",
                   err=True)
    if as_json:
        typer.echo(json_text([r.model_dump() for r in summary.rows], indent=2))
        return
    for r in summary.rows:
        typer.echo(f"{r.dataset:14} {r.model:30} {r.method:16} n={r.n:5d} acc={r.accuracy:.3f}")


@execute_app.command("qa")
@user_errors(kits=False)  # the warm process has them; flows.execute registers them here
def execute_qa_cmd(
    pool: str = typer.Option(..., help="Pool root."),
    agents: str = typer.Option(None, help="Comma-separated catalog agent ids."),
    replay: str = typer.Option(None, help="Replay every (model, method) of this predictions file."),
    replay_models: str = typer.Option(None, help="Restrict replay to these models."),
    replay_methods: str = typer.Option(None, help="Restrict replay to these methods."),
    replicates: int = typer.Option(1, min=1, help="Replicates per agent."),
    time_budget_s: int = typer.Option(None, min=1, help="Wall-time cap per run (default: the "
                                                        "dataset cards' budget)."),
    max_cost_usd: float = typer.Option(
        None, min=0, help="Cost cap per run in USD (price snapshot; cached calls count at their "
        "original price). A run that reaches it ends 'partial'; re-run with more to resume."),
    max_connections: int = typer.Option(
        None, min=1, help="Concurrent requests per provider endpoint (default: the agent's "
        "param, else MEDFLOWS_MAX_CONNECTIONS, 16)."),
    rpm: int = typer.Option(None, min=1, help="Requests-per-minute cap per endpoint."),
    tpm: int = typer.Option(None, min=1, help="Tokens-per-minute cap per endpoint."),
    cache: bool = typer.Option(True, "--cache/--no-cache",
                               help="Serve repeated model calls from the call cache."),
    chunk_size: int = typer.Option(None, min=1, help="Items per execute task run (default: "
                                                     "MEDFLOWS_EXECUTE_CHUNK, 100)."),
    progress: bool = typer.Option(True, "--progress/--no-progress",
                                  help="Show per-run progress on stderr."),
) -> None:
    """Run agents on a pool (execute DAG)."""
    from tasks_lib.warm_start import hand_off_command

    if (code := hand_off_command()) is not None:  # after `medflows server start`
        raise typer.Exit(code)
    from tasks_lib.prefect_server import start_temporary

    server = start_temporary()  # boots in its own process while this one imports
    from flows.cli.progress import execution_progress
    from flows.execute import execute_qa

    if server is not None:
        import litellm  # noqa: F401  (what the first model call imports, while the server boots)

        server.wait()

    with execution_progress(progress):
        runs = execute_qa(pool=location(pool), agents=split_list(agents),
                          replay=location(replay) if replay else None,
                          replay_models=split_list(replay_models),
                          replay_methods=split_list(replay_methods), replicates=replicates,
                          time_budget_s=time_budget_s, max_cost_usd=max_cost_usd,
                          max_connections=max_connections, rpm=rpm, tpm=tpm, cache=cache,
                          chunk_size=chunk_size)
    typer.echo(json_text([{"run_id": r.run_id, "agent_id": r.agent.agent_id,
                            "replicate": r.replicate, "status": r.status.value,
                            "n_answered": r.n_answered, "cost_usd": r.cost_usd,
                            "new_cost_usd": r.new_cost_usd, "cache_hits": r.cache_hits,
                            "error": r.error} for r in runs],
                          indent=2))


@score_app.command("qa")
@user_errors()
def score_qa_cmd(pool: str = typer.Option(..., help="Pool root.")) -> None:
    """Score every stored run on a pool (score DAG); prints macro accuracy per run."""
    from flows.score import score_qa

    cards = score_qa(pool=location(pool))
    typer.echo(json_text([{"run_id": c.run_id, "agent_id": c.agent_id,
                            "task_score": c.task_score, "accuracy_macro": c.task_score}
                           for c in cards], indent=2))


@report_app.command("qa")
@user_errors(kits=False)
def report_qa_cmd(
    pool: str = typer.Option(..., help="Pool root."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as ``medflows report "
                                                       "--json`` does (files, rows with "
                                                       "intervals and tests, pairwise matrix)."),
) -> None:
    """Alias of ``medflows report --pool POOL``: write the leaderboard (intervals, paired tests,
    pairwise matrix), Pareto frontier and plot of a pool's scored runs; prints the files'
    URLs."""
    from flows.cli.output import echo_json
    from flows.cli.runs import leaderboard_report, report_json

    files, board = leaderboard_report(pool=location(pool))
    if as_json:
        echo_json(report_json(files, board))
        return
    typer.echo(files.model_dump_json(indent=2))
