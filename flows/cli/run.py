"""``medflows run cell|matrix``: research cells (agent × task × tier) in a sandbox, then scored
by the score flow from the stored run (``medflows score run RUN_ID`` re-scores one any time)."""

from __future__ import annotations

import time
from typing import Any

import typer

from evaluators.vocabulary import Tier
from flows.cli.groups import app, fail, split_list, user_errors
from flows.cli.output import echo_json
from tasks_lib.sandbox.backends import SandboxBackend

run_app = typer.Typer(no_args_is_help=True,
                      help="Run research agents in sandboxes and score them (S1–S5).")
app.add_typer(run_app, name="run")


MAX_COST_USD: Any = typer.Option(
    None, min=0.0, help="The run's model-spend cap in USD (price snapshot); reached: the run ends "
    "partial and what it produced is scored. Default: the card's tier budget.")
MAX_STEPS: Any = typer.Option(
    None, min=1, help="Model turns (external agents: their own steps). Default: the agent's, "
    "else the card's tier budget, else 30.")
WALL_TIME_S: Any = typer.Option(
    None, min=1, help="Wall-clock cap in seconds. Default: the card's tier budget, else its "
    "time_budget_s.")
"""The run's own compute caps (docs/harness.md#sandboxes), shared by ``run cell`` and ``run
matrix``."""


def sandbox_unavailable() -> tuple[type[Exception], ...]:
    """No sandbox can start here (a user error: install bwrap or docker, or pick the other)."""
    from tasks_lib.sandbox.local import SandboxUnavailableError

    return (SandboxUnavailableError,)


def sweep_orphans() -> None:
    """Release what killed runs left behind (processes, containers, scratch, study-database
    roles) before new cells start; say what was removed on stderr."""
    from tasks_lib.sweep import sweep_orphans as sweep

    for line in sweep():
        typer.echo(f"sweep: {line}", err=True)


@run_app.command("agents")
@user_errors(kits=False)
def run_agents_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the agents as JSON."),
) -> None:
    """List the agents a research cell can run: catalog tool-loop and scripted agents, and
    each external agent (agents/<name>/) once per model, as <name>@<model>."""
    from tasks_lib.agents import cell_agents

    agents = cell_agents()
    if as_json:
        echo_json(agents)
        return
    for a in agents:
        extra = f"  {a.description}" if a.description else ""
        typer.echo(f"{a.agent_id:32} {a.harness.value:10} {a.model}{extra}")


@run_app.command("cell")
@user_errors(loaded=sandbox_unavailable)
def run_cell_cmd(
    agent: str = typer.Option(..., help="Agent id from datasets/agents.yaml."),
    task: str = typer.Option(..., help="Imaging task, challenge card or RWE study id (its pool "
                                       "must be built: medflows pool build "
                                       "imaging|challenge|rwe)."),
    tier: Tier = typer.Option(Tier.LITE, help="lite | standard | pro."),
    sandbox: SandboxBackend = typer.Option(SandboxBackend.LOCAL, help="local (bwrap) | docker."),
    replicate: int = typer.Option(0, min=0, help="Replicate index."),
    judge_model: str = typer.Option(None, help="Judge model (default: the judge_model setting; "
                                    "'rules' = offline deterministic judge)."),
    max_cost_usd: float = MAX_COST_USD,
    max_steps: int = MAX_STEPS,
    wall_time_s: int = WALL_TIME_S,
    as_json: bool = typer.Option(False, "--json", help="Print the cell report as JSON."),
) -> None:
    """Run one evaluation cell (execute, then score) and print its report."""
    sweep_orphans()
    from flows.execute import run_cell

    report = run_cell(agent_id=agent, task_id=task, tier=tier.value, sandbox=sandbox.value,
                      replicate=replicate, judge_model=judge_model, max_cost_usd=max_cost_usd,
                      max_steps=max_steps, wall_time_s=wall_time_s)
    if as_json:
        echo_json(report)
        return
    typer.echo(f"{report.run_id} {report.status.value}: overall={report.overall} "
               f"agentic={report.agentic} task={report.task_score} stages={report.stages} "
               f"codes={[c.value for c in report.error_codes]}")


@run_app.command("matrix")
@user_errors(loaded=sandbox_unavailable)
def run_matrix_cmd(
    agents: str = typer.Option(..., help="Comma-separated agent ids."),
    tasks: str = typer.Option(..., help="Comma-separated ids of imaging tasks, challenge cards "
                                        "or RWE studies (pools built)."),
    tiers: str = typer.Option("lite", help="Comma-separated tiers."),
    replicates: int = typer.Option(1, min=1, help="Replicates per cell (N)."),
    sandbox: SandboxBackend = typer.Option(SandboxBackend.LOCAL, help="local | docker."),
    concurrency: int = typer.Option(2, min=1, help="Cells run at the same time."),
    judge_model: str = typer.Option(None, help="Judge model ('rules' = offline judge)."),
    matrix_id: str = typer.Option(None, help="Report folder name (default: a timestamp)."),
    max_cost_usd: float = MAX_COST_USD,
    max_steps: int = MAX_STEPS,
    wall_time_s: int = WALL_TIME_S,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Run the grid agents × tasks × tiers × N and write the report (matrix.json, matrix.md)."""
    sweep_orphans()
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.execute import run_matrix
    from tasks_lib.harness.matrix import markdown

    try:
        tier_list = [Tier(t).value for t in split_list(tiers) or []]
    except ValueError as exc:
        raise fail(str(exc)) from None
    runner: ThreadPoolTaskRunner[Any] = ThreadPoolTaskRunner(max_workers=concurrency)
    flow = run_matrix.with_options(task_runner=runner)  # type: ignore[arg-type]
    result = flow(matrix_id=matrix_id or time.strftime("%Y%m%dT%H%M%S"),
                  agents=split_list(agents) or [], tasks=split_list(tasks) or [],
                  tiers=tier_list, replicates=replicates, sandbox=sandbox.value,
                  judge_model=judge_model, max_cost_usd=max_cost_usd, max_steps=max_steps,
                  wall_time_s=wall_time_s)
    if as_json:
        echo_json(result)
        return
    typer.echo(markdown(result.report))
    typer.echo(f"report: {result.report_json}")
