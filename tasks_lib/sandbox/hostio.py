"""Bounded host-side reads of agent-made folders: walks, disk use, copies and removal.

Everything here is iterative (no recursion an agent's 1,000-level folder tree could exhaust),
never follows symlinks, and stops at the :class:`~tasks_lib.sandbox.base.HostLimits` depth and
entry caps; a walk that stops early says why (``Walk.stopped``) so the caller can record it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.sandbox.base import HOST_LIMITS, HostLimits


class Entry(Frozen):
    """One file-system entry found by a bounded walk."""

    rel: str = Field(description="Path relative to the walked root ('/'-separated).")
    mode: int = Field(description="lstat mode (links are not followed).")
    size: int = Field(description="Apparent size in bytes.")
    blocks: int = Field(description="Bytes actually allocated on disk (st_blocks · 512).")


class Walk(Frozen):
    """Result of a bounded walk."""

    entries: list[Entry] = Field(description="Entries found, folders before their contents.")
    stopped: str | None = Field(default=None, description="Why the walk stopped early (None: "
                                                          "the whole tree was seen).")

    @property
    def files(self) -> list[Entry]:
        """Regular files only."""
        return [e for e in self.entries if stat.S_ISREG(e.mode)]

    @property
    def disk_bytes(self) -> int:
        """Bytes allocated by every entry seen."""
        return sum(e.blocks for e in self.entries)


def iter_tree(root: Path, limits: HostLimits = HOST_LIMITS) -> Iterator[Entry | str]:
    """Entries below ``root`` depth-first without following links; yields a reason string and
    stops when the depth or entry cap is reached. A missing root yields nothing."""
    stack: list[tuple[str, int]] = [("", 0)]
    seen = 0
    while stack:
        rel, depth = stack.pop()
        try:
            with os.scandir(root / rel if rel else root) as it:
                children = list(it)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not rel:
                return
            continue
        for child in children:
            seen += 1
            if seen > limits.walk_entries:
                yield f"more than {limits.walk_entries} files and folders"
                return
            try:
                info = child.stat(follow_symlinks=False)
            except OSError:
                continue
            path = f"{rel}/{child.name}" if rel else child.name
            yield Entry(rel=path, mode=info.st_mode, size=info.st_size,
                        blocks=getattr(info, "st_blocks", 0) * 512)
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 >= limits.walk_depth:
                    yield f"folders nested deeper than {limits.walk_depth} levels ({path[:200]}…)"
                    return
                stack.append((path, depth + 1))


def walk(root: Path, limits: HostLimits = HOST_LIMITS) -> Walk:
    """All entries below ``root`` within the caps (see :func:`iter_tree`)."""
    entries: list[Entry] = []
    for item in iter_tree(root, limits):
        if isinstance(item, str):
            return Walk(entries=entries, stopped=item)
        entries.append(item)
    return Walk(entries=entries)


def disk_usage(root: Path, limits: HostLimits = HOST_LIMITS) -> tuple[int, str | None]:
    """Bytes allocated below ``root`` and why the count stopped early (None: complete)."""
    total = 0
    for item in iter_tree(root, limits):
        if isinstance(item, str):
            return total, item
        total += item.blocks
    return total, None


def copy_tree(source: Path, target: Path, limits: HostLimits = HOST_LIMITS) -> list[str]:
    """Copy a folder without following links, within the host caps; return what was left out.

    Folders and regular files are copied (files streamed, each at most
    ``submission_file_bytes``, ``submission_bytes`` in all); symlinks are kept as symlinks;
    special files (FIFOs, sockets, devices) are skipped. A missing or symlinked ``source``
    yields an empty ``target``.
    """
    target.mkdir(parents=True, exist_ok=True)
    if source.is_symlink() or not source.is_dir():
        return []
    left_out: list[str] = []
    copied = 0
    for item in iter_tree(source, limits):
        if isinstance(item, str):
            left_out.append(f"copy stopped: {item}")
            break
        here, out = source / item.rel, target / item.rel
        if stat.S_ISLNK(item.mode):
            out.symlink_to(os.readlink(here))
        elif stat.S_ISDIR(item.mode):
            out.mkdir(exist_ok=True)
        elif stat.S_ISREG(item.mode):
            if item.size > limits.submission_file_bytes:
                left_out.append(f"{item.rel}: {item.size} bytes > the "
                                f"{limits.submission_file_bytes}-byte cap per file")
            elif copied + item.size > limits.submission_bytes:
                left_out.append(f"{item.rel}: the submission exceeds "
                                f"{limits.submission_bytes} bytes")
            else:
                _copy_file(here, out, item.size)
                copied += item.size
    return left_out


def _copy_file(source: Path, target: Path, size: int) -> None:
    """Stream at most ``size`` bytes (the file may grow while being copied)."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as src, target.open("wb") as dst:
        left = size
        while left > 0:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                break
            dst.write(chunk)
            left -= len(chunk)


def remove_tree(root: Path) -> None:
    """Delete a folder of any depth (iterative, by folder file descriptors: a path longer
    than PATH_MAX is no obstacle); a missing root is fine."""
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(root)
        return
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    stack: list[tuple[int, str | None]] = [(top, None)]
    while stack:
        fd, _name = stack[-1]
        child = _first_child_dir(fd)
        if child is not None:
            stack.append((os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                  dir_fd=fd), child))
            continue
        for name in os.listdir(fd):
            os.unlink(name, dir_fd=fd)
        os.close(fd)
        stack.pop()
        if stack and _name is not None:
            os.rmdir(_name, dir_fd=stack[-1][0])
    os.rmdir(root)


def _first_child_dir(fd: int) -> str | None:
    with os.scandir(fd) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
    return None
