"""What one run's model proxy allows: the model allow-list, the cost budget, the call options.

The agent asks for a model by the name the run's config gives it (``gpt-4o-mini``); the proxy
sends the litellm model string that name maps to (``openai/gpt-4o-mini``, or any other provider
route), so the agent never chooses the provider, the endpoint or the credential.

Cost is priced from the price snapshot (:mod:`tasks_lib.pricing`, the same source as the run
record's ``cost_usd``) by the provider model; litellm's own price is the fallback for a model the
snapshot lacks. A run with a cost budget must have every allowed model in the snapshot, so the
proxy can price a request before sending it.
"""

from __future__ import annotations

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.llm import CallOptions
from tasks_lib.pricing import price_snapshot

MAX_REQUEST_BYTES = 8 * 2**20
"""Largest request body the proxy reads by default (a bigger one is answered 413)."""


class ProxyConfig(Frozen):
    """The model proxy of one run."""

    models: dict[str, str] = Field(
        min_length=1, description="The run's allow-list: model name the agent asks for → "
        "litellm model string the call layer sends (e.g. gpt-4o-mini → openai/gpt-4o-mini).")
    max_cost_usd: float | None = Field(
        default=None, ge=0, description="The run's cost budget in USD (price snapshot; calls "
        "served from the call cache count at their original price, so a replay stops where the "
        "run did). None: no budget.")
    api_base: str | None = Field(
        default=None, description="Provider endpoint (None: the llm_api_base setting, else "
        "litellm's default for the model).")
    options: CallOptions = Field(
        default_factory=CallOptions, description="Connections, rate caps and cache switch of "
        "the run's calls (the same options as medflows' own agents).")
    salt: str = Field(default="", description="Makes this run's cache keys its own (e.g. the "
                      "replicate), as a call scope's salt does.")
    max_request_bytes: int = Field(default=MAX_REQUEST_BYTES, gt=0,
                                   description="Largest request body read (bigger: HTTP 413).")

    def alias(self, name: object) -> str | None:
        """The allowed model a request names: an alias of :attr:`models`, or the provider model
        behind one (its first alias; scaffolds that route on the model name, like AIDE, can
        send ``openai/gpt-4o-mini``); None when neither."""
        if not isinstance(name, str):
            return None
        if name in self.models:
            return name
        return next((a for a, provider in self.models.items() if provider == name), None)

    def cost(self, name: str, prompt_tokens: float, completion_tokens: float) -> float | None:
        """USD of tokens of the allowed model ``name`` (price snapshot; None: unpriced)."""
        return price_snapshot().cost(self.models[name], prompt_tokens, completion_tokens)

    def check(self) -> ProxyConfig:
        """This config, when a budgeted run can price every allowed model (else the
        operator's mistake, as :class:`~tasks_lib.errors.InputDataError`)."""
        if self.max_cost_usd is None:
            return self
        unpriced = sorted(n for n in self.models if self.cost(n, 1, 1) is None)
        if unpriced:
            raise InputDataError("max_cost_usd", "a cost budget needs a price for every allowed "
                                 f"model; the price snapshot has none for {', '.join(unpriced)}")
        return self
