"""What a sandboxed execution *did*: the breach attempts observed.

* :class:`SyscallMonitor` — ``strace`` runs **outside** the sandbox (the sandboxed code can
  neither see nor signal it) and streams the network, file and namespace system calls of the
  whole process tree through a pipe to the host, which parses them line by line (bounded
  memory, nothing on disk). :func:`judge` turns a call into a
  :class:`~tasks_lib.sandbox.base.Violation` only when its *effect* is a breach attempt: a
  connection the namespace refuses, a path outside the allowed binds that names the private
  references or another run, a write outside the writable mounts, a namespace/mount/ptrace
  call. What the code looks like never matters.

The resource limits (cgroup, disk quota) are :mod:`tasks_lib.sandbox.limits`.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import posixpath
import re
import shutil
import subprocess
import threading
from typing import IO

from tasks_lib.sandbox.base import (
    HOST_LIMITS,
    HostLimits,
    NetworkPolicy,
    SandboxSpec,
    Source,
    Violation,
    ViolationKind,
)

NETWORK_CALLS = ("connect", "sendto", "sendmsg", "sendmmsg", "listen", "bind")
PATH_READS = ("open", "openat", "openat2", "creat", "stat", "lstat", "newfstatat", "statx",
              "access", "faccessat", "faccessat2", "readlink", "readlinkat", "execve",
              "execveat", "chdir")
PATH_WRITES = ("mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "rename", "renameat",
               "renameat2", "link", "linkat", "symlink", "symlinkat", "truncate", "chmod",
               "fchmodat", "chown", "fchownat", "lchown", "mknod", "mknodat")
ESCAPE_CALLS = ("mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "ptrace", "bpf",
                "open_by_handle_at", "init_module", "finit_module", "kexec_load", "move_mount",
                "fsopen", "open_tree")
PROCESS_CALLS = ("clone", "clone3", "fork", "vfork")
FD_RELATIVE = frozenset({"openat", "openat2", "newfstatat", "statx", "faccessat", "faccessat2",
                         "readlinkat", "execveat", "mkdirat", "unlinkat", "renameat",
                         "renameat2", "linkat", "symlinkat", "fchmodat", "fchownat", "mknodat"})
"""Calls whose relative paths are resolved against a folder descriptor (AT_FDCWD = the cwd)."""
TRACED = NETWORK_CALLS + PATH_READS + PATH_WRITES + ESCAPE_CALLS + PROCESS_CALLS

EVALUATOR_MOUNTS = ("/private", "/pool", "/submission", "/output")
"""Mount points of the other profile: reaching for them when they are absent is an attempt."""
ALWAYS_WRITABLE = ("/tmp", "/dev/null", "/dev/zero", "/dev/full", "/dev/stdout", "/dev/stderr",
                   "/dev/tty", "/dev/shm", "/dev/fd", "/dev/pts", "/proc/self/fd",
                   "/proc/thread-self/fd")
_WRITE_FLAGS = re.compile(r"\bO_(WRONLY|RDWR|CREAT|TRUNC|APPEND)\b")
_LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")
_RESULT = re.compile(r"\)\s+=\s+(-?\d+|\?)(?:\s+(E[A-Z0-9]+))?")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_PROC = re.compile(r"^/proc/\d+/(environ|root|cwd|mem|fd|map_files|maps|fdinfo|exe)(/|$)")
_FAST_READ = re.compile(r'^\d+ +(?:open|openat|stat|lstat|newfstatat|statx|access|faccessat2?'
                        r'|readlink|readlinkat)\((?:AT_FDCWD, |-?\d+, )?"/')
_INET = re.compile(r'sa_family=AF_INET6?,\s*sin6?_port=htons\((\d+)\).*?'
                   r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6?,\s*"([^"]+)")')
_UNIX = re.compile(r'sa_family=AF_UNIX,\s*sun_path="([^"]*)"')


@functools.cache
def strace_path() -> str | None:
    """The host's ``strace`` (Debian package ``strace``) if it can trace here, else None
    (probed once per process: some hosts forbid ``ptrace``)."""
    found = shutil.which("strace")
    if found is None:
        return None
    try:
        probe = subprocess.run([found, "-f", "-qq", "-o", "/dev/null", "/bin/true"],
                               capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found if probe.returncode == 0 else None


def strace_argv(strace: str, fd: int, attach: int | None = None) -> list[str]:
    """``strace`` options: follow forks, only the judged calls, stream to file descriptor
    ``fd`` (a pipe the host reads); ``attach``: trace that running process (else the command
    that follows)."""
    mode = ["-p", str(attach)] if attach is not None else ["--seccomp-bpf"]
    return [strace, "-f", "-qq", *mode, "-e", "signal=none",
            "-e", "trace=" + ",".join(f"?{c}" for c in TRACED), "-o", f"/dev/fd/{fd}"]


def _unescape(text: str) -> str:
    return re.sub(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", _escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    code = match.group(1)
    if code.startswith("x"):
        return chr(int(code[1:], 16))
    if code.isdigit():
        return chr(int(code, 8))
    return {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f"}.get(code, code)


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class _Call:
    """One completed system call of the trace."""

    def __init__(self, pid: int, name: str, args: str) -> None:
        self.pid, self.name, self.args = pid, name, args
        found = _RESULT.search(args)
        self.ret = None if found is None else found.group(1)
        self.errno = None if found is None else found.group(2)
        self.strings = [_unescape(s) for s in _STRING.findall(args)]

    @property
    def ok(self) -> bool:
        return self.ret is not None and self.ret != "?" and not self.ret.startswith("-")


class CallJudge:
    """Judges one execution's system calls against a sandbox spec (stateful: working folder
    per process, servers started inside)."""

    def __init__(self, spec: SandboxSpec, limits: HostLimits = HOST_LIMITS,
                 skip_execs: int = 2) -> None:
        self.spec, self.limits, self.skip_execs = spec, limits, skip_execs
        self.mounted = tuple(m.target for m in spec.mounts)
        self.writable = tuple(m.target for m in spec.mounts if m.writable) + ALWAYS_WRITABLE
        self.absent = tuple(p for p in EVALUATOR_MOUNTS if p not in self.mounted)
        self.markers = (*[f for f in spec.forbidden if f], *(f'"{p}' for p in self.absent),
                        "/proc/", "O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "docker.sock",
                        "containerd", "<unfinished", "resumed>", "/..", "\\")
        self.cwd: dict[int, str] = {}
        self.listening = False
        self.bound: set[int] = set()
        """Ports bound inside: a loopback connection to another one reaches for the host's
        services (0: the kernel chose a port, so any may be served inside)."""
        self.execs = 0
        self.pending: dict[int, str] = {}
        self.found: list[Violation] = []
        self._seen: set[tuple[str, str]] = set()
        self.lines = 0

    # -- parsing -------------------------------------------------------------------------
    def feed_line(self, line: str) -> None:
        """Parse one line of ``strace -f`` output (unfinished/resumed pairs joined)."""
        self.lines += 1
        if self.execs >= self.skip_execs and _FAST_READ.match(line) \
                and not any(marker in line for marker in self.markers):
            return  # a plain read of an absolute path that names nothing sensitive
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            return
        pid, resumed, name, rest = int(match.group(1)), match.group(2), match.group(3), \
            match.group(4)
        if resumed is not None:
            head = self.pending.pop(pid, None)
            if head is None:
                return
            name, rest = head.split("(", 1)[0], head.split("(", 1)[1] + rest
        if rest.endswith("<unfinished ...>"):
            self.pending[pid] = f"{name}({rest[: -len('<unfinished ...>')]}"
            return
        self.on_call(_Call(pid, name or "", rest))

    # -- judging -------------------------------------------------------------------------
    def on_call(self, call: _Call) -> None:
        """Track state and record a violation when the call's effect is a breach attempt."""
        if call.name in ("execve", "execveat") and call.ok:
            self.execs += 1
        if self.execs < self.skip_execs:  # bwrap's own set-up before the command runs
            return
        cwd = self.cwd.get(call.pid, self.spec.workdir)
        if call.name in PROCESS_CALLS and call.ok and call.ret is not None:
            self.cwd[int(call.ret)] = cwd
            return
        if call.name == "chdir" and call.ok and call.strings:
            self.cwd[call.pid] = self._resolve(call.strings[0], cwd)
            return
        if call.name in ESCAPE_CALLS:
            self._add(ViolationKind.SANDBOX_ESCAPE, f"{call.name}() -> {call.errno or call.ret}")
            return
        if call.name in NETWORK_CALLS:
            self._network(call)
            return
        self._paths(call, cwd)

    def _resolve(self, path: str, cwd: str) -> str:
        return posixpath.normpath(path if path.startswith("/") else posixpath.join(cwd, path))

    def _roles(self, call: _Call) -> list[tuple[str, bool]]:
        """(path, written?) for the call's path arguments."""
        paths = call.strings
        if call.name in ("execve", "execveat", "chdir") or call.name in PATH_READS[4:]:
            return [(paths[0], False)] if paths else []
        if call.name in ("open", "openat", "openat2", "creat"):
            writes = call.name == "creat" or bool(_WRITE_FLAGS.search(call.args))
            return [(paths[0], writes)] if paths else []
        if call.name in ("symlink", "symlinkat"):
            return [(p, i == 1) for i, p in enumerate(paths[:2])]
        if call.name.startswith("link"):
            return [(p, i == 1) for i, p in enumerate(paths[:2])]
        if call.name.startswith("rename"):
            return [(p, True) for p in paths[:2]]
        return [(paths[0], True)] if paths else []

    def _paths(self, call: _Call, cwd: str) -> None:
        fd_relative = call.name in FD_RELATIVE
        resolvable = not fd_relative or "AT_FDCWD" in call.args
        for raw, written in self._roles(call):
            if not raw.startswith("/") and not resolvable:
                if written and call.errno in ("EROFS", "EACCES", "EPERM"):
                    self._add(ViolationKind.WRITE_OUTSIDE, f"{call.name}({raw}) -> {call.errno}")
                    return
                continue
            resolved = self._resolve(raw, cwd)
            kind = self._read_kind(raw, resolved)
            if kind is not None:
                self._add(kind, resolved)
                return
            # ENOENT: the folder does not exist in the sandbox, nothing was reached (libraries
            # probe for cache folders such as /var/cache/fontconfig this way)
            if written and not _inside(resolved, self.writable) and call.errno != "ENOENT":
                self._add(ViolationKind.WRITE_OUTSIDE, f"{resolved} -> {call.errno or 'ok'}")
                return

    def _read_kind(self, raw: str, resolved: str) -> ViolationKind | None:
        for forbidden in self.spec.forbidden:
            if forbidden and (forbidden in raw or forbidden in resolved):
                return ViolationKind.READ_FORBIDDEN
        if _PROC.match(resolved):
            return ViolationKind.PROC_ACCESS
        if _inside(resolved, self.absent):
            return ViolationKind.READ_FORBIDDEN
        if "docker.sock" in resolved or "containerd" in resolved:
            return ViolationKind.SANDBOX_ESCAPE
        return None

    def _network(self, call: _Call) -> None:
        if call.name == "listen":
            self.listening = True
            return
        unix = _UNIX.search(call.args)
        if unix is not None and ("docker.sock" in unix.group(1)
                                 or "containerd" in unix.group(1)):
            self._add(ViolationKind.SANDBOX_ESCAPE, f"connect unix:{unix.group(1)}")
            return
        if self.spec.network is not NetworkPolicy.NONE:
            return
        inet = _INET.search(call.args)
        if inet is None:
            return
        port, address = int(inet.group(1)), inet.group(2) or inet.group(3) or ""
        if call.name == "bind":
            if call.ok:
                self.bound.add(port)
            return
        try:
            loopback = ipaddress.ip_address(address).is_loopback
        except ValueError:
            loopback = False
        outcome = call.errno or "sent"
        if not loopback:
            self._add(ViolationKind.NETWORK, f"{call.name} {address}:{port} -> {outcome}")
        elif port == 53:
            self._add(ViolationKind.NETWORK, f"name lookup via {address}:53 -> {outcome}")
        elif not self.listening or (self.bound and not {0, port} & self.bound):
            self._add(ViolationKind.NETWORK, f"{call.name} {address}:{port} (no server inside "
                                             f"the sandbox) -> {outcome}")

    def _add(self, kind: ViolationKind, evidence: str) -> None:
        key = (kind.value, evidence)
        if key in self._seen or len(self.found) >= self.limits.monitor_findings:
            return
        self._seen.add(key)
        self.found.append(Violation(kind=kind, source=Source.SANDBOX, evidence=evidence[:300]))


def judge(lines: list[str], spec: SandboxSpec) -> list[Violation]:
    """Violations in a list of ``strace -f`` lines (convenience for tests and tools)."""
    judge_ = CallJudge(spec)
    for line in lines:
        judge_.feed_line(line)
    return judge_.found


class SyscallMonitor:
    """Reads ``strace`` output from a pipe in a thread, judging each call as it arrives."""

    def __init__(self, spec: SandboxSpec, limits: HostLimits = HOST_LIMITS,
                 skip_execs: int = 2) -> None:
        self.judge = CallJudge(spec, limits, skip_execs)
        self.read_fd, self.write_fd = os.pipe()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start reading (call after the traced process has been spawned)."""
        os.close(self.write_fd)
        stream = os.fdopen(self.read_fd, "r", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        with stream:
            while True:
                line = stream.readline(65536)
                if not line:
                    return
                self.judge.feed_line(line)

    def finish(self, timeout_s: float = 30) -> list[Violation]:
        """Wait for the pipe to close (the traced tree has exited) and return the findings."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.judge.found
