"""Locks that hold: a pool version is used only as audited and only with the content it was
locked with.

**The lock.** ``lock.json`` at a pool root (:class:`PoolLock`) lists every file of the version
(key → size and sha256) and the manifest's ``content_hash``. The publish gate writes it right
after the exploit audit (:func:`tasks_lib.audit.require_clean`), the rotations when they write a
subset. Every file under the root is locked except the gate's own records (``audit.json``,
``lock.json``); files added later (e.g. Dask references staged for an older pool) are not
locked and not checked. Pools published before locks existed are locked at their first use
(``origin: first_use``). ``content_hash`` is the shared rule of every kit
(:func:`tasks_lib.pool_format.content_hash`, public and private files); the lock covers the rest.

**Verifying.** :func:`verify_pool` compares each locked file with the lock and refuses a changed,
missing or resized one, naming it. Hashing a large pool on every scoring would be slow, so a
verified digest is cached in a local file keyed by the file's ``(size, mtime_ns, ctime_ns,
inode)``: an unchanged pool on a local disk costs one ``stat`` per file (a file changed within
:data:`RACY_NS` before it was hashed is hashed again next time). The cache lives under
the storage root (``cache/pool-locks/``) when that is a local folder; other pools (``s3://``,
``memory://``) are hashed on every verification.

**Usable.** :func:`require_usable` is the one check of every place a pool is chosen for execute
or scoring (:func:`tasks_lib.rotation.resolve_pool`, :func:`tasks_lib.imaging.pool.
latest_pool_url`, ``score submission --pool``): the version has a clean audit record (or one
with an override reason) for its own content hash — a subset, the records of its parents — and
its files match the lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import time
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from fsspec.implementations.local import LocalFileSystem
from pydantic import Field, ValidationError

from evaluators.core import Frozen, InputDataError
from tasks_lib.storage import Storage

LOCK_JSON = "lock.json"
AUDIT_JSON = "audit.json"
MANIFEST = "manifest.json"
SUBSET_JSON = "subset.json"
UNLOCKED = frozenset({AUDIT_JSON, LOCK_JSON})
"""Root files the lock leaves out: the publish gate's own records."""
CHUNK = 1 << 20
SHOWN = 3
"""Changed files named in one error beyond the first."""
RACY_NS = 1_000_000_000
"""A file changed less than this before it was hashed is not cached: a change within the
file system's timestamp granularity could leave its stat as it was (git's "racily clean")."""
REBUILD = ("restore the file or build a new version (medflows pool build …, medflows pool "
           "rotate …)")


class PoolUnusableError(InputDataError):
    """A pool version that must not be executed or scored: not audited, or not what it was
    locked as."""


class LockOrigin(StrEnum):
    """When a pool version was locked."""

    PUBLISH = "publish"
    FIRST_USE = "first_use"


class LockedFile(Frozen):
    """One locked file."""

    size: int = Field(ge=0, description="Bytes.")
    sha256: str = Field(description="Hex sha256 of the bytes.")


class PoolLock(Frozen):
    """``lock.json``: the files of a pool version as they were published."""

    format: int = Field(default=1, description="Lock format version.")
    content_hash: str = Field(description="The manifest's content_hash when locked.")
    origin: LockOrigin = Field(description="publish (gate or rotation) or first_use (a pool "
                                           "published before locks existed).")
    locked_at: datetime = Field(description="When the lock was written (UTC).")
    files: dict[str, LockedFile] = Field(description="Key (relative to the pool root) → file.")


class Stat(NamedTuple):
    """What identifies an unchanged local file (ctime cannot be set back by a user)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


def _local(root: Storage) -> bool:
    return isinstance(root.fs, LocalFileSystem)


def manifest_hash(root: Storage) -> str:
    """The ``content_hash`` of the manifest at ``root`` (a missing one names the build)."""
    if not root.exists(MANIFEST):
        raise InputDataError(root.url(MANIFEST), "no pool here (build one with medflows pool "
                                                 "build …)")
    try:
        data = root.read_json(MANIFEST)
        digest = data["content_hash"]
    except (ValueError, KeyError, TypeError):
        raise InputDataError(root.url(MANIFEST), "not a pool manifest (no content_hash)") from None
    if not isinstance(digest, str):
        raise InputDataError(root.url(MANIFEST), "not a pool manifest (no content_hash)")
    return digest


def pool_keys(root: Storage) -> list[str]:
    """Every file key under ``root`` the lock covers, sorted."""
    keys = (posixpath.relpath(str(p), root.root_path) for p in root.fs.find(root.root_path))
    return sorted(k for k in keys if k not in UNLOCKED)


def file_sha256(root: Storage, key: str) -> str:
    """Hex sha256 of a stored file, streamed."""
    h = hashlib.sha256()
    with root.open(key) as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


class DigestCache:
    """Verified digests of one local pool's files, keyed by :class:`Stat` (a local JSON file)."""

    def __init__(self, root: Storage) -> None:
        self.root = root
        self.path = _cache_path(root)
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        if self.path is not None and self.path.is_file():
            try:
                entries = json.loads(self.path.read_text(encoding="utf-8"))
                self.entries = entries if isinstance(entries, dict) else {}
            except (ValueError, OSError):
                self.entries = {}

    def stat(self, key: str) -> Stat | None:
        """The file's stat (None: missing or not local)."""
        if not _local(self.root):
            return None
        try:
            st = os.stat(self.root.path(key))
        except FileNotFoundError:
            return None
        return Stat(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def file(self, key: str) -> LockedFile | None:
        """Size and sha256 of the file now (None: missing); hashed only if its stat changed
        since it was last hashed."""
        st = self.stat(key)
        if st is not None:
            cached = self.entries.get(key)
            if isinstance(cached, list) and len(cached) == 5 and Stat(*cached[:4]) == st:
                return LockedFile(size=st.size, sha256=str(cached[4]))
        elif _local(self.root) or not self.root.exists(key):
            return None
        started = time.time_ns()
        digest = file_sha256(self.root, key)
        if st is None:
            return LockedFile(size=int(self.root.fs.size(self.root.path(key))), sha256=digest)
        if self.stat(key) == st and max(st.mtime_ns, st.ctime_ns) < started - RACY_NS:
            self.entries[key] = [*st, digest]
            self.dirty = True
        return LockedFile(size=st.size, sha256=digest)

    def save(self) -> None:
        """Write the cache (atomically) if anything was hashed."""
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.entries), encoding="utf-8")
        os.replace(tmp, self.path)
        self.dirty = False


def _cache_path(root: Storage) -> Path | None:
    """Where the digest cache of a local pool lives (None: not cached)."""
    home = Storage.from_settings()
    if not (_local(root) and _local(home)):
        return None
    name = hashlib.sha256(str(Path(root.root_path).resolve()).encode()).hexdigest()[:32]
    return Path(home.root_path) / "cache" / "pool-locks" / f"{name}.json"


def write_lock(pool_url: str, origin: LockOrigin = LockOrigin.PUBLISH) -> PoolLock:
    """Hash every file of the pool at ``pool_url`` and write its ``lock.json``."""
    root = Storage(pool_url)
    digest = manifest_hash(root)
    cache = DigestCache(root)
    files = {}
    for key in pool_keys(root):
        found = cache.file(key)
        if found is not None:
            files[key] = found
    lock = PoolLock(content_hash=digest, origin=origin, locked_at=datetime.now(UTC),
                    files=files)
    root.write_json(LOCK_JSON, lock)
    cache.save()
    return lock


def read_lock(root: Storage) -> PoolLock | None:
    """The pool's lock (None: a pool published before locks existed)."""
    if not root.exists(LOCK_JSON):
        return None
    try:
        lock = PoolLock.model_validate(root.read_json(LOCK_JSON))
        for key in lock.files:
            root.path(key)  # a key outside the pool raises StorageKeyError
    except (ValueError, ValidationError):
        raise PoolUnusableError(root.url(LOCK_JSON), "unreadable lock: the pool's lock was "
                                                     f"changed; {REBUILD}") from None
    return lock


def _changed(want: LockedFile, got: LockedFile | None) -> str | None:
    """What differs between a locked file and the file now (None: nothing)."""
    if got is None:
        return f"missing (locked with {want.size} bytes)"
    if got.size != want.size:
        return f"changed since the pool was locked ({got.size} bytes, locked {want.size})"
    if got.sha256 != want.sha256:
        return (f"changed since the pool was locked (sha256 {got.sha256[:12]}…, locked "
                f"{want.sha256[:12]}…)")
    return None


def verify_pool(pool_url: str, expected_hash: str | None = None) -> PoolLock:
    """Check the pool at ``pool_url`` against its lock (locking it first if it has none).

    Args:
        pool_url: A pool or subset version root.
        expected_hash: The content hash the caller relies on (a run's ``pool_hash``).

    Raises:
        PoolUnusableError: the manifest's hash is not ``expected_hash`` or not the locked one,
            or a locked file is missing or changed (the first named as the source, up to
            :data:`SHOWN` more in the reason).
    """
    root = Storage(pool_url)
    digest = manifest_hash(root)
    if expected_hash is not None and digest != expected_hash:
        raise PoolUnusableError(root.url(MANIFEST), f"content hash {digest[:12]}… is not the "
                                f"{expected_hash[:12]}… this run was made on; {REBUILD}")
    lock = read_lock(root)
    if lock is None:
        return write_lock(pool_url, LockOrigin.FIRST_USE)
    if lock.content_hash != digest:
        raise PoolUnusableError(root.url(MANIFEST), f"content hash {digest[:12]}… is not the "
                                f"locked {lock.content_hash[:12]}…; {REBUILD}")
    cache = DigestCache(root)
    problems = [(key, what) for key, want in lock.files.items()
                if (what := _changed(want, cache.file(key))) is not None]
    cache.save()
    if problems:
        key, what = problems[0]
        more = [k for k, _ in problems[1:]]
        also = f" (also changed: {', '.join(more[:SHOWN])}{', …' if len(more) > SHOWN else ''})"
        raise PoolUnusableError(root.url(key), f"{what}{also if more else ''}; {REBUILD}")
    return lock


def audit_problem(root: Storage, digest: str) -> str | None:
    """Why the pool at ``root`` has no usable audit record for content ``digest`` (None: it
    has one: clean, or unclean with an override reason)."""
    from tasks_lib.audits.report import GateRecord

    if not root.exists(AUDIT_JSON):
        return "no audit record (audit.json): this version's exploit audit did not finish"
    try:
        record = GateRecord.model_validate(root.read_json(AUDIT_JSON))
    except (ValueError, ValidationError):
        return "unreadable audit record (audit.json)"
    audited = str(record.report.get("pool_hash"))
    if audited != digest:
        return (f"the audit record (audit.json) is of other content (hash {audited[:12]}…, "
                f"the pool's {digest[:12]}…)")
    if record.report.get("clean") is not True and not (record.override or "").strip():
        return "the audit record (audit.json) is not clean and gives no override reason"
    return None


def _parent_urls(root: Storage) -> list[str]:
    try:
        parents = root.read_json(SUBSET_JSON)["parents"]
        return [str(p["url"]) for p in parents]
    except (ValueError, KeyError, TypeError):
        raise PoolUnusableError(root.url(SUBSET_JSON), "unreadable subset record (no parent "
                                                       "urls)") from None


def require_audited(pool_url: str, depth: int = 0) -> None:
    """The pool at ``pool_url`` has a usable audit record; a rotation subset (``subset.json``)
    is drawn from audited parents instead.

    Raises:
        PoolUnusableError: no record, one of other content, or unclean without an override
            (names ``medflows audit pool`` and the build command).
    """
    root = Storage(pool_url)
    digest = manifest_hash(root)
    if root.exists(SUBSET_JSON) and depth < 2:
        parents = _parent_urls(root)
        if not parents:
            raise PoolUnusableError(root.url(SUBSET_JSON), "a subset without parent pools")
        for parent in parents:
            require_audited(parent, depth + 1)
        return
    problem = audit_problem(root, digest)
    if problem is not None:
        raise PoolUnusableError(root.url(AUDIT_JSON), (
            f"{problem}; it is not used for execute or scoring. See its findings with: "
            f"medflows audit pool {root.root_url}; publish it with its build command "
            "(medflows pool build …; --audit-override REASON records why an unclean pool is "
            "used)"))


def require_usable(pool_url: str) -> PoolLock:
    """The one check before a pool version is executed or scored: audited
    (:func:`require_audited`) and unchanged since it was locked (:func:`verify_pool`)."""
    require_audited(pool_url)
    return verify_pool(pool_url)
