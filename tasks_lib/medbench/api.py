"""API mode (spec §6.1): call a registered model endpoint on the randomized items of a pool (or
the active subset) through the one call layer, and store the run like any other.

* The agent is a catalog entry (``datasets/agents.yaml``): its ``model`` is any litellm model
  string; ``params.api_base`` points at an OpenAI-compatible URL (else the
  ``MEDFLOWS_LLM_API_BASE`` setting or the provider's default). A registered endpoint's agent
  is called with that endpoint's own credential, never the operator's, and its base is
  re-checked before every request (:func:`tasks_lib.medbench.endpoints.endpoint_completion`);
  a refused base is the item's error.
* Everything stored (predictions, replies with provider error texts, the run record) passes the
  one redaction rule (:class:`tasks_lib.records.RunStorage`), the endpoint's own key included.
* Decoding is the paper's (§9): temperature 0.7, at most 512 generated tokens, no tools; each
  replicate is one full pass (the paper runs 3) with its own item order (seeded by the run id)
  and its own call-cache salt, so replicates are independent and a re-run resumes from the cache.
* Calls are concurrent (the endpoint's connection limit, on the one item runner
  :func:`tasks_lib.item_runner.run_items`), rate-limited, retried and cached by
  :class:`~tasks_lib.llm.LiteLLMCompletion`; an optional cost budget stops new calls once this
  run's *new* spend reaches it (a cached reply costs nothing new, nor does a failed call; an
  unpriced reply makes the spend unknown, which stops a budgeted run too). The run ends
  ``partial``; its unstarted items are recorded with the error ``cost budget reached``;
  re-running with more budget resumes from the cache.
* A replicate runs as chunks on the one execute path (:mod:`tasks_lib.execution`): this module
  is the kit's item environment (:class:`MedBenchEnvironment`); chunks are slices of the run's
  shuffled order and a budgeted run's chunks are chained, so the budget spans the whole run.
* Answers are extracted by answer type: single choice keeps the reply (scoring applies the
  strict letter rule); lists (labels, tuples, boxes) are the first JSON array in the reply; a
  string is the reply's first non-empty line; open-ended keeps the reply. An unreadable list is
  a missing answer (scored 0). A failed call after retries is recorded on its line (``error``).
* More than 20 % failed calls ⇒ the run ends ``partial`` with ``end = incomplete …`` (spec §8).
* Multimodal items send their image as a base64 ``image_url`` part. The paper's 2,048-token
  context window is not enforced (prompts here are short); recorded as a departure.
* Agent-track items (an ``agent`` part) are run by the agent harness for the agent methods
  (:mod:`tasks_lib.medbench.agent_loop`: the item's tools served on its private world, the
  simulated user, the calls recorded as the prediction's ``tool_calls``); an API-mode agent
  answers them in one plain call without tools. A tool-call item's answer is its calls as
  ``[name, arguments JSON]`` pairs.
"""

from __future__ import annotations

import base64
import json
import random
import re
import time
from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import Field

from evaluators.core import RunStatus, Track
from tasks_lib.agents import AgentSpec
from tasks_lib.domain import Frozen
from tasks_lib.execution.environment import (
    Budgets,
    ChunkResult,
    ItemEnvironment,
)
from tasks_lib.item_runner import RunLimits, StopReason, run_items
from tasks_lib.llm import CallOptions, LiteLLMCompletion
from tasks_lib.llm_scope import call_scope
from tasks_lib.medbench.agent_loop import (
    AGENT_METHODS,
    SCRIPTED,
    TOOL_LOOP,
    Outcome,
    first_message,
    run_model,
    run_scripted,
)
from tasks_lib.medbench.agent_types import AgentKey, ToolCall
from tasks_lib.medbench.endpoints import endpoint_completion
from tasks_lib.medbench.items import (
    SUBMISSION_FILE,
    Answer,
    AnswerType,
    Prediction,
    PublicItem,
    read_manifest,
    read_public_items,
    read_references,
)
from tasks_lib.netpolicy import RefusedEndpoint
from tasks_lib.records import SUBMISSION, TRACE, RunRecord, run_store
from tasks_lib.redaction import redact
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

TEMPERATURE = 0.7
MAX_TOKENS = 512
INCOMPLETE_SHARE = 0.2
SYSTEM = ("You are a medical expert answering benchmark items. Follow the required answer "
          "format exactly.")


class Reply(Frozen):
    """What one item's call produced (kept in ``trace/replies.jsonl``)."""

    item_id: str = Field(description="Evaluation item id.")
    text: str | None = Field(default=None, description="Raw reply (None: the call failed).")
    error: str | None = Field(default=None, description="Why the call failed.")
    prompt_tokens: int = Field(default=0, description="Input tokens.")
    completion_tokens: int = Field(default=0, description="Output tokens.")
    cost_usd: float | None = Field(default=None, description="Priced cost (None = unknown).")
    cached: bool = Field(default=False, description="Served from the call cache.")
    tool_calls: list[ToolCall] | None = Field(default=None, description="Agent items: the "
                                              "tool calls made (None: not an agent run).")
    transcript: list[dict[str, Any]] | None = Field(
        default=None, description="Agent items: the conversation (tool results included).")


def messages(item: PublicItem, pool_url: str) -> list[dict[str, Any]]:
    """The chat messages of one item (options listed, schema stated, image attached)."""
    text = first_message(item)
    content: Any = text
    if item.image:
        data = base64.b64encode(Storage(pool_url).read_bytes(item.image)).decode()
        content = [{"type": "text", "text": text},
                   {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}]


def _json_list(text: str) -> list[Any] | None:
    start, stop = text.find("["), text.rfind("]")
    if start < 0 or stop <= start:
        return None
    try:
        value = json.loads(text[start:stop + 1])
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, list) else None


def extract(item: PublicItem, text: str) -> Answer:
    """The answer of a reply, by the item's answer type (None: unreadable)."""
    kind = item.answer_type
    if kind in (AnswerType.SINGLE_CHOICE, AnswerType.OPEN_ENDED):
        return text
    if kind is AnswerType.STRING:
        return next((line.strip() for line in text.splitlines() if line.strip()), "")
    value = _json_list(text)
    if value is None:
        return None
    if kind is AnswerType.MULTI_LABEL:
        return [str(v) for v in value if isinstance(v, str | int | float)]
    if kind is AnswerType.EXTRACTION:
        return [[str(x) for x in v] for v in value if isinstance(v, list)]
    boxes = [v for v in value if isinstance(v, list) and len(v) == 4
             and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)]
    return [[float(x) for x in b] for b in boxes]


BUDGET_REACHED = "cost budget reached"
"""The error recorded for an item not started because the run's cost budget was spent."""


def _new_cost(reply: Reply) -> float | None:
    """What a reply newly cost: nothing when served from the cache or when the call failed (no
    reply), else its price (None: unpriced)."""
    return 0.0 if reply.cached or reply.text is None else reply.cost_usd


def _ask(item: PublicItem, pool_url: str, agent: AgentSpec,
         completion: LiteLLMCompletion) -> Reply:
    import openai

    params = {"temperature": float(agent.params.get("temperature", TEMPERATURE)),
              "max_tokens": int(agent.params.get("max_tokens", MAX_TOKENS))}
    try:
        got = completion.chat(agent.model, messages(item, pool_url), **params)
    except (openai.APIError, RefusedEndpoint) as exc:
        return Reply(item_id=item.item_id, error=redact(f"{type(exc).__name__}: {exc}")[:300])
    return Reply(item_id=item.item_id, text=got.text, prompt_tokens=got.prompt_tokens,
                 completion_tokens=got.completion_tokens, cost_usd=got.cost_usd,
                 cached=got.cached)


def _agent(item: PublicItem, key: AgentKey | None, pool_url: str, agent: AgentSpec,
           completion: LiteLLMCompletion) -> Reply:
    """An agent method on one item: the harness on agent items; elsewhere one plain call
    (tool loop) or no answer (the scripted agents only know agent items)."""
    import openai

    if item.agent is None or key is None:
        if agent.method == TOOL_LOOP:
            return _ask(item, pool_url, agent, completion)
        return Reply(item_id=item.item_id)
    try:
        out: Outcome = (run_model(item, key, agent, completion) if agent.method == TOOL_LOOP
                        else run_scripted(item, key, gullible=agent.method != SCRIPTED))
    except (openai.APIError, RefusedEndpoint) as exc:
        return Reply(item_id=item.item_id, error=redact(f"{type(exc).__name__}: {exc}")[:300])
    return Reply(item_id=item.item_id, text=out.text, prompt_tokens=out.prompt_tokens,
                 completion_tokens=out.completion_tokens, cost_usd=out.cost_usd,
                 cached=out.cached, tool_calls=out.tool_calls, transcript=out.transcript)


def answer_of(item: PublicItem, reply: Reply) -> Answer:
    """The prediction's answer: a tool-call item's calls as ``[name, arguments JSON]`` pairs;
    otherwise extracted from the reply text by answer type (None: no reply)."""
    if (item.agent is not None and item.answer_type is AnswerType.EXTRACTION
            and reply.tool_calls is not None):
        return [[c.name, json.dumps(c.arguments, sort_keys=True)] for c in reply.tool_calls]
    return None if reply.text is None else extract(item, reply.text)


TIME_REACHED = "time budget reached"
"""The error recorded for an item not started because the run's time budget was spent."""


class MedBenchEnvironment(ItemEnvironment):
    """A MedBench pool (or subset) in API mode: one replicate is one full pass over the items in
    the run's own shuffled order (seeded by the run id); chunks are slices of that order."""

    cache_modules: ClassVar[tuple[str, ...]] = ("tasks_lib.medbench.api",)

    @classmethod
    def open(cls, pool_url: str) -> MedBenchEnvironment:
        """The environment of the MedBench pool at ``pool_url``."""
        m = read_manifest(pool_url)
        return cls(pool_url=pool_url, pool_id=m.pool_id, pool_version=m.version,
                   pool_hash=m.content_hash, n_items=len(read_public_items(pool_url)))

    def items(self, run_id: str) -> list[PublicItem]:
        """The run's items in its randomized order (spec §6.1)."""
        items = read_public_items(self.pool_url)
        random.Random(run_id).shuffle(items)
        return items

    def agent_keys(self, items: list[PublicItem]) -> dict[str, AgentKey]:
        """The private agent parts (tools' worlds) of the agent items among ``items``: the
        harness serves the tools server side; the agent never sees them."""
        if not any(it.agent for it in items):
            return {}
        return {k: r.agent for k, r in read_references(self.pool_url).items()
                if r.agent is not None}

    def run_chunk(self, agent: AgentSpec, replicate: int, start: int, stop: int,
                  limits: RunLimits, options: CallOptions) -> ChunkResult:
        """Ask the chunk's items concurrently; the budget counts new spend only."""
        run_id = self.run_id(agent, replicate)
        items = self.items(run_id)[start:stop]
        completion = endpoint_completion(agent, options)
        keys = self.agent_keys(items) if agent.method in AGENT_METHODS else {}

        def ask(it: PublicItem) -> Reply:
            if agent.method in AGENT_METHODS:
                return _agent(it, keys.get(it.item_id), self.pool_url, agent, completion)
            return _ask(it, self.pool_url, agent, completion)

        with call_scope(salt=f"medbench-r{replicate}") as scope:
            batch = run_items(items, ask, max_workers=completion.max_connections,
                              limits=limits, cost_of=_new_cost)
        return ChunkResult(run_id=run_id, start=start, stop=stop,
                           lines=[r.model_dump(mode="json") for r in batch.results],
                           stopped=batch.stopped, run_cost_usd=batch.spent_usd,
                           calls=scope.calls, cache_hits=scope.cache_hits,
                           input_tokens=scope.prompt_tokens,
                           output_tokens=scope.completion_tokens)

    def assemble(self, agent: AgentSpec, replicate: int, chunks: list[ChunkResult],
                 started_at: float, budgets: Budgets) -> RunRecord:
        """``predictions.jsonl`` and ``trace/replies.jsonl`` (one line per item, unasked items
        with their stop reason as error); partial on a spent budget or > 20 % failed calls."""
        run_id = self.run_id(agent, replicate)
        items = self.items(run_id)
        replies: list[Reply] = []
        for chunk in sorted(chunks, key=lambda c: c.start):
            asked = [Reply.model_validate(line) for line in chunk.lines]
            why = TIME_REACHED if chunk.stopped is StopReason.TIME else BUDGET_REACHED
            replies += asked + [Reply(item_id=it.item_id, error=why)
                                for it in items[chunk.start + len(asked):chunk.stop]]
        by_id = {it.item_id: it for it in items}
        preds = [Prediction(item_id=r.item_id, error=r.error, tool_calls=r.tool_calls,
                            answer=answer_of(by_id[r.item_id], r)) for r in replies]
        store = run_store(run_id)
        store.write_jsonl(f"{SUBMISSION}/{SUBMISSION_FILE}", preds)
        store.write_jsonl(f"{TRACE}/replies.jsonl", replies)
        failed = sum(r.error is not None for r in replies)
        costs = [r.cost_usd for r in replies if r.text is not None]
        new_cost = _known_sum(_new_cost(r) for r in replies)
        stops = {c.stopped for c in chunks} - {None}
        status, end = RunStatus.COMPLETED, "all items asked"
        if StopReason.TIME in stops:
            status, end = RunStatus.TIMEOUT, f"time budget of {budgets.time_budget_s} s reached"
        elif StopReason.BUDGET in stops:
            status, end = RunStatus.PARTIAL, f"cost budget {budgets.max_cost_usd} USD reached" + (
                "" if new_cost is not None else " (a reply's cost is unknown: unpriced model)")
        elif items and failed / len(items) > INCOMPLETE_SHARE:
            status, end = RunStatus.PARTIAL, f"incomplete: {failed} of {len(items)} calls failed"
        wall = time.time() - started_at
        return RunRecord(
            run_id=run_id, agent=agent, task_id=self.pool_id, track=Track.MEDBENCH,
            replicate=replicate, status=status, pool_url=self.pool_url, pool_id=self.pool_id,
            pool_version=self.pool_version, pool_hash=self.pool_hash, n_items=len(items),
            n_answered=sum(r.text is not None for r in replies),
            turns=sum(c.calls for c in chunks),
            wall_time_s=wall, item_time_s=wall / max(len(items), 1),
            input_tokens=sum(c.input_tokens for c in chunks),
            output_tokens=sum(c.output_tokens for c in chunks),
            cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
            new_cost_usd=new_cost, cache_hits=sum(c.cache_hits for c in chunks),
            judge_model=get_settings().judge_model, end=end)


def _known_sum(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return total


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def adhoc_agent(model: str, api_base: str | None = None) -> AgentSpec:
    """An agent for a model string not in the catalog (``--model``)."""
    from tasks_lib.agents import Harness

    params: dict[str, str | int | float | bool] = {"api_base": api_base} if api_base else {}
    return AgentSpec(agent_id=f"{_SAFE.sub('-', model)}@medbench", harness=Harness.QA_METHOD,
                     model=model, method="medbench_api", params=params)
