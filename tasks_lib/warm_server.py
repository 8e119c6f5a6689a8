"""The warm process of :mod:`tasks_lib.warm_start`: imports what flow commands use, then forks
one child per command handed to it.

Run as ``python -m tasks_lib.warm_server SERVER_PID SERVER_START`` (by
:func:`tasks_lib.warm_start.launch`), with ``PREFECT_API_URL`` naming the local Prefect server
``SERVER_PID``. It stays single-threaded, so forking is safe (a child never inherits a lock held
by another thread; it refuses to fork if an import started a thread), and it never runs a flow,
opens a database or calls a model itself: a child starts from imported modules only.

A child takes the command's standard streams, folder, environment and command line, re-reads
the settings Prefect and medflows cached from the environment, runs ``flows.cli.main`` as the
console script would, and exits with its code; the warm process sends that code to the command.
A command killed outright (its connection closes) has its child killed too. The warm process
stops when the Prefect server does or on SIGTERM; when the source changes it stops listening,
lets the children running then finish, and starts afresh (the same PID, new imports).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from tasks_lib.processes import pid_alive
from tasks_lib.service_scope import services_dir
from tasks_lib.warm_start import (
    MAX_SOCKET_PATH,
    RECORD,
    identity,
    import_environment,
    mark_child,
    receive,
    send,
    socket_path,
    source_stamp,
)

PRELOAD = (
    "flows.cli.groups", "flows.cli.audit", "flows.cli.build", "flows.cli.challenge",
    "flows.cli.execute", "flows.cli.imaging", "flows.cli.medbench",
    "flows.cli.medbench_endpoints", "flows.cli.medbench_upload_mode", "flows.cli.ops",
    "flows.cli.qa", "flows.cli.review", "flows.cli.run", "flows.cli.runs", "flows.cli.rwe",
    "flows.cli.rwe_report", "flows.cli.score", "flows.cli.serve", "flows.cli.services",
    "flows.cli.progress", "flows.execute", "tasks_lib.llm", "tasks_lib.qa.methods",
    "litellm", "litellm.main", "prefect.flow_engine", "prefect.task_engine",
    "prefect.task_runners",
)
"""Modules a flow command imports before its first model call (the CLI's command modules
included, as ``flows.cli.main`` imports them)."""
TICK_S = 0.05
"""How often the loop reaps children and checks the Prefect server."""
STAMP_EVERY_S = 2.0
"""How often the loop checks the source for changes (about 10 ms a check)."""


def preload() -> None:
    """Import :data:`PRELOAD` and register every kit; litellm's lazily loaded completion too."""
    for name in PRELOAD:
        importlib.import_module(name)
    from flows import compose

    compose()
    import litellm

    litellm.completion  # noqa: B018  (a lazy attribute: loading it imports the call path)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return int(exc.code or 0)
    print(exc.code, file=sys.stderr)
    return 1


def run_child(request: dict[str, Any], fds: list[int], inherited: list[socket.socket]) -> NoReturn:
    """In the forked child: become the command (see the module docstring) and exit with its
    code."""
    code = 1
    try:
        os.setpgid(0, 0)  # the command forwards its signals to this group
        for sock in inherited:
            sock.close()
        for signum in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        atexit._clear()  # the warm process's exit handlers are not the command's
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=fd == 2 or os.isatty(fd))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["medflows", *request["argv"]]
        mark_child()
        _reread_settings()
        from flows.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
    except BaseException:  # the child exits with a code, whatever happened
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]  # as interpreter exit does
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reread_settings() -> None:
    """Forget what Prefect and medflows read from the warm process's environment."""
    from prefect.context import refresh_global_settings_context

    from tasks_lib.settings import reset_settings

    refresh_global_settings_context()
    reset_settings()


class WarmServer:
    """The accept/fork/reap loop."""

    def __init__(self, listener: socket.socket, server_pid: int, server_start: int | None,
                 stamp: str) -> None:
        self.listener, self.server_pid, self.server_start = listener, server_pid, server_start
        self.imported_env = import_environment(os.environ)
        self.identity = identity()
        self.stamp = stamp  # taken before the imports: a file changed meanwhile makes it stale
        self.children: dict[int, socket.socket] = {}
        self.stale = False
        self.checked = time.monotonic()
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.stopping = False

    def refusal(self, request: dict[str, Any], fds: list[int]) -> str | None:
        """Why this process cannot run ``request`` (None: it can)."""
        if len(fds) != 3:
            return "three standard streams expected"
        if any(request.get(k) != v for k, v in self.identity.items()):
            return "another interpreter or checkout"
        if not isinstance(request.get("env"), dict) or not isinstance(request.get("argv"), list):
            return "malformed request"
        if import_environment(request["env"]) != self.imported_env:
            return "the environment the libraries were imported with differs"
        if self.changed():
            return "the source changed since the warm process started"
        if threading.active_count() > 1:
            return "a thread runs (forking is unsafe)"
        return None

    def changed(self) -> bool:
        """Whether the source changed since the imports (then the loop ends: stale)."""
        self.checked = time.monotonic()
        if source_stamp() != self.stamp:
            self.stale = self.stopping = True
        return self.stale

    def accept(self) -> None:
        """Take one command: refuse it, or fork its child and tell the command its PID."""
        conn, _ = self.listener.accept()
        fds: list[int] = []
        child = 0
        try:
            pid, uid, _ = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid != os.getuid():
                raise ValueError(f"peer pid {pid} is another user's")
            conn.settimeout(5.0)
            _, fds, _, _ = socket.recv_fds(conn, 1, 3)
            with conn.makefile("rb") as reader:
                request = receive(reader) or {}
            why = self.refusal(request, fds)
            if why is not None:
                print(f"refused a command: {why}", flush=True)
                send(conn, {"refused": why})
                raise ValueError(why)
            sys.stdout.flush()
            sys.stderr.flush()
            child = os.fork()
            if child == 0:
                run_child(request, fds, [self.listener, conn, *self.children.values()])
            conn.settimeout(None)
            send(conn, {"pid": child})
        except (OSError, ValueError):
            conn.close()
            if child:
                self.gone(child)
            return
        finally:
            for fd in fds:
                os.close(fd)
        self.children[child] = conn
        self.selector.register(conn, selectors.EVENT_READ, child)

    def reap(self) -> None:
        """Send each ended child's exit code to its command."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                send(conn, {"exit": code if code >= 0 else 128 - code})
            with contextlib.suppress(KeyError):
                self.selector.unregister(conn)
            conn.close()

    def gone(self, child: int) -> None:
        """The command of ``child`` closed its connection: it was killed outright (a signal
        it can handle is passed on, and it waits), so its child is too (it is reaped when it
        ends)."""
        conn = self.children.get(child)
        if conn is not None:
            with contextlib.suppress(KeyError):
                self.selector.unregister(conn)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)

    def serve(self) -> None:
        """Until the Prefect server stops, SIGTERM or stale source; then let children end."""
        while not self.stopping:
            for key, _ in self.selector.select(TICK_S):
                if key.data is None:
                    self.accept()
                elif not key.fileobj.recv(1, socket.MSG_PEEK):  # type: ignore[union-attr]
                    self.gone(key.data)
            self.reap()
            if not pid_alive(self.server_pid, self.server_start):
                self.stopping = True
            elif time.monotonic() - self.checked > STAMP_EVERY_S:
                self.changed()
        self.selector.unregister(self.listener)
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            socket_path().unlink()
        deadline = time.monotonic() + 600
        while self.children and time.monotonic() < deadline:
            for key, _ in self.selector.select(TICK_S):
                if not key.fileobj.recv(1, socket.MSG_PEEK):  # type: ignore[union-attr]
                    self.gone(key.data)
            self.reap()
        for child in self.children:
            self.gone(child)


def listen(path: Path) -> socket.socket:
    """A private Unix socket at ``path`` (a stale file from a dead warm process is replaced).

    Raises:
        OSError: another warm process listens there, or the path is too long.
    """
    if len(str(path)) > MAX_SOCKET_PATH:
        raise OSError(f"socket path too long for a Unix socket: {path}")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with probe, contextlib.suppress(OSError):
        probe.connect(str(path))
        raise FileExistsError(f"a warm process already listens at {path}")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(16)
    return listener


def _serve(server_pid: int, server_start: int | None) -> bool:
    """Preload, listen and serve; whether the source changed while the Prefect server runs on
    (this process then starts afresh)."""
    started = time.monotonic()
    stamp = source_stamp()
    preload()
    server = WarmServer(listen(socket_path()), server_pid, server_start, stamp)

    def stop(*_: object) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, stop)
    print(f"warm process {os.getpid()} ready in {time.monotonic() - started:.1f} s at "
          f"{socket_path()} (Prefect server pid {server_pid})", flush=True)
    server.serve()
    return server.stale and pid_alive(server_pid, server_start)


def main(argv: list[str]) -> None:
    """``SERVER_PID SERVER_START``: serve until the Prefect server stops or SIGTERM, starting
    afresh (same PID, new imports) whenever the source changes; the record goes at exit."""
    server_pid, server_start = int(argv[0]), (int(argv[1]) if argv[1] != "None" else None)
    restart = False
    try:
        restart = _serve(server_pid, server_start)
    finally:
        if not restart:
            record = services_dir() / RECORD
            with contextlib.suppress(OSError, ValueError):
                if f'"pid": {os.getpid()},' in record.read_text(encoding="utf-8"):
                    record.unlink()
            print(f"warm process {os.getpid()} stopped", flush=True)
    if restart:
        print(f"warm process {os.getpid()}: the source changed, importing it afresh", flush=True)
        os.execv(sys.executable, [sys.executable, "-m", "tasks_lib.warm_server", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
    os._exit(0)  # nothing left to flush: skip seconds of tearing down every imported module
