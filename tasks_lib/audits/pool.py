"""The audited pool and the audit's own data: the pool's identity (:func:`pool_info`), its stored
files and their digests, and the floors and injection payloads under
``datasets/audit/``."""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import stat
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import yaml
from fsspec.implementations.local import LocalFileSystem

from evaluators.core import InputDataError, Track
from tasks_lib.domain import Frozen
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

DIGESTS = ("md5", "sha1", "sha256")


class PoolInfo(Frozen):
    """Identity and layout of the audited pool."""

    url: str
    pool_id: str
    version: int
    pool_hash: str
    track: Track
    task_id: str


def pool_info(pool_url: str) -> PoolInfo:
    """Read the manifest of the pool at ``pool_url`` (QA pool root or imaging version folder).

    Raises:
        InputDataError: no manifest, or not a pool manifest.
    """
    root = Storage(pool_url)
    if not root.exists("manifest.json"):
        raise InputDataError(root.url("manifest.json"), "no pool here (build one with medflows "
                                                        "pool build …)")
    refuse_special_files(root)
    try:
        data = root.read_json("manifest.json")
        track = Track(data["track"])
        pool_id = str(data.get("pool_id") or data["task_id"])
        return PoolInfo(url=root.root_url, pool_id=pool_id, version=int(data["version"]),
                        pool_hash=str(data["content_hash"]), track=track,
                        task_id=str(data.get("task_id") or pool_id))
    except (KeyError, ValueError, TypeError) as exc:
        raise InputDataError(root.url("manifest.json"), f"not a pool manifest: {exc}") from None


def refuse_special_files(root: Storage) -> None:
    """Refuse a local pool holding a FIFO, socket or device (or a symlink to one) anywhere:
    every check and kit reader would block or misread on it, so no check runs.

    Raises:
        InputDataError: names the first such file and how many there are.
    """
    if not _is_local(root) or not Path(root.root_path).is_dir():
        return
    from tasks_lib.sandbox.hostio import iter_tree

    top = Path(root.root_path)
    special: list[tuple[str, int]] = []
    for entry in iter_tree(top):
        if isinstance(entry, str):
            break
        mode = entry.mode
        if stat.S_ISLNK(mode):
            try:
                mode = os.stat(top / entry.rel).st_mode  # the target's type; nothing is opened
            except OSError:
                continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            special.append((entry.rel, mode))
    if special:
        rel, mode = sorted(special)[0]
        more = f" (and {len(special) - 1} more)" if len(special) > 1 else ""
        raise InputDataError(root.url(rel), f"{_kind(mode)}, not a regular file{more}: the audit "
                                            "opens no FIFO, socket or device; remove it")


def _data(name: str) -> Any:
    path = get_settings().datasets_dir / "audit" / name
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputDataError(str(path), "audit data file missing") from None


@lru_cache(maxsize=4)
def _floors(datasets_dir: str) -> dict[str, dict[str, dict[str, Any]]]:
    floors: dict[str, dict[str, dict[str, Any]]] = _data("floors.yaml")
    return floors


def floors() -> dict[str, dict[str, dict[str, Any]]]:
    """``datasets/audit/floors.yaml``: track → null agent → ``{floor, source[, tolerance]}``."""
    return _floors(str(get_settings().datasets_dir))


def injections() -> list[dict[str, str]]:
    """``datasets/audit/injections.yaml``: the prompt-injection payloads (``id``, ``text``)."""
    rows: list[dict[str, str]] = _data("injections.yaml")
    return rows


class Listing(NamedTuple):
    """The entries under a prefix of a pool: regular files, and what is not one."""

    files: list[str]
    """Keys of the regular files (sorted)."""
    odd: list[str]
    """One line per symlink (with its target; never followed) or special file (FIFO, socket,
    device; never opened), and why the listing stopped early, if it did."""


def _is_local(root: Storage) -> bool:
    return isinstance(root.fs, LocalFileSystem)


def list_pool(root: Storage, prefix: str) -> Listing:
    """Every entry under ``prefix``: on a local pool a bounded walk that follows no symlink
    (:func:`~tasks_lib.sandbox.hostio.iter_tree`); elsewhere (``memory://``, ``s3://``, which
    have no links) the store's listing."""
    if not _is_local(root):
        base = root.path(prefix)
        found = sorted(root.fs.find(base)) if root.fs.exists(base) else []
        return Listing([posixpath.relpath(str(p), root.root_path) for p in found], [])
    from tasks_lib.sandbox.hostio import iter_tree

    top = Path(root.path(prefix))
    if top.is_symlink():
        return Listing([], [f"{prefix} -> {os.readlink(top)}: the {prefix} view is itself a "
                            "symlink (never followed)"])
    files: list[str] = []
    odd: list[str] = []
    for entry in iter_tree(top):
        if isinstance(entry, str):
            odd.append(f"{prefix}: listing stopped: {entry}")
            break
        key = f"{prefix}/{entry.rel}"
        if stat.S_ISREG(entry.mode):
            files.append(key)
        elif stat.S_ISLNK(entry.mode):
            odd.append(_link(top, entry.rel, prefix))
        elif not stat.S_ISDIR(entry.mode):
            odd.append(f"{key}: {_kind(entry.mode)}, not a regular file (never opened)")
    return Listing(sorted(files), sorted(odd))


def _link(top: Path, rel: str, prefix: str) -> str:
    """What a symlink points at, and whether that is outside ``top`` (resolved by name only;
    nothing behind the link is read)."""
    target = os.readlink(top / rel)
    inside = Path(os.path.realpath(top / rel)).is_relative_to(os.path.realpath(top))
    where = f"stays inside {prefix}/" if inside else f"leaves the {prefix} view"
    return f"{prefix}/{rel} -> {target}: symlink {where} (never followed)"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


def pool_files(root: Storage, prefix: str) -> Iterator[str]:
    """Every regular file key under ``prefix`` (recursive, sorted; symlinks and special files
    are left out: :func:`list_pool` names them)."""
    yield from list_pool(root, prefix).files


def open_file(root: Storage, key: str) -> BinaryIO:
    """A stored regular file opened for reading; on a local pool without following a symlink
    and without blocking (a FIFO swapped in after the listing raises instead of hanging).

    Raises:
        OSError: the key is a symlink, a special file or gone.
    """
    if not _is_local(root):
        fh: BinaryIO = root.open(key)
        return fh
    fd = os.open(root.path(key), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", root.path(key))
    return os.fdopen(fd, "rb")


def read_capped(root: Storage, key: str, cap: int) -> bytes | None:
    """The bytes of a stored regular file, or None when it holds more than ``cap``."""
    with open_file(root, key) as fh:
        data = fh.read(cap + 1)
    return None if len(data) > cap else data


def file_digests(root: Storage, key: str, names: tuple[str, ...] = DIGESTS) -> dict[str, str]:
    """Hex digests (default md5, sha1 and sha256) of a stored file, streamed."""
    hashes = {name: hashlib.new(name) for name in names}
    with open_file(root, key) as fh:
        while chunk := fh.read(2**20):
            for h in hashes.values():
                h.update(chunk)
    return {name: h.hexdigest() for name, h in hashes.items()}

