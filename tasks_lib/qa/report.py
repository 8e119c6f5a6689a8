"""QA leaderboard: macro Pass@1 per (model, method), cost, time, Pareto frontier, plot."""

from __future__ import annotations

import io

import pandas as pd
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from pydantic import Field

from evaluators.pareto import pareto_frontier
from tasks_lib.artifacts import artifact_key
from tasks_lib.domain import Frozen
from tasks_lib.qa.run_steps import QARun
from tasks_lib.qa.scoring import QAScoreCard
from tasks_lib.storage import Storage


class LeaderboardRow(Frozen):
    """One (model, method) on the leaderboard."""

    rank: int = Field(description="1 = best macro accuracy.")
    agent_id: str = Field(description="Agent id.")
    model: str = Field(description="Model.")
    method: str = Field(description="Reasoning method.")
    accuracy_macro: float = Field(description="Mean over datasets of Pass@1 (missing = wrong).")
    per_dataset: dict[str, float] = Field(description="Pass@1 per dataset.")
    coverage: float = Field(description="Answered / pool items.")
    total_cost_usd: float | None = Field(description="Total cost (None = unknown).")
    cost_per_item_usd: float | None = Field(description="Cost per answered item.")
    mean_time_s: float | None = Field(description="Mean seconds per item.")
    pareto: bool = Field(description="On the cost–accuracy Pareto frontier.")


class ReportFiles(Frozen):
    """Where the report was written."""

    csv: str = Field(description="leaderboard.csv URL.")
    markdown: str = Field(description="leaderboard.md URL.")
    plot: str = Field(description="cost_accuracy.png URL.")


def leaderboard(runs: list[QARun], cards: list[QAScoreCard]) -> list[LeaderboardRow]:
    """Join runs and score cards; rank by macro accuracy, flag the Pareto frontier."""
    by_run = {c.run_id: c for c in cards}
    pairs = [(r, by_run[r.run_id]) for r in runs]
    per_item = [r.cost_usd / r.n_answered if r.cost_usd is not None and r.n_answered else None
                for r, _ in pairs]
    front = pareto_frontier(per_item, [c.accuracy_macro for _, c in pairs])
    rows = [
        LeaderboardRow(
            rank=0, agent_id=r.agent.agent_id, model=r.agent.model, method=r.agent.method or "",
            accuracy_macro=c.accuracy_macro,
            per_dataset={ds: s.accuracy for ds, s in sorted(c.per_dataset.items())},
            coverage=c.coverage, total_cost_usd=r.cost_usd, cost_per_item_usd=cpi,
            mean_time_s=r.mean_time_s, pareto=p)
        for (r, c), cpi, p in zip(pairs, per_item, front, strict=True)
    ]
    rows.sort(key=lambda row: (-row.accuracy_macro, row.agent_id))
    return [row.model_copy(update={"rank": i}) for i, row in enumerate(rows, start=1)]


def to_frame(rows: list[LeaderboardRow]) -> pd.DataFrame:
    """Flat table: one column per dataset."""
    records = []
    for r in rows:
        rec = r.model_dump(exclude={"per_dataset"})
        rec.update({f"acc_{ds}": v for ds, v in r.per_dataset.items()})
        records.append(rec)
    return pd.DataFrame.from_records(records)


def to_markdown(rows: list[LeaderboardRow]) -> str:
    """A readable leaderboard table."""
    head = "| # | model | method | macro acc | coverage | cost/item (USD) | s/item | Pareto |\n"
    head += "|---:|---|---|---:|---:|---:|---:|:---:|\n"
    lines = [
        f"| {r.rank} | {r.model} | {r.method} | {100 * r.accuracy_macro:.1f}% | "
        f"{100 * r.coverage:.0f}% | "
        f"{'n/a' if r.cost_per_item_usd is None else f'{r.cost_per_item_usd:.5f}'} | "
        f"{'n/a' if r.mean_time_s is None else f'{r.mean_time_s:.1f}'} | "
        f"{'★' if r.pareto else ''} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def plot_png(rows: list[LeaderboardRow], title: str) -> bytes:
    """Accuracy vs cost per item (log x), frontier drawn; rows without cost are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costed = [(r.cost_per_item_usd, r) for r in rows if r.cost_per_item_usd]
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    ax.scatter([c for c, _ in costed], [100 * r.accuracy_macro for _, r in costed],
               c=["tab:red" if r.pareto else "tab:blue" for _, r in costed], s=28)
    for cost, r in costed:
        ax.annotate(f"{r.model}/{r.method}", (cost, 100 * r.accuracy_macro),
                    fontsize=6, xytext=(3, 2), textcoords="offset points")
    front = sorted((c, r.accuracy_macro) for c, r in costed if r.pareto)
    ax.plot([c for c, _ in front], [100 * a for _, a in front],
            color="tab:red", linewidth=1, label="Pareto frontier")
    ax.set_xscale("log")
    ax.set_xlabel("cost per item (USD, log scale)")
    ax.set_ylabel("macro Pass@1 (%)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


@task(name="publish-leaderboard", task_run_name="publish-leaderboard-{name}")
def publish_leaderboard(runs: list[QARun], cards: list[QAScoreCard], name: str
                        ) -> list[LeaderboardRow]:
    """The leaderboard of the scored runs as a Prefect table artifact."""
    rows = leaderboard(runs, cards)
    create_table_artifact(
        key=artifact_key(f"leaderboard-{name}"),
        table=[r.model_dump(exclude={"per_dataset"}) for r in rows],
        description=f"Leaderboard of {name} (macro Pass@1, cost, Pareto frontier)",
    )
    return rows


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
