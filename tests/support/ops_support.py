"""Helpers of the operations tests: starting and stopping servers on 127.0.0.1, and small pools
made of real questions, published without running the construct flow."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from support.audited import record_override
from tasks_lib.domain import Track
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.qa.ingest import read_questions
from tasks_lib.qa.pool import FILES, pool_files, public_view, reference
from tasks_lib.qa.types import DatasetEntry, PoolManifest, PublishedPool
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

QA_SOURCE = get_settings().data_root / "medagentsbench"
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group we started (by its id), then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class PrefectServer(NamedTuple):
    """A running server and the environment that talks to it."""

    api_url: str
    ui_url: str
    env: dict[str, str]
    home: Path


def publish_test_pool(pool_id: str, per_dataset: dict[str, int]) -> PublishedPool:
    """A pool-shaped root of the first N real questions of each dataset, recorded in the ledger."""
    items = []
    entries = {}
    for ds, n in per_dataset.items():
        chosen = read_questions(ds, str(QA_SOURCE / "questions" / f"{ds}.test.jsonl")).items[:n]
        items += chosen
        entries[ds] = DatasetEntry(n_items=n, realidx=[it.realidx for it in chosen],
                                   n_ingested=n, n_rejected=0, n_hard=n, n_withheld=0)
    digest = pool_files([public_view(it) for it in items], [reference(it) for it in items],
                        []).digest
    version = store.reserve_pool_version(pool_id, digest)
    root = Storage.from_settings().child(f"pools/{pool_id}/v{version}")
    root.write_jsonl(FILES["public_items"], [public_view(it) for it in items])
    root.write_jsonl(FILES["exemplars"], [])
    root.write_jsonl(FILES["references"], [reference(it) for it in items])
    manifest = PoolManifest(
        pool_id=pool_id, version=version, content_hash=digest, created_at=datetime.now(UTC),
        track=Track.QA.value, selection={"rule": "first-n (test)"}, datasets=entries, deid={},
        deid_items=[], meld={"screened": False}, review=None, files=FILES)
    root.write_json("manifest.json", manifest)
    record_override(root.root_url)
    store.record_pool(PoolRow(pool_id=pool_id, version=version, track=Track.QA.value,
                              content_hash=digest, manifest_url=root.url("manifest.json"),
                              n_items=len(items)))
    return PublishedPool(url=root.root_url, manifest=manifest)
