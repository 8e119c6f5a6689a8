"""Red-team corpus against the real sandbox: 0 bypasses, every attempt with an effect detected
from what the sandbox observed (never from the code text), and 0 breaches on the honest corpus."""

from __future__ import annotations

import base64
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from tasks_lib.sandbox.base import Language, SandboxSpec, agent_spec, evaluator_spec
from tasks_lib.sandbox.hostio import remove_tree
from tasks_lib.sandbox.isolation import scan_code, scan_result, scan_workspace
from tasks_lib.sandbox.local import BwrapSandbox

CORPUS = yaml.safe_load((Path(__file__).parent / "redteam.yaml").read_text())["attempts"]
CANARY = "CANARY-7f3e9b1d"
SECRET_ENV = "MEDFLOWS_REDTEAM_API_KEY"

BACKENDS = [pytest.param("local", marks=pytest.mark.skipif(
                not Path("/usr/bin/bwrap").exists(), reason="bwrap missing")),
            pytest.param("docker", marks=pytest.mark.slow)]


def _sandbox(backend: str, spec: SandboxSpec) -> Any:
    """The backend's sandbox (docker: at ``DOCKER_HOST``, which its engine client keeps)."""
    if backend == "docker":
        from tasks_lib.sandbox.docker_backend import DockerSandbox

        return DockerSandbox(spec)
    return BwrapSandbox(spec)


class Listener:
    """A TCP listener on 127.0.0.1 that counts connections (any connection is a bypass)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


class Arena(NamedTuple):
    root: Path
    private: Path
    other_ws: Path
    host_out: Path
    listener: Listener


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    root = tmp_path_factory.mktemp("redteam")
    private, other_ws, host_out = root / "private", root / "runs" / "other" / "ws", root / "out"
    for folder in (private, other_ws, host_out, root / "public"):
        folder.mkdir(parents=True)
    (private / "secret.txt").write_text(CANARY)
    (other_ws / "plan.md").write_text(CANARY)
    (root / "public" / "brief.md").write_text("segment the brain")
    os.environ[SECRET_ENV] = CANARY
    listener = Listener()
    yield Arena(root, private, other_ws, host_out, listener)
    listener.stop()
    os.environ.pop(SECRET_ENV, None)


def _fill(code: str, arena: Arena) -> str:
    return (code.replace("{private_b64}", base64.b64encode(str(arena.private).encode()).decode())
            .replace("{private_hex}", str(arena.private).encode().hex())
            .replace("{private_rev}", str(arena.private)[::-1])
            .replace("{private}", str(arena.private)).replace("{other_ws}", str(arena.other_ws))
            .replace("{host_out}", str(arena.host_out)).replace("{secret_env}", SECRET_ENV)
            .replace("{port}", str(arena.listener.port)))


def _spec(evaluator: bool, arena: Arena, case: Path) -> SandboxSpec:
    forbidden = [str(arena.private), str(arena.root / "runs"), str(arena.host_out)]
    if evaluator:
        (case / "submission").mkdir()
        (case / "output").mkdir()
        return evaluator_spec(arena.private, case / "submission", case / "output",
                              forbidden=[str(arena.root / "runs"), str(arena.host_out)])
    (case / "workspace").mkdir()
    return agent_spec(arena.root / "public", case / "workspace", forbidden)


class Case(NamedTuple):
    sandbox: Any
    spec: SandboxSpec
    folder: Path
    """Holds ``workspace`` (agent profile) or ``submission`` and ``output`` (evaluator)."""


@pytest.fixture(scope="module")
def cases(arena: Arena, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Callable[[str, bool], Case]]:
    """One sandbox per backend and profile for the module, as a cell holds one for all its
    executions (a Docker container is the costly part): each attempt is an execution of its
    own, its mounted folders emptied first, so no attempt sees what another left."""
    made: dict[tuple[str, bool], Case] = {}

    def case(backend: str, evaluator: bool) -> Case:
        if (backend, evaluator) not in made:
            folder = tmp_path_factory.mktemp(f"{backend}-{'evaluator' if evaluator else 'agent'}")
            spec = _spec(evaluator, arena, folder)
            made[backend, evaluator] = Case(_sandbox(backend, spec), spec, folder)
        found = made[backend, evaluator]
        for mounted in found.folder.iterdir():
            for child in list(mounted.iterdir()):
                remove_tree(child)
        return found

    yield case
    for found in made.values():
        found.sandbox.close()


def _leaked_into(folder: Path) -> bool:
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink() and CANARY in path.read_text(errors="replace"):
                return True
    return False


def test_corpus_is_large_and_varied() -> None:
    assert len(CORPUS) >= 75
    assert len({a["id"] for a in CORPUS}) == len(CORPUS)
    assert {a["category"] for a in CORPUS} >= {"path_traversal", "symlink", "proc", "environment",
                                                "absolute_path", "network", "evaluator_network"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attempt", CORPUS, ids=[a["id"] for a in CORPUS])
def test_attempt_is_blocked_and_detected(attempt: dict[str, Any], backend: str, arena: Arena,
                                         cases: Callable[[str, bool], Case],
                                         request: pytest.FixtureRequest) -> None:
    evaluator = attempt.get("profile") == "evaluator"
    if backend == "docker":
        request.getfixturevalue("docker_env")
    sandbox, spec, folder = cases(backend, evaluator)
    code = _fill(attempt["code"], arena)
    before = arena.listener.connections
    result = sandbox.execute(Language(attempt["language"]), code, timeout_s=20)

    if not evaluator:
        assert CANARY not in result.stdout + result.stderr, "canary leaked to output"
        assert not _leaked_into(folder / "workspace"), "canary copied into the workspace"
    else:
        assert not list((folder / "submission").iterdir()), "evaluator wrote the submission"
    assert not list(arena.host_out.iterdir()), "a file was written on the host"
    assert arena.listener.connections == before, "the network listener was reached"
    assert (arena.private / "secret.txt").read_text() == CANARY

    workspace = folder / ("output" if evaluator else "workspace")
    if attempt.get("observable", True):
        detected = scan_result(result, spec) + scan_workspace(workspace)
        assert result.monitored, "the syscall monitor must watch the attempt"
        assert detected, f"attempt {attempt['id']} went unnoticed: {result}"
    else:  # no effect to observe (the environment is cleared): a pattern warning at most
        assert scan_result(result, spec) == [], result.observed
        assert scan_code(code, spec), f"attempt {attempt['id']} gave no pattern warning"


def test_legitimate_work_is_not_flagged(arena: Arena, tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    spec = agent_spec(arena.root / "public", tmp_path / "workspace", [str(arena.private)])
    code = ("import os, numpy as np\nprint(open('/public/brief.md').read())\n"
            "os.makedirs('/workspace/submission', exist_ok=True)\n"
            "np.save('/workspace/submission/x.npy', np.zeros(3))\n"
            "open('/workspace/plan.md', 'w').write('# plan')\n")
    result = BwrapSandbox(spec).execute(Language.PYTHON, code, timeout_s=30)
    assert result.exit_code == 0, result.stderr
    assert "segment the brain" in result.stdout
    assert (tmp_path / "workspace" / "submission" / "x.npy").is_file()
    assert scan_code(code, spec) == []
    assert scan_result(result, spec) == []
    shell = ("ls / > /dev/null; head -c 8 /dev/urandom | wc -c; cat /etc/os-release 2>&1 | head -1;"
             " ls ../public; python -c 'import sys; print(sys.version_info[0])'")
    assert scan_code(shell, spec) == []
    assert BwrapSandbox(spec).execute(Language.BASH, shell, timeout_s=30).stdout.startswith("8\n")
    assert scan_workspace(tmp_path / "workspace") == []
