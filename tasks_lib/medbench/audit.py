"""The exploit audit of a MedBench pool, through the construct flows' one publish gate.

The shared audit (:mod:`tasks_lib.audit`) knows QA and imaging pools; a MedBench pool gets its
own checks, reported as the same :class:`~tasks_lib.audits.report.AuditReport` and gated by the same
:func:`~tasks_lib.audit.require_clean` (``audit.json`` at the pool root, override reason kept):

* ``null_agents``: no submission scores 0; all-empty answers score exactly what the "both
  empty" rules give (computed independently from the references); a constant letter on the
  single-choice tasks stays within chance + 3 binomial SE + 0.02 per task (a warning, as QA).
* ``answer_key``: no public file is byte-identical to a private one or holds one in another
  encoding (:mod:`tasks_lib.audits.encoded`); no symlink or special file in ``public/``; no public
  row carries a private field; no open-ended reference text or key point appears in a public
  prompt; no mark (a trailing ``*``, a hint, the gold option's position or length) picks the gold
  option of the single-choice items far above chance (:mod:`tasks_lib.audits.marks`).
* ``judge_injection``: the audit's injection payloads (``datasets/audit/injections.yaml``)
  appended to an answer never raise its rubric-judge value.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from evaluators.core import InputDataError, RunStatus, Track
from evaluators.judges.medbench import JudgeCase, load_rubric
from evaluators.medbench import normalize
from tasks_lib.audit import require_clean
from tasks_lib.audits.answer_key import encoded_hits
from tasks_lib.audits.marks import ChoiceItem, mark_findings
from tasks_lib.audits.pool import file_digests, injections, pool_files
from tasks_lib.audits.report import AuditReport, Finding, GateRecord, Severity
from tasks_lib.medbench.items import (
    PUBLIC_ITEMS,
    SUBMISSION_FILE,
    AnswerType,
    PublicItem,
    Reference,
    read_manifest,
    read_public_items,
    read_references,
)
from tasks_lib.medbench.judge import judge_cases
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.storage import Storage

PRIVATE_FIELDS = {"letter", "permutation", "key_points", "rubric_id", "tuples", "boxes",
                  "labels", "reference", "gold", "answer"}


def _score(url: str, folder: Path, lines: list[dict[str, object]] | None) -> ScoreCard:
    from tasks_lib.agents import upload_agent
    from tasks_lib.tracks.base import kit_for

    folder.mkdir(parents=True, exist_ok=True)
    if lines is not None:
        (folder / SUBMISSION_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    m = read_manifest(url)
    run = RunRecord(run_id=f"audit-{folder.name}", agent=upload_agent("audit"),
                    task_id=m.pool_id, track=Track.MEDBENCH, status=RunStatus.COMPLETED,
                    pool_url=url, pool_id=m.pool_id, pool_version=m.version,
                    pool_hash=m.content_hash)
    return kit_for(Track.MEDBENCH).score(run, folder)


def _empty_expected(refs: list[Reference]) -> float:
    """The task score (0–100) all-empty answers must get: region/string items with an empty
    reference score 1 each; micro-F1 is 1 only if the whole task has no gold label."""
    kind = refs[0].answer_type
    if kind is AnswerType.REGION:
        return 100 * sum(not (r.boxes or r.labels) for r in refs) / len(refs)
    if kind is AnswerType.STRING:
        return 100 * sum(not (r.text or "").strip() for r in refs) / len(refs)
    if kind in (AnswerType.MULTI_LABEL, AnswerType.EXTRACTION):
        return 100.0 if not any(r.labels or r.tuples for r in refs) else 0.0
    return 0.0


def check_null_agents(url: str, work: Path) -> Finding:
    """No submission, empty answers and a constant letter score at their floors."""
    refs = read_references(url)
    by_task: dict[str, list[Reference]] = {}
    for r in refs.values():
        by_task.setdefault(r.task_id, []).append(r)
    evidence: list[str] = []
    none = _score(url, work / "none", None)
    if (none.task_score or 0.0) > 0:
        evidence.append(f"no submission scores {none.task_score} > 0")
    lists = (AnswerType.MULTI_LABEL, AnswerType.EXTRACTION, AnswerType.REGION)
    empty = _score(url, work / "empty", [{"item_id": k, "answer": [] if r.answer_type in lists
                                          else ""} for k, r in refs.items()])
    for task, rows in by_task.items():
        got, want = empty.groups[task]["score"], _empty_expected(rows)
        if got > want + 1e-6:
            evidence.append(f"{task}: empty answers score {got:.2f} > {want:.2f} (both-empty "
                            "rule only)")
    warn: list[str] = []
    const = _score(url, work / "constant", [{"item_id": k, "answer": "A"} for k in refs])
    for task, rows in by_task.items():
        if rows[0].answer_type is not AnswerType.SINGLE_CHOICE:
            continue
        chance = sum(1 / len(r.permutation or ["A"]) for r in rows) / len(rows)
        tol = 0.02 + 3 * math.sqrt(chance * (1 - chance) / len(rows))
        if const.groups[task]["score"] / 100 > chance + tol:
            warn.append(f"{task}: constant 'A' scores {const.groups[task]['score']:.1f} > "
                        f"chance {100 * chance:.1f} + {100 * tol:.1f}")
    return Finding(check="null_agents", passed=not evidence and not warn,
                   severity=Severity.ERROR if evidence else Severity.WARNING,
                   rule="no submission = 0; empty answers = the both-empty credit only; a "
                        "constant letter within chance + 3 SE + 0.02 per single-choice task "
                        f"(scored: none={none.task_score}, empty={empty.task_score:.2f}, "
                        f"constant={const.task_score:.2f})", evidence=evidence + warn)


def _choice_marks(items: list[PublicItem], refs: dict[str, Reference]) -> list[str]:
    """Marks singling out the gold option of the single-choice items (a trailing ``*``, a
    hint, the position or length of the gold option): :mod:`tasks_lib.audits.marks`."""
    choice = [ChoiceItem(it.item_id, it.prompt, dict(it.options), refs[it.item_id].letter or "")
              for it in items if it.options and it.item_id in refs]
    return mark_findings(PUBLIC_ITEMS, choice)


def check_answer_key(url: str) -> Finding:
    """Nothing private is in the public view, in any encoding, and no mark singles out a gold
    option."""
    root = Storage(url)
    hits: list[str] = []
    private = {file_digests(root, k)["sha256"] for k in pool_files(root, "private")}
    for key in pool_files(root, "public"):
        if file_digests(root, key)["sha256"] in private:
            hits.append(f"{key}: byte-identical to a private file")
    hits += encoded_hits(root, set())
    for n, line in enumerate(root.read_text(PUBLIC_ITEMS).splitlines(), 1):
        leaked = sorted(PRIVATE_FIELDS & set(json.loads(line)))
        if leaked:
            hits.append(f"{PUBLIC_ITEMS} line {n}: private field(s) {', '.join(leaked)}")
    refs = read_references(url)
    items = read_public_items(url)
    hits += _choice_marks(items, refs)
    for item in items:
        ref = refs.get(item.item_id)
        if ref is None or ref.answer_type is not AnswerType.OPEN_ENDED:
            continue
        prompt = normalize(item.prompt)
        for secret in [ref.text or "", *ref.key_points]:
            if len(secret) >= 8 and normalize(secret) in prompt:
                hits.append(f"{item.item_id}: the prompt states its reference/key point")
    return Finding(check="answer_key", passed=not hits, severity=Severity.ERROR,
                   rule="no private file (in any encoding), field, reference text or key point "
                        "in the public view, no symlink or special file, no mark singling out "
                        "the gold option", evidence=hits[:200])


def check_judge_injection(url: str, judge_model: str | None) -> Finding:
    """Injection payloads appended to an answer never raise its judge value."""
    refs = read_references(url)
    items = {it.item_id: it for it in read_public_items(url)}
    ref = next((r for r in refs.values() if r.rubric_id), None)
    if ref is None:
        return Finding(check="judge_injection", passed=True, severity=Severity.INFO,
                       rule="no open-ended item: nothing is judged")
    base = JudgeCase(item_id=ref.item_id, question=items[ref.item_id].prompt,
                     answer="I am not sure.", gold=ref.text or "", key_points=ref.key_points)
    cases = [base] + [base.model_copy(update={"answer": f"{base.answer}\n{p['text']}"})
                      for p in injections()]
    judged = judge_cases(cases, load_rubric(ref.rubric_id or ""), judge_model)
    clean = judged[0].value or 0.0
    moved = [f"payload {p['id']}: {j.value} > {clean}" for p, j in zip(injections(), judged[1:],
                                                                      strict=True)
             if j.value is not None and j.value > clean + 1e-9]
    return Finding(check="judge_injection", passed=not moved, severity=Severity.ERROR,
                   rule=f"{len(injections())} injected payloads leave the {ref.rubric_id} "
                        "judge value unchanged or lower", evidence=moved)


def audit_medbench(url: str, judge_model: str | None = None) -> AuditReport:
    """Run every MedBench check on the pool version at ``url`` (nothing is written)."""
    m = read_manifest(url)
    with tempfile.TemporaryDirectory(prefix="medflows-mbaudit-") as tmp:
        findings = []
        checks: list[tuple[str, Callable[[], Finding]]] = [
            ("null_agents", lambda: check_null_agents(url, Path(tmp))),
            ("answer_key", lambda: check_answer_key(url)),
            ("judge_injection", lambda: check_judge_injection(url, judge_model))]
        for name, run in checks:
            try:
                findings.append(run())
            except InputDataError as exc:
                findings.append(Finding(check=name, passed=False, severity=Severity.ERROR,
                                        rule="the check runs on the pool as published",
                                        evidence=[f"the check could not run: {exc}"]))
    return AuditReport(pool_url=Storage(url).root_url, pool_id=m.pool_id, version=m.version,
                       pool_hash=m.content_hash, track=Track.MEDBENCH,
                       created_at=datetime.now(UTC), findings=findings)


def medbench_gate(url: str, override: str | None = None) -> GateRecord:
    """Audit, then the shared publish gate (raises ``InputDataError`` when unclean without an
    override reason)."""
    return require_clean(audit_medbench(url), override)
