"""Choosing which agents and runs a flow works on (catalog ids, replay groups, ledger)."""

from __future__ import annotations

from prefect import task

from evaluators.core import InputDataError
from tasks_lib.agents import AgentSpec, load_catalog, replay_agent
from tasks_lib.qa.predictions import load_predictions


@task(name="plan-agents")
def plan_agents(agents: list[str], replay: str | None, replay_models: list[str] | None,
                replay_methods: list[str] | None) -> list[AgentSpec]:
    """Catalog agents by id, plus one replay agent per (model, method) group of ``replay``."""
    catalog = load_catalog()
    specs = [catalog.get(a) for a in agents]
    if replay:
        frame = load_predictions(replay, replay_models)
        groups = frame[["model", "method"]].drop_duplicates()
        if replay_methods:
            groups = groups[groups["method"].isin(replay_methods)]
        specs += [replay_agent(m, me, replay) for m, me in
                  sorted(zip(groups["model"], groups["method"], strict=True))]
    if not specs:
        raise InputDataError("agents", "none given: name catalog agents or a predictions file "
                                       "to replay")
    return specs


def qa_time_budget(datasets: list[str]) -> int:
    """Wall-time budget of a run on a pool: the largest budget of its dataset cards."""
    from tasks_lib.domain import Track
    from tasks_lib.taskspec import load_card

    return max((load_card(Track.QA, ds).time_budget_s for ds in datasets), default=3600)
