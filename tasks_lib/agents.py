"""The agent catalog: an agent is a harness + a model string + parameters (ARCHITECTURE §5.4).

Catalog entries live in ``datasets/agents.yaml``; replay agents for recorded predictions are made
on the fly by :func:`replay_agent`. A new harness adds one member to :class:`Harness` and one
runner registered where that harness is executed.
"""

from __future__ import annotations

from enum import StrEnum

import yaml
from pydantic import Field, ValidationError

from evaluators.registry import Registry
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.settings import get_settings


class Harness(StrEnum):
    """How an agent is executed."""

    QA_METHOD = "qa_method"
    QA_REPLAY = "qa_replay"
    TOOL_LOOP = "tool_loop"
    """A litellm tool-calling research agent in a sandbox (``tasks_lib.harness``)."""
    SCRIPTED = "scripted"
    """An offline scripted research agent; ``method`` names the script (baseline, breach)."""
    UPLOAD = "upload"
    """A submission folder handed in as it is (scored like any run; no agent was executed)."""


class AgentSpec(Frozen):
    """One catalog entry."""

    agent_id: str = Field(description="Unique id, e.g. 'gpt-4o@cot'.")
    harness: Harness = Field(description="Runner that executes the agent.")
    model: str = Field(description="litellm model string (or the recorded model name).")
    method: str | None = Field(default=None, description="Reasoning method (QA harnesses).")
    params: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Harness parameters (api_base, predictions file...)."
    )


class AgentCatalog(Frozen):
    """The catalog file."""

    agents: list[AgentSpec] = Field(description="Catalog entries.")


def load_catalog() -> Registry[AgentSpec]:
    """Agents of ``datasets/agents.yaml`` as a registry."""
    path = get_settings().datasets_dir / "agents.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        catalog = AgentCatalog.model_validate(raw)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise InputDataError(str(path), f"cannot load agent catalog: {exc}") from None
    registry: Registry[AgentSpec] = Registry("agent")
    for agent in catalog.agents:
        registry.add(agent.agent_id, agent)
    return registry


def replay_agent(model: str, method: str, predictions: str) -> AgentSpec:
    """An agent that answers from a recorded predictions file (reproduces published results)."""
    return AgentSpec(agent_id=f"replay:{model}@{method}", harness=Harness.QA_REPLAY, model=model,
                     method=method, params={"predictions": predictions})


def upload_agent(name: str) -> AgentSpec:
    """The agent of a submission folder handed in directly (``medflows score submission``)."""
    return AgentSpec(agent_id=f"upload:{name}", harness=Harness.UPLOAD, model="upload")
