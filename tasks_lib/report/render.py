"""The leaderboard as files: a flat CSV, one markdown table per (task, tier) whose columns are
the score cards' (the primary metric by its real name, Overall, S1–S5, named metrics, cost,
time, replicates; unranked rows with their reason and no values; the interval and the mark
against the next row, with a legend), the pairwise matrix (JSON and CSV) and the cost–score
plot.

Nothing here imports Prefect: the ``report`` flow (flows/report.py) turns the same rows and
files into Prefect artifacts (:func:`flat_record` rows, :func:`artifact_markdown`)."""

from __future__ import annotations

import io
import re
from itertools import groupby

import pandas as pd
from pydantic import Field

from evaluators.significance import DEFAULT
from tasks_lib.domain import Frozen
from tasks_lib.report.board import STAGES, LeaderboardRow, Stat
from tasks_lib.report.paired import PairwiseCell, better_than_next
from tasks_lib.storage import Storage

EMPTY = "—"
"""A cell with no value (not credited, or not on the card)."""


class ReportFiles(Frozen):
    """Where the report was written."""

    csv: str = Field(description="leaderboard.csv URL.")
    markdown: str = Field(description="leaderboard.md URL.")
    plot: str = Field(description="cost_accuracy.png URL.")
    pairwise_json: str | None = Field(default=None, description="pairwise.json URL: every pair "
                                      "of ranked rows per (task, tier), with the settings.")
    pairwise_csv: str | None = Field(default=None, description="pairwise.csv URL (the same "
                                                               "cells, flat).")


LEGEND = (f"[low, high]: {DEFAULT.ci_level:.0%} bootstrap percentile interval of the task score "
          f"over items ({DEFAULT.n_resamples:,} resamples, seed {DEFAULT.seed}; replicates "
          "averaged within items). `*`: significantly better than the next ranked row (paired "
          "test on the items both have: exact McNemar for 0–1 outcomes, else paired "
          f"permutation; Holm over this table's adjacent pairs, α = {DEFAULT.alpha}). p vs "
          "next: that Holm-adjusted p value.")
"""The line under every board saying what the interval and the mark are."""


def _flat(stats: dict[str, Stat], prefix: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, s in stats.items():
        out[f"{prefix}{name}"] = s.mean
        out[f"{prefix}{name}_se"] = s.se
    return out


def flat_record(r: LeaderboardRow) -> dict[str, object]:
    """One row flat: ``overall``/``agentic``/``s1``…``s5`` and ``metric/<name>`` means with
    ``_se`` columns; one ``acc_<group>`` column per stratum (primary metric) and
    ``accuracy_macro`` kept as alias columns of the former layout."""
    rec = r.model_dump(exclude={"per_group", "metrics", "stages", "overall", "agentic"})
    rec["accuracy_macro"] = r.task_score
    for name, s in (("overall", r.overall), ("agentic", r.agentic)):
        rec[name], rec[f"{name}_se"] = (s.mean, s.se) if s else (None, None)
    rec.update(_flat(r.stages, ""))
    rec.update(_flat(r.metrics, "metric/"))
    rec.update({f"acc_{g}": v for g, v in r.per_group.items()})
    return rec


def to_frame(rows: list[LeaderboardRow]) -> pd.DataFrame:
    """The flat table (:func:`flat_record` per row)."""
    return pd.DataFrame.from_records([flat_record(r) for r in rows])


def num_text(value: float | None, se: float | None = None) -> str:
    """A board cell: 4 significant digits, `` ± SE`` when given, ``—`` for no value."""
    if value is None:
        return EMPTY
    return f"{value:.4g}" + ("" if se is None else f" ± {se:.2g}")


def stat_text(s: Stat | None) -> str:
    """A mean ± SE cell (``—`` for none)."""
    return EMPTY if s is None else num_text(s.mean, s.se)


def _score(r: LeaderboardRow) -> str:
    """Task score (± SE over replicates), its interval, and ``*`` when the row is significantly
    better than the next ranked row."""
    text = num_text(r.task_score, r.task_score_se)
    if r.ci_low is not None and r.ci_high is not None:
        text += f" [{r.ci_low:.4g}, {r.ci_high:.4g}]"
    return text + (" *" if better_than_next(r.significant, r.paired_difference) else "")


def _board(rows: list[LeaderboardRow]) -> list[str]:
    """One markdown table: the columns the rows' cards have."""
    primary = rows[0].primary_metric or "task score"
    stages = [s for s in STAGES if any(s in r.stages for r in rows)]
    names = sorted({n for r in rows for n in r.metrics} - {r.primary_metric for r in rows})
    extra = ["Overall"] if any(r.overall for r in rows) else []
    head = ["#", "agent", "model", "method", primary, *extra, *(s.upper() for s in stages),
            *names, "coverage", "cost/run (USD)", "cost/item (USD)", "s/item", "wall s",
            "reps", "Pareto", "p vs next", "not ranked because"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.rank or EMPTY), r.agent_id, r.model, r.method, _score(r),
                 *([stat_text(r.overall)] if extra else []),
                 *(stat_text(r.stages.get(s)) for s in stages),
                 *(stat_text(r.metrics.get(n)) for n in names),
                 EMPTY if r.coverage is None else f"{100 * r.coverage:.0f}%",
                 num_text(r.cost_per_run_usd), num_text(r.cost_per_item_usd),
                 num_text(r.mean_time_s), num_text(r.wall_time_s), str(r.n_replicates),
                 "★" if r.pareto else "",
                 EMPTY if r.p_adjusted is None else f"{r.p_adjusted:.2g}",
                 (r.unranked_reason or "").replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _missing(rows: list[LeaderboardRow]) -> list[str]:
    """Why a credited row has no interval or a ranked row no test."""
    notes = [f"- {r.agent_id}: no interval: {r.ci_reason}" for r in rows if r.ci_reason]
    notes += [f"- {r.agent_id}: no test against {r.vs_next_agent}: {r.test_reason}"
              for r in rows if r.test_reason]
    return [*notes, ""] if notes else []


def to_markdown(rows: list[LeaderboardRow]) -> str:
    """One table per (task, tier), ranked rows first; an unranked row shows its reason; under
    each table the legend of the interval and the mark, and why any row has neither."""
    out: list[str] = []
    for (task_id, tier), group in groupby(rows, key=lambda r: (r.task_id, r.tier)):
        board = list(group)
        out += [f"## {task_id} · {tier}", "", *_board(board), "", LEGEND, "",
                *_missing(board)]
    return "\n".join(out)


def pairwise_frame(cells: list[PairwiseCell]) -> pd.DataFrame:
    """The pairwise matrix flat: one line per pair of ranked rows of a (task, tier)."""
    return pd.DataFrame.from_records([c.model_dump() for c in cells],
                                     columns=list(PairwiseCell.model_fields))


def plot_png(rows: list[LeaderboardRow], title: str) -> bytes:
    """Task score vs cost per run (log x) of the ranked rows, frontier drawn; rows without a
    known positive cost are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costed = [(r.cost_per_run_usd, r.task_score, r) for r in rows
              if r.cost_per_run_usd and r.task_score is not None and r.ranked]
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    ax.scatter([c for c, _, _ in costed], [s for _, s, _ in costed],
               c=["tab:red" if r.pareto else "tab:blue" for _, _, r in costed], s=28)
    for cost, score, r in costed:
        ax.annotate(f"{r.model or r.agent_id}/{r.method}", (cost, score),
                    fontsize=6, xytext=(3, 2), textcoords="offset points")
    front = sorted((c, s) for c, s, r in costed if r.pareto)
    ax.plot([c for c, _ in front], [s for _, s in front],
            color="tab:red", linewidth=1, label="Pareto frontier")
    ax.set_xscale("log")
    ax.set_xlabel("cost per run (USD, log scale)")
    names = sorted({r.primary_metric for r in rows if r.primary_metric})
    ax.set_ylabel(", ".join(names) or "task score")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def write_report(rows: list[LeaderboardRow], name: str,
                 pairwise: list[PairwiseCell] | None = None) -> ReportFiles:
    """Write CSV, markdown, the pairwise matrix (JSON with the statistics' settings, CSV) and
    PNG under ``reports/<name>/`` in the storage root."""
    out = Storage.from_settings().child(f"reports/{name}")
    cells = pairwise or []
    return ReportFiles(
        pairwise_json=out.write_json("pairwise.json", {
            "statistics": DEFAULT.model_dump(), "cells": [c.model_dump() for c in cells]}),
        pairwise_csv=out.write_text("pairwise.csv", pairwise_frame(cells).to_csv(index=False)),
        csv=out.write_text("leaderboard.csv", to_frame(rows).to_csv(index=False)),
        markdown=out.write_text("leaderboard.md",
                                f"# Leaderboard — {name}\n\n{to_markdown(rows)}"),
        plot=out.write_bytes("cost_accuracy.png", plot_png(rows, f"Cost vs score — {name}")),
    )


def artifact_markdown(rows: list[LeaderboardRow], name: str, files: ReportFiles) -> str:
    """The report's markdown artifact: the tables and links to the files."""
    return (f"# Report — {name}\n\n{to_markdown(rows)}\n\nFiles:\n\n- [CSV]({files.csv})\n"
            f"- [markdown]({files.markdown})\n- [plot (PNG)]({files.plot})\n"
            f"- [pairwise tests (JSON)]({files.pairwise_json})\n"
            f"- [pairwise tests (CSV)]({files.pairwise_csv})\n")


def report_name(task_id: str | None, pool: str | None, evaluator_version: str | None) -> str:
    """Folder/artifact name of a report: ``<pool id>-v<N>``, the task id, or ``all``."""
    from tasks_lib.scoring import pool_version

    if pool:
        found = pool_version(pool)
        base = f"{found.pool_id}-v{found.version}"
    else:
        base = task_id or "all"
    if evaluator_version is None:
        return base
    return f"{base}@{re.sub(r'[^A-Za-z0-9._+-]', '-', evaluator_version)}"
