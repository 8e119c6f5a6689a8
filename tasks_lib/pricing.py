"""Model prices from a snapshot YAML kept in the repository (USD per 1M tokens)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.settings import get_settings


class Price(Frozen):
    """Price of one model."""

    input_per_mtok: float = Field(ge=0, description="USD per 1M input tokens.")
    output_per_mtok: float = Field(ge=0, description="USD per 1M output tokens.")


class PriceSnapshot(Frozen):
    """A dated price list."""

    as_of: str = Field(description="Date the prices were read (ISO).")
    source: str = Field(description="Where the prices come from.")
    models: dict[str, Price] = Field(description="Model string → price.")

    def cost(self, model: str, input_tokens: float | None, output_tokens: float | None
             ) -> float | None:
        """USD for the tokens, or ``None`` when the model or a token count is unknown.

        A litellm provider prefix is tried without it too (``openai/gpt-4o-mini`` is priced as
        ``gpt-4o-mini``)."""
        price = self.models.get(model) or self.models.get(model.split("/", 1)[-1])
        if price is None or input_tokens is None or output_tokens is None:
            return None
        if input_tokens != input_tokens or output_tokens != output_tokens:  # NaN
            return None
        return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6


@lru_cache(maxsize=4)
def _load(path: Path) -> PriceSnapshot:
    try:
        return PriceSnapshot.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise InputDataError(str(path), "price snapshot not found") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise InputDataError(str(path), f"invalid price snapshot: {exc}") from None


def price_snapshot(path: Path | None = None) -> PriceSnapshot:
    """The configured price snapshot (cached per path)."""
    return _load(path or get_settings().price_snapshot)
