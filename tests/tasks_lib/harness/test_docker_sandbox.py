"""Real containers: the Docker backend runs code, enforces caps and blocks breach attempts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tasks_lib.sandbox.base import Language, agent_spec
from tasks_lib.sandbox.devices import lend
from tasks_lib.sandbox.docker_backend import DockerSandbox

pytestmark = pytest.mark.slow
DEVICE = "/dev/loop-control"
"""A host device a container does not get unless it is passed through."""


def test_container_runs_code_with_mounts_and_kills_at_cap(docker_env: str,
                                                          tmp_path: Path) -> None:
    (tmp_path / "public").mkdir()
    (tmp_path / "workspace").mkdir()
    (tmp_path / "private").mkdir()
    (tmp_path / "public" / "in.txt").write_text("hello")
    (tmp_path / "private" / "secret.txt").write_text("CANARY")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "weights.txt").write_text("w1")
    # what the host lends research cells: the model cache (read-only) and devices
    sandbox = DockerSandbox(lend(agent_spec(tmp_path / "public", tmp_path / "workspace",
                                            [str(tmp_path / "private")]),
                                 tmp_path / "cache", [DEVICE]))
    try:
        ok = sandbox.execute(Language.PYTHON, "import numpy, os\n"
                             "print(open('/public/in.txt').read(), os.getuid())\n"
                             "open('/workspace/out.txt', 'w').write('done')", 60)
        assert (ok.exit_code, ok.stdout) == (0, "hello 1000\n"), ok.stderr
        assert (tmp_path / "workspace" / "out.txt").read_text() == "done"
        leak = sandbox.execute(Language.BASH, f"cat {tmp_path}/private/secret.txt; "
                               "echo x > /public/y; echo x > /etc/y", 30)
        assert "CANARY" not in leak.stdout and leak.exit_code != 0
        assert "Read-only file system" in leak.stderr
        assert not (tmp_path / "public" / "y").exists()
        net = sandbox.execute(Language.PYTHON, "import socket\n"
                              "socket.create_connection(('1.1.1.1', 53), timeout=3)", 30)
        assert "Network is unreachable" in net.stderr
        slow = sandbox.execute(Language.BASH, "echo early > /workspace/early; sleep 30 & "
                               "sleep 30; echo late > /workspace/late", 2)
        assert slow.timed_out and slow.duration_s < 15
        assert (tmp_path / "workspace" / "early").exists()
        assert not (tmp_path / "workspace" / "late").exists()
        # background processes end with the command (as in bwrap's PID namespace)
        left = sandbox.execute(Language.BASH, "sleep 60 & echo started", 60)
        assert left.stdout == "started\n" and left.duration_s < 15 and not left.timed_out
        assert sandbox.execute(Language.BASH, "pgrep -c sleep || true", 30).stdout == "1\n"
        # monitored by effect: the network attempt is observed, not read from the code
        assert net.monitored and [v.kind.value for v in net.observed] == ["network"]
        lent = sandbox.execute(Language.BASH, f"cat /cache/weights.txt; echo; echo $HF_HOME; "
                               f"test -e {DEVICE} && echo dev; echo x > /cache/new", 30)
        assert lent.stdout == "w1\n/cache/huggingface\ndev\n" and lent.exit_code != 0
        assert not (tmp_path / "cache" / "new").exists()
    finally:
        sandbox.close()


def test_docker_cells_agent_and_evaluator_in_containers(docker_env: str, prefect_harness: None,
                                                        seg_pool: Path) -> None:
    from flows.execute import run_cell
    from tasks_lib.settings import reset_settings

    reset_settings()
    good = run_cell(agent_id="scripted-baseline", task_id="brain-tissue-seg", tier="lite",
                    sandbox="docker", judge_model="rules")
    assert good.status.value == "completed", good
    assert good.stages.s4 == 1.0 and good.stages.s5 == 1.0
    assert good.task_score is not None and 0.6 < good.task_score < 0.95
    bad = run_cell(agent_id="scripted-breach", task_id="brain-tissue-seg", tier="lite",
                   sandbox="docker", judge_model="rules")
    assert bad.status.value == "invalid"
    assert set(bad.stages.model_dump().values()) == {0.0} and bad.overall == 0.0


class _Ran(NamedTuple):
    plan: Any
    execution: Any
    record: Any
    provider: Any


def _external_on_docker(agent_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        key: str) -> _Ran:
    """``agent_id`` on ldct-iqa's pool in a Docker cell, the test server as its provider (one
    reply: "Copy the sample."), the provider key ``key``; the run record is made."""
    from support.cells import file_env
    from support.openai_server import FakeOpenAIServer

    from tasks_lib.challenge.pool import publish_challenge_pool
    from tasks_lib.domain import Tier
    from tasks_lib.harness.cell import execute_cell, plan_cell
    from tasks_lib.harness.record import run_record
    from tasks_lib.sandbox.base import SandboxBackend
    from tasks_lib.settings import reset_settings

    url, _ = publish_challenge_pool("ldct-iqa", str(tmp_path / "pool"))
    env = file_env("ldct-iqa", Path(url), 120)
    with FakeOpenAIServer(lambda body: "Copy the sample.") as provider:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", provider.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", key)
        reset_settings()
        try:
            plan = plan_cell(agent_id, env, Tier.LITE, SandboxBackend.DOCKER, 0, "rules")
            execution = execute_cell(plan, env)
        finally:
            reset_settings()
    return _Ran(plan, execution, run_record(plan, execution, env.pool()), provider)


def test_an_external_agent_runs_in_a_container_behind_the_proxy(
        docker_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agents/example-llm on ``--sandbox docker``: the proxy is served on the container's own
    loopback, the one model call reaches the provider with the operator's key, the run's
    meter counts it, and the sample submission it copied is scored."""
    from tasks_lib.domain import RunStatus
    from tasks_lib.harness.rescore import score_cell

    key = "sk-docker-external-0123456789abcdef"
    ran = _external_on_docker("example-llm@gpt-4o-mini", tmp_path, monkeypatch, key)
    assert (ran.execution.status, ran.execution.violations) == (RunStatus.COMPLETED, []), \
        ran.execution.error
    assert len(ran.provider.requests) == 1
    headers = {k.lower(): v for k, v in ran.provider.headers[0].items()}
    assert headers["authorization"] == f"Bearer {key}"
    record = ran.record
    assert record.turns == 1 and record.cost_usd and record.sandbox == "docker"
    said = (ran.plan.trace_dir / "conversation.json").read_text()
    assert "submitted: ['submission.csv']" in said
    assert score_cell(record, ran.plan.submission).metrics == {"score": 0.0}


IMAGE_AGENT = '''"""An agent in its own image: standard library only (the image has no openai)."""
import json, os, shutil, sys, urllib.request
import json
from pathlib import Path

print("python:", sys.executable, sys.version.split()[0])
print("marker:", Path("/opt/agent-image/release.txt").read_text().strip())
print("medflows env:", "present" if Path(sys.argv[1]).exists() else "absent")
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", method="POST",
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"},
    data=json.dumps({"model": os.environ["MEDFLOWS_MODEL"],
                     "messages": [{"role": "user", "content": "plan?"}]}).encode())
with urllib.request.urlopen(request, timeout=60) as reply:
    print("model:", json.load(reply)["choices"][0]["message"]["content"])
shutil.copytree(Path(os.environ["MEDFLOWS_PUBLIC"]) / "sample_submission",
                os.environ["MEDFLOWS_SUBMISSION"], dirs_exist_ok=True)
'''


def test_an_external_agent_runs_in_its_own_image_behind_the_proxy(
        docker_env: str, agents_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent folder with ``image: {tarball: …}``: the tarball is imported once, the command
    runs on the image's own userland (its python, its files; medflows' environment is not
    there), the proxy is reached through the image's python, and the run is metered, recorded
    with its image and scored."""
    import sys

    from support.agent_image import MARKER_TEXT, PYTHON, agent_rootfs

    from tasks_lib.domain import RunStatus
    from tasks_lib.harness.rescore import score_cell
    from tasks_lib.sandbox.docker_backend import client

    folder = agents_dir / "own-image"
    folder.mkdir()
    agent_rootfs(folder / "rootfs.tar")
    (folder / "agent.py").write_text(IMAGE_AGENT)
    (folder / "config.yaml").write_text(
        f"command: python3 agent.py {sys.prefix}\nmodels:\n  gpt-4o-mini: openai/gpt-4o-mini\n"
        "image:\n  tarball: rootfs.tar\n")
    ran = _external_on_docker("own-image@gpt-4o-mini", tmp_path, monkeypatch,
                              "sk-own-image-0123456789abcdef")
    execution, record = ran.execution, ran.record
    said = (ran.plan.trace_dir / "conversation.json").read_text()
    assert (execution.status, execution.violations) == (RunStatus.COMPLETED, []), \
        ([v.evidence for v in execution.violations], execution.error,
         json.loads(said)["messages"][-1]["content"])
    assert f"python: {PYTHON}" in said or "python: /usr/bin/python3" in said, said
    assert f"marker: {MARKER_TEXT.strip()}" in said and "medflows env: absent" in said
    assert "model: Copy the sample." in said and len(ran.provider.requests) == 1
    assert record.image is not None and record.image.startswith("medflows-agent:")
    assert client().images.get(record.image).tags == [record.image]
    assert record.turns == 1 and record.cost_usd and record.sandbox == "docker"
    assert score_cell(record, ran.plan.submission).metrics == {"score": 0.0}
