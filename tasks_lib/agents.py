"""The agent catalog: an agent is a harness + a model string + parameters (ARCHITECTURE §5.4).

Catalog entries live in ``datasets/agents.yaml``; replay agents for recorded predictions are made
on the fly by :func:`replay_agent`; external agents (an outside program run once in the sandbox,
its model calls through the run's model proxy) are the folders ``agents/<name>/`` of the
repository, catalog ids ``external:<name>@<model alias>`` (:func:`resolve_agent`; docs/agents.md).
A new harness adds one member to :class:`Harness` and one runner registered where that harness is
executed.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, model_validator

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
    EXTERNAL = "external"
    """An outside program from ``agents/<name>/`` run once in the sandbox behind the model proxy
    (``method`` = the folder name, ``params.model_alias`` = the model it is told to ask for)."""


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


EXTERNAL_PREFIX = "external:"
"""Catalog ids of external agents: ``external:<name>@<model alias>`` (the prefix keeps them apart
from the catalog's ``<model>@<method>`` ids)."""
CONFIG_FILE = "config.yaml"
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


class AgentBudget(Frozen):
    """An external agent's default caps (the cell's own limits apply when smaller)."""

    wall_time_s: float | None = Field(default=None, gt=0, description="Wall-clock cap of the "
                                      "run (None: the cell's time budget).")
    max_cost_usd: float | None = Field(default=None, gt=0, description="Model spend the proxy "
                                       "allows the run (None: no cap).")
    max_steps: int | None = Field(default=None, gt=0, description="The scaffold's own step "
                                  "count (AIDE: search steps), given as MEDFLOWS_MAX_STEPS "
                                  "(None: 30, the cell's default turn cap).")


class AgentPackages(Frozen):
    """Python packages an external agent needs beyond medflows' environment, installed once
    from the package index into a folder of their own (:mod:`tasks_lib.harness.agent_env`)."""

    pip: list[str] = Field(min_length=1, description="pip requirement lines, pinned "
                           "(``name==version``); installed with ``--no-deps`` unless ``deps``.")
    deps: bool = Field(default=False, description="Let pip resolve dependencies too (off by "
                       "default: list them, so a scaffold's own pins cannot replace medflows' "
                       "numpy, pandas or torch).")


class AgentImage(Frozen):
    """An external agent's own container image (``--sandbox docker`` only): the command runs
    in it instead of in medflows' environment (docs/agents.md)."""

    tag: str | None = Field(default=None, description="An image already in the Docker engine "
                            "(built or loaded there by the operator; nothing is pulled).")
    tarball: str | None = Field(default=None, description="A rootfs tarball, relative to the "
                                "agent's folder (e.g. from ``docker export``), imported once.")
    python: str = Field(default="/usr/bin/python3", description="The image's Python 3 (it runs "
                        "the model proxy's loopback forwarder; standard library only).")

    @model_validator(mode="after")
    def _one_source(self) -> AgentImage:
        if (self.tag is None) == (self.tarball is None):
            raise ValueError("image: give exactly one of 'tag' and 'tarball'")
        if self.tarball is not None and (self.tarball.startswith("/") or ".." in
                                         Path(self.tarball).parts):
            raise ValueError("image.tarball: a path inside the agent's folder")
        if not self.python.startswith("/"):
            raise ValueError("image.python: an absolute path inside the image")
        return self


class ExternalConfig(Frozen):
    """``agents/<name>/config.yaml``."""

    description: str = Field(default="", description="What the agent is (one line).")
    command: str = Field(min_length=1, description="Shell command run once inside the sandbox, "
                         "in the agent's folder (mounted read-only at /agent), e.g. "
                         "'python agent.py'.")
    models: dict[str, str] = Field(min_length=1, description="Model alias the agent may ask the "
                                   "proxy for → litellm provider model (the run's allow-list).")
    budget: AgentBudget = Field(default_factory=AgentBudget, description="Default caps.")
    packages: AgentPackages | None = Field(default=None, description="Packages to install for "
                                           "the agent (None: medflows' environment is enough).")
    image: AgentImage | None = Field(default=None, description="The agent's own container "
                                     "image (None: medflows' environment, on either sandbox).")

    @model_validator(mode="after")
    def _packages_or_image(self) -> ExternalConfig:
        if self.image is not None and self.packages is not None:
            raise ValueError("an agent with its own image carries its packages in it: "
                             "give 'image' or 'packages', not both")
        return self


def external_dir(name: str) -> Path:
    """The folder of external agent ``name`` (under the ``agents_dir`` setting)."""
    return get_settings().agents_dir / name


def external_names() -> list[str]:
    """Names of the external agents (folders of ``agents_dir`` holding a ``config.yaml``)."""
    return sorted(p.parent.name for p in get_settings().agents_dir.glob(f"*/{CONFIG_FILE}"))


def load_external(name: str) -> ExternalConfig:
    """The config of external agent ``name`` (``agents/<name>/config.yaml``)."""
    known = external_names()
    if not _NAME.fullmatch(name) or name not in known:
        raise InputDataError(f"{EXTERNAL_PREFIX}{name}", f"no such external agent; known: "
                                                         f"{', '.join(known) or 'none'}")
    path = external_dir(name) / CONFIG_FILE
    try:
        return ExternalConfig.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise InputDataError(str(path), f"cannot load external agent config: {exc}") from None


def external_agent(agent_id: str) -> AgentSpec:
    """The catalog entry of ``external:<name>@<alias>``: the agent told to ask the proxy for
    model ``alias`` (one of its config's ``models``), priced as the provider model behind it."""
    name, _, alias = agent_id.removeprefix(EXTERNAL_PREFIX).partition("@")
    config = load_external(name)
    if alias not in config.models:
        raise InputDataError(agent_id, f"give the model after '@', one of: "
                                       f"{', '.join(config.models)}")
    steps = {"max_turns": config.budget.max_steps} if config.budget.max_steps else {}
    return AgentSpec(agent_id=agent_id, harness=Harness.EXTERNAL, model=config.models[alias],
                     method=name, params={"model_alias": alias, **steps})


class CellAgent(Frozen):
    """One agent a research cell can run (``medflows run agents``)."""

    agent_id: str = Field(description="Id to pass as --agent.")
    harness: Harness = Field(description="tool_loop | scripted | external.")
    model: str = Field(description="Provider model (scripted: the script's name).")
    description: str = Field(default="", description="External agents: their config's line.")
    budget: dict[str, float] = Field(default_factory=dict, description="External agents: "
                                     "their config's caps.")
    packages: list[str] = Field(default_factory=list, description="External agents: the "
                                "packages installed for them.")


def cell_agents() -> list[CellAgent]:
    """The catalog's research-cell agents (tool loop, scripted) and every external agent
    once per model alias (``<name>@<alias>``)."""
    catalog = load_catalog()
    found = [CellAgent(agent_id=a.agent_id, harness=a.harness, model=a.model)
             for a in (catalog.get(n) for n in catalog.names())
             if a.harness in (Harness.TOOL_LOOP, Harness.SCRIPTED)]
    for name in external_names():
        config = load_external(name)
        budget = {k: v for k, v in config.budget.model_dump().items() if v is not None}
        found += [CellAgent(agent_id=f"{name}@{alias}", harness=Harness.EXTERNAL,
                            model=provider, description=config.description, budget=budget,
                            packages=config.packages.pip if config.packages else [])
                  for alias, provider in config.models.items()]
    return found


def resolve_agent(agent_id: str) -> AgentSpec:
    """The agent of a research cell: an external agent's id (``external:<name>@<alias>``, or
    ``<name>@<alias>`` when the catalog has no such id and ``<name>`` is an external agent, as
    in ``aide@gpt-4o-mini``), else a catalog entry."""
    if agent_id.startswith(EXTERNAL_PREFIX):
        return external_agent(agent_id)
    catalog = load_catalog()
    if agent_id not in catalog.names() and agent_id.partition("@")[0] in external_names():
        return external_agent(agent_id)
    return catalog.get(agent_id)
