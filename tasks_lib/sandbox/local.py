"""The ``local`` backend: bubblewrap (``bwrap``) namespaces, the default on a laptop.

The root is an empty read-only tmpfs; only the system folders, the interpreter and the spec's
mounts are bound into it. All namespaces are unshared (``--unshare-net`` unless the policy allows
the network), capabilities are dropped, the environment is cleared and the code runs as an
unprivileged user in its own PID namespace, so killing ``bwrap`` kills the whole process tree.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tasks_lib.sandbox.base import (
    SAFE_PATH,
    ExecResult,
    Language,
    NetworkPolicy,
    SandboxSpec,
    clip,
    command,
)

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/etc/alternatives", "/etc/ssl")


class SandboxUnavailableError(RuntimeError):
    """The backend's program or daemon is missing on this machine."""


def bwrap_argv(spec: SandboxSpec) -> list[str]:
    """The ``bwrap`` options for ``spec`` (without the command)."""
    argv = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox"]
    if spec.network is NetworkPolicy.NONE:
        argv.append("--unshare-net")
    for folder in SYSTEM_DIRS:
        if Path(folder).is_symlink():
            argv += ["--symlink", os.readlink(folder), folder]
        elif Path(folder).exists():
            argv += ["--ro-bind", folder, folder]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for folder in spec.runtime:  # after /tmp: the runtime may live under it (a clone in /tmp)
        argv += ["--ro-bind", folder, folder]
    for mount in spec.mounts:
        argv += ["--bind" if mount.writable else "--ro-bind", str(mount.host), mount.target]
    argv += ["--remount-ro", "/", "--chdir", spec.workdir]
    env = {"PATH": f"{Path(spec.python).parent}:{SAFE_PATH}", "HOME": spec.workdir,
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "MPLCONFIGDIR": "/tmp", **spec.env}
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return argv


class BwrapSandbox:
    """A :class:`~tasks_lib.sandbox.base.Sandbox` built from bubblewrap namespaces."""

    def __init__(self, spec: SandboxSpec) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxUnavailableError("bwrap not found: install the Debian package bubblewrap")
        self.spec = spec
        self._prefix = bwrap_argv(spec)

    def execute(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run ``code``; at ``timeout_s`` the process group (and its PID namespace) is killed."""
        started = time.monotonic()
        proc = subprocess.Popen(
            [*self._prefix, *command(self.spec, language, code)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={"PATH": SAFE_PATH},
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return ExecResult(
            exit_code=-9 if timed_out else proc.returncode,
            stdout=clip(out.decode("utf-8", "replace")),
            stderr=clip(err.decode("utf-8", "replace")),
            timed_out=timed_out, duration_s=time.monotonic() - started,
        )

    def close(self) -> None:
        """Nothing persists between executions."""
