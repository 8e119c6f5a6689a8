"""Model calls of the stage judges and the error-code coder, with a judgement cache.

The judges read only the stored trace (:func:`tasks_lib.harness.trace.load_trace`): the
conversation, the capped ``plan.md`` copy and the workspace file list. Judgements are cached in
storage under ``judges/<key>.json`` where the key hashes (rubric version, trace digest, judge
model, stage). A failed judgement (provider error, unparseable
reply) is recorded as a failure with its reason, never scored 0, and never cached.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import openai

from evaluators.judges import error_codes, stages
from evaluators.judges.stages import RULES_JUDGE, StageJudgement
from tasks_lib.harness.messages import ChatMessage, Role
from tasks_lib.llm import CompletionFn, LiteLLMCompletion, Message
from tasks_lib.storage import Storage

DIGEST_CHARS = 24_000
PART_CHARS = 1_500
JUDGED = ("s1", "s2", "s3")


def _short(text: str, limit: int = PART_CHARS) -> str:
    return text if len(text) <= limit else f"{text[: limit // 2]}\n...\n{text[-limit // 2:]}"


def trace_digest(messages: Sequence[ChatMessage], plan: str | None) -> str:
    """Condensed trace for judges: turns, code, clipped tool output, and the stored ``plan.md``."""
    parts: list[str] = []
    for m in messages:
        if m.role is Role.ASSISTANT:
            parts.append(f"[assistant] {m.content or ''}")
            parts += [f"[call {c.name}] {_short(c.arguments)}" for c in m.tool_calls]
        elif m.role is Role.TOOL:
            parts.append(f"[result] {_short(m.content or '')}")
    if plan is not None:
        parts.append(f"[file plan.md]\n{_short(plan, 4000)}")
    text = "\n".join(parts)
    return _short(text, DIGEST_CHARS)


def _ask(completion: CompletionFn, model: str, prompt: list[tuple[str, str]]) -> str:
    messages = [Message(role=role, content=content) for role, content in prompt]
    return completion(model, messages, max_tokens=1200, temperature=0.0).text


class StageJudge:
    """Judges S1–S3 of one run with a model (or the offline ``rules`` judge).

    Args:
        model: litellm model string, or ``rules`` for the deterministic offline judge.
        completion: the model door (default: litellm through ``tasks_lib.llm``).
        cache: storage for judgements (default: the configured storage root).
    """

    def __init__(self, model: str, completion: CompletionFn | None = None,
                 cache: Storage | None = None) -> None:
        self.model = model
        self.completion = completion or LiteLLMCompletion(retries=2)
        self.cache = cache or Storage.from_settings().child("judges")

    def judge(self, track: str, tier: str, digest: str, files: list[str]
              ) -> list[StageJudgement]:
        """One judgement per judged stage."""
        rubric = stages.load_rubric(track)
        digest_hash = hashlib.sha256(digest.encode()).hexdigest()
        out = []
        for stage in JUDGED:
            key = stages.cache_key(rubric.version, digest_hash, self.model, f"{stage}:{tier}")
            if self.cache.exists(f"{key}.json"):
                out.append(StageJudgement.model_validate_json(self.cache.read_text(f"{key}.json")))
                continue
            judgement = self._judge_stage(rubric, stage, tier, digest, files)
            if judgement.error is None:
                self.cache.write_text(f"{key}.json", judgement.model_dump_json())
            out.append(judgement)
        return out

    def _judge_stage(self, rubric: stages.Rubric, stage: str, tier: str, digest: str,
                     files: list[str]) -> StageJudgement:
        try:
            if self.model == RULES_JUDGE:
                reply = stages.rules_reply(rubric, stage, digest)
            else:
                prompt = stages.build_prompt(rubric, stage, tier, digest, files)
                reply = _ask(self.completion, self.model, prompt)
            return stages.parse_judgement(rubric, stage, tier, reply, files)
        except stages.JudgeParseError as exc:
            return stages.failed(stage, f"unparseable judge reply: {exc}")
        except openai.APIError as exc:
            return stages.failed(stage, f"judge call failed: {type(exc).__name__}: {exc}")


def code_errors(track: str, digest: str, facts: error_codes.RunFacts, model: str,
                completion: CompletionFn | None = None) -> error_codes.Coding:
    """Rule signals plus (unless ``model`` is ``rules``) the LLM coder, merged."""
    rules = error_codes.rule_signals(facts)
    if model == RULES_JUDGE:
        return error_codes.merge(rules, None)
    door = completion or LiteLLMCompletion(retries=2)
    try:
        reply = _ask(door, model, error_codes.build_prompt(track, digest, rules))
    except openai.APIError as exc:
        return error_codes.merge(rules, None, llm_error=f"{type(exc).__name__}: {exc}")
    return error_codes.merge(rules, reply)
