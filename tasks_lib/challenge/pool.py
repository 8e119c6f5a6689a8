"""Challenge pools: a challenge card's synthetic case as a versioned pool
(``pools/<challenge>/vN/{public,private,manifest.json,audit.json}``), like every other track.

``public/`` (the agent's view)::

    brief.md                    the task, the layouts, the local metric, "illustrative" note
    images/<case>.{png,nii.gz}  the test inputs (seed ``seed``)
    sample_submission/          a valid, imperfect submission of the test cases
    validation/images/          the validation inputs (seed ``seed + 1``)
    validation/sample_submission/
    validation/reference/       the validation answers (public by design)
    local_metric.py             grades a folder on the validation split
    local_metric/               its card JSON and the grading code (:mod:`.local_metric`)

``private/`` holds ``test_labels.csv`` and the label files it names (the test answers). The
manifest is the imaging :class:`~tasks_lib.imaging.types.PoolManifest` (one case per test id),
so the harness's pool checks read it unchanged. Synthetic data: every placement is illustrative.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from tasks_lib.audits.answer_key import check_answer_key
from tasks_lib.audits.pool import PoolInfo, pool_info
from tasks_lib.audits.report import AuditReport, Finding, Severity
from tasks_lib.challenge import local_metric
from tasks_lib.challenge.card import layout, load_challenge
from tasks_lib.challenge.synthetic import SyntheticCase, write_synthetic_case
from tasks_lib.imaging.pool import (
    MANIFEST,
    card_digest,
    content_hash,
    version_for,
    versioned_url,
)
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, PoolManifest, Visibility
from tasks_lib.records import ScoreCard
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec

ILLUSTRATIVE = ("illustrative: synthetic data (a seeded case of shapes, not the challenge's "
                "images), so the leaderboard placement is not comparable with the human entries")
"""The note every challenge cell's score card and report carry."""


def _files(folder: Path, prefix: str, visibility: Visibility) -> list[Artifact]:
    return [Artifact(key=f"{prefix}{p.relative_to(folder).as_posix()}", visibility=visibility,
                     data=p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()]


def brief(card: TaskSpec, test: SyntheticCase, validation: SyntheticCase) -> str:
    """The public brief: the task, the layout, where things are and how to self-check."""
    sub = layout(card)
    cols = ", ".join([sub.id_column, *sub.value_columns, *([sub.file_column]
                                                            if sub.file_column else [])])
    return (
        f"# {card.title} (synthetic case)\n\n{card.description.strip()}\n\n"
        f"**Illustrative:** {ILLUSTRATIVE}.\n\n"
        "## Inputs\n\n- `/public/images/`: the test inputs, one per case id below.\n"
        "- `/public/validation/`: a validation split (other case ids' images, a sample "
        "submission and its public answers under `reference/`).\n\n"
        f"## Submission layout\n\n{sub.description.strip()}\n\nWrite "
        f"`/workspace/submission/submission.csv` with columns {cols} (one row per test case; "
        "file paths relative to the submission folder), like `/public/sample_submission/`.\n\n"
        "## Local metric\n\n`python /public/local_metric.py FOLDER` grades a submission folder "
        "for the validation case ids with the challenge's metrics (the test answers are "
        "hidden).\n\n## Test cases\n\n" + "\n".join(f"- `{c}`" for c in test.case_ids)
        + "\n\n## Validation cases\n\n" + "\n".join(f"- `{c}`" for c in validation.case_ids)
        + "\n")


def _cases(card: TaskSpec, case: SyntheticCase) -> list[CaseEntry]:
    images = {p.name.split(".")[0]: f"images/{p.name}"
              for p in (case.public_dir / "images").glob("*")} if (
        case.public_dir / "images").is_dir() else {}
    return [CaseEntry(case_id=c, output="submission.csv", reference="test_labels.csv",
                      origin=f"synthetic seed {case.seed}", image=images.get(c, ""))
            for c in case.case_ids]


def _renamed(value: object, names: dict[str, str]) -> object:
    """A table cell with a case id, or a path whose file is named after one, renamed."""
    if not isinstance(value, str):
        return value
    head, _, base = value.rpartition("/")
    stem, dot, rest = base.partition(".")
    return f"{head}/" * bool(head) + names.get(stem, stem) + dot + rest


def prefix_cases(case: SyntheticCase, prefix: str) -> SyntheticCase:
    """Give every case of ``case`` the id ``prefix + id``: files named after a case and every
    CSV cell naming one (ids or relative paths), so two splits never share an id or a file."""
    names = {c: f"{prefix}{c}" for c in case.case_ids}
    for folder in (case.public_dir, case.private_dir, case.sample_submission_dir,
                   case.perfect_submission_dir):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix == ".csv":
                table = pd.read_csv(path, dtype=str, keep_default_na=False)
                table = table.apply(lambda col: col.map(lambda v: _renamed(v, names)))
                table.to_csv(path, index=False)
            if path.is_file() and path.name.split(".")[0] in names:
                path.rename(path.with_name(str(_renamed(path.name, names))))
    return case.model_copy(update={"case_ids": [names[c] for c in case.case_ids]})


def artifacts(card: TaskSpec, work: Path, seed: int) -> tuple[list[Artifact], list[CaseEntry]]:
    """Every pool file (public and private) and the test cases, written under ``work`` (the
    validation ids carry the prefix ``val_``)."""
    test = write_synthetic_case(card, work / "test", seed)
    val = prefix_cases(write_synthetic_case(card, work / "validation", seed + 1), "val_")
    public, private = Visibility.PUBLIC, Visibility.PRIVATE
    arts = [*_files(test.public_dir / "images", "images/", public),
            *_files(test.sample_submission_dir, "sample_submission/", public),
            *_files(val.public_dir / "images", "validation/images/", public),
            *_files(val.sample_submission_dir, "validation/sample_submission/", public),
            *_files(val.private_dir, "validation/reference/", public),
            *_files(test.private_dir, "", private),
            Artifact(key="brief.md", visibility=public, data=brief(card, test, val).encode())]
    arts += [Artifact(key=k, visibility=public, data=v)
             for k, v in local_metric.bundle(card).items()]
    return arts, _cases(card, test)


def publish_challenge_pool(task_id: str, out: str | None = None,
                           seed: int = 0) -> tuple[str, PoolManifest]:
    """Write the challenge's pool version (``out`` or ``pools/<task_id>/vN``; the same content
    reuses its published version) and return its root URL and manifest (not ledgered yet)."""
    card = load_challenge(task_id)
    with tempfile.TemporaryDirectory(prefix="medflows-challenge-") as tmp:
        arts, cases = artifacts(card, Path(tmp), seed)
    digest = content_hash(arts)
    version = version_for(task_id, digest)
    url = out or versioned_url(task_id, version)
    pool = Storage(url)
    for art in arts:
        pool.write_bytes(f"{art.visibility.value}/{art.key}", art.data)
    manifest = PoolManifest(task_id=task_id, track=card.track, version=version,
                            card_digest=card_digest(card), content_hash=digest, cases=cases,
                            deid=DeidRecord(files=0, fields_cleared=[]))
    pool.write_json(MANIFEST, manifest)
    return pool.root_url, manifest


# --------------------------------------------------------------------------- audit and ledger

NAME_RULE_EXEMPT = ("public/validation/reference/", "public/local_metric/lib/")
"""Public by design, so the answer-key check's label-like-name rule does not apply to them
(copies and digests of private files still do): the validation answers (another seed's case)
and the local metric's copy of the project's grading code (e.g. ``evaluators/rwe_answers.py``)."""


def _grade(card: TaskSpec, pool_dir: Path, folder: Path) -> ScoreCard:
    from tasks_lib.challenge.cells import score_challenge

    return score_challenge(card, pool_dir, folder, None, "audit", "audit")


def _null_agents(card: TaskSpec, pool_dir: Path, work: Path) -> Finding:
    empty = work / "empty"
    empty.mkdir()
    scored = _grade(card, pool_dir, empty)
    ok = scored.invalid_reason is not None and not scored.metrics
    return Finding(check="null_agents", passed=ok, severity=Severity.ERROR,
                   rule="an empty submission is invalid: no metric, placed last",
                   evidence=[] if ok else [f"empty submission graded {scored.metrics}"])


def _tampering(card: TaskSpec, pool_dir: Path, work: Path) -> Finding:
    """Copies of the private answers planted in the sample submission do not move its grade."""
    sample, planted = work / "sample", work / "planted"
    shutil.copytree(pool_dir / "public" / "sample_submission", sample)
    shutil.copytree(sample, planted)
    shutil.copytree(pool_dir / "private", planted / "private")
    shutil.copytree(pool_dir / "private", planted, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.csv"))
    before, after = _grade(card, pool_dir, sample), _grade(card, pool_dir, planted)
    ok = before.metrics == after.metrics and before.invalid_reason == after.invalid_reason
    return Finding(check="grader_tampering", passed=ok, severity=Severity.ERROR,
                   rule="reference copies planted in the submission folder do not move the "
                        "grade", evidence=[] if ok else [f"{before.metrics} → {after.metrics}"])


def _answer_key(info: PoolInfo) -> Finding:
    found = check_answer_key(info)
    hits = [h for h in found.evidence
            if not (h.startswith(NAME_RULE_EXEMPT) and "file name suggests" in h)]
    return found.model_copy(update={
        "passed": not hits, "evidence": hits,
        "rule": f"{found.rule} (public by design, the name rule does not apply under "
                f"{', '.join(NAME_RULE_EXEMPT)})"})


def audit_challenge_pool(pool_url: str) -> AuditReport:
    """The exploit audit of a challenge pool: null agents, answer key, grader tampering (the
    judge-injection and egress probes are the imaging/QA audits'; reported as skipped)."""
    info = pool_info(pool_url)
    card = load_challenge(info.task_id)
    pool_dir = Path(Storage(pool_url).root_path)
    with tempfile.TemporaryDirectory(prefix="medflows-audit-") as tmp:
        work = Path(tmp)
        findings = [_null_agents(card, pool_dir, work), _answer_key(info),
                    _tampering(card, pool_dir, work)]
    findings += [Finding(check=c, passed=False, severity=Severity.WARNING,
                         rule="not run on challenge pools",
                         evidence=["skipped: the agent sandbox and stage judges are the "
                                   "imaging tracks' (audited there)"])
                 for c in ("judge_injection", "egress")]
    return AuditReport(pool_url=info.url, pool_id=info.pool_id, version=info.version,
                       pool_hash=info.pool_hash, track=info.track, created_at=datetime.now(UTC),
                       findings=findings)
