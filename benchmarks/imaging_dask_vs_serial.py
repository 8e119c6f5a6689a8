"""Scoring brain-tissue-seg-1mm (20 cases at 1 mm, the card's metrics): serial vs 2 Dask workers.

Both legs run the same per-case function (``sharding.score_seg_job``) on the same jobs: the
serial leg in this process, case after case; the Dask leg on a LocalCluster of ``--workers``
one-thread worker processes (``tasks_lib.compute.dask_client``: native thread pools pinned to one
thread, glibc keeping freed memory, a scheduler handing out a case only to a free worker, the last
cases split per label), or on the scheduler of ``MEDFLOWS_DASK_ADDRESS`` (start it and its
workers as docs/operations.md says). Each worker reads its own prediction file and reference zarr
chunks; the cluster is started and warmed before timing and the legs alternate ``--repeat`` times
(default 3; the best wall time of each is reported: this machine's neighbours move single runs
by ±5 %). Peak memory is each
process's ``VmHWM`` over its leg, and "over idle" its growth over the process's RSS once warmed
up and before any case was scored (one case's working set); CPU seconds are each process's own
(all threads).
``cpu_bound_speedup`` = serial CPU / the busiest worker's CPU: the ratio a machine whose cores
are free would show, give or take the scheduler's overhead.

Run: ``.venv/bin/python benchmarks/imaging_dask_vs_serial.py [--root DIR] [--repeat N]``
(``--root`` keeps the built pool and submission for the next run). Last line:
``RESULT speedup=<serial/dask> …``.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path
from typing import Any, NamedTuple

from distributed import get_task_stream
from imaging_common import pool_and_submission

from tasks_lib.compute import dask_client, peak_rss, reset_peak_rss
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.sharding import score_segmentation, score_segmentation_dask
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

MB = 1024 * 1024


class Leg(NamedTuple):
    """One timed leg: values, wall seconds, per-process rows (tasks, busy s, CPU s, MB)."""

    values: dict[str, dict[str, float]]
    wall: float
    rows: dict[str, dict[str, float]]


class Work(NamedTuple):
    """What both legs score."""

    sub: Path
    url: str
    manifest: PoolManifest
    valid: list[str]
    names: list[str]


def _warm() -> int:
    """Import the scoring modules on a worker (not timed); returns the worker's PID."""
    import evaluators.catalog  # noqa: F401
    import tasks_lib.imaging.sharding  # noqa: F401

    return os.getpid()


def _serial(w: Work, idle: int) -> Leg:
    reset_peak_rss()
    cpu = time.process_time()
    t0 = time.perf_counter()
    values = score_segmentation(w.sub, Storage(w.url), w.manifest, w.valid, w.names)
    wall = time.perf_counter() - t0
    row = {"tasks": len(values), "busy": wall, "cpu": time.process_time() - cpu,
           "peak": peak_rss() / MB, "added": (peak_rss() - idle) / MB}
    return Leg(values, wall, {"serial (this process)": row})


def _dask(w: Work, client: Any, idle: dict[str, int]) -> Leg:
    client.run(reset_peak_rss)
    cpu = client.run(time.process_time)
    own_cpu = time.process_time()
    with get_task_stream(client) as stream:
        t0 = time.perf_counter()
        values = score_segmentation_dask(w.sub, w.url, w.manifest, w.valid, w.names, client)
        wall = time.perf_counter() - t0
    peaks, cpu_end = client.run(peak_rss), client.run(time.process_time)
    rows = {f"worker {a}": {"tasks": 0, "busy": 0.0, "cpu": cpu_end[a] - cpu[a],
                            "peak": peaks[a] / MB, "added": (peaks[a] - idle[a]) / MB}
            for a in peaks}
    for task in stream.data:
        row = rows[f"worker {task['worker']}"]
        row["tasks"] += 1
        row["busy"] += sum(s["stop"] - s["start"] for s in task["startstops"]
                           if s["action"] == "compute")
    rows["client (staging, scheduling)"] = {"tasks": 0, "busy": 0.0,
                                            "cpu": time.process_time() - own_cpu,
                                            "peak": 0.0, "added": 0.0}
    return Leg(values, wall, rows)


def _table(title: str, leg: Leg) -> None:
    print(f"{title}: wall {leg.wall:.2f}s")
    print(f"  {'process':<38}{'tasks':>6}{'busy s':>8}{'CPU s':>8}{'peak MB':>9}"
          f"{'over idle':>10}")
    for name, r in leg.rows.items():
        print(f"  {name:<38}{r['tasks']:>6.0f}{r['busy']:>8.2f}{r['cpu']:>8.2f}"
              f"{r['peak']:>9.0f}{r['added']:>10.0f}")


def _legs(w: Work, workers: int, repeat: int) -> tuple[Leg, Leg]:
    serial: list[Leg] = []
    dask: list[Leg] = []
    with dask_client(n_workers=workers) as client:
        deadline = time.monotonic() + 60
        while len(client.scheduler_info()["workers"]) < workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"error: fewer than {workers} Dask workers joined")
            time.sleep(0.2)
        client.run(_warm)
        idle, idle_here = client.run(reset_peak_rss), reset_peak_rss()
        for _ in range(repeat):
            serial.append(_serial(w, idle_here))
            dask.append(_dask(w, client, idle))
    for leg in dask:
        assert leg.values == serial[0].values, "Dask and serial scoring disagree"
    return min(serial, key=lambda g: g.wall), min(dask, key=lambda g: g.wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--task", default="brain-tissue-seg-1mm")
    ap.add_argument("--root", type=Path, default=None, help="keep/reuse the pool and submission")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3,
                    help="alternate the legs N times; the best wall time of each is reported")
    args = ap.parse_args()

    t0 = time.perf_counter()
    url, m, sub = pool_and_submission(args.task, root=args.root)
    t_build = time.perf_counter() - t0
    build_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    names = [ref.evaluator for ref in load_task(args.task).metrics if ref.evaluator]
    w = Work(sub, url, m, [c.case_id for c in m.cases], names)
    load = os.getloadavg()[0]
    serial, dask = _legs(w, args.workers, args.repeat)

    where = get_settings().dask_address or f"LocalCluster, {args.workers} processes"
    print(f"{args.task}: {len(w.valid)} cases of {m.cases[0].shape} voxels, metrics {names}; "
          f"pool + submission ready in {t_build:.1f}s (peak RSS {build_peak:.0f} MB); load "
          f"average {load:.2f} on {os.cpu_count()} CPUs at start; best of {args.repeat}")
    _table("serial", serial)
    _table(f"dask ({where})", dask)
    workers = [r for n, r in dask.rows.items() if n.startswith("worker")]
    cpu_bound = serial.rows["serial (this process)"]["cpu"] / max(r["cpu"] for r in workers)
    print(f"values identical: True; tasks per worker {[int(r['tasks']) for r in workers]} "
          "(a case each, the last cases one per label)")
    print(f"RESULT speedup={serial.wall / dask.wall:.2f} serial_s={serial.wall:.2f} "
          f"dask_s={dask.wall:.2f} workers={args.workers} cases={len(w.valid)} "
          f"worker_peak_mb={max(r['peak'] for r in workers):.0f} "
          f"worker_peak_over_idle_mb={max(r['added'] for r in workers):.0f} "
          f"cpu_bound_speedup={cpu_bound:.2f} load1={load:.2f}")


if __name__ == "__main__":
    main()
