"""RWE study cards, reference analyses (planted effects recovered) and the trap panel."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from evaluators.core import Track
from evaluators.registry import Registry
from tasks_lib.rwe import build
from tasks_lib.rwe.analyses import ANALYSES
from tasks_lib.rwe.analysis_base import AnalysisResult, StudyAnalyses
from tasks_lib.rwe.studies import load_studies
from tasks_lib.rwe.templates import PLANTED
from tasks_lib.rwe.types import FieldType, Study, publish_value, side
from tasks_lib.taskspec import load_card
from tests.tasks_lib.rwe.ehr_db import loaded_db

RWE_METRICS = {"rwe_acc", "rwe_rar", "rwe_smr", "rwe_sr", "rwe_cr"}
PLANTED_FIELDS = {  # planted parameter → (study, field estimating it)
    "statin_hr_28d": ("statin-sepsis", "hr_statin"),
    "lactate_t3_or": ("lactate-hf", "or_t3"),
    "lactate_t2_or": ("lactate-hf", "or_t2"),
    "diuretic_hyponatremia_pr": ("diuretic-hyponatremia-hf", "pr_loop"),
    "albumin_low_or": ("albumin-ap", "or_low_albumin"),
    "glucose_hr_nontraumatic": ("glucose-ich", "hr_glucose"),
    "ppi_or_influenza": ("ppi-influenza-null", "or_ppi"),
    "nlr_q4_hr": ("nlr-sepsis-htn", "hr_q4"),
}


@pytest.fixture(scope="module")
def studies() -> dict[str, Study]:
    return {s.study_id: s for s in load_studies()}


@pytest.fixture(scope="module")
def gold(studies: dict[str, Study]) -> dict[str, AnalysisResult]:
    db = loaded_db().db
    return {sid: ANALYSES.get(s.analysis).reference(db) for sid, s in studies.items()}


def test_cards_validate_and_cover_the_designs(studies: dict[str, Study]) -> None:
    assert len(studies) >= 8
    for sid, s in studies.items():
        card = load_card(Track.RWE, sid)
        assert set(card.metric_names) == RWE_METRICS and card.primary_metric == "rwe_sr"
        gates = [x for x in s.sentences if x.mcq is not None]
        assert 2 <= len(gates) <= 5, sid
        assert 3 <= len(s.fields) <= 8, sid
        assert any(f.type in (FieldType.RATIO, FieldType.P_VALUE) for f in s.fields)
        public = s.public().model_dump_json()
        assert '"key"' not in public and '"basis"' not in public
    assert {s.design.value for s in studies.values()} == {"cohort", "case_control",
                                                           "cross_sectional"}
    assert {s.model.value for s in studies.values()} == {"logistic", "cox", "poisson"}
    assert sum(s.negative_control for s in studies.values()) >= 1


def test_reference_cohort_has_the_contract_columns(studies: dict[str, Study],
                                                   gold: dict[str, AnalysisResult]) -> None:
    for sid, s in studies.items():
        cohort = gold[sid].cohort
        assert list(cohort.columns) == s.protocol.cohort.columns, sid
        assert cohort["stay_id"].is_unique and len(cohort) > 300, sid
        for attr in s.protocol.cohort.attributes:  # every included row meets every rule
            col = cohort[attr.name]
            if attr.min is not None:
                assert (col >= attr.min).all(), (sid, attr.name)
            if attr.equals is not None:
                assert (col == attr.equals).all(), (sid, attr.name)


def test_planted_effects_recovered_within_the_gold_ci(gold: dict[str, AnalysisResult]) -> None:
    for param, (sid, field) in PLANTED_FIELDS.items():
        v = gold[sid].values
        assert v[f"{field}_lo"] <= PLANTED[param] <= v[f"{field}_hi"], (param, v[field])


def test_gold_direction_and_significance_follow_the_plant(
        studies: dict[str, Study], gold: dict[str, AnalysisResult]) -> None:
    for param, (sid, field) in PLANTED_FIELDS.items():
        v = gold[sid].values
        expected = 0 if PLANTED[param] == 1.0 else (1 if PLANTED[param] > 1 else -1)
        assert side(v[f"{field}_lo"], v[f"{field}_hi"]) == expected, (param, v[field])
    assert gold["ppi-influenza-null"].values["p_ppi"] >= 0.05
    assert studies["ppi-influenza-null"].negative_control


def test_trap_panel_flips_a_scored_field_in_every_study(
        studies: dict[str, Study], gold: dict[str, AnalysisResult]) -> None:
    db = loaded_db().db
    for sid, s in studies.items():
        outcomes = build.trap_panel(s, gold[sid], db)
        assert outcomes and all(o.flipped for o in outcomes), sid


def test_a_trap_that_changes_nothing_fails_the_build_naming_the_study(
        studies: dict[str, Study], gold: dict[str, AnalysisResult],
        monkeypatch: pytest.MonkeyPatch) -> None:
    s = studies["glucose-ich"]
    same = gold["glucose-ich"]
    fake: Registry[StudyAnalyses] = Registry("rwe analysis")
    fake.add(s.analysis, StudyAnalyses(reference=lambda db: same, traps={"noop": lambda db: same}))
    monkeypatch.setattr(build, "ANALYSES", fake)
    with pytest.raises(build.TrapPanelError, match=r"glucose-ich.*noop"):
        build.trap_panel(s, same, loaded_db().db)


def test_crude_logistic_or_equals_the_two_by_two_table(gold: dict[str, AnalysisResult]) -> None:
    """The crude trap's logistic OR with one binary covariate is the 2x2 cross-product ratio;
    Woolf's CI gives the same Wald interval (independent hand computation)."""
    db = loaded_db().db
    crude = ANALYSES.get("statin_sepsis").traps["crude"](db)
    from tasks_lib.rwe.sepsis_analyses import _sepsis_stays

    df = _sepsis_stays(db)
    df = df[df["los_icu_days"] >= 1.0]
    tab = pd.crosstab(df["statin"], df["death_28d"])
    a, b, c, d = tab.loc[1, 1], tab.loc[1, 0], tab.loc[0, 1], tab.loc[0, 0]
    odds = (a * d) / (b * c)
    se = math.sqrt(1 / a + 1 / b + 1 / c + 1 / d)
    assert crude.values["or_statin"] == pytest.approx(odds, rel=1e-6)
    assert crude.values["or_statin_lo"] == pytest.approx(odds * math.exp(-1.959964 * se),
                                                         rel=1e-5)
    assert crude.values["n_cohort"] == len(df) == gold["statin-sepsis"].values["n_cohort"]


def test_reference_answers_round_and_key_the_gates(studies: dict[str, Study],
                                                   gold: dict[str, AnalysisResult]) -> None:
    s = studies["statin-sepsis"]
    answers = build.reference_answers(s, gold["statin-sepsis"])
    q1 = next(x for x in s.sentences if x.mcq and x.mcq.id == "q1")
    assert q1.key is not None and answers.mcq["q1"] == q1.key.lower  # statins protect
    assert answers.fields["p_statin"].printed == "<0.001"
    assert answers.fields["n_cohort"].printed == str(int(gold["statin-sepsis"].values[
        "n_cohort"]))
    assert publish_value(FieldType.RATIO, 0.33449) == (0.33, "0.33")
    assert publish_value(FieldType.P_VALUE, 0.04951) == (0.05, "0.050")
    assert publish_value(FieldType.P_VALUE, 0.0009) == (0.001, "<0.001")
    null = studies["ppi-influenza-null"]
    assert build.reference_answers(null, gold["ppi-influenza-null"]).mcq["q1"] == next(
        x for x in null.sentences if x.mcq and x.mcq.id == "q1").key.null  # type: ignore[union-attr]


def test_variant_panel_agrees_with_the_gold(studies: dict[str, Study],
                                            gold: dict[str, AnalysisResult]) -> None:
    """Other valid adjustment sets (sex, quadratic SOFA) keep every scored field's RA/SM."""
    for sid in ("statin-sepsis", "lactate-hf"):
        outcomes = build.variant_panel(studies[sid], gold[sid], loaded_db().db)
        assert len(outcomes) == 3 and all(not o.flipped for o in outcomes), sid
        assert all(o.values["n_cohort"] == gold[sid].values["n_cohort"] for o in outcomes)
