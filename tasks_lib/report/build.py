"""The report as plain functions: ledger → board → files, with no Prefect.

The ``report`` flow (flows/report.py) runs these same functions and adds its Prefect artifacts;
a command that reads the ledger calls :func:`build_report` directly unless a Prefect API is
configured (:func:`prefect_api_configured`): a report is read-only, and recording it as a flow
run is worth a few seconds on a server the user runs, never the start of a temporary one (15 to
30 s on a 2-core machine; docs/operations.md §4).
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

from tasks_lib.report.board import Board, LeaderboardRow, paired_board, scored_runs
from tasks_lib.report.paired import PairwiseCell
from tasks_lib.report.render import ReportFiles, report_name, write_report
from tasks_lib.scoring import select_runs


class Report(NamedTuple):
    """A written report."""

    name: str
    """Its folder under ``reports/`` (:func:`~tasks_lib.report.render.report_name`)."""
    rows: list[LeaderboardRow]
    """The board, ranked per (task, tier)."""
    files: ReportFiles
    """Where CSV, markdown, pairwise matrix and plot were written."""
    pairwise: list[PairwiseCell]
    """Every pair of ranked rows per (task, tier), Holm-adjusted per board."""


def report_board(task_id: str | None = None, pool: str | None = None,
                 run_ids: list[str] | None = None, evaluator_version: str | None = None,
                 matrix: bool = True) -> Board:
    """The board of the named runs, a pool version's runs, a task's runs or every run, from
    their newest score rows (or those of ``evaluator_version``), with the paired statistics
    (with ``matrix``, every pair of ranked rows)."""
    return paired_board(scored_runs(select_runs(run_ids, task_id, pool), evaluator_version),
                        matrix)


def report_rows(task_id: str | None = None, pool: str | None = None,
                run_ids: list[str] | None = None, evaluator_version: str | None = None
                ) -> list[LeaderboardRow]:
    """The rows of :func:`report_board` (intervals and adjacent tests; no matrix)."""
    return report_board(task_id, pool, run_ids, evaluator_version, matrix=False).rows


def build_report(task_id: str | None = None, pool: str | None = None,
                 run_ids: list[str] | None = None, evaluator_version: str | None = None
                 ) -> Report:
    """:func:`report_board`, written under ``reports/<name>/`` (CSV, markdown, pairwise
    matrix, PNG)."""
    rows, pairwise = report_board(task_id, pool, run_ids, evaluator_version)
    name = report_name(task_id, pool, evaluator_version)
    return Report(name, rows, write_report(rows, name, pairwise), pairwise)


def _profile_api_url() -> str | None:
    """``PREFECT_API_URL`` of the active Prefect profile (``PREFECT_PROFILE``, else the
    profiles file's ``active``), read from the file Prefect reads."""
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = os.environ.get("PREFECT_PROFILE") or data.get("active")
    profile = data.get("profiles", {}).get(name) if isinstance(name, str) else None
    value = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return value if isinstance(value, str) and value else None


def prefect_api_configured() -> bool:
    """Whether flows run here would report to a Prefect server the user runs (rather than
    start a temporary one): ``PREFECT_API_URL`` in the environment (where the CLI also puts the
    server of ``medflows server start``) or in the active Prefect profile; in a process that has
    loaded Prefect's settings, their own value. Reads no Prefect module."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    settings = sys.modules.get("prefect.settings")
    if settings is not None:
        return bool(settings.PREFECT_API_URL.value())
    return _profile_api_url() is not None
