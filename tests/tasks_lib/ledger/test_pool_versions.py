"""One version allocator: builders racing for the same pool id get different versions for
different content and the same version for the same content, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow

N_PROC, PER_PROC = 6, 5
"""Builder processes, versions each reserves (each for its own content, plus one shared)."""

WORKER = """
import json, sys, time
from pathlib import Path
from tasks_lib.ledger import store
url, proc, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
store.get_engine(url)
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
own = [store.reserve_pool_version("race", f"p{proc}-{i}", url) for i in range(n)]
print(json.dumps({"own": own, "shared": store.reserve_pool_version("race", "shared", url)}))
"""


def test_racing_builders_get_distinct_versions(ledger_url: str, tmp_path: Path) -> None:
    store.get_engine(ledger_url)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, ledger_url, str(p), str(PER_PROC),
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for p in range(N_PROC)]
    time.sleep(1.0)
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    own = [v for o in outs for v in o["own"]]
    shared = {o["shared"] for o in outs}
    assert len(shared) == 1 and shared.isdisjoint(own)
    assert sorted([*own, *shared]) == list(range(1, N_PROC * PER_PROC + 2))
    rows = store.pools(ledger_url, pool_id="race")
    assert {r.kind for r in rows} == {store.PENDING} and len(rows) == N_PROC * PER_PROC + 1


def test_publishing_a_reserved_version_fills_its_row(ledger_url: str) -> None:
    version = store.reserve_pool_version("p", "h1", ledger_url)
    row = PoolRow(pool_id="p", version=version, track="medbench", content_hash="h1",
                  manifest_url="file:///p/v1/manifest.json", n_items=4, kind="subset",
                  parents_json='[{"pool":"bank@v1"}]')
    store.record_pool(row, ledger_url)
    [stored] = store.pools(ledger_url, pool_id="p")
    assert (stored.track, stored.kind, stored.n_items, stored.parents_json) == (
        "medbench", "subset", 4, '[{"pool":"bank@v1"}]')
    assert store.reserve_pool_version("p", "h2", ledger_url) == 2
    with pytest.raises(ValueError, match="another content hash"):
        store.record_pool(row.model_copy(update={"version": 2}), ledger_url)
