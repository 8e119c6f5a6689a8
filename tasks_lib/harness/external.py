"""External agents in a research cell: an outside program run once in the sandbox, its model calls
through the run's model proxy (docs/agents.md).

The agent is a folder ``agents/<name>/`` (:class:`~tasks_lib.agents.ExternalConfig`: the command,
the models it may ask for, default caps). The harness runs the command once — no tool loop — in
the kit's sandbox (the public view, the workspace, the card's network), with the agent's folder
bound read-only at :data:`AGENT_DIR`, the brief at :data:`INPUT_DIR` and the run's proxy in
front (:func:`tasks_lib.proxy.proxied`). The agent's environment is the protocol's contract
(:func:`contract_env`). The run ends when the command exits or at its wall-clock cap (the process
tree is killed; what was written before counts); the proxy stops with it and its meter is the
run's turns, tokens and cost. The agent's output and the proxy's calls go into the trace.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from tasks_lib.agents import CONFIG_FILE, ExternalConfig, external_dir, load_external
from tasks_lib.domain import Frozen, RunStatus
from tasks_lib.errors import InputDataError
from tasks_lib.harness.agent_env import ENV_DIR, agent_env
from tasks_lib.harness.briefs import SUBMISSION_DIR, tier_section
from tasks_lib.harness.loop import LoopEnd, LoopLimits
from tasks_lib.harness.messages import ChatMessage, Role
from tasks_lib.harness.trace import EventKind, TraceRecorder
from tasks_lib.proxy import ProxyConfig, ProxyMeter, proxied, serve_proxy
from tasks_lib.proxy.sandbox import PROXY_PORT
from tasks_lib.sandbox.base import (
    SAFE_PATH,
    ContainerImage,
    ExecResult,
    Language,
    Mount,
    SandboxBackend,
    SandboxSpec,
    Violation,
    sandbox_env,
)
from tasks_lib.sandbox.isolation import scan_result, scan_workspace
from tasks_lib.sandbox.lease import Lease

if TYPE_CHECKING:
    from tasks_lib.harness.cell import CellPlan
    from tasks_lib.harness.environment import AgentSession

AGENT_DIR = "/agent"
"""Where the agent's folder appears inside the sandbox (read-only; the command runs there)."""
INPUT_DIR = "/run/medflows-agent"
"""Where the run's inputs for the agent (``brief.md``) appear inside the sandbox (read-only)."""
BRIEF = "brief.md"


class ExternalRun(Frozen):
    """How an external agent's run ended (the harness makes it the run's execution)."""

    status: RunStatus = Field(description="completed / timeout / partial / invalid / error.")
    end: LoopEnd | None = Field(description="submitted, timeout or terminated (None: the "
                                            "budget was spent or the command failed).")
    wall_time_s: float = Field(description="Wall time of the agent's command.")
    violations: list[Violation] = Field(description="Isolation violations observed.")
    error: str | None = Field(description="Why the run ended early, if it did.")
    meter: ProxyMeter = Field(description="The run's model-proxy meter.")

PROTOCOL = """## How this run works

You are run once as a program; there are no tools to call. Read the public files in
$MEDFLOWS_PUBLIC, work in $MEDFLOWS_WORKSPACE, and leave your submission in
$MEDFLOWS_SUBMISSION exactly as the brief's submission layout says; exit when done.
Models: ask $OPENAI_BASE_URL (OpenAI API) for model $MEDFLOWS_MODEL; there is no other network.
Budget: {budget_s} s wall time (the process tree is killed at the cap; files written before it
count){cost}."""


def contract_env(plan: CellPlan, alias: str, budget_s: float) -> dict[str, str]:
    """The protocol's environment (besides ``OPENAI_BASE_URL``/``OPENAI_API_KEY``, set by the
    proxy): where the brief, public files, workspace and submission are, the model alias to ask
    for and the provider model behind it (the proxy answers to either), the wall-clock budget
    in seconds, the step cap (a scaffold's own steps) and the cap per code execution, and the
    run's task, tier and id."""
    return {"MEDFLOWS_BRIEF": f"{INPUT_DIR}/{BRIEF}", "MEDFLOWS_PUBLIC": "/public",
            "MEDFLOWS_WORKSPACE": "/workspace", "MEDFLOWS_SUBMISSION": SUBMISSION_DIR,
            "MEDFLOWS_MODEL": alias, "MEDFLOWS_PROVIDER_MODEL": plan.agent.model,
            "MEDFLOWS_STAGE_URL": f"http://127.0.0.1:{PROXY_PORT}/v1/medflows/stage",
            "MEDFLOWS_BUDGET_S": str(int(budget_s)),
            "MEDFLOWS_MAX_STEPS": str(plan.limits.max_turns),
            "MEDFLOWS_EXEC_TIMEOUT_S": str(int(min(plan.limits.exec_timeout_s, budget_s))),
            "MEDFLOWS_TASK": plan.task_id, "MEDFLOWS_TIER": plan.tier.value,
            "MEDFLOWS_RUN_ID": plan.run_id}


def package_view(name: str, config: ExternalConfig, env: dict[str, str]
                 ) -> tuple[list[Mount], dict[str, str]]:
    """The agent's installed packages (:mod:`tasks_lib.harness.agent_env`) as a read-only mount
    at :data:`~tasks_lib.harness.agent_env.ENV_DIR`, first on ``PYTHONPATH`` and ``PATH``;
    nothing when the config lists none."""
    if config.packages is None:
        return [], {}
    folder = agent_env(name, config.packages)
    return [Mount(host=folder.resolve(), target=ENV_DIR)], {
        "PYTHONPATH": ENV_DIR, "PATH": f"{ENV_DIR}/bin:{env.get('PATH', SAFE_PATH)}"}


def external_image(name: str, backend: SandboxBackend) -> ContainerImage | None:
    """External agent ``name``'s own container image (None: it runs in medflows' environment).

    Raises:
        InputDataError: the agent has an image and the backend is not Docker, or its tarball
            is not in its folder.
    """
    image = load_external(name).image
    if image is None:
        return None
    config = str(external_dir(name) / CONFIG_FILE)
    if backend is not SandboxBackend.DOCKER:
        raise InputDataError(config, "image: an agent with its own container image runs on "
                                     "--sandbox docker")
    if image.tag is not None:
        return ContainerImage(tag=image.tag)
    path = external_dir(name) / str(image.tarball)
    if not path.is_file():
        raise InputDataError(config, f"image.tarball: no such file {path}")
    return ContainerImage(tarball=path.resolve())


def external_limits(name: str, limits: LoopLimits) -> LoopLimits:
    """A cell's caps for external agent ``name``: its config's wall-clock and cost caps where
    they are smaller (its ``max_steps`` is already the agent's ``max_turns``)."""
    budget = load_external(name).budget
    costs = [c for c in (limits.max_cost_usd, budget.max_cost_usd) if c is not None]
    wall = min(limits.wall_time_s, budget.wall_time_s or math.inf)
    return limits.model_copy(update={"wall_time_s": wall,
                                     "exec_timeout_s": min(limits.exec_timeout_s, wall),
                                     "max_cost_usd": min(costs) if costs else None})


def brief_text(plan: CellPlan, session: AgentSession, budget_s: float,
               max_cost_usd: float | None) -> str:
    """The agent's brief: the session's task brief, the tier's scaffolding, the protocol."""
    _, task = session.prompts()
    cost = "" if max_cost_usd is None else f"; model spend ≤ {max_cost_usd:g} USD"
    return (f"{task}\n\n{tier_section(plan.track.value, plan.tier)}\n\n"
            f"{PROTOCOL.format(budget_s=int(budget_s), cost=cost)}\n")


def _status(result: ExecResult, violations: list[Violation], meter: ProxyMeter
            ) -> tuple[RunStatus, LoopEnd | None, str | None]:
    """Status, end and error of a finished agent process."""
    if violations:
        return RunStatus.INVALID, LoopEnd.TERMINATED, None
    if result.timed_out:
        return RunStatus.TIMEOUT, LoopEnd.TIMEOUT, None
    if meter.budget_spent:
        return RunStatus.PARTIAL, None, "the run's model budget was spent"
    if result.exit_code != 0:
        return RunStatus.ERROR, None, f"agent exited with code {result.exit_code}"
    return RunStatus.COMPLETED, LoopEnd.SUBMITTED, None


def _record_calls(recorder: TraceRecorder, meter: ProxyMeter, models: dict[str, str]) -> None:
    """One ``model_turn`` event per call the agent made through the proxy (turn = its number;
    the meter logs the first ``MAX_CALLS``), a ``host`` event per stage the agent declared, one
    of the totals of each model, and the refusals."""
    for n, call in enumerate(meter.calls, 1):
        recorder.event(EventKind.MODEL_TURN, n, via="proxy",
                       provider_model=models.get(call.model), **call.model_dump())
    for mark in meter.stages:
        recorder.event(EventKind.HOST, len(meter.calls) or 1, via="proxy", stage=mark.stage,
                       at_s=mark.at_s)
    for alias, usage in meter.models.items():
        recorder.event(EventKind.HOST, len(meter.calls) or 1, proxy_model=alias,
                       **usage.model_dump())
    if meter.refused_model or meter.unauthorized or meter.rejected:
        recorder.event(EventKind.HOST, 1, proxy_refused_model=meter.refused_model,
                       proxy_unauthorized=meter.unauthorized, proxy_rejected=meter.rejected)


def _judge(result: ExecResult, spec: SandboxSpec, plan: CellPlan,
           recorder: TraceRecorder) -> list[Violation]:
    """Violations of the run, by effect (as the tool loop judges an execution)."""
    harmless = ("/public", "/tmp", "/usr", "/bin", "/lib", "/lib64", *spec.runtime)
    found = scan_result(result, spec) + scan_workspace(plan.workspace, harmless)
    for v in found:
        recorder.event(EventKind.VIOLATION, 1, violation=v.kind.value, source=v.source.value,
                       evidence=v.evidence)
    return found


def _run(plan: CellPlan, session: AgentSession, recorder: TraceRecorder, lease: Lease,
         sandbox_type: type, inputs: Path) -> ExternalRun:
    config = load_external(plan.agent.method or "")
    alias = str(plan.agent.params["model_alias"])
    budget_s = plan.limits.wall_time_s
    brief = brief_text(plan, session, budget_s, plan.limits.max_cost_usd)
    (inputs / BRIEF).write_text(brief, encoding="utf-8")
    (inputs / BRIEF).chmod(0o644)
    base = session.cell_sandbox()
    mounts, env = package_view(plan.agent.method or "", config, sandbox_env(base))
    spec = base.model_copy(update={
        "mounts": [*base.mounts, Mount(host=external_dir(plan.agent.method or "").resolve(),
                                       target=AGENT_DIR),
                   Mount(host=inputs, target=INPUT_DIR), *mounts],
        "env": {**base.env, **contract_env(plan, alias, budget_s), **env}})
    if plan.image is not None and config.image is not None:  # its own userland, not ours
        spec = spec.model_copy(update={"image": plan.image, "python": config.image.python,
                                       "runtime": []})
    proxy_config = ProxyConfig(models=config.models, max_cost_usd=plan.limits.max_cost_usd,
                               salt=f"replicate:{plan.replicate}" if plan.replicate else "")
    recorder.message(ChatMessage(role=Role.SYSTEM, at=time.time(), content=(
        f"External agent {plan.agent.method} (agents/{plan.agent.method}): "
        f"`{config.command}`, run once; models {', '.join(config.models)} via the model proxy.")))
    recorder.message(ChatMessage(role=Role.USER, content=brief, at=time.time()))
    recorder.event(EventKind.RUN_START, 0, model=plan.agent.model, agent=plan.agent.method,
                   command=config.command, budget_s=budget_s, image=plan.image_name)
    with serve_proxy(plan.run_id, proxy_config) as proxy:
        sandbox = sandbox_type(proxied(spec, proxy), lease=lease)
        try:
            result = sandbox.execute(Language.BASH, f"cd {AGENT_DIR} && {config.command}",
                                     budget_s)
        finally:
            sandbox.close()
    meter = proxy.meter()
    recorder.event(EventKind.TOOL_EXEC, 1, language="command", exit_code=result.exit_code,
                   timed_out=result.timed_out, duration_s=round(result.duration_s, 3),
                   monitored=result.monitored, limits_hit=",".join(result.limits_hit) or None)
    tail = " (killed at the time cap)" if result.timed_out else ""
    recorder.message(ChatMessage(role=Role.ASSISTANT, at=time.time(), content=(
        f"exit_code: {result.exit_code}{tail}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr}")))
    _record_calls(recorder, meter, config.models)
    violations = _judge(result, spec, plan, recorder)
    status, end, error = _status(result, violations, meter)
    recorder.event(EventKind.RUN_END, 1, end=end.value if end else status.value,
                   violations=len(violations))
    return ExternalRun(status=status, end=end, wall_time_s=result.duration_s,
                       violations=violations, error=error, meter=meter)


def run_external(plan: CellPlan, session: AgentSession, recorder: TraceRecorder, lease: Lease,
                 sandbox_type: type) -> ExternalRun:
    """Run the plan's external agent once, in a ``sandbox_type`` sandbox of the session's
    profile behind the run's model proxy (started and stopped here)."""
    with tempfile.TemporaryDirectory(prefix="medflows-agent-") as folder:
        inputs = Path(folder)
        inputs.chmod(0o755)  # a container's user may differ from ours
        return _run(plan, session, recorder, lease, sandbox_type, inputs)
