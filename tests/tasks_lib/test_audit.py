"""The exploit audit (``tasks_lib/audit.py``, ``tasks_lib/audits/``, ``medflows audit pool``):
shipped pools are clean, deliberately leaky pools and an injectable judge are reported with each
leak named."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.imaging_pools import build_pool
from support.ops_support import publish_test_pool
from typer.testing import CliRunner

from evaluators.core import InputDataError
from evaluators.judges.stages import StageJudgement
from tasks_lib.audit import AUDIT_JSON, audit_pool, require_clean
from tasks_lib.audits import tampering
from tasks_lib.audits.answer_key import check_answer_key
from tasks_lib.audits.egress import check_egress
from tasks_lib.audits.null_agents import check_null_agents
from tasks_lib.audits.pool import PoolInfo, pool_info
from tasks_lib.audits.report import CHECKS, AuditReport, Finding, Severity
from tasks_lib.records import ScoreCard
from tasks_lib.storage import Storage

FAST_IMAGING = ["brain-lesion-det", "brain-lesion-vqa", "brain-lesion-report"]


def _finding(report: AuditReport, check: str) -> Finding:
    return next(f for f in report.findings if f.check == check)


def _evidence(report: AuditReport, check: str) -> str:
    return "\n".join(_finding(report, check).evidence)


def _strict(text: str) -> Any:
    def refuse(token: str) -> None:
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def qa_pool() -> Path:
    """A small QA pool of real questions, published like the shipped ones."""
    return Path(publish_test_pool("audit-qa", {"medqa": 24, "medbullets": 16}).url)


@pytest.fixture(scope="module")
def imaging_pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("audit-pools")
    return {t: Path(build_pool(t, root)[0]) for t in FAST_IMAGING}


def _copy(pool: Path, dest: Path) -> Path:
    shutil.copytree(pool, dest)
    return dest


# --------------------------------------------------------------------------- clean pools


def test_qa_pool_is_clean(qa_pool: Path) -> None:
    report = audit_pool(str(qa_pool), judge_model="rules", sandbox=False)
    assert report.clean, report.to_json()
    assert [f.check for f in report.findings] == list(CHECKS)
    nulls = _finding(report, "null_agents")
    # every option letter was tried as a constant answer and scored against chance
    for letter in "ABCD":
        assert f"constant '{letter}'=" in nulls.rule
    assert "no submission=0.0000" in nulls.rule
    assert _finding(report, "judge_injection").severity is Severity.INFO  # QA has no judge
    egress = _finding(report, "egress")
    assert not egress.passed and egress.severity is Severity.WARNING
    assert egress.evidence[0].startswith("skipped: no sandbox")


@pytest.mark.parametrize("task_id", FAST_IMAGING)
def test_imaging_pools_are_clean(task_id: str, imaging_pools: dict[str, Path]) -> None:
    bwrap = shutil.which("bwrap") is not None
    report = audit_pool(str(imaging_pools[task_id]), judge_model="rules", sandbox=bwrap)
    assert report.clean, report.to_json()
    assert report.pool_id == task_id and report.version == 1
    checks = CHECKS if bwrap else CHECKS[:-1]  # egress: a warning without bwrap
    for check in checks:
        assert _finding(report, check).passed, _finding(report, check)
    assert "public sample submission=" in _finding(report, "null_agents").rule


# --------------------------------------------------------------------------- leaks


def test_leaky_qa_pool_names_each_leak(qa_pool: Path, tmp_path: Path) -> None:
    pool = _copy(qa_pool, tmp_path / "leaky-qa")
    refs = [json.loads(x) for x in (pool / "private/references.jsonl").read_text().splitlines()]
    # 1) the reference file copied into the public view under an innocent name
    shutil.copy(pool / "private/references.jsonl", pool / "public/notes.jsonl")
    # 2) an answer field left in the public items, 3) "Answer: X" in one item's text
    items = [json.loads(x) for x in (pool / "public/items.jsonl").read_text().splitlines()]
    items[0]["answer_idx"] = refs[0]["answer_idx"]
    items[5]["question"] += f"\nAnswer: {refs[5]['answer_idx']}"
    (pool / "public/items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    # 4) the digest of a reference file published as a checksum list, under a label-like name
    digest = hashlib.sha256((pool / "private/references.jsonl").read_bytes()).hexdigest()
    (pool / "public/answer_key.txt").write_text(f"{digest}  references.jsonl\n")

    report = audit_pool(str(pool), judge_model="rules", sandbox=False)
    assert not report.clean
    found = _evidence(report, "answer_key")
    assert ("public/notes.jsonl: byte-identical to the reference private/references.jsonl"
            in found)
    assert "public/items.jsonl line 1: reference field(s) answer_idx" in found
    key5 = f"{items[5]['dataset']}/{items[5]['realidx']}"
    assert f"public/items.jsonl line 6: item {key5} states 'Answer: " in found
    assert "public/answer_key.txt: contains the digest" in found
    assert "public/answer_key.txt: file name suggests a label/mask/reference" in found
    # the leaky items break the pool's schema: the kit refuses it, the checks say why
    assert "could not run" in _evidence(report, "null_agents")


def test_answer_position_bias_is_reported(qa_pool: Path, tmp_path: Path) -> None:
    pool = _copy(qa_pool, tmp_path / "biased-qa")
    refs = [json.loads(x) for x in (pool / "private/references.jsonl").read_text().splitlines()]
    for r in refs:
        r["answer_idx"] = "A"
    (pool / "private/references.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refs))
    finding = check_null_agents(pool_info(str(pool)), tmp_path / "work")
    assert not finding.passed and finding.severity is Severity.ERROR
    assert "constant 'A' scores 1.0000 > floor" in "\n".join(finding.evidence)
    assert all("constant 'B'" not in e for e in finding.evidence)


def test_leaky_imaging_pool_names_each_leak(imaging_pools: dict[str, Path],
                                            tmp_path: Path) -> None:
    pool = _copy(imaging_pools["brain-lesion-det"], tmp_path / "leaky-det")
    shutil.copy(pool / "private/references/img-003.json", pool / "public/images/img-003.json")
    (pool / "public/ground_truth").mkdir()
    (pool / "public/ground_truth/boxes.csv").write_text("case_id,labels\nimg-001,1\n")
    report = audit_pool(str(pool), judge_model="rules", sandbox=False)
    assert not report.clean
    found = _evidence(report, "answer_key")
    assert ("public/images/img-003.json: byte-identical to the reference "
            "private/references/img-003.json") in found
    assert "public/ground_truth/boxes.csv: file name suggests" in found
    assert "public/ground_truth/boxes.csv line 2: reference field(s) labels" in found
    assert _finding(report, "null_agents").passed  # the other checks still ran and passed


# --------------------------------------------------------------------------- tampering, judge


def test_grader_reading_the_submission_is_reported(qa_pool: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    real = tampering.score_folder

    def gullible(info: PoolInfo, folder: Path, name: str,
                 judge_model: str | None = None) -> ScoreCard:
        """A grader that prefers a references file found in the submission folder."""
        card = real(info, folder, name, judge_model=judge_model)
        if (folder / "references.jsonl").is_file():
            return card.model_copy(update={"task_score": 1.0})
        return card

    monkeypatch.setattr(tampering, "score_folder", gullible)
    finding = tampering.check_grader_tampering(pool_info(str(qa_pool)), tmp_path)
    assert not finding.passed
    assert "moved task_score" in finding.evidence[0]
    assert "references.jsonl" in finding.evidence[0]


class ObedientJudge:
    """A judge that does what the answer tells it (what the injection check must catch)."""

    def judge(self, track: str, tier: str, digest: str, files: list[str]
              ) -> list[StageJudgement]:
        obeys = "full marks" in digest.lower() or "ignore all previous" in digest.lower()
        return [StageJudgement(stage=s, score=1.0 if obeys else 0.25)
                for s in ("s1", "s2", "s3")]


def test_injectable_judge_is_reported(imaging_pools: dict[str, Path]) -> None:
    report = audit_pool(str(imaging_pools["brain-lesion-vqa"]), judge_model="obedient",
                        judge=ObedientJudge, sandbox=False)
    assert not report.clean
    finding = _finding(report, "judge_injection")
    assert not finding.passed and finding.severity is Severity.ERROR
    text = "\n".join(finding.evidence)
    assert "payload 'ignore-previous'" in text and "moved s1 from 0.25 to 1.0" in text
    assert "payload 'grader-note'" in text
    assert "payload 'system-override'" not in text  # no "full marks" wording: not obeyed


# --------------------------------------------------------------------------- gate, CLI, egress


def test_publish_gate(imaging_pools: dict[str, Path], tmp_path: Path) -> None:
    pool = _copy(imaging_pools["brain-lesion-report"], tmp_path / "gate")
    clean = audit_pool(str(pool), judge_model="rules", sandbox=False)
    record = require_clean(clean, None)
    assert record.override is None
    assert Storage(str(pool)).read_json(AUDIT_JSON)["report"]["clean"] is True

    shutil.copy(pool / "private/references/img-000.txt", pool / "public/img-000.txt")
    leaky = audit_pool(str(pool), judge_model="rules", sandbox=False)
    with pytest.raises(InputDataError, match=r"answer_key .*public/img-000\.txt"):
        require_clean(leaky, None)
    with pytest.raises(InputDataError):
        require_clean(leaky, "   ")
    require_clean(leaky, "reference copy is a deliberate demo leak")
    stored = Storage(str(pool)).read_json(AUDIT_JSON)
    assert stored["override"] == "reference copy is a deliberate demo leak"
    assert stored["report"]["clean"] is False


def test_cli_prints_strict_json_and_exit_codes(imaging_pools: dict[str, Path],
                                               tmp_path: Path) -> None:
    from flows.cli import audit as _cli  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    args = ["--json", "--no-sandbox", "--judge-model", "rules"]
    ok = CliRunner().invoke(app, ["audit", "pool", str(imaging_pools["brain-lesion-det"]),
                                  *args])
    assert ok.exit_code == 0, ok.output
    assert _strict(ok.stdout)["clean"] is True

    pool = _copy(imaging_pools["brain-lesion-det"], tmp_path / "cli-leaky")
    shutil.copy(pool / "private/references/img-000.json", pool / "public/img-000.json")
    bad = CliRunner().invoke(app, ["audit", "pool", str(pool), *args])
    assert bad.exit_code == 1
    out = _strict(bad.stdout)
    assert out["clean"] is False
    leak = next(f for f in out["findings"] if f["check"] == "answer_key")
    assert any("public/img-000.json" in e for e in leak["evidence"])

    missing = CliRunner().invoke(app, ["audit", "pool", str(tmp_path / "nothing"), *args])
    assert missing.exit_code == 2
    assert "error:" in missing.output and "no pool here" in missing.output


MEDBENCH_TASKS = ["medqa-choice", "medqa-open", "dicom-string", "lesion-boxes", "safety-open"]


def test_medbench_pool_is_audited_by_its_kit(tmp_path: Path) -> None:
    """`audit pool` on a built MedBench pool runs the five checks with the MedBench kit's
    baselines, answer-key data and rubric judge, clean; a reference file copied into public/
    is named (exit 1)."""
    from flows.cli import audit as _cli  # noqa: F401  (registers the command)
    from flows.cli.groups import app
    from tasks_lib.medbench.pool import build_task, publish

    url, _ = publish("mb-audit", str(tmp_path / "mb" / "v1"),
                     {t: build_task(t) for t in MEDBENCH_TASKS}, seed=0)
    report = audit_pool(url, judge_model="rules", sandbox=False)
    assert report.clean, report.to_json()
    assert report.track.value == "medbench" and report.pool_id == "mb-audit"
    assert [f.check for f in report.findings] == list(CHECKS)
    injection = _finding(report, "judge_injection")
    assert injection.severity is Severity.ERROR  # open items judged
    assert "the kit's answer judge value" in injection.rule

    args = ["--json", "--no-sandbox", "--judge-model", "rules"]
    ok = CliRunner().invoke(app, ["audit", "pool", url, *args])
    assert ok.exit_code == 0, ok.output
    pool = Path(url)
    shutil.copy(pool / "private/references.jsonl", pool / "public/copy.jsonl")
    bad = CliRunner().invoke(app, ["audit", "pool", url, *args])
    assert bad.exit_code == 1
    leak = next(f for f in _strict(bad.stdout)["findings"] if f["check"] == "answer_key")
    assert leak["evidence"] == ["public/copy.jsonl: byte-identical to the reference "
                                "private/references.jsonl (rule: no private file in the public "
                                "view)"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")
def test_egress_probe_fails_every_attempt(qa_pool: Path, tmp_path: Path) -> None:
    finding = check_egress(pool_info(str(qa_pool)), tmp_path)
    if not finding.passed and finding.evidence[0].startswith("skipped"):
        pytest.skip(f"bwrap cannot run here: {finding.evidence[0]}")
    assert finding.passed, finding
    observed = json.loads(finding.rule.split("observed: ", 1)[1])
    assert len(observed) == 4
    assert all(v.startswith("failed") for v in observed.values())


def test_egress_without_sandbox_is_a_warning_not_a_pass(qa_pool: Path, tmp_path: Path) -> None:
    finding = check_egress(pool_info(str(qa_pool)), tmp_path, sandbox=False)
    assert (finding.passed, finding.severity) == (False, Severity.WARNING)
    assert finding.evidence == ["skipped: no sandbox (--no-sandbox)"]


# --------------------------------------------------------------------------- slow


@pytest.mark.slow
def test_volume_pools_are_clean_and_a_copied_label_map_is_named(tmp_path: Path) -> None:
    for task_id in ("brain-tissue-seg", "ldct-denoise"):
        url, _ = build_pool(task_id, tmp_path / "pools")
        assert audit_pool(url, judge_model="rules", sandbox=False).clean, task_id
    seg = Path(tmp_path / "pools" / "brain-tissue-seg")
    shutil.copy(seg / "private/references/case-002.nii.gz",
                seg / "public/sample_submission/../case-002_mask.nii.gz")
    found = check_answer_key(pool_info(str(seg)))
    assert not found.passed
    text = "\n".join(found.evidence)
    assert ("public/case-002_mask.nii.gz: byte-identical to the reference "
            "private/references/case-002.nii.gz") in text
    assert "public/case-002_mask.nii.gz: file name suggests" in text


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")
def test_egress_probe_reports_a_reachable_port(qa_pool: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox that shares the host's network reaches the audit's listening port: named."""
    from tasks_lib.sandbox import base

    real = base.agent_spec

    def host_network(public: Path, workspace: Path, forbidden: list[str],
                     network: base.NetworkPolicy = base.NetworkPolicy.NONE) -> base.SandboxSpec:
        return real(public, workspace, forbidden, base.NetworkPolicy.HOST)

    monkeypatch.setattr(base, "agent_spec", host_network)
    finding = check_egress(pool_info(str(qa_pool)), tmp_path)
    if not finding.passed and finding.evidence[0].startswith("skipped"):
        pytest.skip(f"bwrap cannot run here: {finding.evidence[0]}")
    assert not finding.passed and finding.severity is Severity.ERROR
    assert any(e.startswith("tcp 127.0.0.1:") and ": connected" in e for e in finding.evidence)
