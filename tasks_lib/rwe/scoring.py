"""Score one RWE run from its stored submission (``answers.json`` + ``cohort.csv``), the run
record and the pool: the metrics of :mod:`evaluators.graders.rwe` and the cohort screening.

The metrics need only the stored files and the pool's private answers. The id rules of the
screening need the identifiers of the study database: they are read once per pool version from
the database and kept under ``<storage>/rwe/index/<content_hash>.json`` (later scorings need no
database).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evaluators.graders.rwe import score_study
from tasks_lib.domain import RunStatus, Track
from tasks_lib.errors import InputDataError
from tasks_lib.records import CaseScore, RunRecord, ScoreCard
from tasks_lib.rwe.cohort_judge import CohortJudge, judge_cohort
from tasks_lib.rwe.pool_files import load_reference_cohort
from tasks_lib.rwe.pools import LoadedStudy, load_study
from tasks_lib.rwe.screening import HARD_RULES, IdIndex, Screening, rule_screen
from tasks_lib.rwe.session import COHORT_FILE, read_record
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

PRIMARY = "rwe_sr"


def id_index(loaded: LoadedStudy) -> IdIndex:
    """Identifiers of the pool's database (cached in storage by the pool's content hash)."""
    cache = Storage.from_settings().child("rwe").child("index")
    key = f"{loaded.manifest.content_hash}.json"
    if cache.exists(key):
        data = cache.read_json(key)
    else:
        data = _read_ids(loaded)
        cache.write_text(key, json.dumps(data))
    return IdIndex(subjects=set(data["subjects"]),
                   admissions={(a, b) for a, b in data["admissions"]},
                   stays={(a, b, c) for a, b, c in data["stays"]})


def _read_ids(loaded: LoadedStudy) -> dict[str, list[object]]:
    from tasks_lib.rwe.cluster import connect, study_server

    server = study_server().model_copy(update={"database": loaded.manifest.database})
    s = loaded.manifest.schemas
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT subject_id FROM {s.hosp}.patients")
            subjects = [r[0] for r in cur.fetchall()]
            cur.execute(f"SELECT subject_id, hadm_id FROM {s.hosp}.admissions")
            admissions = [list(r) for r in cur.fetchall()]
            cur.execute(f"SELECT subject_id, hadm_id, stay_id FROM {s.icu}.icustays")
            stays = [list(r) for r in cur.fetchall()]
    finally:
        conn.close()
    return {"subjects": subjects, "admissions": admissions, "stays": stays}


def screen(run: RunRecord, loaded: LoadedStudy, submission: Path) -> Screening:
    """Rules, then the cohort judge on a sample seeded by the run id."""
    contract = loaded.study.protocol.cohort
    reference = load_reference_cohort(Storage(loaded.pool_url), loaded.study.study_id)
    frame, result = rule_screen(submission / COHORT_FILE, contract, id_index(loaded), reference)
    if frame is None:
        return result
    seed = int(hashlib.sha256(run.run_id.encode()).hexdigest()[:8], 16)
    judge = CohortJudge(run.judge_model or get_settings().judge_model)
    return judge_cohort(result, frame, loaded.study.protocol, judge, seed)


def _screen_metrics(s: Screening) -> dict[str, float]:
    out = {"cohort_valid": float(s.valid), "cohort_qualified": float(s.qualified),
           "cohort_rows": float(s.n_rows)}
    for name in ("precision", "recall", "jaccard", "exclusion_rate"):
        value = getattr(s, name)
        if value is not None:
            out[f"cohort_{name}"] = value
    return out


def score_rwe_run(run: RunRecord, submission: Path, version: str) -> ScoreCard:
    """The score card of one RWE run (see the module doc)."""
    loaded = load_study(run.task_id, run.pool_url)
    if loaded.manifest.content_hash != run.pool_hash:
        raise InputDataError(run.pool_url, f"the pool changed since run {run.run_id}")
    record = read_record(submission)
    result = score_study(loaded.tree, record.answers)
    screening = screen(run, loaded, submission)
    metrics = {k: v for k, v in {"rwe_acc": result.acc, "rwe_rar": result.rar,
                                 "rwe_smr": result.smr}.items() if v is not None}
    metrics |= {"rwe_sr": result.sr, "rwe_cr": result.cr,
                "rwe_steps": float(record.steps or run.turns or 0),
                "rwe_sr_screened": result.sr if screening.qualified else 0.0,
                "invalid_outputs": float(record.invalid_outputs),
                "n_fields": float(result.n_fields)} | _screen_metrics(screening)
    notes = screening.reasons()
    if result.hidden:
        notes.append(f"hidden by a wrong or unanswered gate (scored 0): {', '.join(result.hidden)}")
    invalid = None if screening.valid else "invalid cohort: " + "; ".join(
        f"{f.rule} ({f.count} row(s))" for f in screening.findings if f.rule in HARD_RULES)
    if run.status is RunStatus.INVALID:
        invalid = "isolation: " + ("; ".join(run.violations) or f"run ended {run.end}")
        metrics |= {"rwe_sr": 0.0, "rwe_sr_screened": 0.0}
        notes.append("invalid run: SR is 0 whatever was answered")
    errors = {"cohort_judge": f"{screening.judge_errors} case(s) failed"} \
        if screening.judge_errors else {}
    return ScoreCard(
        task_id=run.task_id, track=Track.RWE, evaluator_version=version,
        pool_hash=run.pool_hash, run_id=run.run_id, agent_id=run.agent.agent_id,
        primary_metric=PRIMARY, task_score=metrics[PRIMARY], metrics=metrics,
        coverage=len(record.answers) / max(len(loaded.tree.questions), 1),
        per_case=[CaseScore(case_id=q, valid=q not in result.hidden, values={"aligned": v},
                            reason="hidden" if q in result.hidden else "")
                  for q, v in result.per_question.items()],
        notes=notes, invalid_reason=invalid, judge_errors=errors)
