"""Reference and trap analyses of the RWE studies, run through SQL on a study database.

Each study has one *reference* analysis (what its protocol says, exactly) and one or more *trap*
analyses (a protocol violation: no adjustment, no exclusions, the wrong lab item or unit). Both
take a :class:`StudyDB` (SQLAlchemy URL or engine + schema names) and return an
:class:`AnalysisResult`: the field values by field id and the cohort it analysed (one row per
included stay: the protocol's id columns and criterion attributes). The honest scripted agent runs
the very same reference analysis through its sandboxed database role; construct runs it on the
freshly loaded database to produce the private reference answers, then runs the traps to check
that each flips at least one scored field (``../shared/specs/rwe.md`` §9.3).

Values are exact (unrounded); :func:`tasks_lib.rwe.types.publish_value` rounds them. P-values are
Wald (logistic/Poisson/Cox) or log-rank, two-sided.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pandas as pd
from pydantic import Field
from sqlalchemy import Engine, create_engine

from evaluators.core import Frozen, Registry
from tasks_lib.rwe.types import SchemaNames


class StudyDB(NamedTuple):
    """Where a study database is: a SQLAlchemy URL (or an open engine) and its schema names."""

    url: str | Engine
    schemas: SchemaNames = SchemaNames()

    def engine(self) -> Engine:
        """An engine for :attr:`url` (the given engine itself when one was passed)."""
        return self.url if isinstance(self.url, Engine) else create_engine(self.url)

    def query(self, sql: str) -> pd.DataFrame:
        """Run ``sql`` with ``{hosp}``, ``{icu}``, ``{derived}`` replaced by the schema names."""
        text = sql.format(hosp=self.schemas.hosp, icu=self.schemas.icu,
                          derived=self.schemas.derived)
        engine = self.engine()
        try:
            with engine.connect() as conn:
                return pd.read_sql_query(text, conn)
        finally:
            if not isinstance(self.url, Engine):
                engine.dispose()


class AnalysisResult(NamedTuple):
    """What an analysis produced."""

    values: dict[str, float]
    """Field id → exact value (ratios, CI bounds, p-values, counts, percents, AUCs)."""
    cohort: pd.DataFrame
    """The analysed cohort: the contract's id columns and attributes, one row per stay."""


Analysis = Callable[[StudyDB], AnalysisResult]
"""A reference or trap analysis."""


class StudyAnalyses(Frozen):
    """A study's reference analysis and its trap panel."""

    reference: Analysis = Field(description="The protocol-faithful analysis (gold).")
    traps: dict[str, Analysis] = Field(
        min_length=1, description="Trap name (the protocol violation) → analysis; each must "
        "flip at least one scored field of the gold.")


ANALYSES: Registry[StudyAnalyses] = Registry("rwe analysis")
"""Study analysis name (``analysis:`` in ``study.yaml``) → its analyses."""


def run_reference(name: str, db: StudyDB) -> AnalysisResult:
    """Run the reference analysis registered as ``name`` on ``db``."""
    return ANALYSES.get(name).reference(db)


def run_traps(name: str, db: StudyDB) -> dict[str, AnalysisResult]:
    """Run every trap analysis of ``name`` on ``db`` (trap name → result)."""
    return {trap: fn(db) for trap, fn in ANALYSES.get(name).traps.items()}
