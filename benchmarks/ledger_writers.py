"""Ledger write throughput with 8 concurrent writer processes, on SQLite and PostgreSQL.
Reference: one writer process on the same backend.

Each writer process writes ``ROWS`` rows through the public ledger functions, the way execute and
score do: a run upsert (:func:`tasks_lib.ledger.store.upsert_run`) and a score append
(:func:`~tasks_lib.ledger.store.append_score`) per run, one transaction each; every 10th run is
one all writers upsert and score concurrently (the keys that race). The writers start together
(after their imports and their engine are ready); the time is from the start signal to the last
writer's end. Afterwards the ledger is checked: every row is there, none twice.

SQLite: a file in a temporary folder (WAL, ``BEGIN IMMEDIATE``). PostgreSQL: a new database on
``MEDFLOWS_BENCH_POSTGRES_URL`` (default: the local server on 127.0.0.1:5432, user ``postgres``),
dropped at the end. Ends with ``RESULT rows_per_s_sqlite=… rows_per_s_postgres=… …`` (8 writers).
Run: ``.venv/bin/python benchmarks/ledger_writers.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ADMIN_URL = os.environ.get("MEDFLOWS_BENCH_POSTGRES_URL",
                           "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")
WRITERS, ROWS, SHARED_EVERY = 8, 500, 10

WRITER = """
import json, sys, time
from pathlib import Path
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import RunRow, ScoreRow
url, name, n_rows, every, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \\
    Path(sys.argv[5])
store.get_engine(url)
while not go.exists():
    time.sleep(0.005)
started = time.time()
for i in range(n_rows // 2):
    run_id = f"shared-{i}" if i % every == 0 else f"{name}-{i}"
    agent = "shared" if i % every == 0 else name
    store.upsert_run(RunRow(run_id=run_id, agent_id=agent, task_id="t", tier="standard",
                            status="completed", turns=i), url)
    store.append_score(ScoreRow(run_id=run_id, evaluator_version="ev/1", task_score=0.5), url)
print(json.dumps({"started": started, "ended": time.time()}))
"""


def run_writers(url: str, n_writers: int, tag: str, workdir: Path) -> float:
    """Rows per second of ``n_writers`` processes writing ``ROWS`` rows each into ``url``."""
    go = workdir / f"go-{tag}"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, f"{tag}-w{w}", str(ROWS),
                               str(SHARED_EVERY), str(go)], stdout=subprocess.PIPE, text=True)
             for w in range(n_writers)]
    time.sleep(3.0 + n_writers)  # imports and engines ready before the start signal
    go.touch()
    spans = []
    for p in procs:
        out, _ = p.communicate(timeout=900)
        if p.returncode:
            raise RuntimeError(f"a writer failed (exit {p.returncode}) on {tag}")
        spans.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(s["ended"] for s in spans) - min(s["started"] for s in spans)
    check(url, n_writers, tag)
    return n_writers * ROWS / wall


def check(url: str, n_writers: int, tag: str) -> None:
    """Every run and score of this pass is in the ledger exactly once."""
    from tasks_lib.ledger import store

    own = ROWS // 2 - len(range(0, ROWS // 2, SHARED_EVERY))
    with store.get_engine(url).connect() as conn:
        n_runs = conn.execute(text("SELECT COUNT(*) FROM runs WHERE agent_id LIKE :t"),
                              {"t": f"{tag}-%"}).scalar_one()
        n_scores = conn.execute(text(
            "SELECT COUNT(*) FROM scores s JOIN runs r ON r.run_id = s.run_id "
            "WHERE r.agent_id LIKE :t"), {"t": f"{tag}-%"}).scalar_one()
        dups = conn.execute(text(
            "SELECT COUNT(*) FROM (SELECT run_id, evaluator_version FROM scores "
            "GROUP BY run_id, evaluator_version HAVING COUNT(*) > 1) d")).scalar_one()
    if (n_runs, n_scores, dups) != (n_writers * own, n_writers * own, 0):
        raise AssertionError(f"{tag}: runs={n_runs} scores={n_scores} duplicated={dups}, "
                             f"expected {n_writers * own} each and none duplicated")


def measure(url: str, workdir: Path) -> tuple[float, float]:
    """(rows/s of one writer, rows/s of ``WRITERS`` writers) on the ledger at ``url``."""
    from tasks_lib.ledger import store

    store.get_engine(url)  # migrate once
    store.dispose_engines()
    one = run_writers(url, 1, "one", workdir)
    many = run_writers(url, WRITERS, "many", workdir)
    return one, many


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="medflows-bench-ledger-"))
    sqlite_one, sqlite_many = measure(f"sqlite:///{workdir / 'ledger.db'}", workdir)

    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"medflows_bench_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        pg_one, pg_many = measure(url, workdir)
    finally:
        from tasks_lib.ledger import store

        store.dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    print(f"rows per writer: {ROWS} (run upsert + score append per run; every "
          f"{SHARED_EVERY}th run shared by all writers); all rows present, none duplicated")
    print(f"SQLite:     1 writer {sqlite_one:7.0f} rows/s   {WRITERS} writers "
          f"{sqlite_many:7.0f} rows/s   ({sqlite_many / sqlite_one:.2f}x)")
    print(f"PostgreSQL: 1 writer {pg_one:7.0f} rows/s   {WRITERS} writers "
          f"{pg_many:7.0f} rows/s   ({pg_many / pg_one:.2f}x)")
    print(f"RESULT rows_per_s_sqlite={sqlite_many:.0f} rows_per_s_postgres={pg_many:.0f} "
          f"sqlite_over_one_writer={sqlite_many / sqlite_one:.2f} "
          f"postgres_over_one_writer={pg_many / pg_one:.2f} "
          f"one_writer_sqlite={sqlite_one:.0f} one_writer_postgres={pg_one:.0f} "
          f"writers={WRITERS} rows_per_writer={ROWS}")


if __name__ == "__main__":
    main()
