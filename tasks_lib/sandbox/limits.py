"""Resource limits a sandboxed execution is held to on the host.

* :class:`Cgroup` — a memory and process cgroup (v1 or v2) when the host can create one
  (root or a delegated subtree): the same limits as Docker's ``mem_limit``/``pids_limit``; the
  processes still in it when the execution ends are the ones that outlived the sandbox.
* :class:`QuotaWatcher` — polls the disk use of the writable mounts (bounded walk) and kills
  the execution past the quota.

(What an execution *did* — its breach attempts — is :mod:`tasks_lib.sandbox.monitor`.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tasks_lib.sandbox.base import HOST_LIMITS, HostLimits, ResourceLimits
from tasks_lib.sandbox.hostio import disk_usage


class Cgroup:
    """A memory + pids cgroup for one execution, when the host can create one.

    Use :meth:`create` (None when cgroups are not writable here), prefix the command with
    :meth:`enter_argv`, then :meth:`close` (kills and counts what is left, removes the group).
    """

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, limits: ResourceLimits) -> Cgroup | None:
        """Make the group under this process's own cgroup (v1 hierarchies or v2)."""
        name = f"medflows-{uuid.uuid4().hex[:12]}"
        memory = str(limits.memory_mb * 2**20)
        made: dict[str, Path] = {}
        try:
            own = _own_cgroups()
            if "memory" in own and "pids" in own:  # v1
                for ctrl in ("memory", "pids"):
                    folder = own[ctrl] / name
                    folder.mkdir()
                    made[ctrl] = folder
                (made["memory"] / "memory.limit_in_bytes").write_text(memory)
                (made["pids"] / "pids.max").write_text(str(limits.pids))
            elif "" in own:  # v2
                parent = own[""]
                controllers = (parent / "cgroup.subtree_control").read_text().split()
                if not {"memory", "pids"} <= set(controllers):
                    return None
                folder = parent / name
                folder.mkdir()
                made["v2"] = folder
                (folder / "memory.max").write_text(memory)
                if (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
                (folder / "pids.max").write_text(str(limits.pids))
        except OSError:
            for folder in made.values():
                with contextlib.suppress(OSError):
                    folder.rmdir()
            return None
        return cls(made) if made else None

    def enter_argv(self) -> list[str]:
        """``sh -c`` prefix that moves itself into the group, then execs the command."""
        procs = " ".join(f"'{d / 'cgroup.procs'}'" for d in self.dirs.values())
        return ["/bin/sh", "-c", f'for f in {procs}; do echo $$ > "$f" || exit 125; done; '
                                 'exec "$@"', "medflows-cgroup"]

    def pids(self) -> list[int]:
        """Processes still in the group."""
        folder = self.dirs.get("pids") or self.dirs.get("v2")
        if folder is None:
            return []
        try:
            return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def limits_hit(self) -> list[str]:
        """Which limits the group reached ("memory", "processes")."""
        hit: list[str] = []
        try:
            if "memory" in self.dirs:
                if int((self.dirs["memory"] / "memory.failcnt").read_text()) > 0:
                    hit.append("memory")
                if int((self.dirs["pids"] / "pids.events").read_text().split()[-1]) > 0:
                    hit.append("processes")
            elif "v2" in self.dirs:
                events = dict(line.split() for line in
                              (self.dirs["v2"] / "memory.events").read_text().splitlines())
                if int(events.get("max", 0)) > 0 or int(events.get("oom_kill", 0)) > 0:
                    hit.append("memory")
                if int((self.dirs["v2"] / "pids.events").read_text().split()[-1]) > 0:
                    hit.append("processes")
        except (OSError, ValueError, IndexError):
            pass
        return hit

    def drain(self, seconds: float) -> None:
        """Wait (at most ``seconds``) for the group to empty: after the sandbox was killed its
        PID namespace is torn down by the kernel, which takes a moment on a busy host."""
        deadline = time.monotonic() + seconds
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> list[int]:
        """Kill what is left, remove the group; return the pids that were left behind."""
        left = self.pids()
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for folder in self.dirs.values():
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
        return left


def _own_cgroups() -> dict[str, Path]:
    """Writable folders of this process's cgroups: controller → folder ("" = v2)."""
    found: dict[str, Path] = {}
    root = Path("/sys/fs/cgroup")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        for ctrl in controllers.split(","):
            if ctrl in ("memory", "pids"):
                base = root / ctrl
            elif ctrl == "" and (root / "cgroup.controllers").exists():
                base = root
            else:
                continue
            folder = base / rel.lstrip("/")
            if not folder.is_dir():
                folder = base
            if os.access(folder, os.W_OK):
                found[ctrl] = folder
    return found


class QuotaWatcher:
    """Polls the disk use of ``folders`` and calls ``on_exceed`` once past ``limit_bytes``
    (or when a folder holds more entries / deeper trees than the host walks)."""

    def __init__(self, folders: list[Path], limits: ResourceLimits,
                 on_exceed: Callable[[str], None], host: HostLimits = HOST_LIMITS) -> None:
        self.folders, self.limits, self.host = folders, limits, host
        self.on_exceed = on_exceed
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def check(self) -> str | None:
        """One measurement; the reason the quota is exceeded, or None."""
        cap = self.limits.workspace_mb * 2**20
        total = 0
        for folder in self.folders:
            used, stopped = disk_usage(folder, self.host)
            if stopped is not None:
                return f"the writable folder holds {stopped}"
            total += used
        if total > cap:
            return (f"disk quota exceeded: {total // 2**20} MB written > "
                    f"{self.limits.workspace_mb} MB")
        return None

    def start(self) -> None:
        """Poll in a background thread."""
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.limits.quota_poll_s):
            reason = self.check()
            if reason is not None:
                self.reason = reason
                self.on_exceed(reason)
                return

    def stop(self) -> str | None:
        """Stop polling, measure once more; the reason the quota was exceeded, or None."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        if self.reason is None:
            self.reason = self.check()
        return self.reason
