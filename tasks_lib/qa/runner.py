"""Running QA agents over a pool: live methods through litellm, or replay of recorded answers.

Live methods run items concurrently (up to the agent's ``max_connections``, default the
``MEDFLOWS_MAX_CONNECTIONS`` setting); the calls inside one item's method stay in order. The
submission lists answers in the pool's item order, so a concurrent run equals a serial one.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from functools import lru_cache
from typing import Any

import openai
import pandas as pd
from pydantic import Field

from evaluators.core import InputDataError
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.domain import Frozen
from tasks_lib.llm import CompletionFn, LiteLLMCompletion, call_scope
from tasks_lib.pricing import PriceSnapshot
from tasks_lib.qa.methods import METHODS, Method, MethodContext
from tasks_lib.qa.predictions import load_predictions
from tasks_lib.qa.types import Exemplar, PublicQAItem
from tasks_lib.redaction import redact, secret_values
from tasks_lib.settings import get_settings


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
        default=0, description="Calls of the item served from the call cache (no request sent; "
        "tokens and cost are the original call's).")

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.realidx}"


def run_id_for(agent: AgentSpec, pool_hash: str, replicate: int) -> str:
    """Deterministic run id: the same agent on the same pool content is the same run."""
    payload = json.dumps([agent.model_dump(mode="json"), pool_hash, replicate], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


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
"""Provider errors that are our configuration's fault, not the item's: they end the run."""


def max_connections(agent: AgentSpec) -> int:
    """The agent's ``max_connections`` param, else the ``MEDFLOWS_MAX_CONNECTIONS`` setting."""
    value = agent.params.get("max_connections")
    limit = get_settings().max_connections if value is None else int(str(value))
    if limit < 1:
        raise InputDataError(agent.agent_id, f"max_connections must be >= 1, got {limit}")
    return limit


def ask_item(agent: AgentSpec, method: Method, item: PublicQAItem, complete: CompletionFn,
             ctx: MethodContext, prices: PriceSnapshot) -> QAAnswer:
    """One item through the agent's method; a provider failure becomes an errored answer."""
    started = time.perf_counter()
    with call_scope() as scope:
        try:
            result = method(item, agent.model, complete, ctx)
        except NOT_ITEM_ERRORS:
            raise
        except openai.APIError as exc:
            return QAAnswer(
                dataset=item.dataset, realidx=item.realidx, answer=None, raw=None,
                calls=scope.calls, prompt_tokens=scope.prompt_tokens,
                completion_tokens=scope.completion_tokens,
                time_s=time.perf_counter() - started,
                cost_usd=prices.cost(agent.model, scope.prompt_tokens, scope.completion_tokens),
                error=redact(f"{type(exc).__name__}: {exc}", secret_values()),
                cache_hits=scope.cache_hits)
    return QAAnswer(
        dataset=item.dataset, realidx=item.realidx, answer=result.answer, raw=result.raw,
        calls=result.calls, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens, time_s=time.perf_counter() - started,
        cost_usd=prices.cost(agent.model, result.prompt_tokens, result.completion_tokens),
        cache_hits=scope.cache_hits,
    )


def run_method(
    agent: AgentSpec, items: list[PublicQAItem], exemplars: dict[str, list[Exemplar]],
    prices: PriceSnapshot, complete: CompletionFn | None = None,
    progress: Callable[[int, int], None] | None = None, deadline: float | None = None,
) -> list[QAAnswer]:
    """Ask the model every item with the agent's method (litellm unless ``complete`` is given).

    Items run concurrently, at most :func:`max_connections` at a time; answers come back in the
    order of ``items``. An item is not started once ``deadline`` (a ``time.monotonic()`` value)
    has passed: the run's time budget is exhausted and the remaining items stay unanswered.
    ``progress(done, total)`` is called (from the calling thread) as items finish.
    """
    method = METHODS.get(agent.method or "")
    limit = max_connections(agent)
    api_base = agent.params.get("api_base")
    complete = complete or LiteLLMCompletion(api_base=str(api_base) if api_base else None,
                                             max_connections=limit)
    seed = int(agent.params.get("seed", 0))

    def ask(it: PublicQAItem) -> QAAnswer | None:
        if deadline is not None and time.monotonic() > deadline:
            return None
        ctx = MethodContext(exemplars=exemplars.get(it.dataset, []), seed=seed)
        return ask_item(agent, method, it, complete, ctx, prices)

    with ThreadPoolExecutor(max_workers=limit, thread_name_prefix="qa-item") as pool:
        futures = {pool.submit(ask, it): i for i, it in enumerate(items)}
        return _collect(futures, len(items), progress, pool)


def _collect(futures: dict[Future[QAAnswer | None], int], total: int,
             progress: Callable[[int, int], None] | None,
             pool: ThreadPoolExecutor) -> list[QAAnswer]:
    """Answers in item order; a bug in one item cancels the items not yet started."""
    slots: list[QAAnswer | None] = [None] * total
    done = 0
    try:
        for future in as_completed(futures):
            answer = future.result()
            if answer is None:
                continue
            slots[futures[future]] = answer
            done += 1
            if progress:
                progress(done, total)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    return [a for a in slots if a is not None]


def run_agent(
    agent: AgentSpec, items: list[PublicQAItem], exemplars: dict[str, list[Exemplar]],
    prices: PriceSnapshot, complete: CompletionFn | None = None,
    progress: Callable[[int, int], None] | None = None, deadline: float | None = None,
) -> list[QAAnswer]:
    """Dispatch on the agent's harness (replays are instant and ignore the deadline)."""
    if agent.harness is Harness.QA_REPLAY:
        return replay(agent, items, prices)
    if agent.harness is Harness.QA_METHOD:
        return run_method(agent, items, exemplars, prices, complete, progress, deadline)
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
