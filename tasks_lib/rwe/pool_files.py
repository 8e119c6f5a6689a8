"""An RWE study pool's files: the manifest, the file roles and keys, and their reader.

Pool layout (``pools/<pool_id>/vN/``)::

    manifest.json                      RWEPoolManifest
    public/studies.jsonl               PublicStudy per line (protocol + tree, no answers)
    private/answers.jsonl              StudyAnswers per line
    private/cohorts/<study_id>.csv     reference cohort (subject_id, hadm_id, stay_id, attributes)
    audit/traps.jsonl                  TrapOutcome per line (the construct-time trap panel)
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import pandas as pd
from pydantic import Field, ValidationError

from evaluators.core import InputDataError
from tasks_lib.pool_format import PoolHeader, read_manifest
from tasks_lib.rwe.types import EHRSource, PublicStudy, RejectedSeed, SchemaNames, StudyAnswers
from tasks_lib.storage import Storage


class RWEPoolManifest(PoolHeader):
    """``manifest.json`` of a published RWE study pool: the shared header (``cards`` are its
    study ids; the content hash covers the EHR hash too) and the RWE body."""

    pool_kind = "an RWE pool"

    track: Literal["rwe"] = Field(default="rwe", description="Track of the pool.")
    source: EHRSource = Field(default=EHRSource.GENERATED, description="Where the study "
                              "database came from (seed and n_patients mean the generator's "
                              "only for ``generated``).")
    ehr_hash: str = Field(default="", description="sha256 of the EHR tables (canonical CSVs; "
                          "same seed and size => same hash); of a ``database`` source, of the "
                          "read tables' columns, types and row counts.")
    table_hashes: dict[str, str] = Field(description="Schema-qualified table → sha256 of its CSV.")
    seed: int = Field(description="Generator seed of the EHR (same seed and size => same EHR).")
    requested_seed: int | None = Field(default=None, description="The seed asked for, when the "
                                       "build had to re-seed (None: ``seed`` is the one asked).")
    rejected_seeds: list[RejectedSeed] = Field(default_factory=list, description="Seeds tried "
                                               "before ``seed``, in order, and why each failed.")
    n_patients: int = Field(description="Patients generated (other sources: rows of "
                            "mimiciv_hosp.patients).")
    database: str = Field(description="Database name the EHR was loaded into (no credentials).")
    schemas: SchemaNames = Field(description="Schema names in that database.")
    studies: list[str] = Field(description="Study ids in pool order.")
    files: dict[str, str] = Field(description="Role → key relative to the pool root.")


POOL_FILES = {
    "studies": "public/studies.jsonl",
    "answers": "private/answers.jsonl",
    "traps": "audit/traps.jsonl",
    "variants": "audit/variants.jsonl",
}
"""Role → key of the pool files (cohorts: ``private/cohorts/<study_id>.csv``)."""


def cohort_key(study_id: str) -> str:
    """Pool key of a study's reference cohort CSV."""
    return f"private/cohorts/{study_id}.csv"


class LoadedStudyPool(NamedTuple):
    """A published study pool read back from storage."""

    manifest: RWEPoolManifest
    studies: list[PublicStudy]
    answers: dict[str, StudyAnswers]


def _read(root: Storage, key: str) -> Any:
    try:
        return list(root.read_jsonl(key))
    except FileNotFoundError:
        raise InputDataError(root.url(key), f"not an RWE pool: {key} not found") from None
    except ValueError as exc:
        raise InputDataError(root.url(key), f"invalid JSON: {exc}") from None


def load_study_pool(root: Storage, private: bool = True) -> LoadedStudyPool:
    """Read manifest, public studies and (``private``) reference answers of the pool at ``root``.

    Raises:
        InputDataError: a file is missing or does not match its schema.
    """
    manifest = read_manifest(root.root_url, RWEPoolManifest)
    try:
        studies = [PublicStudy.model_validate(r) for r in _read(root, POOL_FILES["studies"])]
        answers = ({r["study_id"]: StudyAnswers.model_validate(r)
                    for r in _read(root, POOL_FILES["answers"])} if private else {})
    except ValidationError as exc:
        raise InputDataError(root.url(""), f"invalid RWE pool: {exc.errors()[0]['msg']}") from None
    return LoadedStudyPool(manifest, studies, answers)


def load_reference_cohort(root: Storage, study_id: str) -> pd.DataFrame:
    """The reference cohort of ``study_id`` in the pool at ``root`` (private)."""
    with root.open(cohort_key(study_id), "rb") as fh:
        return pd.read_csv(fh)
