"""Great Expectations suites, one per track, validating a submission's manifest frame.

Suites are data: ``expectations/suites/<track>.json`` in GX's own suite format (``name`` +
``expectations`` with ``type``/``kwargs``/``meta.meaning``). :func:`validate_frame` runs a suite on
a pandas frame in an ephemeral context (no files written, analytics off).
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from importlib import resources
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

SUITES = ("segmentation", "enhancement", "detection", "vqa", "report_generation")


class Failure(BaseModel):
    """One failed expectation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expectation: str = Field(description="Expectation type.")
    column: str = Field(description="Checked column ('' for table-level expectations).")
    meaning: str = Field(description="What the expectation means, for people.")
    cases: list[str] = Field(description="Values of the key column on failing rows.")


class Outcome(BaseModel):
    """Condensed validation result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool = Field(description="Every expectation passed.")
    suite: str = Field(description="Suite name.")
    failures: list[Failure] = Field(description="Failed expectations.")


def suite_json(track: str) -> dict[str, Any]:
    """The suite file of ``track`` (``KeyError`` listing known suites for an unknown track)."""
    if track not in SUITES:
        raise KeyError(f"no expectation suite for track {track!r}; known: {', '.join(SUITES)}")
    text = resources.files("expectations").joinpath(f"suites/{track}.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.lru_cache(maxsize=1)
def _context() -> Any:
    """One ephemeral context per process (each new one leaves a temporary docs folder)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


def validate_frame(track: str, frame: pd.DataFrame, key: str = "case_id") -> Outcome:
    """Validate ``frame`` with the track's suite; failing rows are named by ``key``."""
    import great_expectations as gx

    spec = suite_json(track)
    ctx = _context()
    run = uuid.uuid4().hex
    suite = ctx.suites.add(gx.ExpectationSuite(name=f"{spec['name']}-{run}",
                                               expectations=spec["expectations"]))
    source = ctx.data_sources.add_pandas(f"submission-{run}")
    try:
        batch = source.add_dataframe_asset("frame").add_batch_definition_whole_dataframe(
            "all").get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(suite, result_format={
            "result_format": "COMPLETE", "unexpected_index_column_names": [key]})
    finally:
        ctx.data_sources.delete(source.name)
        ctx.suites.delete(suite.name)
    failures = []
    for r in result.results:
        if r.success:
            continue
        cfg = r.expectation_config
        idx = r.result.get("unexpected_index_list") or []
        cases = sorted({str(i[key]) if isinstance(i, dict) else str(frame.iloc[i][key])
                        for i in idx})
        failures.append(Failure(expectation=cfg.type, column=str(cfg.kwargs.get("column", "")),
                                meaning=str((cfg.meta or {}).get("meaning", "")), cases=cases))
    return Outcome(ok=bool(result.success), suite=spec["name"], failures=failures)
