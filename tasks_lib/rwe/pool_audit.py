"""What the RWE kit gives the one exploit audit (:func:`tasks_lib.audit.audit_pool`, docs/audit.md).

* Baselines (:func:`rwe_baselines`): one folder per null agent holding one ``<study_id>/``
  submission (``answers.json`` session record, ``cohort.csv``) per study of the pool — the
  pool's tasks (:meth:`~tasks_lib.tracks.rwe.RweKit.pool_task_ids`) — which the audit scores
  study by study with the kit's study scorer into one card whose task score is the pool's mean
  SR (:func:`tasks_lib.audits.scoring.score_folder`). Null agents: no submission, an
  empty session, and one constant option letter on every gate with null-effect fields (ratio and
  CI bounds 1.0, p = 0.5); their floors are the ``rwe`` table of ``datasets/audit/floors.yaml``
  (a constant letter: mean SR ≤ 0.25). ``perfect`` is the reference answers and cohorts.
* Answer-key data (:func:`rwe_answer_key_data`): the study ids, every unrounded answer value (the
  content search looks for them in ``public/``), and the kit's own leak evidence: an answer, MCQ
  key or value key in ``public/studies.jsonl``, and the study database — which must hold the
  manifest's EHR (:func:`~tasks_lib.rwe.cluster.check_study_database`) — exposing more than the
  documented tables and columns to the run role (extra columns, comments, any other table the
  ``rwe_reader`` role may read; spec §11.15).

The trap and variant panels are construction validity, checked before the pool is written
(:func:`tasks_lib.rwe.construct_steps.validate`).
"""

from __future__ import annotations

import hashlib
import io
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg2.extensions

from evaluators.graders.rwe_answers import Kind, QuestionTree, RawAnswer
from tasks_lib.audits.baselines import Baseline, floored, no_submission, perfect, written
from tasks_lib.audits.kit_data import AnswerKeyData
from tasks_lib.rwe import mimic_ddl, schema
from tasks_lib.rwe.baselines import BaselineKind, baseline_answers
from tasks_lib.rwe.cluster import Server, check_study_database, connect, study_server
from tasks_lib.rwe.pool_files import (
    POOL_FILES,
    LoadedStudyPool,
    RWEPoolManifest,
    cohort_key,
    load_study_pool,
)
from tasks_lib.rwe.questions import question_tree
from tasks_lib.rwe.roles import READER
from tasks_lib.rwe.session import ANSWERS_FILE, COHORT_FILE, SessionRecord
from tasks_lib.rwe.types import EHRSource, SchemaNames
from tasks_lib.storage import Storage

if TYPE_CHECKING:
    from tasks_lib.llm import CompletionFn

LEAK_KEYS = ("\"key\"", "\"basis\"", "\"answer\"", "\"printed\"", "\"exact\"", "\"value\"")
"""JSON keys of the private answers that must never appear in ``public/studies.jsonl``."""
def _write_study(folder: Path, study_id: str, answers: dict[str, RawAnswer],
                 cohort: bytes | None) -> None:
    """A study's submission as a session leaves it: the record and, if any, the cohort."""
    folder.mkdir(parents=True, exist_ok=True)
    if cohort is not None:
        (folder / COHORT_FILE).write_bytes(cohort)
    record = SessionRecord(study_id=study_id, answers=answers, order=list(answers),
                           submit_calls=1 if answers else 0,
                           cohort_sha256=hashlib.sha256(cohort).hexdigest() if cohort else None)
    (folder / ANSWERS_FILE).write_text(record.model_dump_json(indent=1), encoding="utf-8")


def _constant_letter(letter: str, tree: QuestionTree) -> dict[str, RawAnswer]:
    """The constant baseline's answers with ``letter`` on every gate."""
    kinds = {q.question_id: q.kind for q in tree.questions}
    return {q: letter if kinds[q] is Kind.MCQ else a
            for q, a in baseline_answers(BaselineKind.CONSTANT, tree).items()}


def _write_pool(pool: LoadedStudyPool, root: Storage, kind: str, folder: Path) -> None:
    """Baseline ``kind`` (``empty``, ``perfect`` or ``constant-X``) in ``folder``: one study
    folder per study of the pool (each the submission of a run on that study)."""
    for study in pool.studies:
        tree = question_tree(study, pool.answers[study.study_id])
        cohort = root.read_bytes(cohort_key(study.study_id)) if kind == "perfect" else None
        answers = (_constant_letter(kind.removeprefix("constant-"), tree)
                   if kind.startswith("constant-") else baseline_answers(kind, tree))
        _write_study(folder / study.study_id, study.study_id, answers, cohort)


def _letters(pool: LoadedStudyPool) -> list[str]:
    """Every option letter of the pool's gates (public)."""
    return sorted({o for study in pool.studies
                   for q in question_tree(study, pool.answers[study.study_id]).questions
                   if q.kind is Kind.MCQ for o in q.options})


def rwe_baselines(pool_url: str, out: Path) -> list[Baseline]:
    """No submission, an empty session, one constant letter per option letter, and the
    references, each as one folder per study (see the module doc); the pool's study
    database is checked to hold its EHR first (the scorer reads its identifiers)."""
    root = Storage(pool_url)
    pool = load_study_pool(root)
    checked_server(pool.manifest)
    write = partial(_write_pool, pool, root)
    found = [no_submission("rwe", out),
             floored("rwe", "empty", "empty baseline", written(out, "empty",
                                                                partial(write, "empty")))]
    for letter in _letters(pool):
        name = f"constant-{letter}"
        found.append(floored("rwe", "constant", f"constant '{letter}' + null effects",
                             written(out, name, partial(write, name))))
    return [*found, perfect(written(out, "perfect", partial(write, "perfect")))]


def checked_server(manifest: RWEPoolManifest) -> Server:
    """The study server, on the pool's database, checked to hold the manifest's EHR.

    Raises:
        InputDataError: the database is missing, lacks a schema or holds another EHR.
    """
    server = study_server().model_copy(update={"database": manifest.database})
    check_study_database(server, list(manifest.schemas.model_dump().values()),
                         manifest.ehr_hash)
    return server


def documented(schemas: SchemaNames, source: EHRSource = EHRSource.GENERATED
               ) -> set[tuple[str, str, str]]:
    """(schema, table, column) the run role may see: the study database's tables; on a
    mimic-code database (``--from-db``) also every create.sql column and mimic-code's concept
    columns (medflows wrote nothing there; its other concept tables are not checked)."""
    names = {"mimiciv_hosp": schemas.hosp, "mimiciv_icu": schemas.icu,
             "mimiciv_derived": schemas.derived}
    tables: dict[str, list[str]] = {t: schema.columns(t) for t in schema.TABLES}
    if source is EHRSource.DATABASE:
        tables |= {t: [c for c, _ in cols] for t, cols in mimic_ddl.official_tables().items()}
        tables |= mimic_ddl.concept_columns()
    return {(names[t.split(".")[0]], t.split(".")[1], c) for t, cols in tables.items()
            for c in cols}


def database_leak(server: Server, schemas: SchemaNames,
                  source: EHRSource = EHRSource.GENERATED) -> list[str]:
    """Evidence that the study database shows the run role more than the documented tables
    and columns (:func:`documented`): an unexpected column or a comment in a study schema, or
    any other table the ``rwe_reader`` role may read (gold answers and planted parameters live
    only in private/)."""
    want = documented(schemas, source)
    study = [schemas.hosp, schemas.icu, schemas.derived]
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_schema, table_name, column_name FROM "
                        "information_schema.columns WHERE table_schema = ANY(%s)", (study,))
            got = {tuple(r) for r in cur.fetchall()}
            if source is EHRSource.DATABASE:  # the user's other mimic-code concepts
                known = {(s, t) for s, t, _ in want}
                got = {g for g in got if g[0] != schemas.derived or (g[0], g[1]) in known}
            cur.execute("SELECT count(*) FROM pg_description d JOIN pg_class c ON c.oid = "
                        "d.objoid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
                        "n.nspname = ANY(%s)", (study,))
            comments = int(cur.fetchone()[0])
            readable = _reader_tables(cur, study)
    finally:
        conn.close()
    where = f"study database {server.database}"
    rule = ("(rule: the run role reads only the documented study tables and columns, without "
            "comments)")
    evidence = [f"{where}: unexpected column {'.'.join(e)} {rule}" for e in sorted(got - want)]
    evidence += [f"{where}: {comments} comments on study tables {rule}"] if comments else []
    return evidence + [f"{where}: the run role can read {t} {rule}" for t in readable]


def _reader_tables(cur: psycopg2.extensions.cursor, study: list[str]) -> list[str]:
    """Tables outside the study schemas that the reader role (every run role's group) may
    SELECT (none when the role does not exist yet: no run has been given the database)."""
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,))
    if cur.fetchone() is None:
        return []
    cur.execute(
        "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND n.nspname <> ALL(%s) "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND "
        "has_schema_privilege(%s, n.oid, 'USAGE') AND has_table_privilege(%s, c.oid, 'SELECT') "
        "ORDER BY 1", (study, READER, READER))
    return [str(r[0]) for r in cur.fetchall()]


def rwe_answer_key_data(pool_url: str) -> AnswerKeyData:
    """The study ids, every unrounded answer value, and the kit's own leak evidence (answer
    keys in the public studies, the study database's exposure: :func:`database_leak`)."""
    root = Storage(pool_url)
    pool = load_study_pool(root)
    text = root.read_text(POOL_FILES["studies"])
    leaks = [f"{POOL_FILES['studies']} contains {k} (rule: the public studies carry no answer, "
             "MCQ key or value)" for k in LEAK_KEYS if k in text]
    leaks += database_leak(checked_server(pool.manifest), pool.manifest.schemas,
                           pool.manifest.source)
    numbers = [(f.exact, f"{POOL_FILES['answers']} {a.study_id}.{f.id}")
               for a in pool.answers.values() for f in a.fields.values()]
    return AnswerKeyData(case_ids=frozenset(pool.manifest.studies), numbers=numbers, leaks=leaks)


INJECTED_FIELD = "note"
"""The free-text column of the judged case that carries the probe's answer (a cohort table may
hold any column an analyst adds; the judge prompt says text in a case is data)."""


def rwe_judge_answers(pool_url: str, answers: list[str], model: str,
                      completion: CompletionFn | None = None) -> list[float | None] | None:
    """The cohort judge on one ineligible case of the pool, once per answer placed in the case's
    :data:`INJECTED_FIELD`: 1 when the judge keeps the case (wrongly), 0 when it excludes it,
    None when it failed. The case is the first study's first reference row with its first ruled
    attribute moved just outside its rule (:func:`tasks_lib.rwe.cohort_judge.perturb`); None
    when no study has a ruled attribute and a reference row."""
    import pandas as pd

    from tasks_lib.rwe.cohort_judge import CohortJudge, case_of, perturb

    root = Storage(pool_url)
    pool = load_study_pool(root)
    for study in pool.studies:
        protocol = study.protocol
        ruled = [a for a in protocol.cohort.attributes
                 if a.min is not None or a.max is not None or a.equals is not None]
        key = cohort_key(study.study_id)
        if not ruled or not root.exists(key):
            continue
        frame = pd.read_csv(io.BytesIO(root.read_bytes(key)), nrows=1)
        if frame.empty:
            continue
        case = perturb(case_of(frame.iloc[0]), ruled[0])
        judge = CohortJudge(model, completion)
        verdicts = [judge.judge(protocol, {**case, INJECTED_FIELD: a}) for a in answers]
        return [None if v.exclude is None else float(not v.exclude) for v in verdicts]
    return None
