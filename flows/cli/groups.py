"""Typer groups shared by the command modules, the global ``--debug`` option and the wrapper
every command runs under (:func:`user_errors`).

This module and every command module import only what ``--help`` needs (typer, the bottom
layer's error classes); a command imports what it uses when it runs, after :func:`user_errors`
has registered every kit (:func:`flows.compose`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer._click import Context
from typer.core import TyperGroup

from evaluators.registry import UnknownNameError
from tasks_lib.errors import InputDataError, InvalidSubmissionError

F = TypeVar("F", bound=Callable[..., Any])
USER_ERRORS: tuple[type[Exception], ...] = (InputDataError, UnknownNameError,
                                            InvalidSubmissionError)
"""Errors that are the user's input, not our bug: one line on stderr, exit code 2."""

VERB = "by-option"
"""Hidden command of a :class:`VerbFirstGroup` that runs when the group's first argument is an
option (``medflows pool build --task ID`` rather than ``medflows pool build qa …``)."""


class VerbFirstGroup(TyperGroup):
    """A group whose first argument may be an option: the arguments then go to its hidden
    :data:`VERB` command (the verb-first form); a subcommand name (an alias) works as before."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """Put :data:`VERB` in front of arguments that start with an option (not ``--help``)."""
        if args and args[0].startswith("-") and args[0] not in ctx.help_option_names:
            args = [VERB, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="medflows: build medical-AI benchmarks, run agents, score offline.")
pool_app = typer.Typer(no_args_is_help=True, help="Build, rotate and inspect pools.")
build_app = typer.Typer(
    cls=VerbFirstGroup, no_args_is_help=True,
    help="Build a pool (construct DAG): `medflows pool build --task ID` plus the options of the "
         "task's kit; the subcommands are the per-protocol forms (aliases).")
qa_app = typer.Typer(no_args_is_help=True, help="Medical QA utilities.")
execute_app = typer.Typer(
    cls=VerbFirstGroup, no_args_is_help=True,
    help="Run agents (execute DAG): `medflows execute --pool P --agents A,B` plus the "
         "options of the pool's kit; the subcommands are the per-protocol forms (aliases).")
score_app = typer.Typer(
    cls=VerbFirstGroup, no_args_is_help=True,
    help="Score stored runs (score DAG): `medflows score --run R | --pool P | --task T`; the "
         "subcommands are the per-protocol forms (aliases).")
report_app = typer.Typer(invoke_without_command=True,
                         help="Leaderboards and plots from the ledger (report).")
runs_app = typer.Typer(no_args_is_help=True, help="Runs in the ledger.")
medbench_app = typer.Typer(no_args_is_help=True,
                           help="MedBench v4: item bank, answer download/upload, judges.")

app.add_typer(pool_app, name="pool")
pool_app.add_typer(build_app, name="build")
app.add_typer(qa_app, name="qa")
app.add_typer(execute_app, name="execute")
app.add_typer(score_app, name="score")
app.add_typer(report_app, name="report")
app.add_typer(runs_app, name="runs")
app.add_typer(medbench_app, name="medbench")


class CliState:
    """What the root options asked for, read by :func:`flows.cli.main` once the command ends."""

    debug: bool = False
    """Show tracebacks and Prefect's console log on stderr (``--debug``)."""


STATE = CliState()


@app.callback()
def root(debug: bool = typer.Option(
        False, "--debug", envvar="MEDFLOWS_DEBUG",
        help="Show the traceback of a failure and Prefect's log on stderr (default: one "
             "`error:` line; the details go to the log file it names).")) -> None:
    """medflows: build medical-AI benchmarks, run agents, score offline."""
    STATE.debug = debug


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` to stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def split_list(value: str | None) -> list[str] | None:
    """``"a,b"`` → ``["a", "b"]``; empty → None."""
    if not value:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def user_errors(*extra: type[Exception],
                loaded: Callable[[], tuple[type[Exception], ...]] | None = None,
                kits: bool = True) -> Callable[[F], F]:
    """Decorate a command so :data:`USER_ERRORS` (and ``extra``, and the classes ``loaded()``
    imports when the command runs: those of heavy modules) end it with ``error: …``. Every kit
    is registered (:func:`flows.compose`) before the command runs, unless ``kits`` is False (a
    command that only reads the ledger: importing every kit would cost it seconds)."""

    def deco(fn: F) -> F:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kits:
                from flows import compose

                compose()
            caught = (*USER_ERRORS, *extra, *(loaded() if loaded else ()))
            try:
                return fn(*args, **kwargs)
            except caught as exc:
                raise fail(str(exc)) from None

        return wrapper  # type: ignore[return-value]

    return deco


def location(path: str) -> str:
    """Absolute path for a local folder or file (flows may run elsewhere); URLs and
    ``active:<subset_id>`` references unchanged."""
    if "://" in path or path.startswith("active:"):
        return path
    return str(Path(path).resolve())
