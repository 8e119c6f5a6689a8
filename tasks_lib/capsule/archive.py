"""The capsule format: a tar (optionally gzip-compressed) or zip archive whose ``capsule.json``
(:class:`CapsuleManifest`) lists every other member with its size and sha256, and the format
version. Members use the storage layout's own keys (``runs/<run_id>/…``, ``pools/<id>/vN/…``,
``llm-cache/…``, ``judges/…``) plus ``cards/`` and ``ledger/``.

Writing is deterministic (sorted members, fixed timestamps and modes), so two exports of the same
runs differ only in ``capsule.json``'s ``created_at``. Reading (:func:`open_capsule`) unpacks into
a private folder and checks every member against the manifest before the caller writes
anything: a member changed, missing, added, duplicated, not a regular file or named outside the
archive is refused with the member's name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import posixpath
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import IO, Any, BinaryIO

from pydantic import Field, ValidationError

from evaluators.core import Frozen, InputDataError, Track

FORMAT = 1
"""Version of the capsule format this code writes and reads."""
CAPSULE_JSON = "capsule.json"
SUFFIXES = {".zip": "zip", ".tar": "tar", ".tar.gz": "tar.gz", ".tgz": "tar.gz"}
"""Archive kinds by the file name's ending."""
CHUNK = 1 << 20
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""Timestamp of every zip member (the earliest zip allows): archives are reproducible."""


class Member(Frozen):
    """One archive member as exported."""

    size: int = Field(ge=0, description="Bytes.")
    sha256: str = Field(description="Hex sha256 of the bytes.")


class PoolEntry(Frozen):
    """A pool version a capsule refers to."""

    pool_id: str = Field(description="Pool id.")
    version: int = Field(ge=1, description="Pool version.")
    content_hash: str = Field(description="The version's content hash (public + private files).")
    track: str = Field(description="Track whose kit reads and scores the pool.")
    files: bool = Field(description="The pool's files are in the capsule (``pools/<id>/vN/``: "
                                    "public view AND private references); False: only its "
                                    "manifest, and the importer must hold this content.")


class RunEntry(Frozen):
    """A run a capsule carries."""

    run_id: str = Field(description="Run id.")
    agent_id: str = Field(description="Agent of the run.")
    task_id: str = Field(description="Task id (or QA pool id).")
    track: Track = Field(description="Track.")
    pool_id: str = Field(description="Pool the run used.")
    pool_version: int = Field(description="Its version.")
    score_cards: dict[str, str] = Field(
        default_factory=dict, description="Evaluator version → member of the score card stored "
                                          "for the run under that version when exported.")
    call_keys: int = Field(default=0, description="Call-cache keys the run's journal lists.")


class CapsuleManifest(Frozen):
    """``capsule.json``: what the capsule holds and the hash of every other member."""

    format: int = Field(description="Capsule format version (:data:`FORMAT`).")
    created_at: datetime = Field(description="When the capsule was exported (UTC).")
    medflows_version: str = Field(description="Version of the medflows that exported it.")
    scope: str = Field(description="What was exported: ``run …``, ``pool ID@vN``, ``report …``.")
    private: bool = Field(description="Holds pool references (``--with-pool-files``): share "
                                      "it only with whom may see the private references.")
    cards: list[str] = Field(description="Task ids whose cards are under ``cards/``.")
    pools: list[PoolEntry] = Field(description="Pool versions of the runs (or the one exported).")
    runs: list[RunEntry] = Field(description="Runs carried.")
    evaluator_versions: dict[str, str] = Field(
        description="Track → its kit's evaluator version in the exporting medflows.")
    call_cache_entries: int = Field(description="Call-cache replies carried (``llm-cache/``).")
    call_cache_missing: int = Field(
        description="Journaled keys whose reply was not in the exporter's call cache (a call "
                    "that failed, or a cache cleared since): re-execution asks those again.")
    members: dict[str, Member] = Field(description="Every other member → size and sha256.")


def archive_kind(path: Path) -> str:
    """``zip``, ``tar`` or ``tar.gz`` from the file name's ending."""
    name = path.name.lower()
    for suffix, kind in sorted(SUFFIXES.items(), key=lambda s: -len(s[0])):
        if name.endswith(suffix):
            return kind
    raise InputDataError(str(path), f"unknown capsule type; name it with one of "
                                    f"{', '.join(sorted(SUFFIXES))}")


def member_name(name: str) -> str:
    """``name`` if it is a clean relative member name (else ``ValueError``)."""
    norm = posixpath.normpath(name)
    if (not name or name.startswith("/") or "\\" in name or norm != name
            or norm == ".." or norm.startswith("../")):
        raise ValueError(f"member name {name!r} is not a clean relative path")
    return name


class _Hashing(io.RawIOBase):
    """A read-only stream that hashes what passes through it."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner, self.digest, self.size = inner, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self.digest.update(data)
        self.size += len(data)
        buffer[:len(data)] = data
        return len(data)


class CapsuleWriter:
    """Writes one archive; :meth:`add` members, then :meth:`close` with the manifest, which
    gets the member table this writer computed."""

    def __init__(self, path: Path) -> None:
        self.path, self.kind = path, archive_kind(path)
        self.members: dict[str, Member] = {}
        self._pending: list[tuple[str, bytes | tuple[Any, str, int]]] = []

    def add_bytes(self, name: str, data: bytes) -> None:
        """Add a member with these bytes."""
        self._pending.append((member_name(name), data))

    def add_file(self, name: str, fs: Any, path: str, size: int) -> None:
        """Add a member streamed from ``path`` on the fsspec filesystem ``fs`` (``size`` bytes)."""
        self._pending.append((member_name(name), (fs, path, size)))

    def _open(self, source: bytes | tuple[Any, str, int]) -> tuple[IO[bytes], int]:
        if isinstance(source, bytes):
            return io.BytesIO(source), len(source)
        fs, path, size = source
        return fs.open(path, "rb"), size

    def close(self, manifest: CapsuleManifest) -> CapsuleManifest:
        """Write every member in name order, then ``capsule.json`` (``manifest`` with the
        member table); returns that manifest. The file appears only when complete."""
        names = [n for n, _ in self._pending]
        if len(set(names)) != len(names) or CAPSULE_JSON in names:
            raise ValueError("duplicate capsule member")  # our bug: the exporter names members
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.partial")
        try:
            final = self._write(partial, manifest)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, self.path)
        return final

    def _write(self, target: Path, manifest: CapsuleManifest) -> CapsuleManifest:
        with open(target, "wb") as raw, ExitStack() as stack:
            add = _adder(raw, self.kind, stack)
            for name, source in sorted(self._pending, key=lambda p: p[0]):
                stream, size = self._open(source)
                with stream:
                    hashing = _Hashing(stream)
                    add(name, hashing, size)  # type: ignore[arg-type]
                self.members[name] = Member(size=hashing.size, sha256=hashing.digest.hexdigest())
            final = manifest.model_copy(update={"members": self.members})
            text = final.model_dump_json(indent=2).encode()
            add(CAPSULE_JSON, io.BytesIO(text), len(text))
        return final


Add = Callable[[str, IO[bytes], int], None]
"""Adds one member ``(name, stream, size)`` to the archive being written."""


def _adder(raw: BinaryIO, kind: str, stack: ExitStack) -> Add:
    """The member writer of a ``kind`` archive on ``raw`` (closed with ``stack``),
    reproducible: fixed timestamps and modes."""
    if kind == "zip":
        zf = stack.enter_context(zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED))

        def add_zip(name: str, stream: IO[bytes], size: int) -> None:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as out:
                while chunk := stream.read(CHUNK):
                    out.write(chunk)

        return add_zip
    target: IO[bytes] | gzip.GzipFile = raw
    if kind == "tar.gz":
        target = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
    tf = stack.enter_context(tarfile.TarFile(fileobj=target, mode="w", format=tarfile.PAX_FORMAT))

    def add_tar(name: str, stream: IO[bytes], size: int) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, 0, 0o644
        tf.addfile(info, stream)

    return add_tar


def _entries(path: Path, kind: str) -> Iterator[tuple[str, IO[bytes] | None]]:
    """``(name, stream)`` of every archive entry that is not a folder; ``stream`` None for an
    entry that is not a regular file."""
    if kind == "zip":
        with zipfile.ZipFile(path) as zf:
            for entry in zf.infolist():
                if entry.is_dir():
                    continue
                if (entry.external_attr >> 16) & 0o170000 not in (0, 0o100000):
                    yield entry.filename, None  # a symlink or device stored in the zip
                    continue
                with zf.open(entry) as stream:
                    yield entry.filename, stream
        return
    with tarfile.open(path, "r:*") as tf:
        for info in tf:
            if info.isdir():
                continue
            yield info.name, tf.extractfile(info) if info.isfile() else None


READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, gzip.BadGzipFile)


def _unpack(path: Path, into: Path) -> dict[str, Member]:
    """Write every entry under ``into``; the member table found (name → size, sha256)."""
    found: dict[str, Member] = {}
    current = "the archive"
    try:
        for name, stream in _entries(path, archive_kind(path)):
            current = f"member {name}"
            try:
                member_name(name)
            except ValueError as exc:
                raise InputDataError(str(path), f"{current}: {exc}; nothing was imported") from None
            if stream is None:
                raise InputDataError(str(path), f"{current} is not a regular file; nothing was "
                                                "imported")
            if name in found:
                raise InputDataError(str(path), f"{current} appears twice; nothing was imported")
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            digest, size = hashlib.sha256(), 0
            with open(target, "wb") as out:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            found[name] = Member(size=size, sha256=digest.hexdigest())
    except READ_ERRORS as exc:
        raise InputDataError(str(path), f"not a readable capsule ({current}: "
                                        f"{type(exc).__name__}: {exc}); nothing was "
                                        "imported") from None
    return found


def open_capsule(path: Path, into: Path) -> CapsuleManifest:
    """Unpack the capsule at ``path`` into the empty folder ``into`` and check it whole.

    Raises:
        InputDataError: naming the capsule and the first member that is changed (size or
            sha256), missing, not listed, not a regular file or badly named; or an unreadable
            archive or ``capsule.json``; or a format newer than this medflows reads.
    """
    if not path.is_file():
        raise InputDataError(str(path), "no such capsule file")
    found = _unpack(path, into)
    if CAPSULE_JSON not in found:
        raise InputDataError(str(path), f"no {CAPSULE_JSON}: not a medflows capsule")
    try:
        manifest = CapsuleManifest.model_validate_json((into / CAPSULE_JSON).read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "capsule"
        raise InputDataError(str(path), f"member {CAPSULE_JSON} is not a capsule manifest "
                                        f"({where}: {first['msg']}); nothing was "
                                        "imported") from None
    if manifest.format > FORMAT:
        raise InputDataError(str(path), f"capsule format {manifest.format} is newer than this "
                                        f"medflows reads ({FORMAT}): upgrade medflows")
    del found[CAPSULE_JSON]
    for name in sorted(set(manifest.members) | set(found)):
        want, got = manifest.members.get(name), found.get(name)
        if want is None:
            problem = f"is not listed in {CAPSULE_JSON}"
        elif got is None:
            problem = f"is listed in {CAPSULE_JSON} but missing"
        elif got != want:
            problem = (f"does not match {CAPSULE_JSON} (sha256 {got.sha256[:12]}…, {got.size} "
                       f"bytes; exported {want.sha256[:12]}…, {want.size} bytes): it was "
                       "changed after export")
        else:
            continue
        raise InputDataError(str(path), f"member {name} {problem}; nothing was imported")
    return manifest


def file_sha256(path: Path) -> str:
    """Hex sha256 of a local file (the capsule's own digest, to publish beside it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
