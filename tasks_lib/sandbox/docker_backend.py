"""The ``docker`` backend: one container per sandbox through the docker SDK.

Nothing can be pulled here, so the image is imported from a rootfs tarball built on the fly: a
skeleton tree (mount points, ``/etc/passwd``, merged-``/usr`` symlinks). The system folders and
the interpreter are bound read-only from the host, exactly as in the bubblewrap backend, which
keeps the image a few kilobytes and the two backends' environments identical. An external
agent may bring its own image instead (:class:`~tasks_lib.sandbox.base.ContainerImage`: a tag in
the engine, or a rootfs tarball imported once): its userland is then its own and nothing of the
host's is bound but the spec's mounts. It needs ``/bin/sh``, ``sleep``, ``timeout`` and ``bash``
(coreutils), and a ``python3`` for the model proxy's loopback forwarder.

Containers run with a read-only root, all capabilities dropped, ``no-new-privileges``, the
spec's :class:`~tasks_lib.sandbox.base.ResourceLimits` (memory, PIDs, CPU time, file size, open
files, a size-capped ``/tmp``, the polled disk quota of the writable mounts), user 1000,
and ``network_mode=none`` unless the policy allows the network. Each
execution runs under ``timeout -s KILL`` inside the container and the container is killed when
the host-side cap passes, so the whole process tree dies at the cap.

The container's name is written on the sandbox's lease (:mod:`tasks_lib.sandbox.lease`) before
it is created, and the container carries the lease id as a label: :meth:`DockerSandbox.close`
removes it on every way out of a cell, ``--rm`` (``auto_remove``) when it stops on its own (a
restart at a cap keeps it), the sweep (:mod:`tasks_lib.sweep`) after a ``kill -9``.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from tasks_lib.sandbox.base import (
    HOST_LIMITS,
    CappedCapture,
    ExecResult,
    HostLimits,
    Language,
    NetworkPolicy,
    SandboxSpec,
    Source,
    Violation,
    ViolationKind,
    clip,
    command,
    hidden_runtime_dirs,
    sandbox_env,
)
from tasks_lib.sandbox.hostio import iter_tree
from tasks_lib.sandbox.images import agent_image
from tasks_lib.sandbox.lease import Lease
from tasks_lib.sandbox.lifetime import die_with_parent
from tasks_lib.sandbox.limits import QuotaWatcher
from tasks_lib.sandbox.local import SYSTEM_DIRS, SandboxUnavailableError, etc_files
from tasks_lib.sandbox.monitor import SyscallMonitor, strace_argv, strace_path

IMAGE = "medflows-sandbox:1"
LEASE_LABEL = "medflows.lease"
"""Container label holding the id of the lease the container belongs to."""
SANDBOX_UID = 1000
ATTACH_WAIT_S = 30.0
"""How long the host waits for an exec to stop itself, then for strace to attach (seconds, by
the clock: on a loaded host each Docker API call is slow, and a count of polls ran out before
the process stopped, leaving the attempt unmonitored)."""
_SKELETON_DIRS = ("etc", "tmp", "proc", "dev", "sys", "usr", "workspace", "public", "private",
                  "submission", "output")


def rootfs_tarball() -> bytes:
    """The image's rootfs: mount points, passwd/group and the host's merged-/usr symlinks."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add(name: str, kind: bytes, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            info.mode = 0o644 if kind == tarfile.REGTYPE else 0o755
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for folder in _SKELETON_DIRS:
            add(folder, tarfile.DIRTYPE)
        for folder in SYSTEM_DIRS:
            path = Path(folder)
            if path.is_symlink():
                add(folder.lstrip("/"), tarfile.SYMTYPE, link=os.readlink(folder))
            elif path.is_dir() and folder.strip("/") not in _SKELETON_DIRS \
                    and folder.count("/") == 1:
                add(folder.lstrip("/"), tarfile.DIRTYPE)
        add("etc/passwd", tarfile.REGTYPE, f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::/workspace:"
            "/bin/sh\n".encode())
        add("etc/group", tarfile.REGTYPE, f"sandbox:x:{SANDBOX_UID}:\n".encode())
    return buffer.getvalue()


def client() -> Any:
    """A docker SDK client for ``DOCKER_HOST`` (or the default socket)."""
    import docker

    try:
        found = docker.from_env(timeout=60)
        found.ping()
    except docker.errors.DockerException as exc:
        raise SandboxUnavailableError(f"no Docker engine reachable: {exc}") from None
    return found


def ensure_image(engine: Any) -> str:
    """Import the sandbox image from the rootfs tarball unless it exists; return its tag."""
    import docker

    try:
        engine.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        repository, tag = IMAGE.split(":")
        engine.api.import_image_from_data(rootfs_tarball(), repository=repository, tag=tag)
    return IMAGE


def _volumes(spec: SandboxSpec) -> dict[str, dict[str, str]]:
    """Binds: the host's system folders and interpreter (not for an agent's own image, whose
    userland is its own), then the spec's mounts."""
    volumes: dict[str, dict[str, str]] = {}
    for folder in SYSTEM_DIRS if spec.image is None else ():
        if Path(folder).is_dir() and not Path(folder).is_symlink():
            volumes[folder] = {"bind": folder, "mode": "ro"}
    for folder in spec.runtime if spec.image is None else ():
        volumes[folder] = {"bind": folder, "mode": "ro"}
    for mount in spec.mounts:
        volumes[str(mount.host)] = {"bind": mount.target, "mode": "rw" if mount.writable else "ro"}
    return volumes


def _own(folder: Path) -> None:
    """Hand a writable mount to the sandbox user (bounded walk; only when running as root)."""
    if os.geteuid() != 0:
        return
    os.lchown(folder, SANDBOX_UID, SANDBOX_UID)
    for item in iter_tree(folder):
        if not isinstance(item, str):
            os.lchown(folder / item.rel, SANDBOX_UID, SANDBOX_UID)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _tracer(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1]) != 0
    except (OSError, ValueError):
        pass
    return False


class DockerSandbox:
    """A :class:`~tasks_lib.sandbox.base.Sandbox` backed by one long-lived container."""

    def __init__(self, spec: SandboxSpec, engine: Any | None = None,
                 host: HostLimits = HOST_LIMITS, monitor: bool = True,
                 lease: Lease | None = None) -> None:
        self.spec, self.host = spec, host
        self.strace = strace_path() if monitor else None
        self.engine = engine or client()
        self._own_lease = lease is None
        self.lease = lease if lease is not None else Lease("sandbox")
        self._etc = etc_files()
        self.lease.add_scratch(self._etc)
        self.name = f"medflows-{self.lease.record.lease_id}-{os.urandom(3).hex()}"
        self.lease.add_container(self.name)
        try:
            self.container = self._create()
        except BaseException:
            self.close()
            raise

    def _create(self) -> Any:
        """Create and start the long-lived container (named, labelled with the lease)."""
        from docker.types import Ulimit

        spec, limits = self.spec, self.spec.limits
        volumes = {**_volumes(spec), **{str(path): {"bind": f"/etc/{path.name}", "mode": "ro"}
                                        for path in self._etc.iterdir()
                                        if path.name in ("hosts", "nsswitch.conf")}}
        for mount in spec.mounts:
            if mount.writable:
                _own(mount.host)
        env = sandbox_env(spec)
        hidden = {d: "ro,size=4k" for d in hidden_runtime_dirs(spec.runtime)} \
            if spec.image is None else {}
        image = ensure_image(self.engine) if spec.image is None \
            else agent_image(self.engine, spec.image)
        return self.engine.containers.run(
            image, ["/bin/sleep", "infinity"], detach=True, auto_remove=True,
            network_mode="none" if spec.network is NetworkPolicy.NONE else "host",
            read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids, ulimits=[
                Ulimit(name="cpu", soft=limits.cpu_s, hard=limits.cpu_s),
                Ulimit(name="fsize", soft=limits.file_mb * 2**20, hard=limits.file_mb * 2**20),
                Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile),
                Ulimit(name="core", soft=0, hard=0)],
            user=f"{SANDBOX_UID}:{SANDBOX_UID}", working_dir=spec.workdir, environment=env,
            volumes=volumes, tmpfs={"/tmp": f"rw,size={limits.tmp_mb}m", **hidden}, init=True,
            hostname="sandbox", name=self.name,
            devices=[f"{d}:{d}:rwm" for d in spec.devices],
            labels={"medflows": "sandbox", LEASE_LABEL: self.lease.record.lease_id},
        )

    def execute(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run ``code`` in the container; kill it (and its tree) at ``timeout_s`` or past the
        disk quota. Output is streamed into capped buffers; when the host has ``strace`` (and
        may trace the container's processes) the execution starts stopped, ``strace`` attaches
        from the host and the calls are judged as in the bubblewrap backend."""
        started = time.monotonic()
        cap = max(int(timeout_s + 0.999), 1)
        argv = ["timeout", "-s", "KILL", str(cap), *command(self.spec, language, code)]
        monitor = SyscallMonitor(self.spec, self.host, skip_execs=0) if self.strace else None
        if monitor is not None:  # stop before anything runs; the host attaches, then resumes
            argv = ["/bin/sh", "-c", 'kill -STOP $$; exec "$@"', "medflows-exec", *argv]
        self._running()
        exec_id = self.engine.api.exec_create(self.container.id, argv, user=str(SANDBOX_UID),
                                              workdir=self.spec.workdir)["Id"]
        out, err = CappedCapture(self.host.output_chars), CappedCapture(self.host.output_chars)

        def pump() -> None:
            for chunk_out, chunk_err in self.engine.api.exec_start(exec_id, stream=True,
                                                                   demux=True):
                if chunk_out:
                    out.feed(chunk_out)
                if chunk_err:
                    err.feed(chunk_err)

        stopped: list[str] = []

        def kill(reason: str) -> None:
            stopped.append(reason)
            self.container.restart(timeout=0)

        quota = QuotaWatcher([m.host for m in self.spec.mounts if m.writable],
                             self.spec.limits, kill, self.host)
        worker = threading.Thread(target=pump, daemon=True)
        worker.start()
        tracer = self._attach(exec_id, monitor) if monitor is not None else None
        if monitor is not None and tracer is None:
            monitor = None
        quota.start()
        deadline = started + timeout_s + 5
        ended: int | None = None  # the exit code seen before a restart dropped the exec record
        while worker.is_alive() and time.monotonic() < deadline:
            worker.join(0.25)
            state = self._inspect(exec_id)
            if worker.is_alive() and state and not state.get("Running"):
                # the command ended but processes it left behind hold the output open: end
                # them as bwrap's PID namespace would (a restart kills every process inside)
                ended = state.get("ExitCode")
                self.container.restart(timeout=0)
                worker.join(10)
        if worker.is_alive():
            self.container.restart(timeout=0)
            worker.join(10)
        over = quota.stop()
        observed: list[Violation] = []
        if tracer is not None and monitor is not None:
            try:
                tracer.wait(30)
            except subprocess.TimeoutExpired:
                tracer.kill()
                tracer.wait()
            observed += monitor.finish()
        exit_code = self._inspect(exec_id).get("ExitCode", ended)
        timed_out = exit_code in (None, 137) and time.monotonic() - started >= timeout_s
        hit: list[str] = []
        if over is not None:
            hit.append("disk")
            observed.append(Violation(kind=ViolationKind.RESOURCE_LIMIT, source=Source.SANDBOX,
                                      evidence=over))
        if exit_code == 137 and not timed_out and over is None:
            hit.append("memory or processes (killed)")
        return ExecResult(
            exit_code=-9 if timed_out else int(exit_code if exit_code is not None else -1),
            stdout=clip(out.text(), self.host.output_chars),
            stderr=clip(err.text(), self.host.output_chars),
            timed_out=timed_out, duration_s=time.monotonic() - started,
            observed=observed, monitored=monitor is not None, limits_hit=hit)

    def _inspect(self, exec_id: str) -> dict[str, Any]:
        """The exec's state; empty when the engine no longer knows it (a restart of the
        container — a cap reached, processes left behind — can drop its exec records)."""
        import docker

        try:
            state: dict[str, Any] = self.engine.api.exec_inspect(exec_id)
        except docker.errors.NotFound:
            return {}
        return state

    def _running(self) -> None:
        """Wait, by the clock, until the container runs: a restart at a cap (the quota watcher's
        thread and the end of the previous execution may both restart it) can leave it
        restarting or stopped when the next execution starts, and an exec on it fails."""
        deadline = time.monotonic() + ATTACH_WAIT_S
        while True:
            self.container.reload()
            status = self.container.status
            if status == "running":
                return
            if status in ("created", "exited"):
                self.container.start()
            if time.monotonic() > deadline:
                raise SandboxUnavailableError(f"sandbox container {self.name} is {status}, "
                                              f"not running, after {ATTACH_WAIT_S:g} s")
            time.sleep(0.1)

    def _attach(self, exec_id: str, monitor: SyscallMonitor) -> subprocess.Popen[bytes] | None:
        """Attach ``strace`` to the stopped exec process and resume it (None: not possible
        here — the process is resumed untraced)."""
        pid = 0
        deadline = time.monotonic() + ATTACH_WAIT_S
        while True:
            pid = int(self._inspect(exec_id).get("Pid") or 0)
            if pid and _state(pid) == "T":
                break
            if time.monotonic() > deadline:
                if pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
                return None
            time.sleep(0.01)
        assert self.strace is not None
        tracer = subprocess.Popen(
            die_with_parent(strace_argv(self.strace, monitor.write_fd, attach=pid)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(monitor.write_fd,), start_new_session=True)
        monitor.start()
        deadline = time.monotonic() + ATTACH_WAIT_S
        attached = False
        while time.monotonic() < deadline:
            attached = _tracer(pid)
            if attached or tracer.poll() is not None:
                break
            time.sleep(0.01)
        # Judged before the process resumes: once it runs, a command that ends at once (a
        # refused wget) ends strace too, which is not a failure to attach.
        refused = not attached and tracer.poll() is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        if refused:  # strace could not attach (no permission)
            return None
        return tracer

    def close(self) -> None:
        """Remove the container (idempotent; also one whose creation failed half-way) and
        release what the lease holds for it."""
        import docker

        shutil.rmtree(self._etc, ignore_errors=True)
        self.lease.drop_scratch(self._etc)
        with contextlib.suppress(docker.errors.NotFound):
            self.engine.containers.get(self.name).remove(force=True)
        self.lease.drop_container(self.name)
        if self._own_lease:
            self.lease.release()
