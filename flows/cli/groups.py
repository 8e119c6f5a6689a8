"""Typer groups shared by the command modules."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="medflows: build medical-AI benchmarks, run agents, score offline.")
pool_app = typer.Typer(no_args_is_help=True, help="Build, rotate and inspect pools.")
build_app = typer.Typer(no_args_is_help=True, help="Build a pool (construct DAG).")
qa_app = typer.Typer(no_args_is_help=True, help="Medical QA utilities.")
execute_app = typer.Typer(no_args_is_help=True, help="Run agents (execute DAG).")
score_app = typer.Typer(no_args_is_help=True, help="Score stored submissions (score DAG).")
report_app = typer.Typer(no_args_is_help=True, help="Leaderboards and plots (report).")

app.add_typer(pool_app, name="pool")
pool_app.add_typer(build_app, name="build")
app.add_typer(qa_app, name="qa")
app.add_typer(execute_app, name="execute")
app.add_typer(score_app, name="score")
app.add_typer(report_app, name="report")


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` to stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def split_list(value: str | None) -> list[str] | None:
    """``"a,b"`` → ``["a", "b"]``; empty → None."""
    if not value:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]
