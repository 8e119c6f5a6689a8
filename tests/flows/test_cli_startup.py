"""The command line starts fast and fails in one line (issue 26): ``--help``, a group's
``--help`` and ``runs list --json`` import no Prefect, model client, scipy, torch or
scikit-learn and start no Prefect server; a failed command prints one ``error:`` line and no
traceback (the details go to the log file it names, or to the console with ``--debug``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli_child import MEDFLOWS, fresh_env, run_main

HEAVY = ("prefect", "litellm", "openai", "scipy", "torch", "sklearn")
"""Libraries a command that runs no flow and calls no model must not import (seconds each)."""


def _main_in_child(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str],
                                                         int, set[str]]:
    """Run the console script's ``main`` with ``args`` in a fresh interpreter; its result, exit
    code and the modules it imported."""
    done, code, modules = run_main(tmp_path / "modules.json", list(args), fresh_env(tmp_path))
    return done, code, set(modules)


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.mark.parametrize("args", [["--help"], ["report", "--help"], ["pool", "build", "--help"],
                                  ["execute", "--help"], ["run", "cell", "--help"],
                                  ["baseline", "--help"]])
def test_help_imports_no_heavy_library_and_no_kit(tmp_path: Path, args: list[str]) -> None:
    done, code, modules = _main_in_child(tmp_path, *args)
    assert code == 0 and "Usage: medflows" in done.stdout, done.stderr[-3000:]
    assert _heavy(modules) == []
    assert "tasks_lib.tracks.catalog" not in modules  # no kit is registered for --help
    assert "evaluators.catalog" not in modules  # nor any metric


def test_runs_list_json_on_an_empty_ledger_starts_no_prefect_server(tmp_path: Path) -> None:
    done, code, modules = _main_in_child(tmp_path, "runs", "list", "--json")
    assert code == 0 and json.loads(done.stdout) == [], done.stderr[-3000:]
    assert done.stderr == ""
    assert _heavy(modules) == []
    # A temporary Prefect server creates its database in PREFECT_HOME: none was started.
    assert not (tmp_path / "prefect-home" / "prefect.db").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_a_failed_flow_step_prints_one_error_line_and_logs_the_traceback(
        tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    env = fresh_env(tmp_path, PREFECT_API_URL=str(PREFECT_API_URL.value()))
    missing = tmp_path / "no-pool"
    done = subprocess.run([MEDFLOWS, "score", "--pool", str(missing)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines() == [
        f"error: {missing}/manifest.json: no pool here (build one with medflows pool build …)"]
    # The score flow ran and failed: Prefect's account of it is in the command's log file.
    [log] = (tmp_path / "results" / "logs").glob("cli-*.log")
    text = log.read_text()
    assert "Flow run 'score-runs' - Encountered exception" in text and "Traceback" in text


def test_a_bug_is_one_error_line_naming_the_log_and_debug_shows_the_traceback(
        tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    ledger.write_text("not a database")  # our data's fault: no user mistake
    env = fresh_env(tmp_path)
    done = subprocess.run([MEDFLOWS, "runs", "list", "--json"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: DatabaseError: ") and "file is not a database" in line
    log = Path(line.rsplit("(details: ", 1)[1].removesuffix(")"))
    assert log.parent == tmp_path / "results" / "logs"
    assert "Traceback (most recent call last)" in log.read_text()
    shown = subprocess.run([MEDFLOWS, "--debug", "runs", "list", "--json"], env=env,
                           capture_output=True, text=True, timeout=300, check=False)
    assert shown.returncode == 1 and "Traceback" in shown.stderr
    assert "file is not a database" in shown.stderr
