"""RWE studies as typed data: protocol, cohort contract, gated question tree, answers, pools.

A study (``datasets/rwe/<study_id>/``) is a protocol (``protocol.md``: background and objective,
methods), a data dictionary, a cohort contract and a question tree (``study.yaml``), and the name of
its reference analysis (``tasks_lib/rwe/analyses.py``). The question tree holds no values: the
reference answers come from running the reference analysis on the generated database and are
stored only in the pool's ``private/`` folder (``../shared/specs/rwe.md`` §2, §9.3).

The pool's files and their reader: :mod:`tasks_lib.rwe.pool_files`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from evaluators.core import Frozen

P_FLOOR = 0.001
"""Publication convention: p-values below this print as ``<0.001`` (spec §9.3)."""


class FieldType(StrEnum):
    """Type of one fill-in field (ClinicalTrials.gov result data elements, spec §2)."""

    RATIO = "ratio"
    CONFIDENCE_INTERVAL = "confidence_interval"
    P_VALUE = "p_value"
    COUNT = "count"
    PROPORTION = "proportion"
    AUC = "auc"
    NUMERIC = "numeric"


SCORED_TYPES = frozenset({FieldType.RATIO, FieldType.P_VALUE})
"""Field types scored by RAR (ratio, with its CI) and SMR (p-value)."""


class Category(StrEnum):
    """Label of a result sentence; additional (subgroup/sensitivity) results are excluded."""

    BASELINE = "baseline_characteristics"
    PRIMARY = "primary_results"


class Design(StrEnum):
    """STROBE design of a study."""

    COHORT = "cohort"
    CASE_CONTROL = "case_control"
    CROSS_SECTIONAL = "cross_sectional"


class Model(StrEnum):
    """Statistical model of the primary analysis."""

    LOGISTIC = "logistic"
    COX = "cox"
    POISSON = "poisson"


class SchemaNames(Frozen):
    """Schema names of the study database (mimic-code's by default)."""

    hosp: str = Field(default="mimiciv_hosp", description="Hospital module schema.")
    icu: str = Field(default="mimiciv_icu", description="ICU module schema.")
    derived: str = Field(default="mimiciv_derived", description="Derived concepts schema.")


class EHRSource(StrEnum):
    """Where a pool's study database came from."""

    GENERATED = "generated"
    """The seeded synthetic EHR (``pool build rwe --seed``)."""
    TABLES = "tables"
    """MIMIC-layout files loaded into its own database (``--from-tables``)."""
    DATABASE = "database"
    """An existing mimic-code database on the study server, used in place (``--from-db``)."""


class DictionaryEntry(Frozen):
    """One data-dictionary line of a protocol: a column or item the study needs."""

    table: str = Field(description="Schema-qualified table, e.g. mimiciv_hosp.labevents.")
    column: str = Field(description="Column (or itemid/code list) the study uses.")
    meaning: str = Field(description="What it means for this study (units, codes, windows).")


class CohortAttribute(Frozen):
    """One criterion attribute the cohort audit table must carry, with its eligibility rule."""

    name: str = Field(description="Column name in the cohort table.")
    description: str = Field(description="Definition, as the protocol states it.")
    dtype: Literal["int", "float", "bool", "str"] = Field(description="Value type.")
    min: float | None = Field(default=None, description="Eligible only if value >= min.")
    max: float | None = Field(default=None, description="Eligible only if value <= max.")
    equals: bool | str | None = Field(default=None, description="Eligible only if value == this.")


class CohortContract(Frozen):
    """What the cohort audit file (one row per included patient) must contain."""

    file: str = Field(default="cohort.csv", description="File name in the agent's workspace.")
    id_columns: list[str] = Field(description="Identifier columns (subject_id first).")
    attributes: list[CohortAttribute] = Field(description="Criterion attributes per row.")

    @property
    def columns(self) -> list[str]:
        """Every required column, ids first."""
        return [*self.id_columns, *(a.name for a in self.attributes)]


class Protocol(Frozen):
    """What the agent reads before it starts (spec §1.2)."""

    background: str = Field(description="Background and objective.")
    methods: str = Field(description="Research methods (results masked).")
    data_dictionary: list[DictionaryEntry] = Field(description="Tables/columns the study needs.")
    cohort: CohortContract = Field(description="The cohort audit table contract.")


class FieldDef(Frozen):
    """One fill-in field (one question) of a result sentence; no value."""

    id: str = Field(description="Field id, unique within the study (a placeholder in the text).")
    type: FieldType = Field(description="Answer type (decides format checks and scoring).")
    label: str = Field(description="What to report, e.g. 'adjusted OR, statin vs none'.")
    pair_of: str | None = Field(
        default=None, description="Confidence-interval fields: the ratio field they bound.")
    bound: Literal["lower", "upper"] | None = Field(
        default=None, description="Confidence-interval fields: which bound.")

    @model_validator(mode="after")
    def _ci_paired(self) -> FieldDef:
        is_ci = self.type is FieldType.CONFIDENCE_INTERVAL
        if is_ci != (self.pair_of is not None) or is_ci != (self.bound is not None):
            raise ValueError(f"{self.id}: confidence_interval fields (only) need pair_of and bound")
        return self


class MCQ(Frozen):
    """A single-choice verification question gating a primary result (public part)."""

    id: str = Field(description="Question id, unique within the study.")
    stem: str = Field(description="The question.")
    options: dict[str, str] = Field(description="Option letter → text (mutually exclusive).")


class MCQKey(Frozen):
    """How the right option of an MCQ follows from the reference result (private)."""

    basis: str = Field(description="Ratio field whose reference CI decides the answer.")
    higher: str = Field(description="Option when the CI lies above 1.")
    lower: str = Field(description="Option when the CI lies below 1.")
    null: str = Field(description="Option when the CI includes 1.")


class Sentence(Frozen):
    """One result sentence of the question tree (public: no values, no MCQ key)."""

    id: str = Field(description="Sentence id, unique within the study.")
    category: Category = Field(description="Baseline (ungated) or primary (gated) result.")
    text: str = Field(description="The sentence with ``{field_id}`` placeholders.")
    mcq: MCQ | None = Field(default=None, description="Gate: fields revealed if answered right.")
    fields: list[FieldDef] = Field(min_length=1, description="Its fill-in fields.")


class StudySentence(Sentence):
    """A sentence as defined on the card: the public part plus the MCQ key."""

    key: MCQKey | None = Field(default=None, description="How the gate's answer is decided.")

    @model_validator(mode="after")
    def _gate_consistent(self) -> StudySentence:
        if (self.mcq is None) != (self.key is None):
            raise ValueError(f"{self.id}: an mcq needs a key and a key needs an mcq")
        if self.category is Category.PRIMARY and self.mcq is None:
            raise ValueError(f"{self.id}: primary results are gated by an mcq")
        if self.mcq is not None and self.key is not None:
            letters = {self.key.higher, self.key.lower, self.key.null}
            if not letters <= set(self.mcq.options):
                raise ValueError(f"{self.id}: key letters {sorted(letters)} not all options")
        return self

    def public(self) -> Sentence:
        """The agent-visible part."""
        return Sentence(id=self.id, category=self.category, text=self.text, mcq=self.mcq,
                        fields=self.fields)


class StudyCard(Frozen):
    """``study.yaml`` of a card folder: everything except the protocol prose."""

    design: Design = Field(description="STROBE design.")
    model: Model = Field(description="Model of the primary analysis.")
    analysis: str = Field(description="Registered reference analysis (tasks_lib.rwe.analyses).")
    data_dictionary: list[DictionaryEntry] = Field(description="Tables/columns the study needs.")
    cohort: CohortContract = Field(description="Cohort audit table contract.")
    sentences: list[StudySentence] = Field(min_length=1, description="The question tree.")
    negative_control: bool = Field(default=False,
                                   description="A planted-null study (reference non-significant).")


class Study(Frozen):
    """A whole study as loaded from its card folder (private: holds the MCQ keys)."""

    study_id: str = Field(description="Task id (card folder name).")
    title: str = Field(description="Title.")
    design: Design = Field(description="STROBE design.")
    model: Model = Field(description="Model of the primary analysis.")
    analysis: str = Field(description="Registered reference analysis name.")
    negative_control: bool = Field(description="A planted-null study.")
    protocol: Protocol = Field(description="Protocol shown to the agent.")
    sentences: list[StudySentence] = Field(description="The question tree with MCQ keys.")

    @model_validator(mode="after")
    def _ids_unique(self) -> Study:
        ids = [s.id for s in self.sentences] + self.field_ids
        ids += [s.mcq.id for s in self.sentences if s.mcq is not None]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"{self.study_id}: duplicate ids {dup}")
        ratio = {f.id for f in self.fields if f.type is FieldType.RATIO}
        for f in self.fields:
            if f.pair_of is not None and f.pair_of not in ratio:
                raise ValueError(f"{f.id}: pair_of {f.pair_of!r} is not a ratio field")
        for s in self.sentences:
            if s.key is not None and s.key.basis not in ratio:
                raise ValueError(f"{s.id}: key basis {s.key.basis!r} is not a ratio field")
        return self

    @property
    def fields(self) -> list[FieldDef]:
        """Every field in tree order."""
        return [f for s in self.sentences for f in s.fields]

    @property
    def field_ids(self) -> list[str]:
        """Every field id in tree order."""
        return [f.id for f in self.fields]

    def public(self) -> PublicStudy:
        """What the agent may know before any answer (answers and keys stripped)."""
        return PublicStudy(study_id=self.study_id, title=self.title, design=self.design,
                           protocol=self.protocol, sentences=[s.public() for s in self.sentences])


class PublicStudy(Frozen):
    """A study's public view: protocol, data dictionary, cohort contract, tree without answers.

    Gating is enforced by ``submit_answers`` (which reveals a gated sentence's fields only after
    its MCQ is answered right); this object is the full public definition it reads.
    """

    study_id: str = Field(description="Task id.")
    title: str = Field(description="Title.")
    design: Design = Field(description="STROBE design.")
    protocol: Protocol = Field(description="Protocol shown to the agent.")
    sentences: list[Sentence] = Field(description="Question tree (no answers).")

    def visible_before_answers(self) -> list[Sentence]:
        """Sentences visible once the cohort file exists: baseline fields and every MCQ stem
        (gated sentences without their fields)."""
        out: list[Sentence] = []
        for s in self.sentences:
            out.append(s if s.mcq is None else s.model_copy(update={"fields": []}))
        return out


class FieldAnswer(Frozen):
    """The reference value of one field."""

    id: str = Field(description="Field id.")
    type: FieldType = Field(description="Field type.")
    value: float = Field(description="Value as published (ratios/CI 2 dp, p 3 dp or the floor).")
    printed: str = Field(description="As a publication prints it (``<0.001`` for tiny p).")
    exact: float = Field(description="Unrounded value from the reference analysis.")


class StudyAnswers(Frozen):
    """Private reference answers of one study."""

    study_id: str = Field(description="Task id.")
    mcq: dict[str, str] = Field(description="MCQ id → right option letter.")
    fields: dict[str, FieldAnswer] = Field(description="Field id → reference value.")
    cohort_size: int = Field(description="Rows of the reference cohort.")


class TrapOutcome(Frozen):
    """Construct-time trap panel result for one (study, trap analysis)."""

    study_id: str = Field(description="Task id.")
    trap: str = Field(description="Trap analysis name (the protocol violation).")
    flipped: list[str] = Field(description="Scored fields whose RA/SM differs from the gold.")
    values: dict[str, float] = Field(description="Field values the trap analysis produced.")


class VariantOutcome(Frozen):
    """Construct-time variant panel result for one (study, valid alternative analysis)."""

    study_id: str = Field(description="Task id.")
    variant: str = Field(description="Variant analysis name (another valid adjustment set).")
    flipped: list[str] = Field(description="Scored fields whose RA/SM differs from the gold "
                                           "(should be empty).")
    values: dict[str, float] = Field(description="Field values the variant produced.")


class RejectedSeed(Frozen):
    """A generator seed the build tried and left: some trap flipped no scored field on its EHR
    (spec §9.3: re-seed, bounded, and record it)."""

    seed: int = Field(description="The rejected generator seed.")
    problems: list[str] = Field(description="``<study>: trap <name> flips nothing`` per trap.")


def side(lower: float, upper: float) -> int:
    """+1: CI above 1; -1: below 1; 0: includes 1 (a bound equal to 1 includes it)."""
    if lower > 1.0:
        return 1
    if upper < 1.0:
        return -1
    return 0


def publish_value(ftype: FieldType, exact: float) -> tuple[float, str]:
    """Round a value as a publication prints it: (value, printed).

    Ratios, CIs and AUCs 2 dp; p-values 3 dp, or ``<0.001`` (value 0.001) below the floor;
    counts as integers; proportions (percent) and other numbers 1 dp.
    """
    if ftype is FieldType.P_VALUE:
        if exact < P_FLOOR:
            return P_FLOOR, f"<{P_FLOOR:g}"
        return round(exact, 3), f"{exact:.3f}"
    if ftype is FieldType.COUNT:
        return float(round(exact)), str(round(exact))
    if ftype in (FieldType.RATIO, FieldType.CONFIDENCE_INTERVAL, FieldType.AUC):
        return round(exact, 2), f"{exact:.2f}"
    return round(exact, 1), f"{exact:.1f}"
