"""One run record and one score card for every track (ARCHITECTURE §5).

Storage layout under the storage root, the same for every track and every kind of run::

    runs/<run_id>/run.json                         RunRecord (what execute recorded)
    runs/<run_id>/submission/                      what the agent handed in
    runs/<run_id>/trace/                           conversation.json, trace.jsonl (research cells)
    runs/<run_id>/scores/<evaluator_version>.json  ScoreCard (append-only, one per version)

Every text written below ``runs/`` goes through :class:`RunStorage`, which applies the one
redaction rule (:mod:`tasks_lib.redaction`).

Execute writes the first three and the ledger's run row; ``score_run`` reads them (and nothing
else) and appends the score card and the ledger's score row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field, field_validator

from evaluators.core import Frozen, RunStatus, Tier, Track
from evaluators.judges.error_codes import Coding
from expectations import ValidationFailure, ValidationReport
from tasks_lib.agents import AgentSpec
from tasks_lib.redaction import redact, redact_data, secret_values
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

__all__ = ["CaseScore", "RunRecord", "ScoreCard", "StageUse", "ValidationFailure",
           "ValidationReport"]

RUN_JSON = "run.json"
SUBMISSION = "submission"
TRACE = "trace"


UNATTRIBUTED = "unattributed"
"""Telemetry key of the time and calls before an agent named its first stage."""


class StageUse(Frozen):
    """What a research cell spent in one stage (S1–S5 as the agent declared them, or
    :data:`UNATTRIBUTED`): :mod:`tasks_lib.harness.telemetry`."""

    seconds: float = Field(default=0.0, description="Wall time in the stage.")
    model_calls: int = Field(default=0, description="Model calls answered.")
    input_tokens: int = Field(default=0, description="Input tokens of those calls.")
    output_tokens: int = Field(default=0, description="Output tokens.")
    cost_usd: float | None = Field(default=0.0, description="USD (None: a call was unpriced).")
    executions: int = Field(default=0, description="Code executions (tool-loop agents).")
    errors: int = Field(default=0, description="Failed model calls, refused requests and "
                        "executions that exited non-zero or at their cap.")
    gpu_util_pct: float | None = Field(default=None, description="Mean GPU utilisation over "
                                       "the stage's samples (None: no GPU was lent).")
    gpu_memory_mb: float | None = Field(default=None, description="Peak GPU memory used.")


class RunRecord(Frozen):
    """What execute recorded for one run ``(agent_id, task_id, tier, run_id)``."""

    run_id: str = Field(description="Unique run id.")
    agent: AgentSpec = Field(description="Catalog entry (or replay agent) that ran.")
    task_id: str = Field(description="Task card id, or the pool id of a multi-card QA pool.")
    track: Track = Field(description="Track whose kit scores the run.")
    tier: Tier = Field(default=Tier.STANDARD, description="Scaffolding tier.")
    replicate: int = Field(default=0, ge=0, description="Replicate index.")
    status: RunStatus = Field(description="completed / timeout / partial / invalid / error.")
    pool_url: str = Field(description="Root URL of the pool version the run used.")
    pool_id: str = Field(description="Pool id.")
    pool_version: int = Field(description="Pool version.")
    pool_hash: str = Field(description="Content hash of that pool version.")
    n_items: int | None = Field(default=None, description="Items or cases the pool asks for.")
    n_answered: int | None = Field(default=None, description="Items the agent answered.")
    turns: int | None = Field(default=None, description="Model calls or turns.")
    wall_time_s: float | None = Field(default=None, description="Wall time of the execution.")
    item_time_s: float | None = Field(
        default=None, description="Mean seconds per answered item (QA; None if unknown).")
    input_tokens: int | None = Field(default=None, description="Input tokens (None = unknown).")
    output_tokens: int | None = Field(default=None, description="Output tokens.")
    cost_usd: float | None = Field(default=None, description="USD (None = unknown/unpriced).")
    new_cost_usd: float | None = Field(
        default=None, description="USD this execution newly paid (calls served from the call "
        "cache cost nothing new; None = unknown or not a live run).")
    cache_hits: int | None = Field(default=None, description="Model calls served from the call "
                                   "cache, or shared with an identical request in flight, in this "
                                   "execution (None = not a live run).")
    sandbox: str | None = Field(default=None, description="Sandbox backend of a research cell.")
    gpus: list[str] = Field(default_factory=list, description="Host GPU devices the run's "
                            "sandbox had (setting sandbox_gpus).")
    image: str | None = Field(default=None, description="The container image an external "
                              "agent brought and ran in (None: medflows' environment).")
    telemetry: dict[str, StageUse] = Field(
        default_factory=dict, description="A research cell's use per stage (s1–s5 as the agent "
        "declared them, 'unattributed' before its first): time, calls, tokens, cost, "
        "executions, errors and, with a GPU lent, its use (empty: not a research cell).")
    limits: dict[str, float] | None = Field(
        default=None, description="A research cell's caps: wall_time_s, max_steps, "
        "exec_timeout_s and max_cost_usd when set (None: not a research cell, or recorded "
        "before caps were).")
    judge_model: str | None = Field(default=None, description="Judge model for S1–S3 "
                                                              "('rules' = offline judge).")
    end: str | None = Field(default=None, description="Why the agent loop stopped.")
    violations: list[str] = Field(default_factory=list,
                                  description="Isolation violations 'kind: evidence'.")
    error: str | None = Field(default=None, description="Why the run ended in error, if it did.")

    @property
    def has_trace(self) -> bool:
        """A research cell (sandboxed agent loop with a trace the judges read)."""
        return self.sandbox is not None


class CaseScore(Frozen):
    """Metric values of one case (missing/invalid cases carry the metric's missing value)."""

    case_id: str = Field(description="Case id.")
    valid: bool = Field(description="The case's output passed every check.")
    reason: str = Field(default="", description="Why the case was not scored normally.")
    values: dict[str, float] = Field(description="Metric name → value.")

    @field_validator("reason")
    @classmethod
    def _redacted(cls, value: str) -> str:
        return _clean(value)


class ScoreCard(Frozen):
    """Everything scoring produced for one run (or one submission), any track."""

    task_id: str = Field(description="Task card id (or pool id of a QA pool).")
    track: Track = Field(description="Track.")
    evaluator_version: str = Field(description="Evaluator version tag (the score row's key).")
    pool_hash: str = Field(description="content_hash of the pool scored against.")
    run_id: str | None = Field(default=None, description="Run scored (None: a loose folder).")
    agent_id: str | None = Field(default=None, description="Agent of the run.")
    primary_metric: str = Field(default="", description="Name of the headline metric.")
    task_score: float | None = Field(description="Primary metric after policy.")
    metrics: dict[str, float] = Field(description="Every metric the card lists, task level.")
    groups: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Metrics per stratum (QA: per dataset).")
    coverage: float | None = Field(default=None, description="Answered / expected items.")
    s1: float | None = Field(default=None, description="Plan (judged; research cells).")
    s2: float | None = Field(default=None, description="Setup (judged).")
    s3: float | None = Field(default=None, description="Validate (judged).")
    s4: float | None = Field(default=None, description="0.5·completion + 0.5·[all present "
                                                       "outputs valid].")
    s5: float | None = Field(default=None, description="0.5·[positive metric evidence] + "
                                                       "0.5·[suite passed].")
    agentic: float | None = Field(default=None, description="Weighted stages (research cells).")
    overall: float | None = Field(default=None, description="Weighted Agentic and task score.")
    validation: ValidationReport | None = Field(default=None, description="Suite outcome.")
    per_case: list[CaseScore] = Field(default_factory=list, description="Per-case values.")
    notes: list[str] = Field(default_factory=list, description="Policy decisions applied.")
    invalid_reason: str | None = Field(default=None, description="Why the submission is "
                                                                 "invalid (agent's fault).")
    judge_errors: dict[str, str] = Field(default_factory=dict,
                                         description="Stage → why its judge failed.")
    coding: Coding | None = Field(default=None, description="Error-code coder output.")

    @field_validator("notes")
    @classmethod
    def _redacted_notes(cls, value: list[str]) -> list[str]:
        return [_clean(v) for v in value]

    @field_validator("invalid_reason")
    @classmethod
    def _redacted_reason(cls, value: str | None) -> str | None:
        return None if value is None else _clean(value)

    @field_validator("judge_errors")
    @classmethod
    def _redacted_errors(cls, value: dict[str, str]) -> dict[str, str]:
        return {k: _clean(v) for k, v in value.items()}

    def finite(self) -> ScoreCard:
        """Honest numbers only: the card with every NaN/inf value taken out, each with a note
        (a per-case value makes the case invalid with its metric's missing value)."""
        from evaluators.metrics import METRICS

        notes: list[str] = []

        def keep(where: str, values: dict[str, float]) -> dict[str, float]:
            bad = {n: v for n, v in values.items() if not math.isfinite(v)}
            notes.extend(f"{where}{n}={v} is not finite; dropped (rule: finite_metric)"
                         for n, v in bad.items())
            return {n: v for n, v in values.items() if n not in bad}

        metrics = keep("", self.metrics)
        groups = {g: keep(f"{g}: ", v) for g, v in self.groups.items()}
        per_case = []
        for c in self.per_case:
            bad = sorted(n for n, v in c.values.items() if not math.isfinite(v))
            if not bad:
                per_case.append(c)
                continue
            values = {n: (METRICS.get(n).missing if n in bad and n in METRICS.names() else v)
                      for n, v in c.values.items() if n not in bad or n in METRICS.names()}
            reason = "; ".join(r for r in [c.reason, f"metric not finite ({', '.join(bad)}) "
                                                     "(rule: finite_metric)"] if r)
            per_case.append(CaseScore(case_id=c.case_id, valid=False, reason=reason,
                                      values=values))
        update: dict[str, object] = {}
        for name in ("task_score", "coverage", "s1", "s2", "s3", "s4", "s5", "agentic",
                     "overall"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                update[name] = None
                notes.append(f"{name}={value} is not finite; dropped (rule: finite_metric)")
        if not notes:
            return self
        return self.model_copy(update={**update, "metrics": metrics, "groups": groups,
                                       "per_case": per_case, "notes": [*self.notes, *notes]})

    @property
    def stages(self) -> dict[str, float | None]:
        """S1–S5."""
        return {"s1": self.s1, "s2": self.s2, "s3": self.s3, "s4": self.s4, "s5": self.s5}

    def summary(self) -> ScoreCard:
        """The card without its per-case rows (what multi-run flows return: Prefect walks a
        flow's return value, and a QA card has a row per item). The stored card keeps them."""
        return self.model_copy(update={"per_case": []})

    def public_json(self) -> dict[str, object]:
        """The CLI JSON shape: per_case rows are flat ``{case_id, valid, reason, metric: v}``."""
        data = self.model_dump(mode="json")
        data["per_case"] = [{"case_id": c.case_id, "valid": c.valid, "reason": c.reason,
                             **c.values} for c in self.per_case]
        return data


def _clean(text: str) -> str:
    """``text`` through the one redaction rule (nothing to do for empty text)."""
    return redact(text) if text else text


class RunStorage(Storage):
    """Storage of run folders: every text it writes (``write_text``, ``write_json``,
    ``write_jsonl``) passes the one redaction rule, so no writer of a run file can forget it.
    Bytes (``write_bytes``, ``open``) are stored as given: submissions copied file by file keep
    their exact content."""

    def child(self, prefix: str) -> RunStorage:
        """A redacting storage rooted at ``prefix`` below this one."""
        return RunStorage(self.url(prefix), **self._options)

    def write_text(self, key: str, text: str) -> str:
        """Write ``text`` redacted; returns the URL."""
        return super().write_text(key, redact(text))

    def write_json(self, key: str, obj: Any) -> str:
        """Write JSON with every string redacted before it is serialized."""
        if isinstance(obj, BaseModel):
            obj = obj.model_dump(mode="json")
        return super().write_json(key, redact_data(obj))

    def write_jsonl(self, key: str, rows: Iterable[BaseModel | dict[str, Any]]) -> str:
        """Write one JSON object per line, every string redacted before it is serialized."""
        secrets = secret_values()
        return super().write_jsonl(key, [redact_data(
            r.model_dump(mode="json") if isinstance(r, BaseModel) else r, secrets)
            for r in rows])


def runs_store() -> Storage:
    """``runs/`` under the configured storage root (a :class:`RunStorage`)."""
    settings = get_settings()
    return RunStorage(f"{settings.storage_url.rstrip('/')}/runs", **settings.storage_options)


def run_store(run_id: str) -> Storage:
    """``runs/<run_id>/`` under the configured storage root."""
    return runs_store().child(run_id)


def card_key(evaluator_version: str) -> str:
    """Key of a score card below ``runs/<run_id>/``."""
    return f"scores/{re.sub(r'[^A-Za-z0-9._+-]', '-', evaluator_version)}.json"


def write_run(record: RunRecord) -> str:
    """Store ``run.json`` (redacted, like every stored run output); returns its URL."""
    return run_store(record.run_id).write_text(RUN_JSON, record.model_dump_json(indent=2))


def read_run(run_id: str) -> RunRecord:
    """The stored run record of ``run_id``."""
    return RunRecord.model_validate(run_store(run_id).read_json(RUN_JSON))


def write_card(card: ScoreCard) -> str:
    """Store a run's score card under its evaluator version; returns the URL."""
    assert card.run_id is not None
    text = card.finite().model_dump_json()
    return run_store(card.run_id).write_text(card_key(card.evaluator_version), text)


def read_card(run_id: str, evaluator_version: str) -> ScoreCard:
    """A stored score card."""
    return ScoreCard.model_validate(run_store(run_id).read_json(card_key(evaluator_version)))
