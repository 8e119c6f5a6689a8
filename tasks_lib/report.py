"""Leaderboards from the ledger alone (never re-scoring): mean ± SE over replicates per
(agent, task, tier), per-stratum scores, cost, time, Pareto frontier, plot, artifacts."""

from __future__ import annotations

import io
import json
import math
import re
from typing import NamedTuple

import pandas as pd
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from pydantic import Field

from evaluators.pareto import pareto_frontier
from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import Frozen
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
from tasks_lib.storage import Storage


class LeaderboardRow(Frozen):
    """One (agent, task, tier) on the leaderboard: the mean over its scored replicates."""

    rank: int = Field(description="1 = best mean task score.")
    agent_id: str = Field(description="Agent id.")
    model: str = Field(description="Model.")
    method: str = Field(description="Reasoning method or harness method.")
    task_id: str = Field(description="Task (or pool) id.")
    tier: str = Field(description="Tier.")
    evaluator_version: str = Field(description="Evaluator version of the score rows shown.")
    n_replicates: int = Field(description="Scored replicates averaged.")
    task_score: float = Field(description="Mean over replicates of the primary metric.")
    task_score_se: float | None = Field(description="Standard error over replicates "
                                                    "(None with one replicate).")
    per_group: dict[str, float] = Field(description="Primary metric per stratum (QA: dataset).")
    coverage: float | None = Field(description="Answered / expected items (mean).")
    total_cost_usd: float | None = Field(description="Total cost of the replicates (None = "
                                                     "unknown).")
    cost_per_item_usd: float | None = Field(description="Cost per answered item.")
    mean_time_s: float | None = Field(description="Mean seconds per item.")
    pareto: bool = Field(description="On the cost–score Pareto frontier.")


class ReportFiles(Frozen):
    """Where the report was written."""

    csv: str = Field(description="leaderboard.csv URL.")
    markdown: str = Field(description="leaderboard.md URL.")
    plot: str = Field(description="cost_accuracy.png URL.")


class Scored(NamedTuple):
    """A run row and the score row shown for it."""

    run: RunRow
    score: ScoreRow


def scored_runs(runs: list[RunRow], evaluator_version: str | None = None) -> list[Scored]:
    """Each run with its newest score row (or the row of ``evaluator_version``); runs without
    one are left out."""
    rows = store.scores_for([r.run_id for r in runs])
    chosen: dict[str, ScoreRow] = {}
    for row in rows:  # oldest first: the newest wins
        if evaluator_version is None or row.evaluator_version == evaluator_version:
            chosen[row.run_id] = row
    return [Scored(r, chosen[r.run_id]) for r in runs if r.run_id in chosen]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _se(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))


def _known(values: list[float | None]) -> list[float] | None:
    return None if any(v is None for v in values) else [v for v in values if v is not None]


def _group_row(items: list[Scored]) -> LeaderboardRow:
    run = items[0].run
    scores = [s.score.task_score or 0.0 for s in items]
    groups: dict[str, list[float]] = {}
    for s in items:
        primary = s.score.primary_metric or ""
        for name, values in json.loads(s.score.groups_json).items():
            groups.setdefault(name, []).append(values.get(primary, 0.0))
    costs = _known([s.run.cost_usd for s in items])
    answered = sum(s.run.n_answered or 0 for s in items)
    times = _known([s.run.item_time_s for s in items])
    coverage = _known([s.score.coverage for s in items])
    return LeaderboardRow(
        rank=0, agent_id=run.agent_id, model=run.model or "", method=run.method or "",
        task_id=run.task_id, tier=run.tier, evaluator_version=items[-1].score.evaluator_version,
        n_replicates=len(items), task_score=_mean(scores), task_score_se=_se(scores),
        per_group={g: _mean(v) for g, v in sorted(groups.items())},
        coverage=_mean(coverage) if coverage else None,
        total_cost_usd=sum(costs) if costs is not None else None,
        cost_per_item_usd=sum(costs) / answered if costs is not None and answered else None,
        mean_time_s=_mean(times) if times else None, pareto=False)


def leaderboard(scored: list[Scored]) -> list[LeaderboardRow]:
    """Mean ± SE over replicates per (agent, task, tier); rank by mean score, flag the
    cost–score Pareto frontier."""
    groups: dict[tuple[str, str, str], list[Scored]] = {}
    for s in sorted(scored, key=lambda s: (s.run.agent_id, s.run.replicate)):
        groups.setdefault((s.run.agent_id, s.run.task_id, s.run.tier), []).append(s)
    rows = [_group_row(items) for items in groups.values()]
    front = pareto_frontier([r.cost_per_item_usd for r in rows], [r.task_score for r in rows])
    rows = [r.model_copy(update={"pareto": p}) for r, p in zip(rows, front, strict=True)]
    rows.sort(key=lambda row: (-row.task_score, row.agent_id, row.task_id, row.tier))
    return [row.model_copy(update={"rank": i}) for i, row in enumerate(rows, start=1)]


def to_frame(rows: list[LeaderboardRow]) -> pd.DataFrame:
    """Flat table: one ``acc_<group>`` column per stratum; ``accuracy_macro`` is kept as an
    alias column of ``task_score``."""
    records = []
    for r in rows:
        rec = r.model_dump(exclude={"per_group"})
        rec["accuracy_macro"] = r.task_score
        rec.update({f"acc_{ds}": v for ds, v in r.per_group.items()})
        records.append(rec)
    return pd.DataFrame.from_records(records)


def to_markdown(rows: list[LeaderboardRow]) -> str:
    """A readable leaderboard table."""
    head = "| # | model | method | macro acc | coverage | cost/item (USD) | s/item | Pareto |\n"
    head += "|---:|---|---|---:|---:|---:|---:|:---:|\n"
    lines = [
        f"| {r.rank} | {r.model} | {r.method} | {_pct(r)} | "
        f"{'n/a' if r.coverage is None else f'{100 * r.coverage:.0f}%'} | "
        f"{'n/a' if r.cost_per_item_usd is None else f'{r.cost_per_item_usd:.5f}'} | "
        f"{'n/a' if r.mean_time_s is None else f'{r.mean_time_s:.1f}'} | "
        f"{'★' if r.pareto else ''} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def _pct(r: LeaderboardRow) -> str:
    se = "" if r.task_score_se is None else f" ± {100 * r.task_score_se:.1f}"
    return f"{100 * r.task_score:.1f}%{se}"


def plot_png(rows: list[LeaderboardRow], title: str) -> bytes:
    """Accuracy vs cost per item (log x), frontier drawn; rows without cost are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costed = [(r.cost_per_item_usd, r) for r in rows if r.cost_per_item_usd]
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    ax.scatter([c for c, _ in costed], [100 * r.task_score for _, r in costed],
               c=["tab:red" if r.pareto else "tab:blue" for _, r in costed], s=28)
    for cost, r in costed:
        ax.annotate(f"{r.model}/{r.method}", (cost, 100 * r.task_score),
                    fontsize=6, xytext=(3, 2), textcoords="offset points")
    front = sorted((c, r.task_score) for c, r in costed if r.pareto)
    ax.plot([c for c, _ in front], [100 * a for _, a in front],
            color="tab:red", linewidth=1, label="Pareto frontier")
    ax.set_xscale("log")
    ax.set_xlabel("cost per item (USD, log scale)")
    ax.set_ylabel("task score (%)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


@task(name="publish-leaderboard", task_run_name="publish-leaderboard-{name}")
def publish_leaderboard(rows: list[LeaderboardRow], name: str) -> None:
    """The leaderboard as a Prefect table artifact."""
    create_table_artifact(
        key=artifact_key(f"leaderboard-{name}"),
        table=[r.model_dump(exclude={"per_group"}) for r in rows],
        description=f"Leaderboard of {name} (mean ± SE over replicates, cost, Pareto frontier)",
    )


@task(name="write-report", task_run_name="write-report-{name}")
def write_report(rows: list[LeaderboardRow], name: str) -> ReportFiles:
    """Write CSV, markdown and PNG under ``reports/<name>/``; a markdown artifact links them."""
    out = Storage.from_settings().child(f"reports/{name}")
    md = to_markdown(rows)
    files = ReportFiles(
        csv=out.write_text("leaderboard.csv", to_frame(rows).to_csv(index=False)),
        markdown=out.write_text("leaderboard.md", f"# Leaderboard — {name}\n\n{md}"),
        plot=out.write_bytes("cost_accuracy.png", plot_png(rows, f"Cost vs accuracy — {name}")),
    )
    create_markdown_artifact(
        key=artifact_key(f"report-{name}"),
        markdown=f"# Report — {name}\n\n{md}\n\nFiles:\n\n- [CSV]({files.csv})\n"
        f"- [markdown]({files.markdown})\n- [plot (PNG)]({files.plot})\n",
    )
    return files


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
