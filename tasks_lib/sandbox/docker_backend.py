"""The ``docker`` backend: one container per sandbox through the docker SDK.

Nothing can be pulled here, so the image is imported from a rootfs tarball built on the fly: a
skeleton tree (mount points, ``/etc/passwd``, merged-``/usr`` symlinks). The system folders and
the interpreter are bound read-only from the host, exactly as in the bubblewrap backend, which
keeps the image a few kilobytes and the two backends' environments identical.

Containers run with a read-only root, all capabilities dropped, ``no-new-privileges``, a memory
and PID limit, user 1000, and ``network_mode=none`` unless the policy allows the network. Each
execution runs under ``timeout -s KILL`` inside the container and the container is killed when
the host-side cap passes, so the whole process tree dies at the cap.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from tasks_lib.sandbox.base import (
    SAFE_PATH,
    ExecResult,
    Language,
    NetworkPolicy,
    SandboxSpec,
    clip,
    command,
)
from tasks_lib.sandbox.local import SYSTEM_DIRS, SandboxUnavailableError

IMAGE = "medflows-sandbox:1"
SANDBOX_UID = 1000
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
    volumes: dict[str, dict[str, str]] = {}
    for folder in SYSTEM_DIRS:
        if Path(folder).is_dir() and not Path(folder).is_symlink():
            volumes[folder] = {"bind": folder, "mode": "ro"}
    for folder in spec.runtime:
        volumes[folder] = {"bind": folder, "mode": "ro"}
    for mount in spec.mounts:
        volumes[str(mount.host)] = {"bind": mount.target, "mode": "rw" if mount.writable else "ro"}
    return volumes


def _own(folder: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            if os.geteuid() == 0:
                os.lchown(name, SANDBOX_UID, SANDBOX_UID)


class DockerSandbox:
    """A :class:`~tasks_lib.sandbox.base.Sandbox` backed by one long-lived container."""

    def __init__(self, spec: SandboxSpec, engine: Any | None = None) -> None:
        self.spec = spec
        self.engine = engine or client()
        for mount in spec.mounts:
            if mount.writable:
                _own(mount.host)
        env = {"PATH": f"{Path(spec.python).parent}:{SAFE_PATH}", "HOME": spec.workdir,
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": "/tmp", **spec.env}
        self.container = self.engine.containers.run(
            ensure_image(self.engine), ["/bin/sleep", "infinity"], detach=True,
            network_mode="none" if spec.network is NetworkPolicy.NONE else "host",
            read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            mem_limit=f"{spec.memory_mb}m", pids_limit=spec.pids_limit,
            user=f"{SANDBOX_UID}:{SANDBOX_UID}", working_dir=spec.workdir, environment=env,
            volumes=_volumes(spec), tmpfs={"/tmp": "rw,size=512m"}, init=True,
            labels={"medflows": "sandbox"},
        )

    def execute(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run ``code`` in the container; kill it (and its tree) at ``timeout_s``."""
        started = time.monotonic()
        cap = max(int(timeout_s + 0.999), 1)
        argv = ["timeout", "-s", "KILL", str(cap), *command(self.spec, language, code)]
        exec_id = self.engine.api.exec_create(self.container.id, argv, user=str(SANDBOX_UID),
                                              workdir=self.spec.workdir)["Id"]
        output: list[tuple[bytes | None, bytes | None]] = []
        worker = threading.Thread(
            target=lambda: output.append(self.engine.api.exec_start(exec_id, demux=True)),
            daemon=True)
        worker.start()
        worker.join(timeout_s + 5)
        if worker.is_alive():
            self.container.restart(timeout=0)
            worker.join(10)
        out, err = output[0] if output else (b"", b"")
        exit_code = self.engine.api.exec_inspect(exec_id).get("ExitCode")
        timed_out = exit_code in (None, 137) and time.monotonic() - started >= timeout_s
        return ExecResult(
            exit_code=-9 if timed_out else int(exit_code if exit_code is not None else -1),
            stdout=clip((out or b"").decode("utf-8", "replace")),
            stderr=clip((err or b"").decode("utf-8", "replace")),
            timed_out=timed_out, duration_s=time.monotonic() - started)

    def close(self) -> None:
        """Remove the container (idempotent)."""
        import docker

        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            return
