"""A container image of an agent's own, made offline for tests: a rootfs tarball holding this
host's Debian ``python3`` with its standard library, ``bash``, ``sh`` and the coreutils an
execution needs, each binary and extension module with the shared libraries ``ldd`` names,
and a marker file that exists only in the image (so a test can tell the image's userland from
medflows' own)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

MARKER = "/opt/agent-image/release.txt"
"""A file only the image has."""
MARKER_TEXT = "medflows test agent image 1\n"
PYTHON = "/usr/bin/python3.11"
BINARIES = (PYTHON, "/usr/bin/bash", "/usr/bin/dash", "/usr/bin/timeout", "/usr/bin/sleep",
            "/usr/bin/cat", "/usr/bin/ls")
STDLIB = Path("/usr/lib/python3.11")
_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
         "pydoc_data", "distutils"}
_LIB = re.compile(r"(/\S+) \(0x")


def _libraries(binary: str) -> set[str]:
    found = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return set(_LIB.findall(found))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    tar.addfile(info)


def _add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


def _add_stdlib(tar: tarfile.TarFile) -> None:
    """The standard library, folders included (an implicit parent would be mode 0700)."""
    for path in [STDLIB, *sorted(STDLIB.rglob("*"))]:
        rel = path.relative_to(STDLIB)
        if _SKIP & set(rel.parts) or path.is_symlink() or not (path.is_file() or path.is_dir()):
            continue
        tar.add(path, arcname=str(path).lstrip("/"), recursive=False)


def agent_rootfs(out: Path) -> Path:
    """Write the rootfs tarball to ``out`` and return it (skips the test where this host has
    no Debian ``python3.11`` to copy)."""
    if not Path(PYTHON).is_file() or shutil.which("ldd") is None:
        pytest.skip(f"{PYTHON} or ldd not on this host: no image to build")
    files = set(BINARIES)
    for binary in (*BINARIES, *map(str, sorted((STDLIB / "lib-dynload").glob("*.so")))):
        files |= _libraries(binary)  # the extension modules' too (ctypes needs libffi)
    with tarfile.open(out, "w") as tar:
        for folder in ("usr", "usr/bin", "usr/lib", "etc", "tmp", "opt", "opt/agent-image",
                       "run", "workspace", "public", "proc", "dev", "sys"):
            _add_dir(tar, folder)
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"),
                             ("usr/bin/python3", "python3.11"), ("usr/bin/sh", "dash")):
            _add_link(tar, link, target)
        placed = {str(Path(p).parent.resolve() / Path(p).name).lstrip("/"): Path(p).resolve()
                  for p in files}  # merged /usr: /lib/x.so is usr/lib/x.so
        for folder in sorted({str(Path(name).parent) for name in placed} - {"usr/bin"}):
            _add_dir(tar, folder)
        for name, real in sorted(placed.items()):
            tar.add(real, arcname=name)
        _add_stdlib(tar)
        data = MARKER_TEXT.encode()
        info = tarfile.TarInfo(MARKER.lstrip("/"))
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return out
