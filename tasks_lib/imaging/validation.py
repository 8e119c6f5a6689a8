"""Judge a submission's measurement frame with the track's Great Expectations suite.

:func:`judge_frame` is the one place a verdict enters the frame: a row is valid when its gates are
open (expected, present, safe, readable, unique) and no suite rule failed on it. Everything a
submission must satisfy beyond "could it be measured" (shape, dtype kind, finiteness, value range,
labels, boxes, text length) lives in ``expectations/suites/<track>.json``; a case a rule rejects is
not scored, and its reason names the rule, the GX expectation and the offending values.

Row-level rules (column-map and column-pair expectations) invalidate exactly the rows GX lists as
unexpected, and only when the expectation fails as a whole (a rule with ``mostly`` tolerates its
share). Aggregate or table-level rules have no rows to blame: they fail the report (S5) only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import pandas as pd

from expectations import SuiteSpec, ValidationFailure, ValidationReport, validate_frame
from tasks_lib.imaging.types import FrameRow, PoolManifest

GATES = frozenset({"expected", "present", "safe", "readable", "unique"})
"""Frame columns that say whether a case could be measured at all (closed gate → row note)."""
VERDICT = frozenset({"note", "judged", "failed"})
"""Row fields that are not measurements (never shown to the suite)."""
ROW = "row"
"""Frame column holding each row's position (the key GX reports failing rows by)."""


class Judged(NamedTuple):
    """Rows with the suite's verdict folded in, and the condensed report."""

    rows: list[FrameRow]
    report: ValidationReport


def measurement_frame(rows: list[FrameRow]) -> pd.DataFrame:
    """The frame the suite validates: gates and measurement columns, plus each row's position."""
    columns = [f for f in FrameRow.model_fields if f not in VERDICT]
    frame = pd.DataFrame([r.model_dump(exclude=set(VERDICT)) for r in rows], columns=columns)
    frame[ROW] = range(len(rows))
    return frame


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


def _by_case(f: ValidationFailure, rows: list[FrameRow]) -> ValidationFailure:
    """A failure keyed by row position → the same failure keyed by case id."""
    values = {rows[int(pos)].case_id: v for pos, v in f.values.items()}
    return ValidationFailure(**{**f.model_dump(), "cases": sorted(values), "values": values})


def _reasons(failures: list[ValidationFailure], rows: list[FrameRow]) -> dict[int, list[str]]:
    """Row position → reasons of the failed rules on measurements (a failed gate rule repeats
    the row's note, so it adds no reason)."""
    out: dict[int, list[str]] = defaultdict(list)
    for f in failures:
        if {c.strip() for c in f.column.split(",")} <= GATES:
            continue
        named = _by_case(f, rows)
        for pos in f.values:
            out[int(pos)].append(failure_reason(named, rows[int(pos)].case_id))
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
    out = validate_frame(track, measurement_frame(rows), key=ROW, suite=suite)
    report = ValidationReport(ok=out.ok, suite=out.suite,
                              failures=[_by_case(f, rows) for f in out.failures])
    reasons = _reasons(out.failures, rows)
    judged = [r.model_copy(update={"judged": True, "failed": reasons.get(pos, [])})
              for pos, r in enumerate(rows)]
    return Judged(judged, report)
