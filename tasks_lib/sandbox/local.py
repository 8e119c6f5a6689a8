"""The ``local`` backend: bubblewrap (``bwrap``) namespaces, the default on a laptop.

The root is an empty read-only tmpfs; only the system folders, the interpreter and the spec's
mounts are bound into it. All namespaces are unshared (``--unshare-net`` unless the policy allows
the network; no nested user namespaces), capabilities are dropped, the environment is cleared
and the code runs as an unprivileged user in its own PID namespace, so killing ``bwrap`` kills
the whole process tree. Resource limits (:class:`~tasks_lib.sandbox.base.ResourceLimits`): a
cgroup when the host can create one, ``prlimit`` inside, a size-capped ``/tmp`` and a polled
disk quota; what the code did is observed by ``strace`` outside the namespaces
(:mod:`tasks_lib.sandbox.monitor`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tasks_lib.sandbox.base import (
    HOST_LIMITS,
    SAFE_PATH,
    CappedCapture,
    ExecResult,
    HostLimits,
    Language,
    NetworkPolicy,
    ResourceLimits,
    SandboxSpec,
    Source,
    Violation,
    ViolationKind,
    clip,
    command,
    hidden_runtime_dirs,
    sandbox_env,
)
from tasks_lib.sandbox.lease import Lease
from tasks_lib.sandbox.lifetime import die_with_parent
from tasks_lib.sandbox.limits import Cgroup, QuotaWatcher
from tasks_lib.sandbox.monitor import SyscallMonitor, strace_argv, strace_path

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/etc/alternatives", "/etc/ssl")


class SandboxUnavailableError(RuntimeError):
    """The backend's program or daemon is missing on this machine."""


def bwrap_argv(spec: SandboxSpec, extra: list[str] | None = None) -> list[str]:
    """The ``bwrap`` options for ``spec`` (without the command); ``extra`` options are added
    after the system folders (e.g. files bound into ``/etc``)."""
    argv = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox",
            "--disable-userns"]
    if spec.network is NetworkPolicy.NONE:
        argv.append("--unshare-net")
    for folder in SYSTEM_DIRS:
        if Path(folder).is_symlink():
            argv += ["--symlink", os.readlink(folder), folder]
        elif Path(folder).exists():
            argv += ["--ro-bind", folder, folder]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(spec.limits.tmp_mb * 2**20), "--tmpfs", "/tmp", *(extra or [])]
    for device in spec.devices:
        argv += ["--dev-bind", device, device]
    for folder in spec.runtime:  # after /tmp: the runtime may live under it (a clone in /tmp)
        argv += ["--ro-bind", folder, folder]
    for folder in hidden_runtime_dirs(spec.runtime):
        argv += ["--size", "4096", "--tmpfs", folder, "--remount-ro", folder]
    for mount in spec.mounts:
        argv += ["--bind" if mount.writable else "--ro-bind", str(mount.host), mount.target]
    argv += ["--remount-ro", "/", "--chdir", spec.workdir]
    env = sandbox_env(spec)
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return argv


def prlimit_argv(limits: ResourceLimits) -> list[str]:
    """``prlimit`` run *inside* the namespaces (so the process count is the sandbox's own):
    address space, processes, CPU time, file size, open files; no core dumps."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        return []
    cap = limits.memory_mb * 2**20
    return [prlimit, f"--as={cap}", f"--nproc={limits.pids}", f"--cpu={limits.cpu_s}",
            f"--fsize={limits.file_mb * 2**20}", f"--nofile={limits.nofile}", "--core=0", "--"]


HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
"""Name files inside: the sandbox resolves its own name and localhost without a DNS query."""


def etc_files() -> Path:
    """A fresh temporary folder holding the sandbox's ``/etc`` name files (the caller removes
    it): hosts, nsswitch.conf, passwd, group."""
    folder = Path(tempfile.mkdtemp(prefix="medflows-etc-"))
    files = {"hosts": HOSTS, "nsswitch.conf": NSSWITCH,
             "passwd": "sandbox:x:1000:1000::/workspace:/bin/sh\n", "group": "sandbox:x:1000:\n"}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
        os.chmod(folder / name, 0o444)
    os.chmod(folder, 0o755)
    return folder


class BwrapSandbox:
    """A :class:`~tasks_lib.sandbox.base.Sandbox` built from bubblewrap namespaces.

    Each execution: [die-with-parent] → [cgroup] → [strace, outside the namespaces] → bwrap →
    prlimit → command, in a session of its own; stdout/stderr are drained into capped buffers,
    the writable mounts' disk use is polled. The session, cgroup and ``/etc`` folder are held on
    ``lease`` (the cell's, else one of the sandbox's own) until released.
    """

    def __init__(self, spec: SandboxSpec, host: HostLimits = HOST_LIMITS,
                 monitor: bool = True, lease: Lease | None = None) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxUnavailableError("bwrap not found: install the Debian package bubblewrap")
        if spec.image is not None:
            raise SandboxUnavailableError("a sandbox with its own container image needs the "
                                          "docker backend (--sandbox docker)")
        self.spec, self.host = spec, host
        self.strace = strace_path() if monitor else None
        self._etc = etc_files()
        self._own_lease = lease is None
        self.lease = lease if lease is not None else Lease("sandbox")
        self.lease.add_scratch(self._etc)
        extra: list[str] = []
        for path in sorted(self._etc.iterdir()):
            extra += ["--ro-bind", str(path), f"/etc/{path.name}"]
        self._prefix = bwrap_argv(spec, extra)

    def _argv(self, language: Language, code: str, monitor: SyscallMonitor | None,
              cgroup: Cgroup | None) -> list[str]:
        argv = [*self._prefix, *prlimit_argv(self.spec.limits), *command(self.spec, language, code)]
        if monitor is not None and self.strace is not None:
            argv = [*strace_argv(self.strace, monitor.write_fd), *argv]
        if cgroup is not None:
            argv = [*cgroup.enter_argv(), *argv]
        return die_with_parent(argv)

    def _spawn(self, argv: list[str], monitor: SyscallMonitor | None,
               cgroup: Cgroup | None) -> subprocess.Popen[bytes]:
        """Start the execution in a session of its own and record it on the lease."""
        if cgroup is not None:
            self.lease.add_cgroups(list(cgroup.dirs.values()))
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, env={"PATH": SAFE_PATH},
                pass_fds=(monitor.write_fd,) if monitor is not None else ())
        except BaseException:
            self._close_cgroup(cgroup)
            raise
        self.lease.add_group(proc.pid)
        return proc

    def _close_cgroup(self, cgroup: Cgroup | None) -> list[int]:
        if cgroup is None or not any(d.is_dir() for d in cgroup.dirs.values()):
            return []
        left = cgroup.close()
        self.lease.drop_cgroups(list(cgroup.dirs.values()))
        return left

    def execute(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run ``code``; at ``timeout_s`` (or past the disk quota) the process group and its
        PID namespace are killed, and so they are on every other way out of this call."""
        started = time.monotonic()
        monitor = SyscallMonitor(self.spec, self.host) if self.strace else None
        cgroup = Cgroup.create(self.spec.limits)
        proc = self._spawn(self._argv(language, code, monitor, cgroup), monitor, cgroup)
        try:
            if monitor is not None:
                monitor.start()
            return self._wait(proc, monitor, cgroup, timeout_s, started)
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            self.lease.drop_group(proc.pid)
            self._close_cgroup(cgroup)

    def _wait(self, proc: subprocess.Popen[bytes], monitor: SyscallMonitor | None,
              cgroup: Cgroup | None, timeout_s: float, started: float) -> ExecResult:
        out, err = CappedCapture(self.host.output_chars), CappedCapture(self.host.output_chars)
        readers = [threading.Thread(target=c.drain, args=(s,), daemon=True)
                   for c, s in ((out, proc.stdout), (err, proc.stderr))]
        for reader in readers:
            reader.start()

        def kill(_reason: str = "") -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        writable = [m.host for m in self.spec.mounts if m.writable]
        quota = QuotaWatcher(writable, self.spec.limits, kill, self.host)
        quota.start()
        timed_out = False
        try:
            proc.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            kill()
            proc.wait()
        finally:
            over = quota.stop()
        for reader in readers:
            reader.join(10)
        observed = monitor.finish() if monitor is not None else []
        hit = cgroup.limits_hit() if cgroup is not None else []
        if timed_out and cgroup is not None:
            cgroup.drain(2.0)  # killed by us: what dies with the namespace did not outlive it
        left = self._close_cgroup(cgroup)
        if left:
            observed.append(Violation(kind=ViolationKind.PROCESS_LEFT, source=Source.SANDBOX,
                                      evidence=f"{len(left)} processes outlived the sandbox"))
        if over is not None:
            hit.append("disk")
            observed.append(Violation(kind=ViolationKind.RESOURCE_LIMIT, source=Source.SANDBOX,
                                      evidence=over))
        return ExecResult(
            exit_code=-9 if timed_out else proc.returncode,
            stdout=clip(out.text(), self.host.output_chars),
            stderr=clip(err.text(), self.host.output_chars),
            timed_out=timed_out, duration_s=time.monotonic() - started,
            observed=observed, monitored=monitor is not None, limits_hit=hit)

    def close(self) -> None:
        """Remove the sandbox's name files (nothing else persists between executions) and
        release the sandbox's own lease."""
        shutil.rmtree(self._etc, ignore_errors=True)
        self.lease.drop_scratch(self._etc)
        if self._own_lease:
            self.lease.release()
