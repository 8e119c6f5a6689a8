"""The long-lived processes medflows starts on the user's behalf, one record each.

A **service** is a process that outlives the step that needed it: medflows' own RWE study
database cluster, a local Prefect server started by ``medflows server start``, the ``medflows
serve`` HTTP service. (Dask LocalClusters live inside the step that uses them and end with it;
a scheduler named by ``MEDFLOWS_DASK_ADDRESS`` is the user's, not medflows'.) Each running
service has one JSON record, ``<services dir>/<key>.json`` (:class:`Service`: kind, PID, address,
start time, the command that started it, whether to keep it), so ``medflows services status``
can list what runs and ``medflows services stop`` can stop it by PID.

A record whose process is gone (or whose PID now names another process: the kernel's start time
is recorded too) is *stale*: :func:`status` reports it once and removes it.

Commands stop what they started: the CLI runs each command inside
:func:`~tasks_lib.service_scope.command_scope`. A service used during it (:func:`use`: medflows'
cluster calls it on every start) holds a lease for this process (``<key>.users/<pid>``); when
the command ends, every service it used that is not kept and that no other live process holds a
lease on is stopped. ``--keep-services`` (or ``MEDFLOWS_KEEP_SERVICES=true``) keeps what the
command started or used. Outside a command (a Prefect worker, a test fixture) a service is
recorded as kept: it runs on, as before. The CLI entry's part (:func:`apply_local_server`, the
command scope) is in :mod:`tasks_lib.service_scope`, which loads no pydantic, so ``--help``
stays fast; it is re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import Field, ValidationError

from evaluators.core import Frozen
from tasks_lib.processes import pid_alive, proc_start, terminate
from tasks_lib.service_scope import (
    KEEP_FLAG,
    Command,
    apply_local_server,
    command_line,
    command_scope,
    current_command,
    joined,
    masked,
    note_used,
    prefect_home,
    services_dir,
)

__all__ = ["KEEP_FLAG", "Service", "ServiceError", "ServiceKind", "ServiceState",
           "ServiceStatus", "apply_local_server", "command_line", "command_scope", "finish",
           "forget", "load", "other_users", "prefect_home", "records", "register", "running",
           "running_here", "save", "services_dir", "status", "stop", "stop_service", "use"]


class ServiceKind(StrEnum):
    """What kind of process a record describes (``medflows services stop KIND``)."""

    RWE_CLUSTER = "rwe-cluster"
    PREFECT_SERVER = "prefect-server"
    SERVE = "serve"


class ServiceState(StrEnum):
    """A record's process as :func:`status` found it."""

    RUNNING = "running"
    STALE = "stale"


class ServiceError(RuntimeError):
    """A service could not be started or did not stop (our environment's fault)."""


class Service(Frozen):
    """One long-lived process medflows started (one JSON record)."""

    kind: ServiceKind = Field(description="What it is.")
    name: str = Field(default="", description="Instance name within the kind ('' = the only "
                                              "one): a port, a state-folder digest.")
    pid: int = Field(description="Process id to signal.")
    proc_start: int | None = Field(default=None, description="The process's start time in "
                                   "clock ticks after boot (/proc): tells a reused PID apart.")
    address: str = Field(description="Where it answers: a URL or a unix socket path.")
    started_at: datetime = Field(description="When it was recorded (UTC).")
    started_by: str = Field(description="Command line that started it (passwords masked; "
                                        "'' = found running, origin unknown).")
    keep: bool = Field(description="Left running when the command that started it ends.")
    home: str = Field(default="", description="Data folder it serves from (a local Prefect "
                                              "server: its PREFECT_HOME).")
    stop_signal: str = Field(default="SIGTERM", description="Signal that asks it to stop.")
    stop_wait_s: float = Field(default=10.0, description="How long to wait after that signal.")
    kill: bool = Field(default=True, description="SIGKILL it when it outlives the wait "
                                                 "(False: report the failure instead).")

    @property
    def key(self) -> str:
        """Record name: the kind, plus the instance name when there is one."""
        return f"{self.kind.value}-{self.name}" if self.name else self.kind.value


class ServiceStatus(Frozen):
    """A record with what :func:`status` found (the public ``services status --json`` row)."""

    kind: ServiceKind = Field(description="What it is.")
    key: str = Field(description="Record name (kind, plus the instance name).")
    pid: int = Field(description="Process id.")
    address: str = Field(description="Where it answers.")
    started_at: datetime = Field(description="When it was recorded (UTC).")
    started_by: str = Field(description="Command line that started it.")
    keep: bool = Field(description="Left running when the command that started it ends.")
    state: ServiceState = Field(description="running, or stale (process gone; record removed).")


def alive(service: Service) -> bool:
    """The record's process still runs."""
    return pid_alive(service.pid, service.proc_start)


# --- records ---------------------------------------------------------------------------------

def _path(key: str) -> Path:
    return services_dir() / f"{key}.json"


def load(key: str) -> Service | None:
    """The record named ``key`` (None: none, or unreadable)."""
    try:
        return Service.model_validate_json(_path(key).read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None


def records() -> list[Service]:
    """Every record, oldest first (unreadable files skipped)."""
    found = [load(p.stem) for p in sorted(services_dir().glob("*.json"))]
    return sorted((s for s in found if s is not None), key=lambda s: s.started_at)


def save(service: Service) -> Service:
    """Write the record (atomically) and return it."""
    path = _path(service.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(service.model_dump_json(indent=2), encoding="utf-8")
    os.replace(tmp, path)
    return service


def forget(key: str) -> None:
    """Remove the record and its leases."""
    _path(key).unlink(missing_ok=True)
    users = _users(key)
    for lease in users.glob("*") if users.is_dir() else []:
        lease.unlink(missing_ok=True)
    if users.is_dir():
        users.rmdir()


# --- commands and leases ---------------------------------------------------------------------

def _users(key: str) -> Path:
    return services_dir() / f"{key}.users"


def use(key: str) -> None:
    """Hold a lease on service ``key`` for this process (and note it for the running command)."""
    lease = _users(key) / str(os.getpid())
    if not lease.exists():
        lease.parent.mkdir(parents=True, exist_ok=True)
        lease.write_text(str(proc_start(os.getpid())), encoding="utf-8")
    note_used(key)


def other_users(key: str) -> list[int]:
    """Live processes other than this one holding a lease on ``key`` (dead ones' leases go)."""
    users, found = _users(key), []
    for lease in users.glob("*") if users.is_dir() else []:
        try:
            pid, start = int(lease.name), int(lease.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not pid_alive(pid, start):
            lease.unlink(missing_ok=True)
        elif pid != os.getpid():
            found.append(pid)
    return found


def register(kind: ServiceKind, pid: int, address: str, *, name: str = "",
             started_here: bool = True, keep: bool | None = None, home: str = "",
             stop_signal: str = "SIGTERM", stop_wait_s: float = 10.0,
             kill: bool = True) -> Service:
    """Record a service and lease it for this process.

    ``started_here`` False records a service found already running: an existing record of the
    same live process is kept as it is, otherwise it is recorded as kept with an unknown origin.
    ``keep`` None: the running command's choice (``--keep-services``), kept outside a command.
    """
    current = load(f"{kind.value}-{name}" if name else kind.value)
    start = proc_start(pid)
    if not started_here and current is not None and current.pid == pid and alive(current):
        use(current.key)
        return current
    command = current_command()
    if keep is None:
        keep = command.keep if command is not None and started_here else True
    by = (command.line if command is not None else _this_process()) if started_here else ""
    service = save(Service(kind=kind, name=name, pid=pid, proc_start=start, address=address,
                           started_at=datetime.now(UTC), started_by=by, keep=keep, home=home,
                           stop_signal=stop_signal, stop_wait_s=stop_wait_s, kill=kill))
    use(service.key)
    return service


def _this_process() -> str:
    """This process's own command line (a worker, a test runner), passwords masked."""
    try:
        argv = Path("/proc/self/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return ""
    return joined(masked(argv))


def finish(command: Command) -> list[str]:
    """Release the command's leases; stop what it leaves unused and unkept. Messages for the
    services that would not stop (printed on stderr by the CLI)."""
    problems = []
    for key in sorted(command.used):
        (_users(key) / str(os.getpid())).unlink(missing_ok=True)
        service = load(key)
        if service is None or not alive(service):
            forget(key)
            continue
        if command.keep and not service.keep:
            save(service.model_copy(update={"keep": True}))
            continue
        if service.keep or other_users(key):
            continue
        try:
            if stop_service(service):
                continue
            why = f"did not stop in {service.stop_wait_s:.0f} s"
        except OSError as exc:  # e.g. another user's process
            why = f"could not be stopped ({exc.strerror})"
        problems.append(f"{service.key} (pid {service.pid}) {why}; stop it with: medflows "
                        f"services stop {service.kind.value}")
    return problems


# --- status and stop -------------------------------------------------------------------------

def status() -> list[ServiceStatus]:
    """Every record with its state; stale records are reported here once and removed."""
    rows = []
    for service in records():
        state = ServiceState.RUNNING if alive(service) else ServiceState.STALE
        if state is ServiceState.STALE:
            forget(service.key)
        rows.append(ServiceStatus(kind=service.kind, key=service.key, pid=service.pid,
                                  address=service.address, started_at=service.started_at,
                                  started_by=service.started_by, keep=service.keep,
                                  state=state))
    return rows


def stop_service(service: Service) -> bool:
    """Stop one service by its PID with its own stop policy; the record goes when it ended.
    False when it outlived its wait and may not be killed (the record stays)."""
    ended = terminate(service.pid, service.proc_start, service.stop_signal,
                      service.stop_wait_s, service.kill)
    if ended:
        forget(service.key)
    return ended


def stop(kind: ServiceKind | None = None) -> list[Service]:
    """Stop every running service of ``kind`` (None: all); the services stopped. Raises
    :class:`ServiceError` naming those that would not stop."""
    stopped, failed = [], []
    for service in records():
        if kind is not None and service.kind is not kind:
            continue
        if not alive(service):
            forget(service.key)
        elif stop_service(service):
            stopped.append(service)
        else:
            failed.append(f"{service.key} (pid {service.pid})")
    if failed:
        raise ServiceError(f"did not stop: {', '.join(failed)}")
    return stopped


def running(kind: ServiceKind) -> list[Service]:
    """Live services of ``kind`` (stale records removed)."""
    found = [s for s in records() if s.kind is kind]
    for service in found:
        if not alive(service):
            forget(service.key)
    return [s for s in found if alive(s)]


@contextmanager
def running_here(kind: ServiceKind, address: str, name: str = "") -> Iterator[Service]:
    """Record this process as a service while the block runs (``medflows serve``); the record
    goes when the block ends."""
    service = register(kind, os.getpid(), address, name=name, keep=True)
    try:
        yield service
    finally:
        forget(service.key)
