"""Check 1 of the exploit audit, ``null_agents``: the null agents of the pool's kit (no
submission, empty and constant answers) and the pool's public sample submission, all written by
:meth:`~tasks_lib.tracks.base.TrackKit.baselines` and scored by the kit's own scorer, stay at or
below their audit floors (``datasets/audit/floors.yaml``); the perfect submission scores above
every one of them (the baselines are ordered)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from tasks_lib.audits.baselines import Baseline
from tasks_lib.audits.pool import PoolInfo
from tasks_lib.audits.report import Finding, Severity
from tasks_lib.audits.scoring import score_folder

EPS = 1e-9


class Scored(NamedTuple):
    """One baseline and the audit value the kit gave it."""

    baseline: Baseline
    value: float


def _verdict(s: Scored) -> tuple[str | None, bool]:
    """``(evidence line or None, blocks)`` of one null agent against its floor."""
    b, v = s.baseline, s.value
    if b.floor is None:
        return None, False
    shown = b.warn_above if b.warn_above is not None else b.floor
    if v <= shown + EPS:
        return None, False
    return f"{b.name} scores {v:.4f} > floor {shown:.4f} ({b.source})", v > b.floor + EPS


def _ordering(scored: list[Scored]) -> list[str]:
    """Evidence that the perfect submission does not beat every null agent."""
    best = [s for s in scored if s.baseline.floor is None]
    nulls = [s for s in scored if s.baseline.floor is not None]
    return [f"perfect scores {p.value:.4f}, not above {n.baseline.name} ({n.value:.4f}) (rule: "
            "the references written as a submission outrank every null agent)"
            for p in best for n in nulls if p.value <= n.value + EPS]


def check_null_agents(info: PoolInfo, work: Path, judge_model: str | None = None) -> Finding:
    """Every null agent and the public sample stay at or below their floors; perfect is above
    (each scored with ``judge_model``, None: the configured one)."""
    from tasks_lib.tracks.base import kit_for

    kit = kit_for(info.track)
    scored = [Scored(b, kit.audit_value(score_folder(info, b.folder, b.folder.name,
                                                     judge_model=judge_model)))
              for b in kit.baselines(info.url, work / "baselines")]
    evidence: list[str] = []
    blocking = False
    for s in scored:
        line, blocks = _verdict(s)
        if line is not None:
            evidence.append(line)
            blocking = blocking or blocks
    ordering = _ordering(scored)
    evidence += ordering
    floors = "; ".join(f"{s.baseline.name} ≤ {s.baseline.floor:.3f}" for s in scored
                       if s.baseline.floor is not None)
    summary = "; ".join(f"{s.baseline.name}={s.value:.4f}" for s in scored)
    return Finding(check="null_agents", passed=not evidence,
                   severity=Severity.ERROR if blocking or ordering or not evidence
                   else Severity.WARNING,
                   rule=f"null agents and the public sample score at or below their floors "
                        f"({floors}); perfect scores above them; scored: {summary}",
                   evidence=evidence)
