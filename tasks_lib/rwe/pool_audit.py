"""Exploit audit of an RWE study pool (the construct gate records it like the other tracks'
audits: :func:`tasks_lib.audit.require_clean` writes ``audit.json``).

Checks: ``answer_key`` (the public view carries no answer, key or value, under any name or
encoding: :mod:`tasks_lib.audits.encoded`), ``database_leak``
(the agent-readable schemas of the study database hold only the documented tables and columns,
without comments, so no gold answer or planted parameter can hide there; spec §11.15),
``trap_panel`` (every study has traps and each flipped a scored field) and ``null_agents``
(constant-letter agents that answer every field with a null effect stay below the SR floor).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg2

from evaluators.core import Track
from tasks_lib.audits.answer_key import encoded_hits
from tasks_lib.audits.pool import file_digests, pool_files
from tasks_lib.audits.report import AuditReport, Finding, Severity
from tasks_lib.rwe import schema
from tasks_lib.rwe.load import dsn
from tasks_lib.rwe.types import (
    POOL_FILES,
    FieldType,
    RWEPoolManifest,
    SchemaNames,
    StudyAnswers,
    TrapOutcome,
    VariantOutcome,
    load_study_pool,
    side,
)
from tasks_lib.storage import Storage

LEAK_KEYS = ("\"key\"", "\"basis\"", "\"answer\"", "\"printed\"", "\"exact\"", "\"value\"")
NULL_SR_FLOOR = 0.25
"""Largest SR a constant-letter, null-effect agent may reach on the pool."""


def _answer_key(root: Storage, answers: list[StudyAnswers]) -> Finding:
    text = root.read_text(POOL_FILES["studies"])
    hits = [f"public/studies.jsonl contains {k}" for k in LEAK_KEYS if k in text]
    private = {file_digests(root, k)["sha256"]: k for k in pool_files(root, "private")}
    hits += [f"{k}: byte-identical to the reference {private[d]} (rule: no private file in the "
             "public view)" for k in pool_files(root, "public")
             if (d := file_digests(root, k)["sha256"]) in private]
    values = [(f.exact, f"{POOL_FILES['answers']} {a.study_id}.{f.id}")
              for a in answers for f in a.fields.values()]
    hits += encoded_hits(root, set(), values)
    return Finding(check="answer_key", passed=not hits, severity=Severity.ERROR,
                   rule="public/studies.jsonl carries no answer, MCQ key or value; no public "
                        "file (any name, any encoding) holds a private file, an answer row or "
                        "an unrounded answer value; no symlink or special file in public/",
                   evidence=hits[:200])


def _database_leak(url: str, schemas: SchemaNames) -> Finding:
    names = {"mimiciv_hosp": schemas.hosp, "mimiciv_icu": schemas.icu,
             "mimiciv_derived": schemas.derived}
    want = {(names[t.split(".")[0]], t.split(".")[1], c) for t in schema.TABLES
            for c in schema.columns(t)}
    with psycopg2.connect(**dsn(url)) as conn, conn.cursor() as cur:
        cur.execute("SELECT table_schema, table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = ANY(%s)", (list(names.values()),))
        got = {tuple(r) for r in cur.fetchall()}
        cur.execute("SELECT count(*) FROM pg_description d JOIN pg_class c ON c.oid = d.objoid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ANY(%s)",
                    (list(names.values()),))
        comments = int(cur.fetchone()[0])
    conn.close()
    extra = sorted(".".join(r) for r in got - want)
    evidence = [f"unexpected column {e}" for e in extra[:20]]
    evidence += [f"{comments} comments on study tables"] if comments else []
    return Finding(check="database_leak", passed=not evidence, severity=Severity.ERROR,
                   rule="the study database holds only the documented tables/columns, no "
                        "comments (gold answers and planted parameters live only in private/)",
                   evidence=evidence)


def _trap_panel(root: Storage, studies: list[str]) -> Finding:
    traps = [TrapOutcome.model_validate(r) for r in root.read_jsonl(POOL_FILES["traps"])]
    evidence = [f"{s}: no trap analysis" for s in studies if not any(t.study_id == s
                                                                     for t in traps)]
    evidence += [f"{t.study_id}: trap {t.trap} flips nothing" for t in traps if not t.flipped]
    return Finding(check="trap_panel", passed=not evidence, severity=Severity.ERROR,
                   rule="every study has a trap panel and each trap flips a scored field",
                   evidence=evidence)


def _variant_panel(root: Storage) -> Finding:
    rows = ([VariantOutcome.model_validate(r) for r in root.read_jsonl(POOL_FILES["variants"])]
            if root.exists(POOL_FILES["variants"]) else [])
    evidence = [f"{v.study_id}: variant {v.variant} flips {', '.join(v.flipped)}"
                for v in rows if v.flipped]
    return Finding(check="variant_panel", passed=bool(rows) and not evidence,
                   severity=Severity.WARNING,
                   rule="other valid analyses (extra covariates) agree with the gold on every "
                        "scored field", evidence=evidence or [f"{len(rows)} variants agree"])


def null_agent_sr(answers: list[StudyAnswers], letter: str) -> float:
    """SR of an agent that picks ``letter`` for every MCQ and reports a null effect (ratio 1,
    CI including 1, p = 0.5) for every revealed field."""
    wins = 0
    for a in answers:
        if any(v != letter for v in a.mcq.values()):
            continue
        ratios = [f for f in a.fields.values() if f.type is FieldType.RATIO]
        pvals = [f for f in a.fields.values() if f.type is FieldType.P_VALUE]
        if all(side(a.fields[f"{f.id}_lo"].value, a.fields[f"{f.id}_hi"].value) == 0
               for f in ratios) and all(p.value >= 0.05 for p in pvals):
            wins += 1
    return wins / len(answers) if answers else 0.0


def _null_agents(answers: list[StudyAnswers]) -> Finding:
    letters = sorted({v for a in answers for v in a.mcq.values()} | {"A"})
    srs = {x: null_agent_sr(answers, x) for x in letters}
    bad = [f"constant {x} + null fields: SR {v:.2f}" for x, v in srs.items() if v > NULL_SR_FLOOR]
    return Finding(check="null_agents", passed=not bad, severity=Severity.ERROR,
                   rule=f"constant-letter null agents reach SR <= {NULL_SR_FLOOR}",
                   evidence=bad or [json.dumps(srs)])


def audit_rwe_pool(pool_url: str, database_url: str) -> AuditReport:
    """Run every RWE check on the pool at ``pool_url`` and its study database."""
    root = Storage(pool_url)
    pool = load_study_pool(root)
    m: RWEPoolManifest = pool.manifest
    findings = [_answer_key(root, list(pool.answers.values())),
                _database_leak(database_url, m.schemas), _trap_panel(root, m.studies),
                _variant_panel(root), _null_agents(list(pool.answers.values()))]
    return AuditReport(pool_url=root.root_url, pool_id=m.pool_id, version=m.version,
                       pool_hash=m.content_hash, track=Track.RWE, created_at=datetime.now(UTC),
                       findings=findings)
