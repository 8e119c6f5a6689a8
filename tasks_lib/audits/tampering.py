"""Check 3 of the exploit audit, ``grader_tampering``: forged reference copies planted in the
folder of the kit's constant baseline (:meth:`~tasks_lib.tracks.base.TrackKit.baselines`) do
not move its score; the agent sandbox spec mounts nothing private and the
evaluator's mounts are read-only."""

from __future__ import annotations

import json
import posixpath
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluators.core import InputDataError
from tasks_lib.audits.answer_key import REFERENCE_FIELDS
from tasks_lib.audits.baselines import Baseline
from tasks_lib.audits.pool import PoolInfo, list_pool, pool_files
from tasks_lib.audits.report import Finding, Severity
from tasks_lib.audits.scoring import score_folder
from tasks_lib.records import ScoreCard
from tasks_lib.storage import Storage


def _plant_tampered(root: Storage, folder: Path, forged: Callable[[str], bytes]) -> list[str]:
    """Copies of every reference file, forged, at the paths an evaluator might look for."""
    own = {p.name for p in folder.iterdir()}
    planted: list[str] = []
    for key in pool_files(root, "private"):
        if "/zarr/" in f"/{key}":
            continue
        data = forged(key)
        rel = posixpath.relpath(key, "private")
        for target in (key, rel, posixpath.basename(key),
                       f"references/{posixpath.basename(key)}",
                       f"labels/{posixpath.basename(key)}"):
            if target.split("/")[0] in own:
                continue  # never overwrite the submission's own files
            path = folder / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            planted.append(target)
    return sorted(set(planted))


def _first_answer(baseline: Path) -> object:
    """The answer of the baseline's first JSONL row (what a constant agent answers)."""
    for path in sorted(baseline.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if isinstance(row, dict) and "answer" in row:
                return row["answer"]
    return None


def _forger(root: Storage, baseline: Path) -> Callable[[str], bytes]:
    """A forged reference equal to what the baseline submitted, so a grader reading it would
    score the baseline perfect: a JSONL reference with every reference field set to the
    baseline's answer; any other file replaced by the submitted file of the same stem (or the
    first one)."""
    answer = _first_answer(baseline)
    submitted = {p.stem.split(".")[0]: p.read_bytes()
                 for p in sorted(baseline.rglob("*")) if p.is_file()}
    only = next(iter(submitted.values()), b"")

    def forged(key: str) -> bytes:
        if key.endswith(".jsonl"):
            rows = [{k: answer if k.lower() in REFERENCE_FIELDS else v for k, v in r.items()}
                    for r in root.read_jsonl(key) if isinstance(r, dict)]
            return "".join(json.dumps(r) + "\n" for r in rows).encode()
        return submitted.get(posixpath.basename(key).split(".")[0], only)
    return forged


def _planted_baseline(info: PoolInfo, work: Path) -> Baseline:
    """The kit's constant baseline (else its first null agent that submits files)."""
    from tasks_lib.tracks.base import kit_for

    nulls = [b for b in kit_for(info.track).baselines(info.url, work / "tamper-baselines")
             if b.floor is not None and any(p.is_file() for p in b.folder.rglob("*"))]
    if not nulls:
        raise InputDataError(info.url, "the kit writes no null agent that submits a file")
    return next((b for b in nulls if b.name.startswith("constant")), nulls[0])


def _key_values(card: ScoreCard) -> dict[str, Any]:
    return {"task_score": card.task_score, "metrics": card.metrics,
            "per_case": {c.case_id: c.values for c in card.per_case}}


def _spec_exposure(info: PoolInfo, work: Path) -> list[str]:
    """Private files reachable through the agent or evaluator sandbox specs."""
    from tasks_lib.sandbox.base import agent_spec, evaluator_spec

    root = Storage(info.url)
    if not Path(root.root_path).is_dir():
        return []
    pool = Path(root.root_path).resolve()
    private = pool / "private"
    hits = [f"{line} (rule: the agent reads only public/)"
            for line in list_pool(root, "public").odd if "leaves the public view" in line]
    workspace = work / "spec-workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    spec = agent_spec(pool / "public", workspace, [str(private)])
    for m in spec.mounts:
        host = m.host.resolve()
        if host == private or private.is_relative_to(host) or host.is_relative_to(private):
            hits.append(f"agent sandbox mounts {host} at {m.target}, which exposes "
                        f"{private} (rule: private references are never mounted)")
    out = work / "spec-output"
    out.mkdir(parents=True, exist_ok=True)
    espec = evaluator_spec(private, work, out, [])
    for m in espec.mounts:
        if m.writable and m.target != "/output":
            hits.append(f"evaluator sandbox mounts {m.target} writable (rule: references and "
                        "submission are read-only in the evaluator)")
    return hits


def check_grader_tampering(info: PoolInfo, work: Path, judge_model: str | None = None
                           ) -> Finding:
    """A baseline scored clean and with forged reference copies planted beside it score the
    same (both with ``judge_model``, None: the configured one); the sandbox specs expose no
    private file."""
    root = Storage(info.url)
    baseline = _planted_baseline(info, work)
    clean_dir, tampered = work / "tamper-clean", work / "tamper-planted"
    shutil.copytree(baseline.folder, clean_dir)
    shutil.copytree(baseline.folder, tampered)
    planted = _plant_tampered(root, tampered, _forger(root, clean_dir))
    before = _key_values(score_folder(info, clean_dir, "tamper-clean", judge_model=judge_model))
    after = _key_values(score_folder(info, tampered, "tamper-planted", judge_model=judge_model))
    evidence: list[str] = []
    if before != after:
        moved = [k for k in before if before[k] != after[k]]
        evidence.append(f"planting forged references ({', '.join(planted[:5])}"
                        f"{' …' if len(planted) > 5 else ''}) moved {', '.join(moved)}: "
                        f"task_score {before['task_score']} → {after['task_score']} (rule: the "
                        "evaluator reads references only from the pool's private copy)")
    evidence += _spec_exposure(info, work)
    return Finding(check="grader_tampering", passed=not evidence, severity=Severity.ERROR,
                   rule=f"the score of the {baseline.name} does not move when {len(planted)} "
                        "forged reference copies are planted in its submission folder; the agent "
                        "spec "
                        "mounts nothing private; the evaluator's references are read-only",
                   evidence=evidence)
