"""Leases: what a running cell holds on this host, written down while it holds it.

A cell's process groups (``strace`` → ``bwrap`` → agent), cgroups, Docker containers and
scratch folders (the workspace, the sandbox's ``/etc`` files) are recorded in one small JSON
file per lease, updated as they appear and go, and deleted when the cell releases them. A cell
whose process dies without releasing them (``kill -9``, the OOM killer, a power cut) leaves its
lease behind; :func:`tasks_lib.sweep.sweep_orphans`, run at the start of the next command that
runs cells, releases the leases whose owner is dead.

The owner is identified by its pid **and** its start time (``/proc/<pid>/stat`` field 22) on
this host's boot (``/proc/sys/kernel/random/boot_id``), so a reused pid never passes for a live
owner; a process group is killed only while its leader is gone or is still the recorded
process. Leases live in ``<storage root>/.medflows/leases/`` (a local storage root), else in
the checkout's state folder ``.medflows/leases/``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType

from pydantic import Field, ValidationError

from tasks_lib.domain import Frozen
from tasks_lib.processes import proc_start
from tasks_lib.settings import PROJECT_ROOT, get_settings

LEASES = Path(".medflows") / "leases"


def boot_id() -> str:
    """This boot of this machine (empty when the kernel does not say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def lease_dirs() -> list[Path]:
    """Folders that may hold leases: the local storage root's first (where new leases go),
    then the checkout's state folder."""
    from fsspec.core import url_to_fs
    from fsspec.implementations.local import LocalFileSystem

    settings = get_settings()
    found = [PROJECT_ROOT / LEASES]
    fs, root = url_to_fs(settings.storage_url, **settings.storage_options)
    if isinstance(fs, LocalFileSystem):
        found.insert(0, Path(str(root)).resolve() / LEASES)
    return list(dict.fromkeys(found))


class Group(Frozen):
    """A process group the lease's owner started (its leader runs in a session of its own)."""

    pgid: int = Field(description="Process group id (= the leader's pid).")
    leader_start: int = Field(description="The leader's start time in clock ticks since boot.")


class Scratch(Frozen):
    """A folder the cell writes into and nobody keeps (removed when the lease is swept)."""

    path: Path = Field(description="Absolute host path.")
    device: int = Field(description="st_dev when leased: a different folder at the same path "
                                    "is never removed.")
    inode: int = Field(description="st_ino when leased.")


class LeaseRecord(Frozen):
    """The content of one lease file."""

    lease_id: str = Field(description="Unique id (also the file name).")
    label: str = Field(description="What holds it: a run id, or 'sandbox'.")
    host: str = Field(description="Hostname of the owner.")
    boot: str = Field(description="Boot id of the owner's machine.")
    owner_pid: int = Field(description="Pid of the process that holds the lease.")
    owner_start: int = Field(description="The owner's start time (clock ticks since boot; 0 "
                                         "where /proc does not tell).")
    created: float = Field(description="Unix time the lease was opened.")
    groups: list[Group] = Field(default_factory=list, description="Live process groups.")
    cgroups: list[Path] = Field(default_factory=list, description="cgroup folders to empty "
                                                                   "and remove.")
    containers: list[str] = Field(default_factory=list, description="Docker container names.")
    scratch: list[Scratch] = Field(default_factory=list, description="Scratch folders.")

    def owner_alive(self) -> bool:
        """The owner still runs (same host, same boot, same pid and start time). A lease of
        another host counts as alive: this host cannot judge it."""
        if self.host != socket.gethostname():
            return True
        if self.boot != boot_id():
            return False
        if self.owner_start == 0:  # no /proc here: the pid alone has to do
            try:
                os.kill(self.owner_pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return proc_start(self.owner_pid) == self.owner_start


def read_lease(path: Path) -> LeaseRecord | None:
    """The lease in ``path``; None when it is gone or unreadable (a torn write)."""
    try:
        return LeaseRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError):
        return None


def _scratch(path: Path) -> Scratch:
    info = os.stat(path, follow_symlinks=False)
    return Scratch(path=path.absolute(), device=info.st_dev, inode=info.st_ino)


class Lease:
    """A live lease of this process: every change is written at once (atomically).

    Args:
        label: what holds it (a run id, 'sandbox').
        scratch: folders (existing) removed if the owner dies before releasing them.
        folder: where the file goes (default: the first of :func:`lease_dirs`).
    """

    def __init__(self, label: str, scratch: list[Path] | None = None,
                 folder: Path | None = None) -> None:
        pid = os.getpid()
        self.folder = folder or lease_dirs()[0]
        self.folder.mkdir(parents=True, exist_ok=True)
        self.record = LeaseRecord(
            lease_id=f"{label}-{uuid.uuid4().hex[:12]}", label=label,
            host=socket.gethostname(), boot=boot_id(), owner_pid=pid,
            owner_start=proc_start(pid) or 0, created=time.time(),
            scratch=[_scratch(p) for p in scratch or []])
        self.path = self.folder / f"{self.record.lease_id}.json"
        self._lock = threading.Lock()
        self._released = False
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self.record.model_dump_json(), encoding="utf-8")
        os.replace(tmp, self.path)

    def _update(self, **changes: object) -> None:
        with self._lock:
            if self._released:
                return
            self.record = self.record.model_copy(update=changes)
            self._write()

    def add_group(self, pgid: int) -> None:
        """Record a process group just started (its leader is ``pgid``)."""
        start = proc_start(pgid)
        if start is not None:
            self._update(groups=[*self.record.groups, Group(pgid=pgid, leader_start=start)])

    def drop_group(self, pgid: int) -> None:
        """Forget a process group that has ended."""
        self._update(groups=[g for g in self.record.groups if g.pgid != pgid])

    def add_cgroups(self, folders: list[Path]) -> None:
        """Record cgroup folders just made."""
        self._update(cgroups=[*self.record.cgroups, *folders])

    def drop_cgroups(self, folders: list[Path]) -> None:
        """Forget removed cgroup folders."""
        self._update(cgroups=[c for c in self.record.cgroups if c not in folders])

    def add_container(self, name: str) -> None:
        """Record a container name (before it is created: no window without a record)."""
        self._update(containers=[*self.record.containers, name])

    def drop_container(self, name: str) -> None:
        """Forget a removed container."""
        self._update(containers=[c for c in self.record.containers if c != name])

    def add_scratch(self, path: Path) -> None:
        """Record an existing scratch folder."""
        self._update(scratch=[*self.record.scratch, _scratch(path)])

    def drop_scratch(self, path: Path) -> None:
        """Forget a scratch folder that has been removed."""
        self._update(scratch=[s for s in self.record.scratch if s.path != path.absolute()])

    def release(self) -> None:
        """Delete the lease (idempotent): everything it listed has been released."""
        with self._lock:
            self._released = True
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
