"""S1–S3 stage judges: rubrics as data, prompt building, JSON parsing, post-processing.

Pure code: the model call itself is made by the caller (``tasks_lib.harness.judging``). The
post-processing is deterministic and applied in this order: the judge's answers are coerced to
yes/no (items) or snapped to the nearest level; facts override answers (``file`` items follow
the workspace listing); dependency rules zero items whose required items are 0; in the Lite tier
``lite_credit`` items are credited 1.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from evaluators.core import Frozen

RUBRICS_DIR = Path(__file__).parent / "rubrics"



class StageKind(StrEnum):
    """How a stage is scored."""

    ITEMS = "items"
    LEVELS = "levels"


class RubricItem(Frozen):
    """One yes/no question of an ``items`` stage."""

    id: str = Field(description="Item id (answer key in the judge's JSON).")
    question: str = Field(description="What the judge answers yes or no to.")
    lite_credit: bool = Field(default=False, description="Credited 1 in the Lite tier.")
    requires: list[str] = Field(default_factory=list, description="Items that must be 1.")
    file: str | None = Field(default=None, description="Workspace file deciding the item.")
    signals: list[str] = Field(default_factory=list,
                               description="Regexes the offline 'rules' judge looks for.")


class LevelSignal(Frozen):
    """A level the offline judge gives when every regex matches the trace."""

    level: float = Field(description="Stage score given.")
    all: list[str] = Field(description="Regexes that must all match.")


class StageRubric(Frozen):
    """Rubric of one judged stage."""

    kind: StageKind = Field(description="items (mean of yes/no) or levels (snapped score).")
    title: str = Field(description="Stage title shown to the judge.")
    items: list[RubricItem] = Field(default_factory=list, description="Items (kind items).")
    levels: list[float] = Field(default_factory=list, description="Allowed values (levels).")
    question: str | None = Field(default=None, description="The question (kind levels).")
    level_signals: list[LevelSignal] = Field(default_factory=list,
                                             description="Offline judge rules, first match wins.")


class Rubric(Frozen):
    """S1–S3 rubric of one track."""

    track: str = Field(description="Track the rubric applies to.")
    version: str = Field(description="Rubric version (part of the judge cache key).")
    stages: dict[str, StageRubric] = Field(description="Stage id (s1, s2, s3) → rubric.")


class StageJudgement(Frozen):
    """Post-processed result of one judged stage."""

    stage: str = Field(description="s1, s2 or s3.")
    score: float | None = Field(description="Stage score in [0, 1]; None when the judge failed.")
    items: dict[str, float] = Field(default_factory=dict, description="Item id → 0/1.")
    rationale: str = Field(default="", description="The judge's explanation.")
    error: str | None = Field(default=None, description="Why the judge failed (None = ok).")


class JudgeParseError(ValueError):
    """The judge's reply cannot be turned into a stage score."""


@lru_cache(maxsize=16)
def load_rubric(track: str) -> Rubric:
    """The rubric of ``track`` (``rubrics/<track>.yaml``)."""
    path = RUBRICS_DIR / f"{track}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in RUBRICS_DIR.glob("*.yaml")
                       if p.stem not in {"weights", "error_codes"})
        raise KeyError(f"no stage rubric for track {track!r}; known: {known}")
    return Rubric.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def cache_key(rubric_version: str, trace_digest: str, judge_model: str, stage: str) -> str:
    """Hash of everything a judgement depends on."""
    raw = json.dumps([rubric_version, trace_digest, judge_model, stage])
    return hashlib.sha256(raw.encode()).hexdigest()


def build_prompt(rubric: Rubric, stage: str, tier: str, digest: str,
                 files: list[str]) -> list[tuple[str, str]]:
    """``(role, content)`` messages asking the judge to grade one stage as JSON."""
    spec = rubric.stages[stage]
    if spec.kind is StageKind.ITEMS:
        questions = "\n".join(f'- "{i.id}": {i.question}' for i in spec.items)
        schema = ('{"items": {' + ", ".join(f'"{i.id}": "yes"|"no"' for i in spec.items)
                  + '}, "rationale": "<one paragraph>"}')
    else:
        questions = spec.question or ""
        schema = '{"score": ' + "|".join(str(v) for v in spec.levels) + ', "rationale": "..."}'
    system = ("You grade the research process of an AI agent on a medical-imaging task from "
              "its trace. Judge only what the trace shows. Answer with one JSON object and "
              "nothing else.")
    user = (f"Track: {rubric.track}. Tier: {tier}. Stage {stage.upper()} ({spec.title}).\n\n"
            f"Questions:\n{questions}\n\nFiles in the workspace at the end of the run:\n"
            + ("\n".join(files) or "(none)") + f"\n\nTrace:\n{digest}\n\nReply with JSON: {schema}")
    return [("system", system), ("user", user)]


def _json_object(text: str) -> dict[str, object]:
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    candidate = fenced.group(1) if fenced else text[text.find("{"): text.rfind("}") + 1]
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"judge reply is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise JudgeParseError("judge reply is not a JSON object")
    return value


_YES = {"yes", "y", "true", "1", "1.0", "pass"}
_NO = {"no", "n", "false", "0", "0.0", "fail"}


def _yes_no(value: object, item: str) -> float:
    token = str(value).strip().lower()
    if token in _YES:
        return 1.0
    if token in _NO:
        return 0.0
    raise JudgeParseError(f"item {item!r}: expected yes/no, got {value!r}")


def snap(value: float, levels: list[float]) -> float:
    """The level nearest to ``value`` (ties go to the lower level)."""
    return min(sorted(levels), key=lambda level: abs(level - value))


class _Reply(Frozen):
    items: dict[str, object] = Field(default_factory=dict, description="Raw item answers.")
    score: float | None = Field(default=None, description="Raw level score.")
    rationale: str = Field(default="", description="Explanation.")


def parse_judgement(rubric: Rubric, stage: str, tier: str, reply: str,
                    files: list[str]) -> StageJudgement:
    """Parse the judge's reply and apply the deterministic post-processing."""
    spec = rubric.stages[stage]
    raw = _json_object(reply)
    try:
        parsed = _Reply.model_validate({k: v for k, v in raw.items()
                                        if k in {"items", "score", "rationale"}})
    except ValidationError as exc:
        raise JudgeParseError(f"judge JSON has the wrong shape: {exc.errors()[0]['msg']}") from None
    if spec.kind is StageKind.LEVELS:
        if parsed.score is None:
            raise JudgeParseError("judge JSON has no score")
        return StageJudgement(stage=stage, score=snap(parsed.score, spec.levels),
                              rationale=parsed.rationale)
    answers: dict[str, float] = {}
    for item in spec.items:
        if item.file is not None:
            answers[item.id] = 1.0 if item.file in files else 0.0
        elif item.id in parsed.items:
            answers[item.id] = _yes_no(parsed.items[item.id], item.id)
        else:
            raise JudgeParseError(f"judge JSON lacks item {item.id!r}")
    items = post_process(spec, answers, tier)
    return StageJudgement(stage=stage, score=sum(items.values()) / len(items), items=items,
                          rationale=parsed.rationale)


def post_process(spec: StageRubric, answers: dict[str, float], tier: str) -> dict[str, float]:
    """Dependency rules, then Lite credits (a credited item counts 1 whatever its inputs)."""
    out = dict(answers)
    for item in spec.items:
        if any(out.get(dep, 0.0) == 0.0 for dep in item.requires):
            out[item.id] = 0.0
    if tier == "lite":
        for item in spec.items:
            if item.lite_credit:
                out[item.id] = 1.0
    return out


RULES_JUDGE = "rules"
"""Judge model name of the offline deterministic judge (regex signals from the rubric)."""


def rules_reply(rubric: Rubric, stage: str, digest: str) -> str:
    """The JSON reply of the offline judge: an item is "yes" when any of its signals matches."""
    spec = rubric.stages[stage]
    if spec.kind is StageKind.LEVELS:
        level = next((s.level for s in spec.level_signals
                      if all(re.search(rx, digest) for rx in s.all)), 0.0)
        return json.dumps({"score": level, "rationale": "offline rules judge"})
    items = {i.id: "yes" if any(re.search(rx, digest) for rx in i.signals) else "no"
             for i in spec.items}
    return json.dumps({"items": items, "rationale": "offline rules judge"})


def failed(stage: str, error: str) -> StageJudgement:
    """A judge failure, recorded as such (the stage has no score, never a silent 0)."""
    return StageJudgement(stage=stage, score=None, error=error)


class TierWeights(Frozen):
    """Agentic and Overall weights of one tier."""

    stages: dict[str, float] = Field(description="Stage id → weight in Agentic (sum 1).")
    overall: dict[str, float] = Field(description="'agentic' and 'task' weights (sum 1).")


class WeightTable(Frozen):
    """``rubrics/weights.yaml``."""

    version: str = Field(description="Weights version.")
    tiers: dict[str, TierWeights] = Field(description="Tier → weights.")


@lru_cache(maxsize=1)
def load_weights() -> WeightTable:
    """The weight table, checked to sum to 1 per tier."""
    table = WeightTable.model_validate(
        yaml.safe_load((RUBRICS_DIR / "weights.yaml").read_text(encoding="utf-8")))
    for tier, weights in table.tiers.items():
        for name, group in (("stages", weights.stages), ("overall", weights.overall)):
            if abs(sum(group.values()) - 1.0) > 1e-9:
                raise ValueError(f"weights.yaml: {tier}.{name} must sum to 1")
    return table


def agentic_score(stages: dict[str, float | None], tier: str) -> float | None:
    """Σ w_s · S_s; None when any weighted stage has no score (e.g. a judge failure)."""
    weights = load_weights().tiers[tier].stages
    total = 0.0
    for stage, weight in weights.items():
        value = stages.get(stage)
        if value is None:
            return None
        total += weight * value
    return total


def overall_score(agentic: float | None, task: float | None, tier: str) -> float | None:
    """w_agentic · Agentic + w_task · Task; None when either part is missing."""
    if agentic is None or task is None:
        return None
    weights = load_weights().tiers[tier].overall
    return weights["agentic"] * agentic + weights["task"] * task
