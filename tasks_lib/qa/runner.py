"""Running QA agents over a pool: live methods through litellm, or replay of recorded answers.

Live methods run items concurrently (up to the agent's ``max_connections``, default the
``MEDFLOWS_MAX_CONNECTIONS`` setting); dependent calls inside one item's method stay in order,
independent ones run concurrently (:func:`tasks_lib.llm_scope.gather`). The submission lists
answers in the pool's item order, so a concurrent run equals a serial one.

A run stops starting items once its wall-time deadline has passed or its cost (priced from the
snapshot, cached calls at their original price) reaches ``max_cost_usd``; what it answered is kept,
and the same command with a later deadline or a larger budget resumes from the call cache. Items
run on the one item runner (:func:`tasks_lib.item_runner.run_items`), which states the limits'
rules (an unknown cost stops a budgeted run: it cannot be checked against the budget).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import openai
import pandas as pd
from pydantic import Field

from evaluators.core import InputDataError
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.domain import Frozen
from tasks_lib.execution.environment import TRANSPORT_PARAMS as TRANSPORT_PARAMS
from tasks_lib.execution.environment import run_id_for as run_id_for
from tasks_lib.item_runner import RunLimits as RunLimits
from tasks_lib.item_runner import StopReason as StopReason
from tasks_lib.item_runner import run_items
from tasks_lib.llm import CallOptions, CompletionFn, LiteLLMCompletion
from tasks_lib.llm_scope import call_scope
from tasks_lib.pricing import PriceSnapshot
from tasks_lib.qa.method_base import Method, MethodContext, MethodResult
from tasks_lib.qa.methods import METHODS
from tasks_lib.qa.predictions import load_predictions
from tasks_lib.qa.types import Exemplar, PublicQAItem
from tasks_lib.redaction import redact, secret_values
from tasks_lib.settings import get_settings

ANSWERS = "answers.jsonl"
"""A QA submission's file (one :class:`QAAnswer` per line)."""


class QAAnswer(Frozen):
    """One line of a QA submission (``answers.jsonl``)."""

    dataset: str = Field(description="Dataset.")
    realidx: str = Field(description="Item id.")
    answer: str | None = Field(description="Option letter, None if the agent gave none.")
    raw: str | None = Field(description="Raw model text (None for replays without text).")
    calls: int = Field(description="Model calls made for the item.")
    prompt_tokens: float | None = Field(description="Input tokens (None if unknown).")
    completion_tokens: float | None = Field(description="Output tokens (None if unknown).")
    time_s: float | None = Field(description="Wall time for the item (None if unknown).")
    cost_usd: float | None = Field(description="USD for the item (None if unknown).")
    error: str | None = Field(
        default=None, description="Why the provider gave no answer after its retries (then "
        "`answer` is None and the item counts as unanswered); None when it answered.")
    cache_hits: int = Field(
        default=0, description="Calls of the item served from the call cache or shared with "
        "an identical request in flight (no request sent; tokens and cost are the original "
        "call's).")
    new_cost_usd: float | None = Field(
        default=None, description="USD this execution newly paid for the item (cache hits are "
        "free); None when unpriced or replayed.")
    extractor: str | None = Field(
        default=None, description="Who decided the answer ('llm:<model>', 'regex', "
        "'regex-fallback', 'option-regex'); None = the method's built-in regex or a replay.")
    trace: dict[str, str] = Field(default_factory=dict, description="Method-specific facts "
                                  "(e.g. the MDAgents route).")

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.realidx}"


class Batch(Frozen):
    """What one execution of an agent over some items produced."""

    answers: list[QAAnswer] = Field(description="Answers in item order (unstarted items absent).")
    stopped: StopReason | None = Field(
        default=None, description="Why items were left unstarted (None: all were asked).")


class RunProgress(Frozen):
    """A progress report of a live run (sent as items finish)."""

    agent_id: str = Field(description="Agent.")
    done: int = Field(description="Items finished in this execution.")
    total: int = Field(description="Items this execution was asked to do.")
    calls: int = Field(description="Model calls so far (cache hits included).")
    cache_hits: int = Field(description="Calls served from the call cache.")
    cost_usd: float | None = Field(description="Cost of the finished items (None: unpriced).")
    new_cost_usd: float | None = Field(description="What this execution newly paid.")
    elapsed_s: float = Field(description="Seconds since the execution started.")


@lru_cache(maxsize=4)
def _recorded(path: str) -> pd.DataFrame:
    return load_predictions(path)


def _nan_to_none(value: Any) -> float | None:
    """Recorded numbers are floats with NaN for blanks; blanks become None."""
    number = float(value)
    return None if math.isnan(number) else number


def replay(agent: AgentSpec, items: list[PublicQAItem], prices: PriceSnapshot) -> list[QAAnswer]:
    """Answers recorded for ``agent.model``/``agent.method``; items without a record are omitted.

    Cost per item: the recorded ``cost_usd`` when present, else tokens × price snapshot, else
    None. The first recorded row per item wins (published files contain duplicates).
    """
    frame = _recorded(str(agent.params["predictions"]))
    group = frame[(frame["model"] == agent.model) & (frame["method"] == agent.method)]
    by_key = {f"{d}/{r}": row for d, r, row in zip(
        group["dataset"], group["realidx"], group.itertuples(index=False), strict=True)}
    answers = []
    for it in items:
        row = by_key.get(f"{it.dataset}/{it.realidx}")
        if row is None:
            continue
        pt, ct = _nan_to_none(row.prompt_tokens), _nan_to_none(row.completion_tokens)
        cost = _nan_to_none(row.cost_usd)
        if cost is None:
            cost = prices.cost(agent.model, pt, ct)
        answers.append(QAAnswer(
            dataset=it.dataset, realidx=it.realidx, answer=row.predicted_answer or None, raw=None,
            calls=1, prompt_tokens=pt, completion_tokens=ct, time_s=_nan_to_none(row.time_s),
            cost_usd=cost,
        ))
    return answers


NOT_ITEM_ERRORS = (openai.AuthenticationError, openai.PermissionDeniedError,
                   openai.NotFoundError)
"""Provider errors that are our configuration's fault, not the item's: they end the run (as an
``InputDataError`` with the provider's message redacted: providers quote rejected keys)."""


def max_connections(agent: AgentSpec, options: CallOptions | None = None) -> int:
    """``--max-connections``, else the agent's ``max_connections`` param, else the setting."""
    value = agent.params.get("max_connections")
    if options and options.max_connections is not None:
        value = options.max_connections
    limit = get_settings().max_connections if value is None else int(str(value))
    if limit < 1:
        raise InputDataError(agent.agent_id, f"max_connections must be >= 1, got {limit}")
    return limit


def ask_item(agent: AgentSpec, method: Method, item: PublicQAItem, complete: CompletionFn,
             ctx: MethodContext, prices: PriceSnapshot, replicate: int = 0) -> QAAnswer:
    """One item through the agent's method; a provider failure becomes an errored answer.
    Replicates other than 0 salt the call cache keys: each replicate asks afresh."""
    started = time.perf_counter()
    with call_scope(f"replicate:{replicate}" if replicate else "") as scope:
        try:
            result = method(item, agent.model, complete, ctx)
        except NOT_ITEM_ERRORS as exc:
            raise InputDataError(
                f"provider of {agent.agent_id}",
                redact(f"{type(exc).__name__}: {exc}", secret_values())) from None
        except openai.APIError as exc:
            return QAAnswer(
                dataset=item.dataset, realidx=item.realidx, answer=None, raw=None,
                calls=scope.calls, prompt_tokens=scope.prompt_tokens,
                completion_tokens=scope.completion_tokens,
                time_s=time.perf_counter() - started,
                cost_usd=prices.cost(agent.model, scope.prompt_tokens, scope.completion_tokens),
                error=redact(f"{type(exc).__name__}: {exc}", secret_values()),
                cache_hits=scope.cache_hits,
                new_cost_usd=prices.cost(agent.model, scope.new_prompt_tokens,
                                         scope.new_completion_tokens))
    return QAAnswer(
        dataset=item.dataset, realidx=item.realidx, answer=result.answer, raw=result.raw,
        calls=result.calls, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens, time_s=time.perf_counter() - started,
        cost_usd=_priced(prices, agent.model, ctx, result),
        cache_hits=scope.cache_hits,
        new_cost_usd=prices.cost(agent.model, scope.new_prompt_tokens,
                                 scope.new_completion_tokens),
        extractor=result.extractor, trace=result.trace,
    )


def _priced(prices: PriceSnapshot, model: str, ctx: MethodContext,
            result: MethodResult) -> float | None:
    """The item's cost as the paper counts it: the method's calls at the agent model's price,
    the answer extractor's calls at the extractor model's."""
    own = prices.cost(model, result.prompt_tokens - result.extractor_prompt_tokens,
                      result.completion_tokens - result.extractor_completion_tokens)
    if not result.extractor_calls:
        return own
    extracted = prices.cost(ctx.extractor_model, result.extractor_prompt_tokens,
                            result.extractor_completion_tokens)
    return None if own is None or extracted is None else own + extracted


class _Progress:
    """Running totals of one execution, reported as a :class:`RunProgress` per finished item
    (called from the calling thread only)."""

    def __init__(self, agent_id: str, total: int, spent_usd: float,
                 report: Callable[[RunProgress], None]) -> None:
        self.agent_id, self.total, self.report = agent_id, total, report
        self.started = time.perf_counter()
        self.done = self.calls = self.hits = 0
        self.cost: float | None = spent_usd
        self.new_cost: float | None = 0.0

    def __call__(self, answer: QAAnswer) -> None:
        self.done += 1
        self.calls += answer.calls
        self.hits += answer.cache_hits
        self.cost = known_sum([self.cost, answer.cost_usd])
        self.new_cost = known_sum([self.new_cost, answer.new_cost_usd])
        self.report(RunProgress(
            agent_id=self.agent_id, done=self.done, total=self.total, calls=self.calls,
            cache_hits=self.hits, cost_usd=self.cost, new_cost_usd=self.new_cost,
            elapsed_s=time.perf_counter() - self.started))


def run_method(
    agent: AgentSpec, items: list[PublicQAItem], exemplars: dict[str, list[Exemplar]],
    prices: PriceSnapshot, complete: CompletionFn | None = None,
    progress: Callable[[RunProgress], None] | None = None, limits: RunLimits | None = None,
    options: CallOptions | None = None, replicate: int = 0,
) -> Batch:
    """Ask the model every item with the agent's method (litellm unless ``complete`` is given).

    Items run concurrently, at most :func:`max_connections` at a time; answers come back in the
    order of ``items``. An item is not started once ``limits`` say the run's time or cost budget
    is spent; the remaining items stay unanswered and :attr:`Batch.stopped` says why.
    ``progress`` is called (from the calling thread) as items finish.
    """
    method = METHODS.get(agent.method or "")
    limits = limits or RunLimits()
    if limits.max_cost_usd is not None and prices.cost(agent.model, 1, 1) is None:
        raise InputDataError(agent.agent_id, f"a cost budget needs a price for {agent.model!r} "
                                             "in the price snapshot (datasets/prices.yaml)")
    limit = max_connections(agent, options)
    complete = complete or LiteLLMCompletion.for_run(
        agent.params, (options or CallOptions()).model_copy(update={"max_connections": limit}))
    seed = int(agent.params.get("seed", 0))
    extraction = {k: str(agent.params[k]) for k in ("extractor", "extractor_model")
                  if agent.params.get(k) is not None}

    def ask(it: PublicQAItem) -> QAAnswer:
        ctx = MethodContext(exemplars=exemplars.get(it.dataset, []), seed=seed, **extraction)
        return ask_item(agent, method, it, complete, ctx, prices, replicate)

    report = None if progress is None else _Progress(agent.agent_id, len(items),
                                                      limits.spent_usd, progress)
    batch = run_items(items, ask, max_workers=limit, limits=limits,
                      cost_of=lambda answer: answer.cost_usd, progress=report)
    return Batch(answers=batch.results, stopped=batch.stopped)


def run_agent(
    agent: AgentSpec, items: list[PublicQAItem], exemplars: dict[str, list[Exemplar]],
    prices: PriceSnapshot, complete: CompletionFn | None = None,
    progress: Callable[[RunProgress], None] | None = None, limits: RunLimits | None = None,
    options: CallOptions | None = None, replicate: int = 0,
) -> Batch:
    """Dispatch on the agent's harness (replays are instant and ignore the limits)."""
    if agent.harness is Harness.QA_REPLAY:
        return Batch(answers=replay(agent, items, prices))
    if agent.harness is Harness.QA_METHOD:
        return run_method(agent, items, exemplars, prices, complete, progress, limits, options,
                          replicate)
    raise InputDataError(agent.agent_id, f"harness {agent.harness.value!r} cannot run QA pools "
                                         "(use qa_method or qa_replay agents)")


def known_sum(values: Iterable[float | None]) -> float | None:
    """Sum of the values; None when there are none or any is unknown (never a silent 0)."""
    known = list(values)
    if not known or any(v is None for v in known):
        return None
    return float(sum(v for v in known if v is not None))


def total_cost(answers: Iterable[QAAnswer]) -> float | None:
    """Sum of item costs; None when any answered item's cost is unknown."""
    return known_sum(a.cost_usd for a in answers)
