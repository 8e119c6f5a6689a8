"""Leaderboards from the ledger alone (never re-scoring): one board whose columns come from the
score card (:mod:`.board`), one ranking rule (:mod:`.standing`), files and artifacts
(:mod:`.render`).

The names of :mod:`.render` (Prefect steps, pandas, matplotlib) load when first used, so reading
the board (``medflows runs list``) imports neither Prefect nor a plotting library.
"""

from typing import TYPE_CHECKING, Any

from tasks_lib.report.board import (
    LeaderboardRow,
    Scored,
    Stat,
    leaderboard,
    scored_runs,
    standings,
)
from tasks_lib.report.standing import Standing, is_ranked, pool_flags, standing

if TYPE_CHECKING:
    from tasks_lib.report.render import (
        ReportFiles,
        plot_png,
        publish_leaderboard,
        report_name,
        to_frame,
        to_markdown,
        write_report,
    )

_RENDER = {"ReportFiles", "plot_png", "publish_leaderboard", "report_name", "to_frame",
           "to_markdown", "write_report"}

__all__ = ["LeaderboardRow", "ReportFiles", "Scored", "Standing", "Stat", "is_ranked",
           "leaderboard", "plot_png", "pool_flags", "publish_leaderboard", "report_name",
           "scored_runs", "standing", "standings", "to_frame", "to_markdown", "write_report"]


def __getattr__(name: str) -> Any:
    if name in _RENDER:
        from tasks_lib.report import render

        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
