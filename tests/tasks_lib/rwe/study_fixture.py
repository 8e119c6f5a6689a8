"""A hand-made RWE study with reference answers for session, scoring and screening tests."""

from __future__ import annotations

from tasks_lib.rwe.types import (
    MCQ,
    Category,
    CohortAttribute,
    CohortContract,
    Design,
    FieldAnswer,
    FieldDef,
    FieldType,
    Protocol,
    PublicStudy,
    Sentence,
    StudyAnswers,
)


def make_study() -> tuple[PublicStudy, StudyAnswers]:
    """A hand-made study: a baseline sentence (N, % female) and one gated primary result
    (adjusted OR with its CI bounds and p), with reference answers."""
    contract = CohortContract(id_columns=["subject_id"], attributes=[
        CohortAttribute(name="anchor_age", description="age at admission", dtype="int", min=18)])
    protocol = Protocol(background="Does X lower Y?", methods="Logistic model.",
                        data_dictionary=[], cohort=contract)
    baseline = Sentence(id="s0", category=Category.BASELINE, text="N = {n}, {female}% female",
                        fields=[FieldDef(id="n", type=FieldType.COUNT, label="N"),
                                FieldDef(id="female", type=FieldType.PROPORTION, label="%F")])
    primary = Sentence(
        id="s1", category=Category.PRIMARY, text="OR {or} ({or_lo}-{or_hi}), p {p}",
        mcq=MCQ(id="q1", stem="Was X associated with Y?",
                options={"A": "lower odds", "B": "higher odds", "C": "no difference"}),
        fields=[FieldDef(id="or", type=FieldType.RATIO, label="adjusted OR"),
                FieldDef(id="or_lo", type=FieldType.CONFIDENCE_INTERVAL, label="lower",
                         pair_of="or", bound="lower"),
                FieldDef(id="or_hi", type=FieldType.CONFIDENCE_INTERVAL, label="upper",
                         pair_of="or", bound="upper"),
                FieldDef(id="p", type=FieldType.P_VALUE, label="p")])
    study = PublicStudy(study_id="tiny", title="Tiny", design=Design.COHORT, protocol=protocol,
                        sentences=[baseline, primary])

    def fa(fid: str, ftype: FieldType, value: float, printed: str) -> FieldAnswer:
        return FieldAnswer(id=fid, type=ftype, value=value, printed=printed, exact=value)

    key = StudyAnswers(study_id="tiny", mcq={"q1": "A"}, cohort_size=2, fields={
        "n": fa("n", FieldType.COUNT, 2, "2"),
        "female": fa("female", FieldType.PROPORTION, 50.0, "50.0"),
        "or": fa("or", FieldType.RATIO, 0.5, "0.50"),
        "or_lo": fa("or_lo", FieldType.CONFIDENCE_INTERVAL, 0.35, "0.35"),
        "or_hi": fa("or_hi", FieldType.CONFIDENCE_INTERVAL, 0.71, "0.71"),
        "p": fa("p", FieldType.P_VALUE, 0.001, "<0.001")})
    return study, key
