"""Upload mode: a submission folder handed in directly becomes an ordinary run.

Its regular files are copied to ``runs/<run_id>/submission/`` (symlinks are kept as links on a
local storage root so inspection still flags them; other special files are not copied and the
case counts as missing), a run record is written, and the one score flow scores it. The run id
is a digest of the task, pool version and submitted bytes: the same folder is the same run.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from fsspec.implementations.local import LocalFileSystem

from evaluators.core import InputDataError, RunStatus, Tier
from tasks_lib.agents import upload_agent
from tasks_lib.ledger import store
from tasks_lib.records import RUN_JSON, SUBMISSION, RunRecord, read_run, run_store
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for

MAX_FILE_BYTES = 256 * 1024 * 1024
"""Files larger than this are not copied (inspection reports the case as missing)."""


def _entries(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise InputDataError(str(folder), "submission folder not found")
    return sorted(folder.iterdir(), key=lambda p: p.name.encode("utf-8", "surrogateescape"))


def submission_digest(folder: Path) -> str:
    """Digest of the folder's regular files (names and bytes) and link targets."""
    h = hashlib.sha256()
    for p in _entries(folder):
        name = p.name.encode("utf-8", "surrogateescape")
        if p.is_symlink():
            h.update(b"L" + name + os.readlink(p).encode("utf-8", "surrogateescape"))
        elif p.is_file() and p.stat().st_size <= MAX_FILE_BYTES:
            h.update(b"F" + name + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def copy_submission(folder: Path, dest: Storage) -> None:
    """Copy the regular files (and, locally, the symlinks as links) into ``dest``."""
    local = isinstance(dest.fs, LocalFileSystem)
    for p in _entries(folder):
        if p.is_symlink():
            if local:
                target = Path(dest.path(p.name))
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink() or target.exists():
                    target.unlink()
                target.symlink_to(os.readlink(p))
        elif p.is_file() and p.stat().st_size <= MAX_FILE_BYTES:
            dest.write_bytes(p.name, p.read_bytes())


def register_upload(task_id: str, folder: Path, pool_url: str, pool_id: str, pool_version: int,
                    pool_hash: str, track: str) -> RunRecord:
    """Store the folder as a run's submission and record the run (status completed)."""
    kit_for(track)
    digest = submission_digest(folder)
    run_id = "upload-" + hashlib.sha256(f"{task_id}|{pool_hash}|{digest}".encode()).hexdigest()[:16]
    if run_store(run_id).exists(RUN_JSON) and store.runs(run_id=run_id):
        return read_run(run_id)  # the same bytes on the same pool version: the same run
    copy_submission(folder, run_store(run_id).child(SUBMISSION))
    record = RunRecord(
        run_id=run_id, agent=upload_agent(folder.name or "submission"), task_id=task_id,
        track=track, tier=Tier.STANDARD, status=RunStatus.COMPLETED, pool_url=pool_url,
        pool_id=pool_id, pool_version=pool_version, pool_hash=pool_hash)
    record_run(record)
    return record
