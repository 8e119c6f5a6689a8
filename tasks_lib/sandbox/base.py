"""The sandbox protocol shared by the bubblewrap and Docker backends.

A sandbox is described by a :class:`SandboxSpec` (mounts, network policy, limits) and executes
code through :meth:`Sandbox.execute`. Both backends present the same paths inside:

* agent profile: ``/public`` (read-only public view), ``/workspace`` (writable, fresh per
  replicate); private references are never mounted;
* evaluator profile: ``/private`` (read-only references), ``/submission`` (read-only), ``/output``
  (writable score card); the network is always off.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from pydantic import Field

from tasks_lib.domain import Frozen


class Language(StrEnum):
    """Languages the ``execute_code`` tool accepts."""

    PYTHON = "python"
    BASH = "bash"


class NetworkPolicy(StrEnum):
    """Whether the sandbox may reach any network."""

    NONE = "none"
    HOST = "host"


class SandboxBackend(StrEnum):
    """Available sandbox implementations."""

    LOCAL = "local"
    DOCKER = "docker"


class Mount(Frozen):
    """A host folder visible inside the sandbox."""

    host: Path = Field(description="Absolute host path.")
    target: str = Field(description="Absolute path inside the sandbox.")
    writable: bool = Field(default=False, description="Read-write (else read-only).")


class SandboxSpec(Frozen):
    """Everything a backend needs to build one sandbox."""

    mounts: list[Mount] = Field(description="Folders visible inside (workspace, public view...).")
    workdir: str = Field(description="Working directory inside the sandbox.")
    network: NetworkPolicy = Field(default=NetworkPolicy.NONE, description="Network policy.")
    forbidden: list[str] = Field(
        default_factory=list,
        description="Host paths the code must never touch (private references, other runs).",
    )
    runtime: list[str] = Field(
        default_factory=list,
        description="Host folders bound read-only at the same path (interpreter, libraries).",
    )
    python: str = Field(default=sys.executable, description="Interpreter path inside.")
    memory_mb: int = Field(default=2048, gt=0, description="Memory limit (Docker backend).")
    pids_limit: int = Field(default=256, gt=0, description="Process limit (Docker backend).")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment (no secrets).")


class ExecResult(Frozen):
    """Outcome of one code execution."""

    exit_code: int = Field(description="Process exit code (-9 when killed at the time cap).")
    stdout: str = Field(description="Captured standard output (truncated).")
    stderr: str = Field(description="Captured standard error (truncated).")
    timed_out: bool = Field(description="The process tree was killed at the time cap.")
    duration_s: float = Field(description="Wall time of the execution.")


class Sandbox(Protocol):
    """One live sandbox; ``execute`` may be called many times, then ``close`` once."""

    spec: SandboxSpec

    def execute(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run ``code`` inside; kill the whole process tree after ``timeout_s``."""
        ...

    def close(self) -> None:
        """Release the sandbox (idempotent)."""
        ...


MAX_OUTPUT = 20_000
"""Characters of stdout/stderr kept per execution."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def runtime_dirs() -> list[str]:
    """Host folders holding this interpreter and its packages (bound read-only)."""
    dirs = {str(Path(sys.prefix).resolve()), str(Path(sys.base_prefix).resolve())}
    return sorted(d for d in dirs if not d.startswith("/usr"))


def clip(text: str) -> str:
    """Keep the head and tail of long output."""
    if len(text) <= MAX_OUTPUT:
        return text
    half = MAX_OUTPUT // 2
    return f"{text[:half]}\n...[{len(text) - MAX_OUTPUT} characters truncated]...\n{text[-half:]}"


def agent_spec(public: Path, workspace: Path, forbidden: list[str],
               network: NetworkPolicy = NetworkPolicy.NONE) -> SandboxSpec:
    """The agent profile: read-only public view, writable workspace, nothing private."""
    return SandboxSpec(
        mounts=[Mount(host=public.resolve(), target="/public"),
                Mount(host=workspace.resolve(), target="/workspace", writable=True)],
        workdir="/workspace", network=network, forbidden=forbidden, runtime=runtime_dirs(),
    )


def evaluator_spec(private: Path, submission: Path, output: Path,
                   forbidden: list[str]) -> SandboxSpec:
    """The evaluator profile: references and submission read-only, network always off."""
    return SandboxSpec(
        mounts=[Mount(host=private.resolve(), target="/private"),
                Mount(host=submission.resolve(), target="/submission"),
                Mount(host=output.resolve(), target="/output", writable=True)],
        workdir="/output", network=NetworkPolicy.NONE, forbidden=forbidden,
        runtime=runtime_dirs(),
    )


def command(spec: SandboxSpec, language: Language, code: str) -> list[str]:
    """argv that runs ``code`` with the sandbox's interpreter or shell."""
    if language is Language.PYTHON:
        return [spec.python, "-c", code]
    return ["/bin/bash", "-c", code]
