"""The sandbox protocol shared by the bubblewrap and Docker backends.

A sandbox is described by a :class:`SandboxSpec` (mounts, network policy, limits) and executes
code through :meth:`Sandbox.execute`. Both backends present the same paths inside:

* agent profile: ``/public`` (read-only public view), ``/workspace`` (writable, fresh per
  replicate); private references are never mounted;
* evaluator profile: ``/private`` (read-only references), ``/submission`` (read-only), ``/output``
  (writable score card); the network is always off.
"""

from __future__ import annotations

import site
import sys
from enum import StrEnum
from pathlib import Path
from typing import IO, Protocol

from pydantic import Field, model_validator

from tasks_lib.domain import Frozen
from tasks_lib.sandbox.backends import SandboxBackend as SandboxBackend


class Language(StrEnum):
    """Languages the ``execute_code`` tool accepts."""

    PYTHON = "python"
    BASH = "bash"


class NetworkPolicy(StrEnum):
    """Whether the sandbox may reach any network."""

    NONE = "none"
    HOST = "host"


class ResourceLimits(Frozen):
    """What one sandboxed execution may consume; both backends enforce the same numbers.

    Docker: ``mem_limit``, ``pids_limit``, ``ulimits`` (cpu, fsize, nofile), a ``size=`` tmpfs
    on ``/tmp``. bubblewrap: a cgroup (memory, pids) when the host can create one, ``prlimit``
    inside the namespaces (address space, processes, CPU time, file size, open files), a
    ``--size`` tmpfs on ``/tmp``. Both: the writable mounts' disk use is polled during the
    execution and the process tree is killed past ``workspace_mb``.
    """

    memory_mb: int = Field(default=2048, gt=0, description="Memory of the process tree (cgroup; "
                                                           "address space per process under "
                                                           "prlimit).")
    pids: int = Field(default=256, gt=0, description="Processes and threads at once.")
    cpu_s: int = Field(default=1200, gt=0, description="CPU seconds per process.")
    file_mb: int = Field(default=1024, gt=0, description="Largest file a process may write.")
    nofile: int = Field(default=4096, gt=0, description="Open files per process.")
    tmp_mb: int = Field(default=512, gt=0, description="Size of the RAM-backed /tmp.")
    workspace_mb: int = Field(default=4096, gt=0, description="Disk quota of the writable mounts "
                                                              "(blocks actually used).")
    quota_poll_s: float = Field(default=1.0, gt=0, description="Disk-quota polling interval.")


class HostLimits(Frozen):
    """What the host reads from a sandbox's output, workspace or submission: every read is
    streamed or capped by these numbers (an agent cannot make the host allocate more)."""

    output_chars: int = Field(default=20_000, gt=0, description="Characters of stdout/stderr "
                                                                "kept per execution (head + tail;"
                                                                " the rest is streamed past).")
    walk_depth: int = Field(default=64, gt=0, description="Deepest folder level the host walks "
                                                          "in a workspace or submission.")
    walk_entries: int = Field(default=100_000, gt=0, description="Files and folders the host "
                                                                 "lists in one walk.")
    listed_files: int = Field(default=10_000, gt=0, description="Paths kept in workspace.json.")
    plan_bytes: int = Field(default=64 * 1024, gt=0, description="Bytes of plan.md copied into "
                                                                 "the trace.")
    submission_file_bytes: int = Field(default=512 * 2**20, gt=0,
                                       description="Largest submission file the host copies.")
    submission_bytes: int = Field(default=4 * 2**30, gt=0,
                                  description="Total bytes of a copied submission.")
    monitor_findings: int = Field(default=200, gt=0, description="Observed breach attempts kept "
                                                                 "per execution.")


HOST_LIMITS = HostLimits()
"""The host's read limits (one place; tests may pass their own)."""


class ViolationKind(StrEnum):
    """What a breach attempt tried to do."""

    READ_FORBIDDEN = "read_forbidden"
    PATH_ESCAPE = "path_escape"
    PROC_ACCESS = "proc_access"
    SECRET_ENV = "secret_env"
    WRITE_OUTSIDE = "write_outside"
    NETWORK = "network"
    SANDBOX_ESCAPE = "sandbox_escape"
    SYMLINK_ESCAPE = "symlink_escape"
    PROCESS_LEFT = "process_left"
    MONITOR_LOST = "monitor_lost"
    RESOURCE_LIMIT = "resource_limit"
    DATABASE_ACCESS = "database_access"
    """A study-database request its role was refused (RWE: another schema or role, server
    files, a privileged login), seen in the database server's log."""


class Source(StrEnum):
    """Where a violation was seen."""

    TRACE = "trace"
    SANDBOX = "sandbox"


class Violation(Frozen):
    """One detected breach attempt (or a host limit the agent's files crossed)."""

    kind: ViolationKind = Field(description="What was attempted.")
    source: Source = Field(description="Seen in the code (trace) or in the sandbox's behaviour.")
    evidence: str = Field(description="The matching text or path (secrets never included).")


class Mount(Frozen):
    """A host folder visible inside the sandbox."""

    host: Path = Field(description="Absolute host path.")
    target: str = Field(description="Absolute path inside the sandbox.")
    writable: bool = Field(default=False, description="Read-write (else read-only).")


class ContainerImage(Frozen):
    """A container image of the agent's own (Docker backend only): its userland replaces the
    host's system folders and interpreter, which are then not bound in."""

    tag: str | None = Field(default=None, description="An image already in the Docker engine "
                            "(e.g. built by the operator with ``docker build -t``).")
    tarball: Path | None = Field(default=None, description="A rootfs tarball imported once as "
                                 "``medflows-agent:<digest>`` (``docker import``; nothing can "
                                 "be pulled).")

    @model_validator(mode="after")
    def _one_source(self) -> ContainerImage:
        if (self.tag is None) == (self.tarball is None):
            raise ValueError("give exactly one of 'tag' and 'tarball'")
        return self


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
    limits: ResourceLimits = Field(default_factory=ResourceLimits,
                                   description="Resource limits of each execution.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment (no secrets).")
    launcher: list[str] = Field(
        default_factory=list, description="argv run inside, in front of every command, that "
        "ends by exec'ing it (e.g. the model proxy's loopback forwarder, tasks_lib.proxy).")
    devices: list[str] = Field(default_factory=list, description="Host device files passed "
                               "through at the same path (GPUs: tasks_lib.sandbox.devices).")
    image: ContainerImage | None = Field(default=None, description="The agent's own container "
                                         "image (Docker only; None: medflows' skeleton image "
                                         "with the host's system folders and ``runtime`` bound "
                                         "read-only). ``python`` is then the image's own.")


class ExecResult(Frozen):
    """Outcome of one code execution."""

    exit_code: int = Field(description="Process exit code (-9 when killed at the time cap).")
    stdout: str = Field(description="Captured standard output (truncated).")
    stderr: str = Field(description="Captured standard error (truncated).")
    timed_out: bool = Field(description="The process tree was killed at the time cap.")
    duration_s: float = Field(description="Wall time of the execution.")
    observed: list[Violation] = Field(
        default_factory=list, description="Breach attempts the sandbox observed (syscall "
                                          "monitor, leftover processes, disk quota).")
    monitored: bool = Field(default=False, description="A syscall monitor watched the run "
                                                       "(network, file and escape attempts).")
    limits_hit: list[str] = Field(default_factory=list, description="Resource limits the "
                                                                    "execution reached.")


class Sandbox(Protocol):
    """One live sandbox; ``execute`` may be called many times, then ``close`` once."""

    spec: SandboxSpec

    def execute(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run ``code`` inside; kill the whole process tree after ``timeout_s``."""
        ...

    def close(self) -> None:
        """Release the sandbox (idempotent)."""
        ...


MAX_OUTPUT = HOST_LIMITS.output_chars
"""Characters of stdout/stderr kept per execution."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def sandbox_env(spec: SandboxSpec) -> dict[str, str]:
    """The whole environment inside (both backends; nothing inherited from the host). Tools
    that would phone home on their own (pip's version check, the Hugging Face hub) are told not
    to, so an honest command never makes a network attempt it did not ask for."""
    return {"PATH": f"{Path(spec.python).parent}:{SAFE_PATH}", "HOME": spec.workdir,
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": "/tmp", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
            "HF_HUB_OFFLINE": "1", **spec.env}


def runtime_dirs() -> list[str]:
    """Host folders holding this interpreter and its packages (bound read-only)."""
    dirs = {str(Path(sys.prefix).resolve()), str(Path(sys.base_prefix).resolve())}
    return sorted(d for d in dirs if not d.startswith("/usr"))


def hidden_runtime_dirs(runtime: list[str]) -> list[str]:
    """Folders inside the bound ``runtime`` that this interpreter never reads, covered inside by
    an empty read-only tmpfs: a virtual environment's base interpreter's own site-packages
    (``include-system-site-packages = false``; 51k files of other projects' packages on a
    development machine), which code inside could otherwise read and walk."""
    on_path = {str(Path(p).resolve()) for p in sys.path if p}
    inside = [str(Path(p).resolve()) for p in site.getsitepackages([sys.base_prefix])]
    return sorted(d for d in inside if d not in on_path and Path(d).is_dir()
                  and any(d.startswith(r.rstrip("/") + "/") for r in runtime))


def clip(text: str, cap: int = MAX_OUTPUT) -> str:
    """Keep the head and tail of long output."""
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}\n...[{len(text) - cap} characters truncated]...\n{text[-half:]}"


class CappedCapture:
    """Drains a byte stream keeping only its head and tail (``cap`` bytes in all): the host's
    memory stays bounded however much the sandbox writes.

    Args:
        cap: bytes kept (half from the start, half from the end).
    """

    def __init__(self, cap: int = MAX_OUTPUT) -> None:
        self.half = max((cap - 100) // 2, 1)  # room for the truncation note within ``cap``
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Account one chunk."""
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def drain(self, stream: IO[bytes], chunk: int = 65536) -> None:
        """Read ``stream`` to its end (run in a thread per stream)."""
        while True:
            data = stream.read1(chunk) if hasattr(stream, "read1") else stream.read(chunk)
            if not data:
                return
            self.feed(data)

    def text(self) -> str:
        """Head and tail as text, with the number of bytes streamed past between them."""
        head = self.head.decode("utf-8", "replace")
        skipped = self.total - len(self.head) - len(self.tail)
        if not self.tail:
            return head
        tail = self.tail.decode("utf-8", "replace")
        if skipped <= 0:
            return head + tail
        return f"{head}\n...[{skipped} bytes truncated]...\n{tail}"


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
    """argv that runs ``code`` with the sandbox's interpreter or shell (behind the spec's
    launcher, if any)."""
    if language is Language.PYTHON:
        return [*spec.launcher, spec.python, "-c", code]
    return [*spec.launcher, "/bin/bash", "-c", code]
