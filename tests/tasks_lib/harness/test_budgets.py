"""Compute caps of research cells: the card's per-tier budgets, the agent's own steps, the run's
caps (``run cell --max-cost-usd/--max-steps/--wall-time-s``) and an external agent's config,
folded in that order into the plan's limits, which the run record keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.domain import Tier
from tasks_lib.errors import InputDataError
from tasks_lib.harness.environment import Environment
from tasks_lib.harness.loop import LoopLimits
from tasks_lib.taskspec import Budget
from tasks_lib.tracks.base import find_card

TOOLS = AgentSpec(agent_id="gpt-4o-mini@tools", harness=Harness.TOOL_LOOP,
                  model="openai/gpt-4o-mini")


def _env(tmp_path: Path) -> Environment:
    card = find_card("ldct-iqa").model_copy(update={
        "time_budget_s": 86400,
        "budgets": {Tier.LITE: Budget(wall_time_s=3600, max_steps=20),
                    Tier.PRO: Budget(max_steps=200, max_cost_usd=10.0)}})
    return Environment(card, tmp_path)


def _caps(limits: LoopLimits) -> tuple[int, float, float, float | None]:
    return limits.max_turns, limits.wall_time_s, limits.exec_timeout_s, limits.max_cost_usd


def test_tier_budgets_agent_steps_and_run_caps_fold_in_order(tmp_path: Path) -> None:
    env = _env(tmp_path)
    # no budget for the tier: the card's 24 h, 30 turns, no cost cap
    assert _caps(env.limits(TOOLS, Tier.STANDARD)) == (30, 86400, 600, None)
    # the tier's budget replaces what it names
    assert _caps(env.limits(TOOLS, Tier.LITE)) == (20, 3600, 600, None)
    assert _caps(env.limits(TOOLS, Tier.PRO)) == (200, 86400, 600, 10.0)
    # the agent's own steps beat the tier's; the run's caps beat both
    capped = TOOLS.model_copy(update={"params": {"max_turns": 12}})
    assert _caps(env.limits(capped, Tier.PRO)) == (12, 86400, 600, 10.0)
    run = Budget(max_steps=5, max_cost_usd=0.5, wall_time_s=90)
    assert _caps(env.limits(capped, Tier.PRO, run)) == (5, 90, 90, 0.5)
    assert LoopLimits(max_turns=5, wall_time_s=90, exec_timeout_s=90,
                      max_cost_usd=0.5).recorded() == {
        "wall_time_s": 90, "max_steps": 5, "exec_timeout_s": 90, "max_cost_usd": 0.5}


def test_a_card_budget_is_validated() -> None:
    with pytest.raises(ValueError, match="less than or equal"):
        Budget(wall_time_s=8 * 86400)
    with pytest.raises(ValueError, match="greater than 0"):
        Budget(max_cost_usd=0)


def test_a_cost_cap_needs_a_priced_model(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.harness.cell import plan_cell
    from tasks_lib.sandbox.base import SandboxBackend
    from tasks_lib.settings import reset_settings

    prices = tmp_path / "prices.yaml"
    prices.write_text('as_of: "2026-01-01"\nsource: test\nmodels:\n'
                      '  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10.0}\n')
    monkeypatch.setenv("MEDFLOWS_PRICE_SNAPSHOT", str(prices))
    reset_settings()
    try:
        env = _env(tmp_path)
        plan_cell("gpt-4o@tools", env, Tier.PRO, SandboxBackend.LOCAL, 0, "rules")
        with pytest.raises(InputDataError, match="a cost cap needs a price for gpt-4o-mini"):
            plan_cell("gpt-4o-mini@tools", env, Tier.PRO, SandboxBackend.LOCAL, 0, "rules")
        plan_cell("gpt-4o-mini@tools", env, Tier.LITE, SandboxBackend.LOCAL, 0, "rules")
    finally:
        monkeypatch.delenv("MEDFLOWS_PRICE_SNAPSHOT")
        reset_settings()


def test_an_external_agents_config_caps_apply_when_smaller(
        tmp_path: Path, agents_dir: Path) -> None:
    from tasks_lib.harness.cell import plan_cell
    from tasks_lib.sandbox.base import SandboxBackend

    (agents_dir / "capped").mkdir()
    (agents_dir / "capped" / "config.yaml").write_text(
        "command: 'true'\nmodels: {m: openai/gpt-4o-mini}\n"
        "budget: {wall_time_s: 600, max_cost_usd: 2.0, max_steps: 7}\n")
    env = _env(tmp_path)
    plan = plan_cell("capped@m", env, Tier.PRO, SandboxBackend.LOCAL, 0, "rules")
    assert _caps(plan.limits) == (7, 600, 600, 2.0)
    cheaper = plan_cell("capped@m", env, Tier.PRO, SandboxBackend.LOCAL, 0, "rules",
                        Budget(max_cost_usd=0.25, max_steps=3, wall_time_s=60))
    assert _caps(cheaper.limits) == (3, 60, 60, 0.25)
