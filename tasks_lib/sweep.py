"""The sweep at the start of every command that runs cells: release what dead runs held.

A cell records what it holds on a lease (:mod:`tasks_lib.sandbox.lease`). When its process dies
without releasing it (``kill -9``, the OOM killer, a reboot), :func:`sweep_orphans` finds the
lease (its owner's pid is gone or belongs to another process now), kills the process groups it
lists (SIGTERM, then SIGKILL after a grace), empties and removes its cgroups, removes its Docker
containers, deletes its scratch folders (the workspace; never the stored submission or trace),
and deletes the lease; then it runs every service sweep a track kit registered in
:data:`SERVICE_SWEEPS` (the RWE kit's drops the study-database roles of killed runs).
Cheap: a listing of one or two folders when nothing died; no Prefect, no server.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from evaluators.registry import Registry
from tasks_lib.processes import proc_start
from tasks_lib.sandbox.hostio import disk_usage, remove_tree
from tasks_lib.sandbox.lease import LeaseRecord, boot_id, lease_dirs, read_lease
from tasks_lib.sandbox.lifetime import kill_group, kill_pids

CLAIMED = ".sweeping"
"""Suffix of a lease a sweep has claimed (renamed first, so two sweeps never share one)."""
STALE_CLAIM_S = 600.0
"""A claim older than this belongs to a sweep that died: the next sweep takes it over."""

SERVICE_SWEEPS: Registry[Callable[[], list[str]]] = Registry("service sweep")
"""Sweeps of what killed runs left in a service a kit provides (one line per thing removed);
registered by the kits (:mod:`tasks_lib.tracks.catalog` imports them all)."""


def sweep_orphans(grace_s: float = 2.0) -> list[str]:
    """Release the leases of dead owners on this host; one line per thing removed."""
    removed: list[str] = []
    for folder in lease_dirs():
        for path in _candidates(folder):
            record = read_lease(path)
            if record is not None and record.owner_alive() and path.suffix == ".json":
                continue
            claimed = _claim(path)
            if claimed is None:
                continue
            if record is None:
                claimed.unlink(missing_ok=True)
                removed.append(f"unreadable lease {path.name} deleted")
                continue
            removed += _release(record, claimed, grace_s)
    for name in SERVICE_SWEEPS:
        removed += SERVICE_SWEEPS.get(name)()
    return removed


def _candidates(folder: Path) -> list[Path]:
    """Lease files, stale claims, and temporary files a killed writer left."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    now = time.time()
    for path in sorted(folder.iterdir()):
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:
            continue
        if path.suffix == ".json" or (path.suffix == CLAIMED and age > STALE_CLAIM_S):
            found.append(path)
        elif path.suffix == ".tmp" and age > STALE_CLAIM_S:
            path.unlink(missing_ok=True)
    return found


def _claim(path: Path) -> Path | None:
    """Rename the lease so no other sweep takes it; None when another one did first."""
    claimed = path.with_suffix(CLAIMED)
    try:
        os.replace(path, claimed)
    except FileNotFoundError:
        return None
    os.utime(claimed)
    return claimed


def _release(record: LeaseRecord, claimed: Path, grace_s: float) -> list[str]:
    """Everything ``record`` lists, then the lease itself (kept, listing only the containers,
    when Docker could not be reached to remove them)."""
    who = f"lease {record.lease_id} (owner pid {record.owner_pid} gone)"
    done: list[str] = []
    if record.boot == boot_id():  # after a reboot no process of the lease can exist
        for group in record.groups:
            leader = proc_start(group.pgid)
            if leader is not None and leader != group.leader_start:
                continue  # the pgid now names another process's group
            killed = kill_group(group.pgid, grace_s)
            if killed:
                done.append(f"{who}: killed {killed} processes of group {group.pgid}")
        for folder in record.cgroups:
            if _remove_cgroup(folder):
                done.append(f"{who}: removed cgroup {folder}")
    left: list[str] = []
    if record.containers:
        notes, left = _remove_containers(record)
        done += [f"{who}: {note}" for note in notes]
    for scratch in record.scratch:
        try:
            info = os.stat(scratch.path, follow_symlinks=False)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) != (scratch.device, scratch.inode):
            continue  # another folder at that path now
        used, _ = disk_usage(scratch.path)
        remove_tree(scratch.path)
        done.append(f"{who}: removed scratch {scratch.path} ({used / 2**20:.1f} MiB)")
    if left:
        kept = record.model_copy(update={"groups": [], "cgroups": [], "scratch": [],
                                         "containers": left})
        claimed.with_suffix(".json").write_text(kept.model_dump_json(), encoding="utf-8")
    claimed.unlink(missing_ok=True)
    return done or [f"{who}: released (nothing was left)"]


def _remove_cgroup(folder: Path) -> bool:
    """Kill the processes still in a cgroup folder and remove it; False when it is gone."""
    if not folder.is_dir():
        return False
    for _ in range(50):
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        kill_pids(pids)
        with contextlib.suppress(OSError):
            folder.rmdir()
            return True
        time.sleep(0.02)
    return not folder.is_dir()


def _remove_containers(record: LeaseRecord) -> tuple[list[str], list[str]]:
    """Remove the lease's containers (by name and by the lease label); notes, and the names
    that could not be removed because no Docker engine answered."""
    from tasks_lib.sandbox.docker_backend import LEASE_LABEL, client
    from tasks_lib.sandbox.local import SandboxUnavailableError

    try:
        engine = client()
    except (ImportError, SandboxUnavailableError) as exc:
        return [f"containers {record.containers} kept: {exc}"], list(record.containers)
    import docker

    found = engine.containers.list(all=True,
                                   filters={"label": f"{LEASE_LABEL}={record.lease_id}"})
    for name in record.containers:
        with contextlib.suppress(docker.errors.NotFound):
            found.append(engine.containers.get(name))
    notes: list[str] = []
    for container in {c.id: c for c in found}.values():
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
            notes.append(f"removed container {container.name}")
    return notes, []
