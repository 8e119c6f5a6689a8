"""Great Expectations suites, one per track, judging a submission's measurement frame.

Suites are data: ``expectations/suites/<track>.json`` in GX's own suite format (``name`` +
``expectations`` with ``type``/``kwargs``/``meta``). Each expectation's ``meta`` carries ``rule``
(a short stable name), ``meaning`` (what it asks of the submission, for people) and optionally
``show`` (context columns to print beside the offending value, e.g. ``labels``); the rules are
thresholds on measured columns (shape, dtype kind, finite fraction, value range, label and box
counts, text length), so changing what counts as valid means editing a suite, not Python.

:func:`validate_frame` runs a suite on a pandas frame in an ephemeral context (no files written,
analytics off) and condenses the result: which rule failed, on which columns, for which rows
(GX's ``unexpected_index_list`` with ``result_format`` COMPLETE), with the offending values.
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


def suite_names() -> list[str]:
    """Tracks with a suite file (``expectations/suites/<track>.json``), sorted."""
    folder = resources.files("expectations").joinpath("suites")
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir()
                  if p.name.endswith(".json"))


COLUMN_KWARGS = ("column", "column_A", "column_B", "column_list")
"""Expectation kwargs that name frame columns, in reporting order."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ExpectationSpec(_Model):
    """One expectation of a suite file."""

    type: str = Field(description="GX expectation type, e.g. 'expect_column_values_to_be_between'.")
    kwargs: dict[str, Any] = Field(description="GX kwargs (columns, thresholds, row_condition).")
    meta: dict[str, Any] = Field(default_factory=dict,
                                 description="'rule' (short name) and 'meaning' (for people).")


class SuiteSpec(_Model):
    """A suite file: the rules a track's measurement frame must meet."""

    name: str = Field(description="Suite name.")
    expectations: list[ExpectationSpec] = Field(description="Rules, in reporting order.")


class SuiteError(RuntimeError):
    """A suite could not be evaluated (unknown column, bad kwargs): our bug, never the agent's."""


class ValidationFailure(_Model):
    """One failed expectation: the rule, and the failing rows (keyed by the frame's key column
    here; :mod:`tasks_lib.imaging.validation` re-keys them by case id for score cards)."""

    expectation: str = Field(description="Expectation type.")
    column: str = Field(description="Checked columns, comma-separated ('' for table-level).")
    meaning: str = Field(description="What the expectation means, for people.")
    cases: list[str] = Field(description="Failing rows (values of the key column, or case ids).")
    rule: str = Field(default="", description="Short rule name from the suite's meta.")
    values: dict[str, str] = Field(default_factory=dict,
                                   description="Row → offending values, e.g. 'shape=4x4x4'.")


class ValidationReport(_Model):
    """The Great Expectations result, condensed."""

    ok: bool = Field(description="Every expectation passed.")
    suite: str = Field(description="Suite name.")
    failures: list[ValidationFailure] = Field(description="Failed expectations.")


def load_suite(track: str) -> SuiteSpec:
    """The suite of ``track`` (``KeyError`` listing known suites for an unknown track)."""
    if track not in suite_names():
        raise KeyError(f"no expectation suite for track {track!r}; known: "
                       f"{', '.join(suite_names())}")
    text = resources.files("expectations").joinpath(f"suites/{track}.json").read_text("utf-8")
    return SuiteSpec.model_validate_json(text)


def suite_json(track: str) -> dict[str, Any]:
    """The suite file of ``track`` as plain JSON data."""
    data: dict[str, Any] = json.loads(load_suite(track).model_dump_json())
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


def _raised(info: Any) -> str:
    """The exception message GX recorded for an expectation ('' if it evaluated)."""
    if not isinstance(info, dict):
        return ""
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    return next((m for m in map(_raised, info.values()) if m), "")


def _columns(kwargs: dict[str, Any]) -> list[str]:
    cols: list[str] = []
    for k in COLUMN_KWARGS:
        v = kwargs.get(k)
        cols += [str(c) for c in v] if isinstance(v, list) else [str(v)] if v else []
    return cols


def _text(v: Any) -> str:
    """A measured value for people: integral floats without '.0', others to 6 digits."""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.6g}"
    return str(v)


def _failure(r: Any, key: str) -> ValidationFailure:
    cfg = r.expectation_config
    meta = cfg.meta or {}
    cols = _columns(cfg.kwargs) + [str(c) for c in meta.get("show", [])]
    values: dict[str, str] = {}
    for hit in r.result.get("unexpected_index_list") or []:
        shown = [f"{c}={_text(hit[c])}" for c in cols if c in hit and c != key]
        values.setdefault(str(hit[key]), ", ".join(shown or [f"{key}={hit[key]}"]))
    return ValidationFailure(expectation=cfg.type, column=", ".join(_columns(cfg.kwargs)),
                   meaning=str(meta.get("meaning", "")), cases=sorted(values),
                   rule=str(meta.get("rule", "")), values=values)


def _index_columns(spec: SuiteSpec, key: str, frame: pd.DataFrame) -> list[str]:
    """``key`` plus the context columns rules ask to show (``meta.show``) that the frame has."""
    shown = {str(c) for e in spec.expectations for c in e.meta.get("show", [])}
    return [key, *sorted(c for c in shown if c in frame.columns and c != key)]


def validate_frame(track: str, frame: pd.DataFrame, key: str = "case_id",
                   suite: SuiteSpec | None = None) -> ValidationReport:
    """Validate ``frame`` with the track's suite (or ``suite``); failing rows named by ``key``.

    Raises:
        SuiteError: An expectation could not be evaluated (e.g. it names a missing column).
    """
    import great_expectations as gx

    spec = suite or load_suite(track)
    ctx = _context()
    run = uuid.uuid4().hex
    gx_suite = ctx.suites.add(gx.ExpectationSuite(
        name=f"{spec.name}-{run}", expectations=[e.model_dump() for e in spec.expectations]))
    source = ctx.data_sources.add_pandas(f"submission-{run}")
    try:
        batch = source.add_dataframe_asset("frame").add_batch_definition_whole_dataframe(
            "all").get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(gx_suite, result_format={
            "result_format": "COMPLETE", "unexpected_index_column_names": _index_columns(
                spec, key, frame)})
    finally:
        ctx.data_sources.delete(source.name)
        ctx.suites.delete(gx_suite.name)
    failures = []
    for r in result.results:
        if message := _raised(r.exception_info):
            raise SuiteError(f"suite {spec.name}: {r.expectation_config.type} "
                             f"{_columns(r.expectation_config.kwargs)}: {message}")
        if not r.success:
            failures.append(_failure(r, key))
    rank = {(e.type, ", ".join(_columns(e.kwargs)), str(e.meta.get("rule", ""))): i
            for i, e in reversed(list(enumerate(spec.expectations)))}
    failures.sort(key=lambda f: rank.get((f.expectation, f.column, f.rule), len(rank)))
    return ValidationReport(ok=bool(result.success), suite=spec.name, failures=failures)
