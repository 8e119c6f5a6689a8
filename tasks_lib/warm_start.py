"""Commands that start warm: after ``medflows server start``, a flow command runs in a process
forked from one that has already imported Prefect, litellm and every kit.

Those imports cost every command seconds of CPU before its first step (on a 2-core machine:
litellm ≈ 4 s, Prefect ≈ 1.2 s, the kits ≈ 2 s), however fast the Prefect server answers.
``medflows server start`` therefore also starts a *warm process* (:mod:`tasks_lib.warm_server`;
the zygote of Android and Chromium, Python's own ``multiprocessing`` forkserver): it imports
them once (``server start`` waits for that: seconds), then waits on a Unix socket. A command
that supports it (``execute qa``) hands its command line, environment, working folder and
standard streams to it (:func:`hand_off`); the warm process forks a child that runs that command
line in that folder and environment, on the command's terminal and on the same local Prefect
server (flow and task runs are recorded as before), and the command exits with the child's exit
code. Ctrl-C, SIGTERM and SIGHUP are passed on to the child; a command killed outright has its
child killed.

The command runs in its own process instead, as it would without a server, when:

* no warm process listens (none started, still importing, or stopped);
* what the libraries read when they were imported would differ: the command's ``PREFECT_*``,
  ``LITELLM_*``, ``GX_*`` and ``PYTHON*`` variables and ``MEDFLOWS_KIT_MODULES``
  (:func:`import_environment`), the interpreter or the checkout;
* a source file or an installed package changed since the warm process imported them (it
  then imports them afresh, within seconds of the change);
* ``MEDFLOWS_WARM_COMMANDS=false``, or this process is itself a warm child.

Other ``MEDFLOWS_*`` settings are read when used, so the child reads the command's. The warm
process stops with the local Prefect server it serves (``medflows server stop``, ``medflows
services stop``) and holds about 0.4 GB of memory while it runs. Only this user can connect: the
socket is private (mode 0600) and the peer's uid is checked.

Standard library only: :func:`hand_off` runs before a command's heavy imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

from tasks_lib.processes import pid_alive, proc_start
from tasks_lib.service_scope import CHECKOUT, services_dir

SOCKET = "warm.sock"
"""The warm process's socket, in the services folder."""
RECORD = "warm.json"
"""The warm process's PID and start time, in the services folder."""
LOG = "warm.log"
"""What the warm process and its children print before a command takes their streams."""
IMPORT_PREFIXES = ("PREFECT_", "LITELLM_", "GX_", "PYTHON")
IMPORT_NAMES = frozenset({"MEDFLOWS_KIT_MODULES"})
"""Environment variables read when the warm process imports its libraries and kits."""
SOURCES = ("flows", "tasks_lib", "evaluators", "expectations")
"""The checkout's packages, whose files the warm process has imported."""
MAX_SOCKET_PATH = 100
"""Longest socket path used (the kernel's limit is 107 bytes)."""
READY_TIMEOUT_S = 180.0
"""How long ``medflows server start`` waits for the warm process to finish its imports."""
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals a handing-off command passes on to the child."""

_IN_CHILD = False


class WarmProcessError(RuntimeError):
    """The warm process ended while it ran the command."""


def enabled() -> bool:
    """Warm commands are on (``MEDFLOWS_WARM_COMMANDS``, default true) and this process is
    not a warm child."""
    value = os.environ.get("MEDFLOWS_WARM_COMMANDS", "").strip().lower()
    return not _IN_CHILD and value not in {"0", "false", "no", "off"}


def mark_child() -> None:
    """This process is a warm child: it never hands a command off again."""
    global _IN_CHILD
    _IN_CHILD = True


def socket_path() -> Path:
    """Where the warm process listens."""
    return services_dir() / SOCKET


def import_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` that imported libraries have read (see the module docstring)."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(IMPORT_PREFIXES) or k in IMPORT_NAMES}


def source_stamp() -> str:
    """Changes when a source file of the checkout, or the installed packages, change (the
    newest ``.py`` modification time and the count, and the site-packages folder's time)."""
    newest = count = 0
    for package in SOURCES:
        for path in (CHECKOUT / package).rglob("*.py"):
            newest = max(newest, path.stat().st_mtime_ns)
            count += 1
    site = Path(sysconfig.get_paths()["purelib"])
    return f"{count}:{newest}:{site.stat().st_mtime_ns}"


def identity() -> dict[str, str]:
    """What a command and the warm process must share: interpreter and checkout."""
    return {"python": sys.executable, "checkout": str(CHECKOUT)}


def send(sock: socket.socket, message: Mapping[str, Any]) -> None:
    """One JSON line."""
    sock.sendall(json.dumps(message).encode() + b"\n")


def receive(reader: BinaryIO, limit: int = 1 << 22) -> dict[str, Any] | None:
    """The next JSON line of ``reader`` (a socket's ``makefile("rb")``); None: the peer closed
    the connection first."""
    line = reader.readline(limit)
    if not line.endswith(b"\n"):
        if line:
            raise ValueError("message too long or cut")
        return None
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    return message


def hand_off(argv: Sequence[str]) -> int | None:
    """Run ``medflows ARGV`` in a child of the warm process, with this process's environment,
    folder and standard streams; its exit code, or None when the command must run here (see
    the module docstring: nothing has run then).

    Raises:
        WarmProcessError: the warm process ended while the child ran.
    """
    if not enabled():
        return None
    path = socket_path()
    if not path.exists() or len(str(path)) > MAX_SOCKET_PATH:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(10.0)
        sock.connect(str(path))
        socket.send_fds(sock, [b"\0"], [0, 1, 2])
        send(sock, {"argv": list(argv), "env": dict(os.environ), "cwd": os.getcwd(),
                    **identity()})
        reader = sock.makefile("rb")
        reply = receive(reader)
    except (OSError, ValueError):
        sock.close()
        return None
    if reply is None or not isinstance(reply.get("pid"), int):
        sock.close()
        return None
    sock.settimeout(None)
    with sock, reader, _forwarding(reply["pid"]):
        done = receive(reader)
    if done is None or not isinstance(done.get("exit"), int):
        raise WarmProcessError(f"the warm process ended before the command did (its log: "
                               f"{services_dir() / LOG})")
    return int(done["exit"])


def hand_off_command() -> int | None:
    """:func:`hand_off` of this process's command line when the console script runs it (None
    otherwise, e.g. a command invoked in-process by a test or an embedder)."""
    from tasks_lib.service_scope import current_command

    return hand_off(sys.argv[1:]) if current_command() is not None else None


@contextlib.contextmanager
def _forwarding(pid: int) -> Iterator[None]:
    """Pass :data:`FORWARDED` signals on to the child's process group while the block runs."""

    def forward(signum: int, _: FrameType | None) -> None:
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:  # not yet its own group leader
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def running() -> int | None:
    """The warm process's PID, if it runs."""
    try:
        record = json.loads((services_dir() / RECORD).read_text(encoding="utf-8"))
        pid, start = int(record["pid"]), int(record["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if pid_alive(pid, start) else None


def launch(server_pid: int, api_url: str, wait_s: float = READY_TIMEOUT_S) -> int | None:
    """Start the warm process for the local Prefect server ``server_pid`` at ``api_url`` in
    this environment, unless warm commands are off or one runs, and wait (up to ``wait_s``)
    until it listens, so the next command starts warm; its PID (None: off). A warm process that
    fails is not an error: commands then run in their own process (its log says why)."""
    if not enabled():
        return None
    if (pid := running()) is not None:
        _wait_listening(pid, wait_s)
        return pid
    folder = services_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / LOG).open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tasks_lib.warm_server", str(server_pid),
             str(proc_start(server_pid))], env={**os.environ, "PREFECT_API_URL": api_url},
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    (folder / RECORD).write_text(json.dumps({"pid": proc.pid, "start": proc_start(proc.pid)}),
                                 encoding="utf-8")
    proc.returncode = 0  # detached on purpose: no ResourceWarning for a child left running
    _wait_listening(proc.pid, wait_s)
    return proc.pid


def _wait_listening(pid: int, wait_s: float) -> None:
    """Until the warm process ``pid`` listens, ends, or ``wait_s`` passes."""
    deadline = time.monotonic() + wait_s
    while not socket_path().exists() and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
