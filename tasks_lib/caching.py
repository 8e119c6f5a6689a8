"""Step options shared by every expensive deterministic step.

Cache on inputs + step source (never the run id, which Prefect's default policy includes), and
persist results in a local folder, so re-running a failed flow run resumes at the failed step.
"""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import INPUTS, TASK_SOURCE

from tasks_lib.settings import get_settings


def cached(**extra: Any) -> dict[str, Any]:
    """Keyword arguments for ``@task`` that make a step resumable across runs."""
    results = get_settings().results_dir
    results.mkdir(parents=True, exist_ok=True)
    return {
        "cache_policy": INPUTS + TASK_SOURCE,
        "persist_result": True,
        "result_storage": results,
        **extra,
    }


IO_RETRIES: dict[str, Any] = {"retries": 2, "retry_delay_seconds": [2, 10]}
"""Retries for I/O steps (model calls, storage, containers); never for pure computation."""
