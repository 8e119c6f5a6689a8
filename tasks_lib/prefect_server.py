"""A local Prefect server that later commands reuse (``medflows server start|stop|status``).

Without one, every command that runs a flow starts Prefect's temporary server (seconds on this
machine) and stops it at exit. ``medflows server start`` starts the same server — uvicorn with
Prefect's ``create_app`` factory and the services of Prefect's temporary server, no UI — but
detached, on 127.0.0.1, and records it (:mod:`tasks_lib.services`); later commands point
``PREFECT_API_URL`` at it (:func:`tasks_lib.services.apply_local_server`). Its database is the
one the temporary server uses, ``$PREFECT_HOME/prefect.db``, so flow and task runs are kept in
the same place either way. It also starts the warm process that later flow commands fork from
(:mod:`tasks_lib.warm_start`; it stops with the server). For Prefect's UI, scheduler and
deployments run ``prefect server start`` instead and set ``PREFECT_API_URL``.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tasks_lib import warm_start
from tasks_lib.services import (
    Service,
    ServiceError,
    ServiceKind,
    prefect_home,
    register,
    running,
    services_dir,
    stop,
)

STARTUP_TIMEOUT_S = 180.0
"""How long ``server start`` waits for the server's health check (Prefect's own default for its
temporary server on a slow machine: the first start migrates the database)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_argv(port: int) -> list[str]:
    """The command Prefect runs for its temporary server, on ``port``."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.origin is None:
        raise ServiceError("prefect is not installed")
    return [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(spec.origin).parent.parent),
            "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "error", "--lifespan", "on"]


def healthy(url: str) -> bool:
    """``GET {url}/health`` answers 200."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def start(port: int | None = None, timeout_s: float = STARTUP_TIMEOUT_S) -> tuple[Service, bool]:
    """The local server: the running one, else a new one on ``port`` (None: a free port);
    and whether it was started now. Raises :class:`ServiceError` when it does not come up."""
    home = prefect_home()
    live = running(ServiceKind.PREFECT_SERVER)
    if live and live[0].home == str(home):
        warm_start.launch(live[0].pid, live[0].address)
        return live[0], False
    if live:
        raise ServiceError(f"a local Prefect server for PREFECT_HOME={live[0].home} runs at "
                           f"{live[0].address}: medflows server stop first")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no telemetry (offline)
    env.update({"PREFECT_HOME": str(home), "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"})
    log_path = services_dir() / "prefect-server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(server_argv(port), env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not healthy(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            why = (f"exited with code {proc.returncode}" if proc.poll() is not None
                   else f"did not answer in {timeout_s:.0f} s")
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:]
            raise ServiceError(f"the local Prefect server {why}; its log {log_path}:\n{tail}")
        time.sleep(0.2)
    service = register(ServiceKind.PREFECT_SERVER, proc.pid, url, keep=True, home=str(home),
                       stop_wait_s=15.0)
    proc.returncode = 0  # detached on purpose: no ResourceWarning for a child left running
    warm_start.launch(proc.pid, url)
    return service, True


class TemporaryServer:
    """Prefect's temporary server, started by medflows before Prefect is imported (see
    :func:`start_temporary`)."""

    def __init__(self, timeout_s: float) -> None:
        from tasks_lib.orchestration import server_output, watched_server_args

        port = free_port()
        self.url = f"http://127.0.0.1:{port}/api"
        self.timeout_s = timeout_s
        self.ready = False
        out = server_output()
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1"}
        self.proc = subprocess.Popen(watched_server_args(server_argv(port), os.getpid()),
                                     env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        atexit.register(self.stop)

    def wait(self) -> None:
        """Return once the server answers. Raises :class:`ServiceError` when it exits or does
        not answer within the startup timeout."""
        deadline = time.monotonic() + self.timeout_s
        while not self.ready and not healthy(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited with code {self.proc.returncode}" if self.proc.poll() is not None
                       else f"did not answer in {self.timeout_s:.0f} s")
                raise ServiceError(f"Prefect's temporary server {why}")
            time.sleep(0.05)
        self.ready = True

    def stop(self) -> None:
        """Stop the server (as Prefect stops its own: SIGTERM, SIGKILL after 5 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_temporary() -> TemporaryServer | None:
    """Start Prefect's temporary server now and point ``PREFECT_API_URL`` at it, when this
    process will run a flow and names no server (no ``PREFECT_API_URL``, no local server) and
    Prefect is not imported yet: the server boots in its own process (seconds of CPU) while
    this one imports the command's libraries, instead of after them. It is the server Prefect
    would start (same command, same database), stopped when this process ends (``atexit``; a
    watchdog stops it if this process is killed). Call :meth:`TemporaryServer.wait` before the
    first flow. The server started by an earlier call, if any; None: nothing was started."""
    if _TEMPORARY:
        return _TEMPORARY[0]
    if os.environ.get("PREFECT_API_URL") or "prefect" in sys.modules:
        return None
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or 180)
    server = TemporaryServer(timeout)
    os.environ["PREFECT_API_URL"] = server.url
    _TEMPORARY.append(server)
    return server


_TEMPORARY: list[TemporaryServer] = []
"""The temporary server :func:`start_temporary` started in this process."""


def stop_server() -> list[Service]:
    """Stop the local server(s) by PID; those stopped."""
    return stop(ServiceKind.PREFECT_SERVER)
