"""Capability judge (ReX-MLE): which of 13 winning strategies a run's trace shows evidence of.

Pure code only; the model calls live in ``tasks_lib.challenge.judge``. The pipeline:

1. :func:`strip_trace` keeps what the criteria need (prose, commands, comments, signatures,
   imports, hyperparameter and keyword lines, result lines) and drops code bodies, blobs and
   repeated log lines.
2. :func:`split_sections` cuts the stripped trace into sections that fit the model's context.
3. :func:`build_prompt` asks for one JSON verdict per strategy and section.
4. :func:`parse_reply` validates ``{"results": [{"id", "strategy", "score", "evidence"}]}``.
   Strategies the reply leaves out score **0**; a score of 1 without evidence scores 0.
5. :func:`combine_sections` takes, per strategy, the best score over the sections that
   succeeded (evidence anywhere in the run counts); :func:`aggregate` averages runs per agent or
   per challenge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from functools import lru_cache
from importlib import resources
from typing import Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluators.core import Frozen


class Strategy(Frozen):
    """One winning strategy (``strategies.yaml``)."""

    id: str = Field(description="Stable identifier used in replies and reports.")
    name: str = Field(description="Human-readable name.")
    criteria: str = Field(description="What counts as explicit evidence of execution.")


class Verdict(Frozen):
    """The judge's verdict on one strategy (one element of the reply's ``results``)."""

    id: str = Field(description="Strategy id.")
    strategy: str = Field(description="Strategy name.")
    score: Literal[0, 1] = Field(description="1 only with explicit evidence of execution.")
    evidence: str = Field(default="", description="Quote or pointer into the trace.")


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: list[dict[str, object]]


class SectionStatus(StrEnum):
    """Outcome of judging one section."""

    OK = "ok"
    FAILED = "failed"


class SectionResult(Frozen):
    """What one section's judge call produced (failed sections are kept, never dropped)."""

    index: int = Field(description="0-based section number.")
    status: SectionStatus = Field(description="ok, or failed after every retry.")
    attempts: int = Field(ge=1, description="Calls made, including retries.")
    verdicts: list[Verdict] = Field(default_factory=list, description="Empty when failed.")
    error: str | None = Field(default=None, description="Last error when failed.")


class RunCapability(Frozen):
    """The judge's result for one run."""

    run_id: str = Field(description="Run identifier.")
    agent_id: str = Field(description="Agent that made the run.")
    challenge: str = Field(description="Challenge id.")
    scores: dict[str, int] = Field(description="Strategy id → 0/1 (best over ok sections).")
    evidence: dict[str, str] = Field(description="Strategy id → evidence of a 1 ('' for 0).")
    sections: list[SectionResult] = Field(description="Every section, failed ones included.")

    @property
    def n_strategies(self) -> int:
        """How many strategies the run showed."""
        return sum(self.scores.values())

    @property
    def failed_sections(self) -> list[int]:
        """Indices of sections whose judge call failed."""
        return [s.index for s in self.sections if s.status is SectionStatus.FAILED]


class GroupBy(StrEnum):
    """How runs are aggregated."""

    AGENT = "agent"
    CHALLENGE = "challenge"


class CapabilitySummary(Frozen):
    """Strategy rates over a group of runs (one agent or one challenge)."""

    group_by: GroupBy = Field(description="agent or challenge.")
    key: str = Field(description="The agent id or challenge id.")
    n_runs: int = Field(description="Runs in the group.")
    rates: dict[str, float] = Field(description="Strategy id → fraction of runs showing it.")
    mean_strategies: float = Field(description="Mean number of strategies per run.")
    runs_with_failed_sections: int = Field(description="Runs judged on partial traces.")


class Prompt(NamedTuple):
    """System and user message of one judge call."""

    system: str
    user: str


class JudgeReplyError(ValueError):
    """The model's reply is not valid judge JSON (the call is retried, then recorded failed)."""


@lru_cache(maxsize=1)
def load_strategies() -> tuple[Strategy, ...]:
    """The 13 strategies shipped in ``evaluators/judges/strategies.yaml``."""
    text = resources.files("evaluators.judges").joinpath("strategies.yaml").read_text("utf-8")
    return tuple(Strategy.model_validate(s) for s in yaml.safe_load(text)["strategies"])


# --- 1. stripping --------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*```")
_KEYWORDS = re.compile(
    r"augment|ensembl|fold|seed|optuna|sweep|grid|search|lr\b|learning.rate|epoch|batch|"
    r"pretrain|checkpoint|weights|external|post.?process|connected.component|threshold|nms|"
    r"tta|clean|corrupt|duplicate|mislabel|spacing|resampl|window|normali[sz]|dice|f1|iou|"
    r"hd95|metric|score|loss|fail|worst|error|prior|topolog|nnu-?net|cellpose|stardist|"
    r"valid|val_|accuracy", re.IGNORECASE)
_SIGNATURE = re.compile(r"^\s*(?:def |class |import |from \S+ import |@|#|[A-Z_]{2,}\s*=|\$ |"
                        r"python |!|%|pip |bash |sh )")
_BLOB = re.compile(r"[A-Za-z0-9+/=]{200,}")
_DIGITS = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


def _keep_code_line(line: str) -> bool:
    return bool(_SIGNATURE.match(line) or _KEYWORDS.search(line))


def _collapse_repeats(lines: list[str]) -> list[str]:
    """Runs of lines equal up to their numbers (training logs) → first, count, last."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        shape = _DIGITS.sub("#", lines[i])
        while j + 1 < len(lines) and _DIGITS.sub("#", lines[j + 1]) == shape:
            j += 1
        if j - i >= 3:
            out += [lines[i], f"[... {j - i - 1} similar lines ...]", lines[j]]
        else:
            out += lines[i:j + 1]
        i = j + 1
    return out


def strip_trace(trace: str) -> str:
    """Reduce a trace to what the criteria need (see the module docstring)."""
    kept: list[str] = []
    in_code, dropped = False, 0
    for raw in trace.splitlines():
        line = _BLOB.sub("[blob]", raw.rstrip())
        if _FENCE.match(line):
            if in_code and dropped:
                kept.append(f"    [... {dropped} code lines omitted ...]")
            in_code, dropped = not in_code, 0
            kept.append(line)
            continue
        if in_code and not _keep_code_line(line):
            dropped += 1
            continue
        if line.strip():
            kept.append(line)
    if in_code and dropped:
        kept.append(f"    [... {dropped} code lines omitted ...]")
    return "\n".join(_collapse_repeats(kept))


# --- 2. sectioning --------------------------------------------------------------------------------

CHARS_PER_TOKEN = 4
"""Conservative characters-per-token estimate used to fit sections into the context."""


def split_sections(text: str, budget_tokens: int) -> list[str]:
    """Cut ``text`` at line boundaries into sections of at most ``budget_tokens`` (estimated).

    A single line longer than the budget is cut into pieces. An empty text gives one empty
    section (the judge then scores every strategy 0 from an explicit call, never silently).
    """
    limit = budget_tokens * CHARS_PER_TOKEN
    if limit <= 0:
        raise ValueError("budget_tokens must be positive")
    sections: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines():
        pieces = [line[i:i + limit] for i in range(0, len(line), limit)] or [""]
        for piece in pieces:
            if current and size + len(piece) + 1 > limit:
                sections.append("\n".join(current))
                current, size = [], 0
            current.append(piece)
            size += len(piece) + 1
    if current or not sections:
        sections.append("\n".join(current))
    return sections


def prompt_overhead_tokens(strategies: Sequence[Strategy]) -> int:
    """Estimated tokens of a prompt without its trace section."""
    empty = build_prompt(strategies, "", 0, 1, "challenge")
    return (len(empty.system) + len(empty.user)) // CHARS_PER_TOKEN + 1


# --- 3. prompt ------------------------------------------------------------------------------------

_SYSTEM = (
    "You audit the trace of an AI agent that solved a medical-imaging challenge. For each "
    "strategy listed, answer score 1 ONLY if this trace section shows explicit evidence that "
    "the agent EXECUTED it (code that ran, a command and its output, a logged result); plans, "
    "intentions and unexecuted code score 0. Quote the evidence briefly. Reply with JSON only: "
    '{"results": [{"id": "<strategy id>", "strategy": "<strategy name>", "score": 0 or 1, '
    '"evidence": "<short quote or empty>"}]} with one element per strategy.'
)


def build_prompt(strategies: Sequence[Strategy], section: str, index: int, total: int,
                 challenge: str) -> Prompt:
    """The messages of one judge call on section ``index`` of ``total``."""
    rubric = "\n".join(f"- {s.id} ({s.name}): {s.criteria}" for s in strategies)
    user = (f"Challenge: {challenge}\nStrategies:\n{rubric}\n\n"
            f"Trace section {index + 1} of {total}:\n<trace>\n{section}\n</trace>")
    return Prompt(_SYSTEM, user)


# --- 4. parsing -----------------------------------------------------------------------------------

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _extract_json(text: str) -> object:
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise JudgeReplyError("reply contains no JSON object")
    try:
        return json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise JudgeReplyError(f"reply is not valid JSON: {exc}") from None


def parse_reply(text: str, strategies: Sequence[Strategy]) -> list[Verdict]:
    """Validate a reply; one verdict per strategy in ``strategies`` order.

    Missing strategies score 0; a score of 1 with empty evidence scores 0; the canonical name
    replaces whatever name the model wrote.

    Raises:
        JudgeReplyError: no JSON, wrong shape, an unknown or repeated id, or a score not 0/1.
    """
    try:
        reply = _Reply.model_validate(_extract_json(text))
    except ValidationError as exc:
        raise JudgeReplyError(f"reply does not match the judge contract: {exc}") from None
    by_id = {s.id: s for s in strategies}
    found: dict[str, Verdict] = {}
    for item in reply.results:
        sid = item.get("id")
        if not isinstance(sid, str) or sid not in by_id:
            raise JudgeReplyError(f"unknown strategy id {sid!r}; known: {', '.join(by_id)}")
        if sid in found:
            raise JudgeReplyError(f"strategy {sid!r} appears twice")
        score, evidence = item.get("score"), str(item.get("evidence") or "").strip()
        if isinstance(score, bool) or score not in (0, 1):
            raise JudgeReplyError(f"score of {sid!r} must be 0 or 1, got {score!r}")
        score = score if evidence else 0
        found[sid] = Verdict(id=sid, strategy=by_id[sid].name, score=score, evidence=evidence)
    return [found.get(s.id, Verdict(id=s.id, strategy=s.name, score=0)) for s in strategies]


# --- 5. aggregation -------------------------------------------------------------------------------

def combine_sections(run_id: str, agent_id: str, challenge: str,
                     sections: Sequence[SectionResult],
                     strategies: Sequence[Strategy]) -> RunCapability:
    """Per strategy, the best score over the sections that succeeded."""
    scores = {s.id: 0 for s in strategies}
    evidence = {s.id: "" for s in strategies}
    for section in sections:
        for v in section.verdicts:
            if v.score > scores[v.id]:
                scores[v.id] = v.score
                evidence[v.id] = f"[section {section.index + 1}] {v.evidence}"
    return RunCapability(run_id=run_id, agent_id=agent_id, challenge=challenge, scores=scores,
                         evidence=evidence, sections=list(sections))


def aggregate(runs: Iterable[RunCapability], by: GroupBy) -> list[CapabilitySummary]:
    """Strategy rates per agent or per challenge, groups sorted by key."""
    groups: dict[str, list[RunCapability]] = {}
    for run in runs:
        groups.setdefault(run.agent_id if by is GroupBy.AGENT else run.challenge, []).append(run)
    out = []
    for key in sorted(groups):
        members = groups[key]
        ids = list(members[0].scores)
        out.append(CapabilitySummary(
            group_by=by, key=key, n_runs=len(members),
            rates={i: sum(r.scores[i] for r in members) / len(members) for i in ids},
            mean_strategies=sum(r.n_strategies for r in members) / len(members),
            runs_with_failed_sections=sum(1 for r in members if r.failed_sections),
        ))
    return out
