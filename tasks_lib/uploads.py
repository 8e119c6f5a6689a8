"""Upload mode: a submission folder handed in directly becomes an ordinary run.

Its regular files are copied to ``runs/<run_id>/submission/`` (symlinks are kept as links on a
local storage root so inspection still flags them; other special files are not copied and the
case counts as missing), a run record is written, and the one score flow scores it. The run id
is a digest of the task, pool version and submitted bytes: the same folder is the same run.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import shutil
from collections.abc import Collection
from pathlib import Path

from fsspec.implementations.local import LocalFileSystem

from evaluators.core import InputDataError, RunStatus, Tier
from tasks_lib.agents import upload_agent
from tasks_lib.ledger import store
from tasks_lib.records import RUN_JSON, SUBMISSION, RunRecord, read_run, run_store
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage, StorageKeyError
from tasks_lib.tracks.base import kit_for
from tasks_lib.tracks.limits import DEFAULT_LIMITS, SubmissionLimits

CHUNK = 1024 * 1024
"""Bytes read at a time: files are streamed, never read whole."""


def _key(p: Path) -> bytes:
    return p.name.encode("utf-8", "surrogateescape")


def check_folder(folder: Path) -> None:
    """A submission folder to upload must be a real folder (a symlink is refused)."""
    if folder.is_symlink():
        raise InputDataError(str(folder), "the submission folder is a symlink (refused)")
    if not folder.is_dir():
        raise InputDataError(str(folder), "submission folder not found")


def _entries(folder: Path, limits: SubmissionLimits = DEFAULT_LIMITS,
             wanted: Collection[str] = ()) -> list[Path]:
    """The folder's entries to store, by name: every ``wanted`` one present, plus the first
    ``max_entries + 1`` others (one more than inspection lists, so it can flag the excess)."""
    check_folder(folder)
    keep = set(wanted)
    named = [folder / n for n in sorted(keep) if os.path.lexists(folder / n)]
    with os.scandir(folder) as it:
        others = heapq.nsmallest(limits.max_entries + 1,
                                 (Path(e.path) for e in it if e.name not in keep), key=_key)
    return sorted(named + others, key=_key)


def _regular(p: Path, limits: SubmissionLimits) -> bool:
    return not p.is_symlink() and p.is_file() and p.stat().st_size <= limits.max_file_bytes


def _file_digest(p: Path) -> bytes:
    h = hashlib.sha256()
    with p.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.digest()


def submission_digest(folder: Path, limits: SubmissionLimits = DEFAULT_LIMITS,
                      wanted: Collection[str] = ()) -> str:
    """Digest of the stored entries' names and bytes (streamed) and link targets."""
    h = hashlib.sha256()
    for p in _entries(folder, limits, wanted):
        name = _key(p)
        if p.is_symlink():
            h.update(b"L" + name + os.readlink(p).encode("utf-8", "surrogateescape"))
        elif _regular(p, limits):
            h.update(b"F" + name + _file_digest(p))
    return h.hexdigest()


def copy_submission(folder: Path, dest: Storage, limits: SubmissionLimits = DEFAULT_LIMITS,
                    wanted: Collection[str] = ()) -> None:
    """Copy the regular files (streamed) and, locally, the symlinks as links into ``dest``;
    names storage refuses (e.g. with a backslash) are not copied."""
    local = isinstance(dest.fs, LocalFileSystem)
    for p in _entries(folder, limits, wanted):
        try:
            target_path = dest.path(p.name)
        except StorageKeyError:
            continue
        if p.is_symlink():
            if local:
                target = Path(target_path)
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink() or target.exists():
                    target.unlink()
                target.symlink_to(os.readlink(p))
        elif _regular(p, limits):
            dest.fs.makedirs(dest.root_path, exist_ok=True)
            with p.open("rb") as src, dest.fs.open(target_path, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)


def register_upload(task_id: str, folder: Path, pool_url: str, pool_id: str, pool_version: int,
                    pool_hash: str, track: str, wanted: Collection[str] = ()) -> RunRecord:
    """Store the folder as a run's submission and record the run (status completed).

    Args:
        wanted: File names the task asks for (always stored; other entries are capped at the
            kit's ``limits.max_entries``).
    """
    limits = kit_for(track).limits
    digest = submission_digest(folder, limits, wanted)
    run_id = "upload-" + hashlib.sha256(f"{task_id}|{pool_hash}|{digest}".encode()).hexdigest()[:16]
    if run_store(run_id).exists(RUN_JSON) and store.runs(run_id=run_id):
        return read_run(run_id)  # the same bytes on the same pool version: the same run
    copy_submission(folder, run_store(run_id).child(SUBMISSION), limits, wanted)
    record = RunRecord(
        run_id=run_id, agent=upload_agent(folder.name or "submission"), task_id=task_id,
        track=track, tier=Tier.STANDARD, status=RunStatus.COMPLETED, pool_url=pool_url,
        pool_id=pool_id, pool_version=pool_version, pool_hash=pool_hash)
    record_run(record)
    return record
