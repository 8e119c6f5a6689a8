"""Steps of the MedBench flows (construct, rotate, execute); the flows in ``flows/medbench.py``
narrate them."""

from __future__ import annotations

from prefect import task

from tasks_lib.audit import GateRecord
from tasks_lib.caching import IO_RETRIES
from tasks_lib.medbench.bank import BuiltTask
from tasks_lib.medbench.items import MedBenchManifest, TaskEntry
from tasks_lib.rotation import SubsetManifest


@task(name="medbench-build-tasks", task_run_name="build-{n}-tasks")
def build_tasks(task_ids: list[str], n: int) -> dict[str, tuple[TaskEntry, BuiltTask]]:
    """Build every named card's items (seeded builders; same cards ⇒ same items)."""
    from tasks_lib.medbench.pool import build_task

    return {t: build_task(t) for t in task_ids}


@task(name="medbench-publish", task_run_name="publish-{pool_id}", **IO_RETRIES)
def publish(pool_id: str, out: str | None, built: dict[str, tuple[TaskEntry, BuiltTask]],
            notes: list[str]) -> tuple[str, MedBenchManifest]:
    """Write the pool version (not yet ledgered)."""
    from tasks_lib.medbench import pool

    return pool.publish(pool_id, out, built, seed=0, notes=notes)


@task(name="medbench-audit", task_run_name="audit-{url}")
def audit(url: str, override: str | None) -> GateRecord:
    """The exploit audit and the publish gate (``audit.json``)."""
    from tasks_lib.medbench.audit import medbench_gate

    return medbench_gate(url, override)


@task(name="medbench-record", task_run_name="record-{manifest.pool_id}-v{manifest.version}",
      **IO_RETRIES)
def record(url: str, manifest: MedBenchManifest, kind: str = "pool") -> None:
    """Ledger the version (its audit passed)."""
    from tasks_lib.medbench import pool

    pool.record(url, manifest, kind)


@task(name="medbench-rotate", task_run_name="rotate-{subset_id}-seed{seed}", **IO_RETRIES)
def rotate(parent: str, size: int, seed: int, subset_id: str) -> SubsetManifest:
    """Draw and publish a stratified subset of a MedBench pool (see
    :mod:`tasks_lib.medbench.rotation`)."""
    from tasks_lib.medbench.rotation import rotate as draw_and_publish

    return draw_and_publish(parent, size, seed, subset_id)
