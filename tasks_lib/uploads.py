"""Upload mode: a submission folder handed in directly becomes an ordinary run.

Its regular files are copied to ``runs/<run_id>/submission/`` (symlinks are kept as links on a
local storage root so inspection still flags them), a run record is written, and the one score
flow scores it. An entry that cannot be stored as it is — a file over the kit's
``max_file_bytes``, a special file, an unreadable one, a name storage refuses, entries beyond
``max_entries + 1`` — is never silently dropped: the run is recorded ``invalid`` with
``'<file>: <what> (rule: <rule>)'`` per entry, and its card says so. The run id is a digest of
the task, pool version and every entry (stored files by name and bytes; the others by name and
size, or by name beyond the listed ones): the same folder is the same run, and a folder with an
extra file is another run.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import shutil
import stat
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import NamedTuple

from fsspec.implementations.local import LocalFileSystem

from evaluators.core import InputDataError, RunStatus, Tier
from tasks_lib.agents import upload_agent
from tasks_lib.ledger import store
from tasks_lib.records import RUN_JSON, SUBMISSION, RunRecord, read_run, run_store
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage, StorageKeyError
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits, violation
from tasks_lib.tracks.base import kit_for

CHUNK = 1024 * 1024
"""Bytes read at a time: files are streamed, never read whole."""
MOD = 2**256


def _key(p: Path) -> bytes:
    return p.name.encode("utf-8", "surrogateescape")


def check_folder(folder: Path) -> None:
    """A submission folder to upload must be a real folder (a symlink is refused)."""
    if folder.is_symlink():
        raise InputDataError(str(folder), "the submission folder is a symlink (refused)")
    if not folder.is_dir():
        raise InputDataError(str(folder), "submission folder not found")


class Listing(NamedTuple):
    """The entries of a submission folder, split into the ones stored and the rest."""

    stored: list[Path]
    """Entries to store, by name: every ``wanted`` one present, the first others."""
    n_more: int
    """Entries beyond the stored ones (never stored, never opened)."""
    more_digest: int
    """Order-free digest of those entries' names (a sum of sha256 values mod 2**256)."""


def breach(name: str, rule: str, what: str) -> str:
    """The reason of one broken limit: ``'<file>: <what> (rule: <rule>)'``."""
    return str(violation(name, rule, what))


def _name_value(name: bytes) -> int:
    return int.from_bytes(hashlib.sha256(name).digest(), "big")


def _listing(folder: Path, limits: SubmissionLimits = DEFAULT_LIMITS,
             wanted: Collection[str] = ()) -> Listing:
    """Every ``wanted`` entry present plus the first ``max_entries + 1`` others by name (one
    more than inspection lists, so it can flag the excess); the rest are counted and digested
    by name, streamed (a folder of a million entries is not held in memory)."""
    check_folder(folder)
    keep = set(wanted)
    named = [folder / n for n in sorted(keep) if os.path.lexists(folder / n)]
    total, count = 0, 0

    def others() -> Iterator[Path]:
        nonlocal total, count
        with os.scandir(folder) as it:
            for e in it:
                if e.name not in keep:
                    total, count = (total + _name_value(_key(Path(e.name)))) % MOD, count + 1
                    yield Path(e.path)

    first = heapq.nsmallest(limits.max_entries + 1, others(), key=_key)
    rest = (total - sum(_name_value(_key(p)) for p in first)) % MOD
    return Listing(sorted(named + first, key=_key), count - len(first), rest)


def refusal(p: Path, limits: SubmissionLimits, local: bool = True) -> str | None:
    """Why the entry ``p`` cannot be stored as it is (``'<file>: <what> (rule: <rule>)'``;
    None: it is stored). Nothing is opened."""
    name = p.name
    if p.is_symlink():
        return None if local else breach(name, "files_safe", "a symlink (not stored on a "
                                                             "remote storage root)")
    try:
        st = p.stat()
    except OSError as exc:
        return breach(name, "files_safe", f"cannot be read ({exc.strerror})")
    if not stat.S_ISREG(st.st_mode):
        return breach(name, "files_safe", "not a regular file")
    if st.st_size > limits.max_file_bytes:
        return breach(name, "file_size", f"{st.st_size} bytes, larger than "
                                         f"{limits.max_file_bytes} bytes")
    if not os.access(p, os.R_OK):
        return breach(name, "files_safe", "cannot be read (permission denied)")
    return None


def _regular(p: Path, limits: SubmissionLimits) -> bool:
    return not p.is_symlink() and refusal(p, limits) is None


def _file_digest(p: Path) -> bytes:
    h = hashlib.sha256()
    with p.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.digest()


def submission_digest(folder: Path, limits: SubmissionLimits = DEFAULT_LIMITS,
                      wanted: Collection[str] = ()) -> str:
    """Digest of every entry: the stored ones' names and bytes (streamed) or link targets, the
    names and sizes of files too large or too odd to store, and the names of entries beyond
    the listed ones. A clean folder's digest is the one it always had."""
    h = hashlib.sha256()
    listing = _listing(folder, limits, wanted)
    for p in listing.stored:
        name = _key(p)
        if p.is_symlink():
            h.update(b"L" + name + os.readlink(p).encode("utf-8", "surrogateescape"))
        elif _regular(p, limits):
            h.update(b"F" + name + _file_digest(p))
        else:
            size = p.lstat().st_size if os.path.lexists(p) else -1
            h.update(b"X" + name + b"\0" + str(size).encode())
    if listing.n_more:
        h.update(b"N" + str(listing.n_more).encode() + b"\0" +
                 listing.more_digest.to_bytes(32, "big"))
    return h.hexdigest()


def copy_submission(folder: Path, dest: Storage, limits: SubmissionLimits = DEFAULT_LIMITS,
                    wanted: Collection[str] = ()) -> list[str]:
    """Copy the regular files (streamed) and, locally, the symlinks as links into ``dest``.

    Returns:
        Why each entry that was not copied was not (:func:`refusal`; a name storage refuses,
        e.g. with a backslash; entries beyond the listed ones): an upload with any is invalid.
    """
    local = isinstance(dest.fs, LocalFileSystem)
    listing = _listing(folder, limits, wanted)
    refused = []
    if listing.n_more:
        refused.append(breach(folder.name or str(folder), "file_count",
                              f"{listing.n_more} entries beyond the first "
                              f"{limits.max_entries + 1} are not stored"))
    for p in listing.stored:
        try:
            target_path = dest.path(p.name)
        except StorageKeyError:
            refused.append(breach(p.name, "file_name", "a name storage cannot hold"))
            continue
        if (why := refusal(p, limits, local)) is not None:
            refused.append(why)
        elif p.is_symlink():
            target = Path(target_path)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            target.symlink_to(os.readlink(p))
        else:
            dest.fs.makedirs(dest.root_path, exist_ok=True)
            with p.open("rb") as src, dest.fs.open(target_path, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
    return refused


def register_upload(task_id: str, folder: Path, pool_url: str, pool_id: str, pool_version: int,
                    pool_hash: str, track: str, wanted: Collection[str] = ()) -> RunRecord:
    """Store the folder as a run's submission and record the run: status completed, or
    invalid when an entry could not be stored (each reason in ``violations``, so scoring makes
    the upload invalid with them instead of missing what it never saw).

    Args:
        wanted: File names the task asks for (always stored; other entries are capped at the
            kit's ``limits.max_entries``).
    """
    limits = kit_for(track).limits
    digest = submission_digest(folder, limits, wanted)
    run_id = "upload-" + hashlib.sha256(f"{task_id}|{pool_hash}|{digest}".encode()).hexdigest()[:16]
    if run_store(run_id).exists(RUN_JSON) and store.runs(run_id=run_id):
        return read_run(run_id)  # the same bytes on the same pool version: the same run
    refused = copy_submission(folder, run_store(run_id).child(SUBMISSION), limits, wanted)
    record = RunRecord(
        run_id=run_id, agent=upload_agent(folder.name or "submission"), task_id=task_id,
        track=track, tier=Tier.STANDARD,
        status=RunStatus.INVALID if refused else RunStatus.COMPLETED, pool_url=pool_url,
        pool_id=pool_id, pool_version=pool_version, pool_hash=pool_hash, violations=refused)
    record_run(record)
    return record
