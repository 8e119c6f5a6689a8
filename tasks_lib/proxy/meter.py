"""The proxy's meter: what one run's model calls cost, per model, and the run's cost budget.

Every request the proxy answers is counted here: calls, cache hits, tokens and cost per model
(priced by :class:`~tasks_lib.proxy.config.ProxyConfig`), provider errors passed on, and the
requests refused (budget spent, a model outside the allow-list, a wrong token, a malformed
request). The budget is checked before a request is sent: the cost spent so far, plus what the
requests in flight may cost, plus this request's least cost (its prompt, estimated at four
characters a token, and its ``max_tokens`` if given) must stay within ``max_cost_usd``. A reply
longer than its estimate can still take the run past the budget by that one call; every later
request is refused.

Each request that reached the budget check is also logged as a :class:`ProxyCall` (when, which
model, answered / failed / refused for the budget, tokens, cost, cache hit), the first
:data:`MAX_CALLS` of them: the trace's per-call ``model_turn`` events.

When the proxy stops, the meter is stored beside the run as ``runs/<run_id>/calls/proxy.json``
(:data:`METER_FILE`); :meth:`ProxyMeter.onto` puts its totals on the run record.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from enum import StrEnum

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.llm import Completion
from tasks_lib.llm_cache import CALLS
from tasks_lib.records import RunRecord

METER_FILE = f"{CALLS}/proxy.json"
"""Where the meter is stored below ``runs/<run_id>/``."""
MAX_CALLS = 10_000
"""Calls logged one by one per run (later ones are counted in the totals only)."""


def _add(a: float | None, b: float | None) -> float | None:
    """Sum of two costs; unknown (None) when either is."""
    return None if a is None or b is None else a + b


class Refusal(StrEnum):
    """Why a request was refused before any model was asked."""

    MODEL = "model"
    """A model outside the run's allow-list."""
    UNAUTHORIZED = "unauthorized"
    """Not the run's proxy token."""
    REJECTED = "rejected"
    """A malformed or unsupported request."""


class ModelUsage(Frozen):
    """Model calls through the proxy (one model's, or the run's total)."""

    calls: int = Field(default=0, description="Requests answered with a completion.")
    cache_hits: int = Field(default=0, description="Of those, served from the call cache or "
                            "shared with an identical request in flight.")
    errors: int = Field(default=0, description="Requests the provider failed (after retries); "
                        "the error was passed on.")
    refused_budget: int = Field(default=0, description="Requests refused because the run's "
                                "cost budget was spent.")
    prompt_tokens: int = Field(default=0, description="Input tokens of the answered calls.")
    completion_tokens: int = Field(default=0, description="Output tokens of the answered calls.")
    cost_usd: float | None = Field(default=0.0, description="USD of the answered calls, cached "
                                   "ones at their original price (None: a call was unpriced).")
    new_cost_usd: float | None = Field(default=0.0, description="USD newly paid (cache hits "
                                       "cost nothing new; None: a call was unpriced).")

    def plus(self, other: ModelUsage) -> ModelUsage:
        """The sum of two usages."""
        return ModelUsage(
            calls=self.calls + other.calls, cache_hits=self.cache_hits + other.cache_hits,
            errors=self.errors + other.errors,
            refused_budget=self.refused_budget + other.refused_budget,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=_add(self.cost_usd, other.cost_usd),
            new_cost_usd=_add(self.new_cost_usd, other.new_cost_usd))


class ProxyCall(Frozen):
    """One request the proxy admitted or refused for the budget."""

    at_s: float = Field(description="Seconds from the proxy's start to the request's end.")
    model: str = Field(description="The allowed model (alias) asked for.")
    outcome: str = Field(description="answered | error (the provider failed it) | "
                                     "refused_budget.")
    prompt_tokens: int = Field(default=0, description="Input tokens (answered calls).")
    completion_tokens: int = Field(default=0, description="Output tokens (answered calls).")
    cost_usd: float | None = Field(default=0.0, description="USD (None: unpriced).")
    cached: bool = Field(default=False, description="Served from the call cache or shared "
                                                    "with an identical request in flight.")


class StageMark(Frozen):
    """The agent said it entered a stage (``POST /v1/medflows/stage``)."""

    at_s: float = Field(description="Seconds from the proxy's start.")
    stage: str = Field(description="s1 … s5.")


class ProxyMeter(Frozen):
    """Everything one run's model proxy served and refused."""

    run_id: str = Field(description="Run the proxy served.")
    max_cost_usd: float | None = Field(description="The run's cost budget (None: none).")
    budget_spent: bool = Field(description="The budget was reached: a request was refused "
                               "for it, or the calls cost at least the budget.")
    models: dict[str, ModelUsage] = Field(description="Per model name the agent asked for.")
    total: ModelUsage = Field(description="All models.")
    refused_model: int = Field(description="Requests for a model outside the allow-list.")
    unauthorized: int = Field(description="Requests without the run's proxy token.")
    rejected: int = Field(description="Malformed or unsupported requests (HTTP 400/413).")
    calls: list[ProxyCall] = Field(default_factory=list, description=f"The requests one by "
                                   f"one, in order (the first {MAX_CALLS}).")
    stages: list[StageMark] = Field(default_factory=list, description="The stages the agent "
                                    f"declared, in order (the first {MAX_CALLS}).")

    def onto(self, record: RunRecord) -> RunRecord:
        """``record`` with the proxy's calls as its turns, tokens, cost and cache hits (a run
        whose model calls all went through this proxy)."""
        t = self.total
        return record.model_copy(update={
            "turns": t.calls, "input_tokens": t.prompt_tokens,
            "output_tokens": t.completion_tokens, "cost_usd": t.cost_usd,
            "new_cost_usd": t.new_cost_usd, "cache_hits": t.cache_hits})


class Meter:
    """The live, thread-safe meter of one proxy (requests are served on many threads).

    Args:
        run_id: The run served.
        max_cost_usd: The run's cost budget (None: none).
    """

    def __init__(self, run_id: str, max_cost_usd: float | None) -> None:
        self.run_id, self.max_cost_usd = run_id, max_cost_usd
        self._models: dict[str, ModelUsage] = {}
        self._reserved = 0.0
        self._refused: Counter[Refusal] = Counter()
        self._calls: list[ProxyCall] = []
        self._stages: list[StageMark] = []
        self._started = time.monotonic()
        self._lock = threading.Lock()

    def _spent(self) -> float:
        costs = [u.cost_usd for u in self._models.values()]
        return sum(c for c in costs if c is not None)

    def _count(self, name: str, usage: ModelUsage) -> None:
        self._models[name] = self._models.get(name, ModelUsage()).plus(usage)

    def _log(self, name: str, outcome: str, reply: Completion | None = None,
             cost_usd: float | None = 0.0) -> None:
        if len(self._calls) >= MAX_CALLS:
            return
        self._calls.append(ProxyCall(
            at_s=round(time.monotonic() - self._started, 3), model=name, outcome=outcome,
            prompt_tokens=reply.prompt_tokens if reply else 0,
            completion_tokens=reply.completion_tokens if reply else 0,
            cost_usd=cost_usd if reply else 0.0, cached=bool(reply and reply.cached)))

    def admit(self, name: str, least_usd: float) -> str | None:
        """Reserve ``least_usd`` for a request to ``name``; returns why it is refused instead
        (the budget would be passed), or None when admitted."""
        with self._lock:
            if self.max_cost_usd is None:
                return None
            spent = self._spent() + self._reserved
            if spent + least_usd > self.max_cost_usd:
                self._count(name, ModelUsage(refused_budget=1))
                self._log(name, "refused_budget")
                return (f"the run's cost budget of ${self.max_cost_usd:g} is spent: "
                        f"${spent:.6f} used or in flight, this request needs at least "
                        f"${least_usd:.6f}")
            self._reserved += least_usd
            return None

    def settle(self, name: str, least_usd: float, reply: Completion | None,
               cost_usd: float | None) -> None:
        """Release an admitted request's reservation and count its outcome (``reply`` None:
        the provider failed it)."""
        with self._lock:
            if self.max_cost_usd is not None:
                self._reserved = max(0.0, self._reserved - least_usd)
            if reply is None:
                self._count(name, ModelUsage(errors=1))
                self._log(name, "error")
                return
            self._log(name, "answered", reply, cost_usd)
            self._count(name, ModelUsage(
                calls=1, cache_hits=int(reply.cached), prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens, cost_usd=cost_usd,
                new_cost_usd=0.0 if reply.cached else cost_usd))

    def enter(self, stage: str) -> None:
        """Record that the agent entered ``stage`` (now)."""
        with self._lock:
            if len(self._stages) < MAX_CALLS:
                self._stages.append(StageMark(
                    at_s=round(time.monotonic() - self._started, 3), stage=stage))

    def refuse(self, why: Refusal) -> None:
        """Count a request refused before any model was asked."""
        with self._lock:
            self._refused[why] += 1

    def snapshot(self) -> ProxyMeter:
        """The meter as it stands."""
        with self._lock:
            models = dict(sorted(self._models.items()))
            total = ModelUsage()
            for usage in models.values():
                total = total.plus(usage)
            spent = self.max_cost_usd is not None and (
                total.refused_budget > 0 or self._spent() >= self.max_cost_usd)
            return ProxyMeter(
                run_id=self.run_id, max_cost_usd=self.max_cost_usd, budget_spent=spent,
                models=models, total=total, refused_model=self._refused[Refusal.MODEL],
                unauthorized=self._refused[Refusal.UNAUTHORIZED],
                rejected=self._refused[Refusal.REJECTED], calls=list(self._calls),
                stages=list(self._stages))
