"""Leaderboards from the ledger (never re-scoring): one board whose columns come from the score
card (:mod:`.board`), one ranking rule (:mod:`.standing`), paired statistics over the per-case
values of the stored score cards (:mod:`.paired`), files (:mod:`.render`), the report as plain
functions (:mod:`.build`). Prefect artifacts are made by the ``report`` flow (flows/report.py)
only.

The names of :mod:`.render`, :mod:`.build` and :mod:`.paired` (pandas, scipy, and matplotlib
when plotting) load when first used, so reading the board (``medflows runs list``) imports no
plotting, table or statistics library; nothing here imports Prefect.
"""

from typing import TYPE_CHECKING, Any

from tasks_lib.report.board import (
    Board,
    LeaderboardRow,
    Scored,
    Stat,
    leaderboard,
    paired_board,
    scored_runs,
    standings,
)
from tasks_lib.report.standing import Standing, is_ranked, pool_flags, standing

if TYPE_CHECKING:
    from tasks_lib.report.build import (
        Report,
        build_report,
        prefect_api_configured,
        report_board,
        report_rows,
    )
    from tasks_lib.report.paired import PairwiseCell
    from tasks_lib.report.render import (
        ReportFiles,
        artifact_markdown,
        flat_record,
        pairwise_frame,
        plot_png,
        report_name,
        to_frame,
        to_markdown,
        write_report,
    )

_LAZY = {"build": {"Report", "build_report", "prefect_api_configured", "report_board",
                   "report_rows"},
         "paired": {"PairwiseCell"},
         "render": {"ReportFiles", "artifact_markdown", "flat_record", "pairwise_frame",
                    "plot_png", "report_name", "to_frame", "to_markdown", "write_report"}}

__all__ = ["Board", "LeaderboardRow", "PairwiseCell", "Report", "ReportFiles", "Scored",
           "Standing", "Stat", "artifact_markdown", "build_report", "flat_record",
           "is_ranked", "leaderboard", "paired_board", "pairwise_frame", "plot_png",
           "pool_flags", "prefect_api_configured", "report_board", "report_name", "report_rows",
           "scored_runs", "standing", "standings", "to_frame", "to_markdown", "write_report"]


def __getattr__(name: str) -> Any:
    for module, names in _LAZY.items():
        if name in names:
            from importlib import import_module

            return getattr(import_module(f"tasks_lib.report.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
