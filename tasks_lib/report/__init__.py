"""Leaderboards from the ledger alone (never re-scoring): one board whose columns come from the
score card (:mod:`.board`), one ranking rule (:mod:`.standing`), files and artifacts
(:mod:`.render`)."""

from tasks_lib.report.board import (
    LeaderboardRow,
    Scored,
    Stat,
    leaderboard,
    scored_runs,
    standings,
)
from tasks_lib.report.render import (
    ReportFiles,
    plot_png,
    publish_leaderboard,
    report_name,
    to_frame,
    to_markdown,
    write_report,
)
from tasks_lib.report.standing import Standing, is_ranked, pool_flags, standing

__all__ = ["LeaderboardRow", "ReportFiles", "Scored", "Standing", "Stat", "is_ranked",
           "leaderboard", "plot_png", "pool_flags", "publish_leaderboard", "report_name",
           "scored_runs", "standing", "standings", "to_frame", "to_markdown", "write_report"]
