"""Leases and the sweep of dead runs (:mod:`tasks_lib.sandbox.lease`, :mod:`tasks_lib.sweep`),
on real processes: an owner that exits leaving a process group and a scratch folder behind, a
live owner, a reused pid, another host, a folder replaced at the leased path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults.procs import alive, cmdline

from tasks_lib.processes import proc_start
from tasks_lib.sandbox.lease import Lease, LeaseRecord, lease_dirs, read_lease
from tasks_lib.settings import reset_settings
from tasks_lib.sweep import sweep_orphans


@pytest.fixture
def leases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private storage root, so only this test's leases are swept."""
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    reset_settings()
    yield lease_dirs()[0]
    reset_settings()


def _marked(marker: str) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and marker in cmdline(int(p.name)) and alive(int(p.name))]


OWNER = textwrap.dedent("""
    import subprocess, sys
    from pathlib import Path
    from tasks_lib.sandbox.lease import Lease
    scratch = Path(sys.argv[1]); scratch.mkdir()
    (scratch / "big").write_bytes(b"x" * 3_000_000)
    lease = Lease("run-dead", scratch=[scratch])
    child = subprocess.Popen(["/bin/sh", "-c", f"sleep 300; echo {sys.argv[2]}"],
                             start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    lease.add_group(child.pid)
    print(lease.path, flush=True)
""")
"""An owner that starts a process group of its own (no die-with-parent) and exits without
releasing its lease, as a killed CLI would."""


def test_sweep_kills_the_group_and_frees_the_scratch_of_a_dead_owner(leases: Path,
                                                                     tmp_path: Path) -> None:
    marker = f"orphan-{uuid.uuid4().hex[:8]}"
    scratch = tmp_path / "workspace"
    done = subprocess.run([sys.executable, "-c", OWNER, str(scratch), marker],
                          capture_output=True, text=True, check=True, timeout=60)
    lease_path = Path(done.stdout.strip())
    try:
        assert lease_path.parent == leases and _marked(marker), "the orphan should still run"
        record = read_lease(lease_path)
        assert record is not None and not record.owner_alive()
        removed = sweep_orphans(grace_s=0.5)
        assert not _marked(marker)
        assert not scratch.exists() and not lease_path.exists()
        assert any("killed 2 processes of group" in line for line in removed), removed
        assert any(f"removed scratch {scratch}" in line and "2.9 MiB" in line
                   for line in removed), removed
        assert sweep_orphans() == []  # nothing left for the next command
    finally:
        for pid in _marked(marker):
            os.kill(pid, 9)


def test_live_foreign_and_reused_leases(leases: Path, tmp_path: Path) -> None:
    keep, foreign, reused = (tmp_path / n for n in ("keep", "foreign", "reused"))
    for folder in (keep, foreign, reused):
        folder.mkdir()
    live = Lease("run-live", scratch=[keep])
    other = Lease("run-other", scratch=[foreign])
    other.record = other.record.model_copy(update={"host": "another-host", "owner_pid": 1})
    other._write()
    # our own pid with another start time: a process that reused a dead owner's pid
    stale = Lease("run-reused", scratch=[reused])
    stale.record = stale.record.model_copy(update={"owner_start": stale.record.owner_start - 1})
    stale._write()
    # a host without /proc start times (owner_start 0): the live pid alone keeps the lease
    bare = Lease("run-bare", scratch=[keep])
    bare.record = bare.record.model_copy(update={"owner_start": 0})
    bare._write()
    removed = sweep_orphans()
    assert bare.path.exists()
    bare.release()
    assert removed == [f"lease {stale.record.lease_id} (owner pid {os.getpid()} gone): removed "
                       f"scratch {reused} (0.0 MiB)"]
    assert keep.is_dir() and foreign.is_dir() and not reused.exists()
    assert live.path.exists() and other.path.exists() and not stale.path.exists()
    live.release()
    assert not live.path.exists()
    live.add_group(os.getpid())  # a change after the release writes nothing
    assert not live.path.exists()


def test_a_folder_replaced_at_the_leased_path_is_kept(leases: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    lease = Lease("run-gone", scratch=[scratch])
    scratch.rename(tmp_path / "moved")  # still exists: the new folder gets another inode
    scratch.mkdir()
    (scratch / "keep.txt").write_text("not the run's")
    data = json.loads(lease.path.read_text())
    data["owner_start"] += 1
    lease.path.write_text(json.dumps(data))
    assert sweep_orphans() == [f"lease {lease.record.lease_id} (owner pid {os.getpid()} gone): "
                               "released (nothing was left)"]
    assert (scratch / "keep.txt").exists() and not lease.path.exists()


def test_a_reused_group_leader_is_not_killed(leases: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        lease = Lease("run-pgid")
        lease.add_group(sleeper.pid)
        start = proc_start(sleeper.pid)
        assert start is not None
        record = LeaseRecord.model_validate_json(lease.path.read_text())
        wrong = record.model_copy(update={
            "owner_start": record.owner_start + 1,
            "groups": [g.model_copy(update={"leader_start": start + 1}) for g in record.groups]})
        lease.path.write_text(wrong.model_dump_json())
        sweep_orphans(grace_s=0.1)
        time.sleep(0.1)
        assert sleeper.poll() is None, "a group whose leader is another process was killed"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unreadable_and_claimed_leases(leases: Path) -> None:
    leases.mkdir(parents=True, exist_ok=True)
    (leases / "torn.json").write_text("{")
    fresh_claim = leases / "run-x.sweeping"
    fresh_claim.write_text("{}")
    assert sweep_orphans() == ["unreadable lease torn.json deleted"]
    assert not (leases / "torn.json").exists()
    assert fresh_claim.exists(), "a claim of a sweep that still runs is left to it"
    old = time.time() - 3600
    os.utime(fresh_claim, (old, old))
    assert sweep_orphans() == ["unreadable lease run-x.sweeping deleted"]
