"""Construct steps of the RWE track: generate + load the EHR, reference answers, trap panel,
publish the study pool (``../shared/specs/rwe.md`` §9.3).

Reference answers are the reference analysis's values rounded as a publication prints them
(:func:`tasks_lib.rwe.types.publish_value`); each MCQ's right option follows from the printed CI
of its basis ratio field. The trap panel re-runs the study with each protocol violation and
requires at least one scored field (a ratio's CI side, a p-value's significance) to differ from
the gold; otherwise the build fails naming the study.
"""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
from typing import NamedTuple

from evaluators.core import InputDataError
from tasks_lib.pool_format import PoolFiles, content_hash, jsonl_bytes
from tasks_lib.pool_publish import write_version
from tasks_lib.rwe import ehr, load
from tasks_lib.rwe.analyses import ANALYSES
from tasks_lib.rwe.analysis_base import AnalysisResult, StudyDB
from tasks_lib.rwe.pool_files import POOL_FILES, RWEPoolManifest, cohort_key
from tasks_lib.rwe.types import (
    EHRSource,
    FieldAnswer,
    FieldType,
    RejectedSeed,
    SchemaNames,
    Study,
    StudyAnswers,
    TrapOutcome,
    VariantOutcome,
    publish_value,
    side,
)

ALPHA = 0.05


class TrapPanelError(InputDataError):
    """A study's trap analysis flips no scored field: the study does not discriminate."""


class GoldError(InputDataError):
    """A reference analysis did not produce every field of its study's question tree."""


class LoadedEHR(NamedTuple):
    """A generated and loaded EHR."""

    content_hash: str
    table_hashes: dict[str, str]
    rows: dict[str, int]
    generate_s: float
    load_s: float
    database: str = ""
    """The EHR's own database on the study server (``rwe_<content_hash[:16]>``)."""
    reused: bool = False
    """True: the database already held this EHR (nothing was loaded)."""


def generate_and_load(seed: int, n_patients: int, server_url: str,
                      schemas: SchemaNames = SchemaNames()) -> LoadedEHR:
    """Generate the EHR for ``seed`` and make sure its own database on the server of
    ``server_url`` (an admin URL) holds it: loaded with COPY the first time, reused after."""
    t0 = time.perf_counter()
    data = ehr.generate(seed, n_patients)
    csvs = ehr.table_csvs(data)
    hashes = ehr.table_hashes(csvs)
    digest = content_hash(csvs)
    t1 = time.perf_counter()
    db = load.ensure_ehr_database(server_url, digest, csvs, schemas)
    return LoadedEHR(digest, hashes, db.rows, t1 - t0, time.perf_counter() - t1, db.name,
                     db.reused)


def _published(study: Study, values: dict[str, float]) -> dict[str, FieldAnswer]:
    missing = [f for f in study.field_ids if f not in values]
    if missing:
        raise GoldError(f"study {study.study_id}", f"analysis {study.analysis!r} did not "
                        f"produce fields {missing}")
    out = {}
    for f in study.fields:
        value, printed = publish_value(f.type, values[f.id])
        out[f.id] = FieldAnswer(id=f.id, type=f.type, value=value, printed=printed,
                                exact=values[f.id])
    return out


def reference_answers(study: Study, result: AnalysisResult) -> StudyAnswers:
    """The private answers of ``study`` from its reference analysis result."""
    fields = _published(study, result.values)
    mcq = {}
    for s in study.sentences:
        if s.mcq is None or s.key is None:
            continue
        lo, hi = fields[f"{s.key.basis}_lo"].value, fields[f"{s.key.basis}_hi"].value
        mcq[s.mcq.id] = {1: s.key.higher, -1: s.key.lower, 0: s.key.null}[side(lo, hi)]
    return StudyAnswers(study_id=study.study_id, mcq=mcq, fields=fields,
                        cohort_size=len(result.cohort))


def scored_outcomes(study: Study, values: dict[str, float]) -> dict[str, int | bool]:
    """Per scored field: the CI side of each ratio, the significance of each p-value (as
    published)."""
    fields = _published(study, values)
    out: dict[str, int | bool] = {}
    for f in study.fields:
        if f.type is FieldType.RATIO:
            out[f.id] = side(fields[f"{f.id}_lo"].value, fields[f"{f.id}_hi"].value)
        elif f.type is FieldType.P_VALUE:
            out[f.id] = fields[f.id].value < ALPHA
    return out


def trap_panel(study: Study, gold: AnalysisResult, db: StudyDB,
               strict: bool = True) -> list[TrapOutcome]:
    """Run every trap of ``study``; if one flips nothing, raise :class:`TrapPanelError`
    (``strict``) or record it with no flipped field (the construct flow judges the panel of
    every study at once and may re-seed)."""
    want = scored_outcomes(study, gold.values)
    outcomes = []
    for name, fn in ANALYSES.get(study.analysis).traps.items():
        values = fn(db).values
        got = scored_outcomes(study, values)
        flipped = [k for k in want if got[k] != want[k]]
        outcomes.append(TrapOutcome(study_id=study.study_id, trap=name, flipped=flipped,
                                    values={k: float(v) for k, v in values.items()}))
        if strict and not flipped:
            raise TrapPanelError(f"study {study.study_id}", f"trap {name!r} flips no scored "
                                 f"field (gold {want}); the study does not discriminate")
    return outcomes


def variant_panel(study: Study, gold: AnalysisResult, db: StudyDB) -> list[VariantOutcome]:
    """Run every variant (valid alternative analysis) of ``study``; record the scored fields
    where it disagrees with the gold (reported by the audit as a warning)."""
    want = scored_outcomes(study, gold.values)
    out = []
    for name, fn in ANALYSES.get(study.analysis).variants.items():
        values = fn(db).values
        got = scored_outcomes(study, values)
        out.append(VariantOutcome(study_id=study.study_id, variant=name,
                                  flipped=[k for k in want if got[k] != want[k]],
                                  values={k: float(v) for k, v in values.items()}))
    return out


class StudyBuild(NamedTuple):
    """Everything construct produced for one study."""

    study: Study
    answers: StudyAnswers
    cohort_csv: bytes
    traps: list[TrapOutcome]
    variants: list[VariantOutcome]


def build_study(study: Study, db: StudyDB, strict: bool = True) -> StudyBuild:
    """Reference analysis → answers → trap panel (``strict``: see :func:`trap_panel`) →
    variant panel for one study."""
    gold = ANALYSES.get(study.analysis).reference(db)
    answers = reference_answers(study, gold)
    traps = trap_panel(study, gold, db, strict)
    buf = io.StringIO()
    gold.cohort.to_csv(buf, index=False, lineterminator="\n")
    return StudyBuild(study, answers, buf.getvalue().encode(), traps,
                      variant_panel(study, gold, db))


def pool_files(ehr_hash: str, builds: list[StudyBuild]) -> PoolFiles:
    """The files of an RWE study pool: public studies, private answers and cohorts (hashed, with
    the EHR hash as the named entry ``ehr``: the same studies on another EHR are another pool);
    the trap and variant panels (``audit/``, not hashed)."""
    return PoolFiles(
        content={POOL_FILES["studies"]: jsonl_bytes(b.study.public() for b in builds),
                 POOL_FILES["answers"]: jsonl_bytes(b.answers for b in builds),
                 **{cohort_key(b.study.study_id): b.cohort_csv for b in builds}},
        provenance={POOL_FILES["traps"]: jsonl_bytes(t for b in builds for t in b.traps),
                    POOL_FILES["variants"]: jsonl_bytes(v for b in builds for v in b.variants)},
        identity={"ehr": ehr_hash.encode()})


def write_pool(pool_id: str, out: str | None, seed: int, n_patients: int, loaded: LoadedEHR,
               schemas: SchemaNames, builds: list[StudyBuild],
               rejected: list[RejectedSeed] | None = None,
               source: EHRSource = EHRSource.GENERATED) -> tuple[str, RWEPoolManifest]:
    """Write public studies, private answers and cohorts, the panels and the manifest as the
    version of this content (:func:`tasks_lib.pool_publish.write_version`: ``out`` or
    ``pools/<pool_id>/vN``; ``seed`` is the EHR's, after the ``rejected`` ones; ``source``:
    where the database came from); returns its root URL and manifest."""
    studies = [b.study.study_id for b in builds]

    def manifest(version: int, digest: str) -> RWEPoolManifest:
        return RWEPoolManifest(
            pool_id=pool_id, version=version, content_hash=digest, created_at=datetime.now(UTC),
            cards=studies, source=source, ehr_hash=loaded.content_hash,
            table_hashes=loaded.table_hashes, seed=seed,
            requested_seed=rejected[0].seed if rejected else None,
            rejected_seeds=rejected or [], n_patients=n_patients, database=loaded.database,
            schemas=schemas,
            studies=studies, files=POOL_FILES)

    return write_version(pool_id, pool_files(loaded.content_hash, builds), manifest, out)
