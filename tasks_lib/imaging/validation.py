"""Judge a submission's measurement frame with the track's Great Expectations suite.

:func:`judge_frame` is the one place a verdict enters the frame: a row is valid when its gates are
open (expected, present, safe, readable, unique) and no suite rule failed on it. Everything a
submission must satisfy beyond "could it be measured" (shape, dtype kind, finiteness, value range,
labels, boxes, text length) lives in ``expectations/suites/<track>.json``; a case a rule rejects is
not scored, and its reason names the rule, the GX expectation and the offending values.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import pandas as pd

from expectations import SuiteSpec, validate_frame
from tasks_lib.imaging.types import FrameRow, PoolManifest, ValidationFailure, ValidationReport

GATES = frozenset({"expected", "present", "safe", "readable", "unique"})
"""Frame columns that say whether a case could be measured at all (closed gate → row note)."""
VERDICT = frozenset({"note", "judged", "failed"})
"""Row fields that are not measurements (never shown to the suite)."""


class Judged(NamedTuple):
    """Rows with the suite's verdict folded in, and the condensed report."""

    rows: list[FrameRow]
    report: ValidationReport


def measurement_frame(rows: list[FrameRow]) -> pd.DataFrame:
    """The frame the suite validates: one row per frame row, gates and measurement columns."""
    columns = [f for f in FrameRow.model_fields if f not in VERDICT]
    return pd.DataFrame([r.model_dump(exclude=set(VERDICT)) for r in rows], columns=columns)


def _check_covers(rows: list[FrameRow], manifest: PoolManifest) -> None:
    """Every manifest case has exactly one expected row (else our inspector is broken)."""
    counts = defaultdict(int, {c.case_id: 0 for c in manifest.cases})
    for r in rows:
        if r.expected:
            counts[r.case_id] += 1
    wrong = sorted(k for k, n in counts.items() if n != 1)
    if wrong:
        raise ValueError(f"{manifest.task_id}: frame rows do not match the manifest's cases "
                         f"one to one: {', '.join(wrong[:10])}")


def failure_reason(f: ValidationFailure, case_id: str) -> str:
    """One case's reason for a failed rule: rule, meaning, expectation, offending values."""
    got = f.values.get(case_id, "")
    return (f"{f.rule or f.expectation}: {f.meaning} "
            f"[{f.expectation}({f.column}){'; got ' + got if got else ''}]")


def _reasons(report: ValidationReport) -> dict[str, list[str]]:
    """Case id → reasons of the failed rules on measurements (gate rules repeat the row note)."""
    out: dict[str, list[str]] = defaultdict(list)
    for f in report.failures:
        if {c.strip() for c in f.column.split(",")} <= GATES:
            continue
        for case_id in f.cases:
            out[case_id].append(failure_reason(f, case_id))
    return out


def judge_frame(track: str, rows: list[FrameRow], manifest: PoolManifest,
                suite: SuiteSpec | None = None) -> Judged:
    """Run the track's suite on the measurement frame and fold its verdict into the rows.

    Args:
        track: Whose suite to run (``expectations/suites/<track>.json``).
        rows: The measurement frame (:func:`~tasks_lib.imaging.submission.measure_submission`);
            rows judged before are judged afresh.
        manifest: The pool manifest the rows were measured against (checked for coverage).
        suite: A suite to run instead of the shipped one (tests, what-if analyses).

    Returns:
        The rows, each ``judged`` with ``failed`` naming every rule it broke (so ``valid`` is
        gates ∧ no failed rule), and the :class:`ValidationReport`.

    Raises:
        ValueError: The rows do not hold exactly one expected row per manifest case.
        expectations.SuiteError: The suite cannot be evaluated on this frame.
    """
    _check_covers(rows, manifest)
    out = validate_frame(track, measurement_frame(rows), suite=suite)
    report = ValidationReport(ok=out.ok, suite=out.suite, failures=[
        ValidationFailure(**f.model_dump()) for f in out.failures])
    reasons = _reasons(report)
    judged = [r.model_copy(update={"judged": True, "failed": reasons.get(r.case_id, [])})
              for r in rows]
    return Judged(judged, report)
