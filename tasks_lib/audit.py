"""The exploit audit of a published pool: the ways an agent games a benchmark, checked before
the pool is published (docs/audit.md).

Five checks, one :class:`Finding` each, on every kind of pool; what differs per track is data
and methods of the pool's kit (:class:`~tasks_lib.tracks.base.TrackKit`), never a branch here:

1. ``null_agents`` — the kit's null agents and the pool's public sample submission
   (``kit.baselines``), scored by the kit, stay at or below their floors
   (``datasets/audit/floors.yaml``, bounding ``kit.audit_value``); perfect scores above them.
   A pool run task by task (``kit.pool_task_ids``, e.g. an RWE pool's studies) has each
   baseline scored per task sub-folder and averaged (:mod:`tasks_lib.audits.scoring`).
2. ``answer_key`` — nothing the agent can read (``public/``) reveals a reference: no byte copy
   or digest of a private file or a copy in another encoding, no reference field on a row that
   names a pool case, no label-like file name, none of the leaks the kit names
   (``kit.answer_key_data``: e.g. "Answer: X" in a QA item).
3. ``grader_tampering`` — forged reference copies planted in the kit's constant baseline do not
   move its score; the agent sandbox spec mounts nothing private and the evaluator's mounts are
   read-only.
4. ``judge_injection`` — an answer that instructs the judge to give full marks
   (``datasets/audit/injections.yaml``) is judged exactly like the same answer without it: the
   kit's stage judges (``stage_rubric``) and answer judge (``kit.judge_answers``); "not
   applicable" (with the reason) when the kit has neither.
5. ``egress`` — inside the agent sandbox (the card's network policy), TCP to a listening
   127.0.0.1 port, TCP to an external address and DNS resolution all fail.

:func:`require_clean` is the publish gate: a pool is published only with a clean report or an
explicit override reason, and the decision is recorded in the pool's ``audit.json``; the files it
audited are locked in ``lock.json`` (:mod:`tasks_lib.pool_lock`), and a pool without a usable
audit record is never executed or scored (:func:`tasks_lib.pool_lock.require_usable`).

The checks live in :mod:`tasks_lib.audits` (one module each), with the report types
(:mod:`tasks_lib.audits.report`), the audited pool and the audit's data
(:mod:`tasks_lib.audits.pool`) and kit scoring (:mod:`tasks_lib.audits.scoring`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from prefect import get_run_logger, task

from evaluators.core import InputDataError
from tasks_lib.audits.answer_key import check_answer_key
from tasks_lib.audits.egress import check_egress
from tasks_lib.audits.injection import JudgeFactory, check_judge_injection
from tasks_lib.audits.null_agents import check_null_agents
from tasks_lib.audits.pool import pool_info
from tasks_lib.audits.report import AuditReport, Finding, GateRecord, Severity
from tasks_lib.audits.tampering import check_grader_tampering
from tasks_lib.compute import shared_dask
from tasks_lib.pool_lock import AUDIT_JSON, write_lock
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

__all__ = ["AUDIT_JSON", "audit_gate", "audit_pool", "require_clean"]


def _guard(check: str, run: Callable[[], Finding]) -> Finding:
    """Run one check; a pool the kit refuses fails the check with the kit's reason."""
    try:
        return run()
    except InputDataError as exc:
        return Finding(check=check, passed=False, severity=Severity.ERROR,
                       rule="the check runs on the pool as published",
                       evidence=[f"the check could not run: {exc}"])


def audit_pool(pool_url: str, judge_model: str | None = None, judge: JudgeFactory | None = None,
               sandbox: bool = True) -> AuditReport:
    """Run every check on the pool at ``pool_url``; nothing is written to the pool.

    Args:
        pool_url: A pool version root (URL or local path) of any track.
        judge_model: Judge of every score the audit makes (the baselines' and the tampering
            probe's runs carry it as ``run.judge_model``) and of the injection check (default:
            the configured ``judge_model``; ``rules`` is the offline judge).
        judge: Builds the judge to probe instead of the harness's StageJudge (tests).
        sandbox: Run the egress probe in the bwrap sandbox (off: the finding says skipped).

    Raises:
        InputDataError: ``pool_url`` holds no pool.
    """
    info = pool_info(pool_url)
    model = judge_model or get_settings().judge_model
    with tempfile.TemporaryDirectory(prefix="medflows-audit-") as tmp, shared_dask():
        work = Path(tmp)
        findings = [_guard("null_agents", lambda: check_null_agents(info, work, model)),
                    _guard("answer_key", lambda: check_answer_key(info)),
                    _guard("grader_tampering",
                           lambda: check_grader_tampering(info, work, model)),
                    _guard("judge_injection",
                           lambda: check_judge_injection(info, judge, model, work)),
                    _guard("egress", lambda: check_egress(info, work, sandbox))]
    return AuditReport(pool_url=info.url, pool_id=info.pool_id, version=info.version,
                       pool_hash=info.pool_hash, track=info.track, created_at=datetime.now(UTC),
                       findings=findings)


def require_clean(report: AuditReport, override: str | None) -> GateRecord:
    """The publish gate: pass a clean report, or an unclean one with an override reason; the
    pool's files are locked (``lock.json``), then the report and the override are recorded in
    ``audit.json`` at the pool root (Storage layer), so a gate killed half-way leaves no record.

    Raises:
        InputDataError: the report is not clean and no override reason was given (names every
            failed check).
    """
    reason = (override or "").strip() or None
    if not report.clean and reason is None:
        failed = [f"{f.check} ({f.evidence[0] if f.evidence else f.rule})"
                  for f in report.findings if not f.passed and f.severity is Severity.ERROR]
        raise InputDataError(f"pool {report.pool_id} v{report.version}",
                             f"the exploit audit is not clean: {'; '.join(failed)}; fix the "
                             "pool or publish with an override reason")
    record = GateRecord(report=report.to_json(), override=reason,
                        decided_at=datetime.now(UTC))
    write_lock(report.pool_url)
    Storage(report.pool_url).write_json(AUDIT_JSON, record)
    return record


@task(name="audit-pool", task_run_name="audit-{pool_url}")
def audit_gate(pool_url: str, override: str | None = None) -> GateRecord:
    """The construct flows' publish gate: audit the written pool version before the ledger
    records it; an unclean audit stops the flow unless ``override`` gives a reason (recorded in
    the pool's ``audit.json`` with the report)."""
    report = audit_pool(pool_url)
    for finding in report.findings:
        if not finding.passed:
            get_run_logger().warning("audit %s: %s (%s)", finding.check, finding.rule,
                                     "; ".join(finding.evidence[:3]))
    return require_clean(report, override)
