"""The MedBench agent track's 14 cards built, published in the ledger and passed through the
publish gate with the fixture override (tests/tasks_lib/medbench/test_agent_upload.py runs the
exploit audit on such a pool)."""

from __future__ import annotations

import uuid
from pathlib import Path

from evaluators.core import Track
from support.audited import record_override
from tasks_lib.taskspec import list_cards


def agent_tasks() -> list[str]:
    """Task ids of the agent-track cards."""
    return [t for t in list_cards(Track.MEDBENCH) if t.startswith("agent-")]


def publish_agent_pool(folder: Path, prefix: str) -> str:
    """Build every agent card into ``folder/v1`` (a fresh pool id starting with ``prefix``),
    record the version, pass the publish gate. Returns the pool's URL."""
    from tasks_lib.medbench.pool import build_task, publish
    from tasks_lib.pool_publish import record_version

    url, manifest = publish(prefix + uuid.uuid4().hex[:6], str(folder / "v1"),
                            {t: build_task(t) for t in agent_tasks()}, seed=0)
    record_version.fn(url, manifest, manifest.n_items)
    record_override(url)
    return url
