"""Publish a fixture pool through the real publish gate with a recorded override reason (what
``--audit-override`` does), for tests that build pools without running the exploit audit
(tests/tasks_lib/test_audit.py and the construct flow tests run it). The gate locks the pool's
files (``lock.json``) and writes ``audit.json``, so the pool is usable for execute and scoring."""

from __future__ import annotations

from datetime import UTC, datetime

from evaluators.core import Track
from tasks_lib.audit import require_clean
from tasks_lib.audits.report import AuditReport, Finding, Severity
from tasks_lib.storage import Storage

REASON = "test fixture: built without the exploit audit (tests/tasks_lib/test_audit.py runs it)"


def record_override(pool_url: str, track: Track | str | None = None) -> None:
    """Pass the pool at ``pool_url`` through :func:`require_clean` with :data:`REASON`."""
    root = Storage(pool_url)
    data = root.read_json("manifest.json")
    report = AuditReport(
        pool_url=root.root_url, pool_id=str(data.get("pool_id") or data["task_id"]),
        version=int(data["version"]), pool_hash=str(data["content_hash"]),
        track=Track(track or data["track"]), created_at=datetime.now(UTC),
        findings=[Finding(check="not_audited", passed=False, severity=Severity.ERROR,
                          rule="the fixture is not audited here")])
    require_clean(report, REASON)
