"""Cohort screening of an RWE run (``../shared/specs/rwe.md`` §6–§7): rules first, then the
cohort judge on a seeded sample (:mod:`tasks_lib.rwe.cohort_judge`).

Rules (each finding names its rows' ids):

* ``empty`` / ``unreadable`` / ``missing_columns`` / ``too_large`` (> 50,000 rows): invalid;
* ``fabricated_ids``: a ``subject_id`` absent from the study database — invalid, always caught;
* ``inconsistent_ids``: ``hadm_id``/``stay_id`` not belonging to the row's patient — invalid;
* ``duplicates``: the same identifiers twice;
* ``declared_ineligible``: the row's own attribute breaks the contract (age 17 where ≥ 18);
* ``contradicts_database``: an attribute differs from the database's value for that stay;
* ``ineligible``: an existing patient outside the protocol's cohort (criteria checked in SQL by
  the reference analysis).

A cohort is **invalid** on the first four hard rules, **unqualified** when the judge's exclusion
rate exceeds τ (0.20); either fails the task in SR-after-screening. Exact precision, recall and
Jaccard against the reference cohort are reported too (the generator knows the truth).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from pydantic import Field

from evaluators.core import Frozen
from tasks_lib.rwe.types import CohortAttribute, CohortContract

MAX_ROWS = 50_000
"""Cohort size rule (spec §6)."""

TAU = 0.20
"""Judge exclusion-rate threshold above which a cohort is unqualified ([M], spec §6)."""

SAMPLE = 100
"""Cases the judge sees: min(100, n) (spec §6)."""

HARD_RULES = ("unreadable", "empty", "missing_columns", "too_large", "fabricated_ids",
              "inconsistent_ids")
"""Findings that make a cohort invalid by themselves."""

MAX_IDS = 20
"""Ids listed per finding (the count is always complete)."""


class IdIndex(Frozen):
    """The identifiers that exist in the study database (what the id rules check against)."""

    subjects: set[int] = Field(description="Every subject_id.")
    admissions: set[tuple[int, int]] = Field(description="Every (subject_id, hadm_id).")
    stays: set[tuple[int, int, int]] = Field(description="Every (subject_id, hadm_id, stay_id).")


class Finding(Frozen):
    """One rule that fired."""

    rule: str = Field(description="Rule name (see the module doc).")
    count: int = Field(description="Rows concerned.")
    ids: list[str] = Field(description="Up to 20 of their identifiers.")
    detail: str = Field(default="", description="What is wrong.")


class Screening(Frozen):
    """Outcome of screening one run's cohort."""

    n_rows: int = Field(description="Rows in the cohort file.")
    findings: list[Finding] = Field(description="Rules that fired.")
    valid: bool = Field(description="No hard rule fired.")
    sampled: int = Field(default=0, description="Cases the judge saw.")
    excluded: int = Field(default=0, description="Sampled cases the judge would exclude.")
    judge_errors: int = Field(default=0, description="Sampled cases the judge failed on.")
    exclusion_rate: float | None = Field(default=None, description="excluded / judged cases.")
    qualified: bool = Field(description="valid and exclusion rate ≤ τ.")
    precision: float | None = Field(default=None, description="Rows in the reference cohort / "
                                                              "rows (exact, by stay).")
    recall: float | None = Field(default=None, description="Reference rows found / reference "
                                                           "rows.")
    jaccard: float | None = Field(default=None, description="|A ∩ R| / |A ∪ R| of the id sets.")
    judge_model: str | None = Field(default=None, description="Judge model ('rules' offline).")

    @property
    def fabricated(self) -> list[str]:
        """Fabricated subject_ids found (up to 20)."""
        return next((f.ids for f in self.findings if f.rule == "fabricated_ids"), [])

    def reasons(self) -> list[str]:
        """One line per finding, for the score card."""
        lines = [f"cohort {f.rule}: {f.count} row(s){' — ' + f.detail if f.detail else ''}"
                 f"{' e.g. ' + ', '.join(f.ids) if f.ids else ''}" for f in self.findings]
        if self.exclusion_rate is not None:
            lines.append(f"cohort judge ({self.judge_model}): {self.excluded}/{self.sampled} "
                         f"sampled cases excluded (rate {self.exclusion_rate:.2f}, τ {TAU})")
        return lines


def read_cohort(path: Path, contract: CohortContract) -> tuple[pd.DataFrame | None, list[Finding]]:
    """The cohort table, or None with the finding that stops the rules."""
    if not path.is_file() or path.is_symlink():
        return None, [Finding(rule="empty", count=0, ids=[], detail="no cohort file")]
    try:
        frame = pd.read_csv(path, nrows=MAX_ROWS + 1, low_memory=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        return None, [Finding(rule="unreadable", count=0, ids=[], detail=str(exc)[:200])]
    if frame.empty:
        return None, [Finding(rule="empty", count=0, ids=[])]
    if len(frame) > MAX_ROWS:
        return None, [Finding(rule="too_large", count=len(frame), ids=[],
                              detail=f"more than {MAX_ROWS} rows")]
    missing = [c for c in contract.columns if c not in frame.columns]
    if missing:
        return None, [Finding(rule="missing_columns", count=len(frame), ids=[],
                              detail=f"columns {', '.join(missing)} missing")]
    ids = frame[contract.id_columns].apply(pd.to_numeric, errors="coerce")
    bad = ids.isna().any(axis=1) | (ids % 1 != 0).any(axis=1)
    if bad.any():
        return None, [Finding(rule="unreadable", count=int(bad.sum()), ids=[],
                              detail="identifiers must be integers")]
    frame[contract.id_columns] = ids.astype("int64")
    return frame, []


def _key(row: pd.Series, columns: list[str]) -> str:
    return "/".join(str(int(row[c])) for c in columns)


def _finding(rule: str, rows: pd.DataFrame, columns: list[str], detail: str = "") -> Finding:
    return Finding(rule=rule, count=len(rows), detail=detail,
                   ids=[_key(r, columns) for _, r in rows.head(MAX_IDS).iterrows()])


def id_rules(frame: pd.DataFrame, contract: CohortContract, index: IdIndex) -> list[Finding]:
    """Fabricated, inconsistent and duplicated identifiers."""
    cols, found = contract.id_columns, []
    fabricated = frame[~frame["subject_id"].isin(index.subjects)]
    if len(fabricated):
        found.append(_finding("fabricated_ids", fabricated, ["subject_id"],
                              "subject_id not in the database"))
    known = frame[frame["subject_id"].isin(index.subjects)]
    if "hadm_id" in cols:
        pairs = list(zip(known["subject_id"], known["hadm_id"], strict=True))
        bad = known[[p not in index.admissions for p in pairs]]
        if "stay_id" in cols:
            triples = list(zip(known["subject_id"], known["hadm_id"], known["stay_id"],
                               strict=True))
            bad = known[[t not in index.stays for t in triples]]
        if len(bad):
            found.append(_finding("inconsistent_ids", bad, cols,
                                  "admission/stay not of that patient"))
    dup = frame[frame.duplicated(cols, keep="first")]
    if len(dup):
        found.append(_finding("duplicates", dup, cols, "same identifiers repeated"))
    return found


def violates(attribute: CohortAttribute, value: object) -> bool:
    """Whether ``value`` breaks the attribute's eligibility rule (missing values do)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return attribute.min is not None or attribute.max is not None \
            or attribute.equals is not None
    if attribute.equals is not None:
        if isinstance(attribute.equals, bool):
            return _as_bool(value) is not attribute.equals
        return str(value) != str(attribute.equals)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return attribute.min is not None or attribute.max is not None
    return ((attribute.min is not None and number < attribute.min)
            or (attribute.max is not None and number > attribute.max))


def _as_bool(value: object) -> bool | None:
    text = str(value).strip().lower()
    if text in ("true", "t", "1", "1.0", "yes"):
        return True
    if text in ("false", "f", "0", "0.0", "no"):
        return False
    return None


def attribute_rules(frame: pd.DataFrame, contract: CohortContract,
                    reference: pd.DataFrame | None) -> list[Finding]:
    """Declared-ineligible rows, attributes contradicting the database (the reference cohort
    holds the database's values for eligible stays) and existing-but-ineligible stays."""
    cols, found = contract.id_columns, []
    declared = frame[_any_row(frame, contract.attributes,
                              lambda a, col: [violates(a, v) for v in frame[col]])]
    if len(declared):
        found.append(_finding("declared_ineligible", declared, cols,
                              "the row's own attributes break an eligibility rule"))
    if reference is None:
        return found
    merged = frame.merge(reference[[*cols, *(a.name for a in contract.attributes)]], on=cols,
                         how="left", suffixes=("", "__db"), indicator=True)
    inside = merged[merged["_merge"] == "both"]
    wrong = inside[_any_row(inside, contract.attributes, lambda a, col: [
        _differs(x, y) for x, y in zip(inside[col], inside[f"{col}__db"], strict=True)])]
    if len(wrong):
        found.append(_finding("contradicts_database", wrong, cols,
                              "attribute values differ from the database"))
    outside = merged[merged["_merge"] == "left_only"]
    if len(outside):
        found.append(_finding("ineligible", outside, cols,
                              "not in the protocol's cohort (criteria checked in SQL)"))
    return found


def _any_row(frame: pd.DataFrame, attributes: list[CohortAttribute],
             test: Callable[[CohortAttribute, str], list[bool]]) -> list[bool]:
    """Per row: whether ``test`` (one column at a time) flags any attribute."""
    flags = [False] * len(frame)
    for a in attributes:
        flags = [f or t for f, t in zip(flags, test(a, a.name), strict=True)]
    return flags


def _differs(mine: object, truth: object) -> bool:
    try:
        return not math.isclose(float(mine), float(truth),  # type: ignore[arg-type]
                                rel_tol=1e-3, abs_tol=1e-2)
    except (TypeError, ValueError):
        b1, b2 = _as_bool(mine), _as_bool(truth)
        if b1 is not None and b2 is not None:
            return b1 != b2
        return str(mine).strip().lower() != str(truth).strip().lower()


def exact_agreement(frame: pd.DataFrame, reference: pd.DataFrame, columns: list[str]
                    ) -> tuple[float, float, float]:
    """Precision, recall and Jaccard of the cohort's id set against the reference's."""
    mine = {tuple(r) for r in frame[columns].itertuples(index=False)}
    truth = {tuple(int(v) for v in r) for r in reference[columns].itertuples(index=False)}
    both = len(mine & truth)
    union = len(mine | truth)
    return (both / len(mine) if mine else 0.0, both / len(truth) if truth else 0.0,
            both / union if union else 0.0)


def rule_screen(path: Path, contract: CohortContract, index: IdIndex,
                reference: pd.DataFrame | None) -> tuple[pd.DataFrame | None, Screening]:
    """The rule part of screening (no judge): the table (None if unusable) and the outcome."""
    frame, stop = read_cohort(path, contract)
    if frame is None:
        return None, Screening(n_rows=0, findings=stop, valid=False, qualified=False)
    findings = id_rules(frame, contract, index) + attribute_rules(frame, contract, reference)
    valid = not any(f.rule in HARD_RULES for f in findings)
    exact: tuple[float | None, ...] = (None, None, None)
    if reference is not None:
        exact = exact_agreement(frame, reference, contract.id_columns)
    return frame, Screening(n_rows=len(frame), findings=findings, valid=valid, qualified=valid,
                            precision=exact[0], recall=exact[1], jaccard=exact[2])
