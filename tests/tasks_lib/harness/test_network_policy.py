"""The agent sandbox takes its network policy from the task card (default: no network)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cells import file_env

from tasks_lib.domain import Tier
from tasks_lib.harness.cell import CellPlan, cell_environment, plan_cell
from tasks_lib.sandbox.base import NetworkPolicy, SandboxBackend, SandboxSpec
from tasks_lib.sandbox.local import bwrap_argv
from tasks_lib.settings import get_settings, reset_settings


def agent_sandbox(plan: CellPlan) -> SandboxSpec:
    """The agent's sandbox profile in the plan's environment (its card read now)."""
    with cell_environment(plan).session(plan) as session:
        return session.sandbox()


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    reset_settings()
    yield
    reset_settings()


def test_agent_network_follows_the_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        fresh_settings: None) -> None:
    plan = plan_cell("scripted-baseline", file_env("brain-tissue-seg", tmp_path / "pool", 60),
                     Tier.LITE, SandboxBackend.LOCAL, 0, "rules")
    default = agent_sandbox(plan)
    assert default.network is NetworkPolicy.NONE
    assert "--unshare-net" in bwrap_argv(default)

    datasets = tmp_path / "datasets"
    shutil.copytree(get_settings().datasets_dir, datasets)
    card = datasets / "segmentation" / "brain-tissue-seg" / "task.yaml"
    card.write_text(card.read_text() + "network: host\n")
    monkeypatch.setenv("MEDFLOWS_DATASETS_DIR", str(datasets))
    reset_settings()
    opened = agent_sandbox(plan)
    assert opened.network is NetworkPolicy.HOST
    assert "--unshare-net" not in bwrap_argv(opened)
