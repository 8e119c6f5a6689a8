"""The agent sandbox takes its network policy from the task card (default: no network)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.domain import Tier, Track
from tasks_lib.harness.cell import agent_sandbox, plan_cell
from tasks_lib.sandbox.base import NetworkPolicy, SandboxBackend
from tasks_lib.sandbox.local import bwrap_argv
from tasks_lib.settings import get_settings, reset_settings


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    reset_settings()
    yield
    reset_settings()


def test_agent_network_follows_the_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        fresh_settings: None) -> None:
    plan = plan_cell("scripted-baseline", "brain-tissue-seg", Track.SEGMENTATION, Tier.LITE,
                     SandboxBackend.LOCAL, 0, tmp_path / "pool", "rules", 60)
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
