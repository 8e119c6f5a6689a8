"""The malformed-submission corpus (issue 14): no input crashes the scorer.

Every case of :mod:`support.malformed_submissions` is scored in-process with the kit's own
scoring (pools built once per module): a score card comes back, the bad case is invalid with a
reason naming its file and the rule, the other cases are scored exactly as in the good
submission, the card is strict JSON, and nothing is written outside the submission folder. The
bombs are scored again in a subprocess whose peak RSS must stay under 1 GiB, and a handful of
cases go end to end through ``medflows score submission``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.imaging_pools import build_pool
from support.malformed_submissions import (
    IMAGING,
    GiB,
    Malformed,
    MalformedChallenge,
    MalformedQA,
    challenge_corpus,
    imaging_corpus,
    qa_corpus,
)
from support.memory import PEAK_SNIPPET

from evaluators.core import RunStatus, Track
from tasks_lib.agents import replay_agent
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.registry import imaging_kit
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.base import kit_for

IMAGING_CASES = imaging_corpus()
QA_CASES = qa_corpus()
CHALLENGE_CASES = challenge_corpus()


def test_the_corpus_is_large_and_covers_every_track() -> None:
    total = len(IMAGING_CASES) + len(QA_CASES) + len(CHALLENGE_CASES)
    assert total >= 150
    assert {c.task for c in IMAGING_CASES} == set(IMAGING)
    assert sum(c.from_issue for c in IMAGING_CASES) >= 15
    assert {c.challenge for c in CHALLENGE_CASES} == {"ldct-iqa", "neurips-cellseg"}
    names = [c.name for c in IMAGING_CASES] + [c.name for c in QA_CASES] + [
        c.name for c in CHALLENGE_CASES]
    assert len(names) == len(set(names))


# --- imaging ------------------------------------------------------------------------------------

class Built:
    """One task's pool, its perfect submission and the card of that submission."""

    def __init__(self, task: str, root: Path) -> None:
        self.task = task
        self.url, self.m = build_pool(task, root / "pools")
        self.card = _light_card(load_task(task))
        self.good = write_submission(baseline_files(BaselineKind.PERFECT, self.url, self.m),
                                     root / "good" / task)
        self.good_card = self.score(self.good)
        assert all(c.valid for c in self.good_card.per_case)

    def score(self, sub: Path) -> ScoreCard:
        return imaging_kit(self.m.track).score_folder(self.card, self.url, sub, use_dask=False)


def _light_card(card: TaskSpec) -> TaskSpec:
    """The card with its primary metric only (surface distances would dominate run time)."""
    return card.model_copy(update={"metrics": [m for m in card.metrics
                                               if m.name == card.primary_metric]})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    root = tmp_path_factory.mktemp("malformed")
    return {t: Built(t, root) for t in IMAGING}


def snapshot(*roots: Path) -> set[tuple[str, int, int]]:
    """Every entry below ``roots`` (path, size, mtime) without following links."""
    seen = set()
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for name in dirs + files:
                p = Path(dirpath) / name
                st = p.lstat()
                seen.add((str(p), st.st_size, st.st_mtime_ns))
    return seen


def strict_json(card: ScoreCard) -> None:
    """The card (and its CLI form) is strict JSON: no NaN or infinity anywhere."""
    assert card.finite() is card
    json.dumps(card.public_json(), allow_nan=False)
    assert ScoreCard.model_validate_json(card.model_dump_json()) == card


def check_imaging(case: Malformed, b: Built, card: ScoreCard) -> None:
    """The card's verdict on ``case`` (see the module docstring)."""
    strict_json(card)
    m: PoolManifest = b.m
    per = {c.case_id: c for c in card.per_case}
    good = {c.case_id: c for c in b.good_card.per_case}
    if case.scope == "case":
        bad = {m.cases[case.target].case_id}
    elif case.scope in ("table", "folder"):
        bad = set(per)
    else:
        bad = set()
    for cid, c in per.items():
        if cid in bad:
            assert not c.valid, (cid, c)
            assert case.rule in c.reason, c.reason
            if case.scope != "folder":
                name = case.file or next(x.output for x in m.cases if x.case_id == cid)
                assert name in c.reason, c.reason
        else:
            assert c.valid and c.values == good[cid].values, (cid, c.reason)
    if case.scope == "extra":
        assert card.validation is not None and not card.validation.ok
        failed = {f.rule: f.cases for f in card.validation.failures}
        assert case.rule in failed, failed
        if case.file:
            assert any(case.file in name for name in failed[case.rule]), failed
    assert (card.s4 is not None and card.s4 < 1.0) or case.scope == "extra"


@pytest.fixture
def case_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "case"


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.name, marks=() if c.from_issue else pytest.mark.slow)
    for c in IMAGING_CASES])
def test_imaging_case(case: Malformed, built: dict[str, Built], case_dir: Path) -> None:
    b = built[case.task]
    sub = case_dir / "submission"
    shutil.copytree(b.good, sub)
    case.apply(sub, b.m)
    pool_root = Path(b.url)
    before = snapshot(case_dir, pool_root)
    card = b.score(sub)
    assert snapshot(case_dir, pool_root) == before  # nothing written, nothing changed
    check_imaging(case, b, card)


# --- QA answers.jsonl ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunRecord, list[dict[str, object]]]:
    """A tiny QA pool (3 items of two datasets) and replayed answers on it (no Prefect)."""
    from support.paths import QA_SOURCE

    from tasks_lib.pricing import price_snapshot
    from tasks_lib.qa import steps
    from tasks_lib.qa.ingest import default_source
    from tasks_lib.qa.pool import load_pool
    from tasks_lib.qa.review import auto_record
    from tasks_lib.qa.runner import replay
    from tasks_lib.storage import Storage
    from tasks_lib.taskspec import list_cards

    root = tmp_path_factory.mktemp("qa-malformed")
    source = default_source()
    builds = []
    for ds in list_cards(Track.QA)[:2]:
        src = steps.resolve_card.fn(ds, source)
        ingested = steps.ingest.fn(ds, src.questions, src.questions_digest)
        builds.append(steps.DatasetBuild(ds, ingested.n_lines, ingested.items[:3], [], [], [],
                                         []))
    published = steps.publish_pool.fn("qa-malformed", str(root / "pool"), builds, [],
                                      auto_record([]), {"rule": "first"})
    agent = replay_agent("gpt-4o", "zero_shot", str(QA_SOURCE / "predictions" / "full.csv.gz"))
    answers = replay(agent, load_pool(Storage(published.url)).items, price_snapshot())
    run = RunRecord(run_id="qa-malformed", agent=agent, task_id="qa-malformed", track=Track.QA,
                    status=RunStatus.COMPLETED, pool_url=published.url, pool_id="qa-malformed",
                    pool_version=published.manifest.version,
                    pool_hash=published.manifest.content_hash)
    return run, [a.model_dump(mode="json") for a in answers]


def _qa_score(run: RunRecord, sub: Path, lines: list[bytes]) -> ScoreCard:
    sub.mkdir(parents=True, exist_ok=True)
    (sub / "answers.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    before = snapshot(sub)
    card = kit_for(Track.QA).score(run, sub)
    assert snapshot(sub) == before
    strict_json(card)
    return card


@pytest.mark.parametrize("case", QA_CASES, ids=[c.name for c in QA_CASES])
def test_qa_answer_line(case: MalformedQA, qa: tuple[RunRecord, list[dict[str, object]]],
                        tmp_path: Path) -> None:
    run, answers = qa
    first = answers[0]
    key = f"{first['dataset']}/{first['realidx']}"
    lines = [case.line(first)] + [json.dumps(a).encode() for a in answers[1:]]
    card = _qa_score(run, tmp_path, lines)
    per = {c.case_id: c for c in card.per_case}
    assert not per[key].valid
    where = "answers.jsonl line 1"
    if case.attributed:
        assert where in per[key].reason and case.rule in per[key].reason, per[key].reason
    else:
        assert any(where in n and case.rule in n for n in card.notes), card.notes
    good = {f"{a['dataset']}/{a['realidx']}" for a in answers[1:]}
    assert all(per[k].valid for k in good)
    assert card.coverage == pytest.approx(len(good) / len(per))


@pytest.mark.parametrize("kind", ["symlink", "too-big", "directory"])
def test_qa_answers_file_refused_as_a_whole(kind: str, qa: tuple[RunRecord, list[dict[str,
                                            object]]], tmp_path: Path) -> None:
    run, answers = qa
    sub = tmp_path / "sub"
    sub.mkdir()
    path = sub / "answers.jsonl"
    if kind == "symlink":
        (tmp_path / "real.jsonl").write_text("\n".join(json.dumps(a) for a in answers))
        path.symlink_to(tmp_path / "real.jsonl")
        rule = "files_safe"
    elif kind == "directory":
        path.mkdir()
        rule = "files_safe"
    else:
        with path.open("wb") as f:
            f.truncate(65 * 2 ** 20)
        rule = "table_size"
    card = kit_for(Track.QA).score(run, sub)
    strict_json(card)
    assert card.coverage == 0.0 and not any(c.valid for c in card.per_case)
    assert any("answers.jsonl" in n and rule in n for n in card.notes), card.notes


def test_provider_key_in_an_error_is_redacted(qa: tuple[RunRecord, list[dict[str, object]]],
                                              tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli.output import json_text
    from tasks_lib.records import write_card

    key = "zz-live-7f3a9c1e5b2d8a4f6e0c"  # not key-shaped: only the environment names it
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    from tasks_lib.settings import reset_settings

    reset_settings()
    try:
        run, answers = qa
        failed = {**answers[0], "answer": None,
                  "error": f"AuthenticationError: Incorrect API key provided: {key}; also "
                           "sk-proj-abcdefghijklmnopqrstuvwx"}
        lines = [json.dumps(failed).encode()] + [json.dumps(a).encode() for a in answers[1:]]
        card = _qa_score(run, tmp_path / "sub", lines)
        url = write_card(card)
        stored = Path(url.removeprefix("file://")).read_text()
        printed = json_text(card.public_json())
    finally:
        monkeypatch.undo()
        reset_settings()
    for text in (card.model_dump_json(), stored, printed):
        assert key not in text and "sk-proj-abc" not in text
        assert "[REDACTED]" in text


# --- challenge ----------------------------------------------------------------------------------

def _challenge(root: Path, challenge: str) -> tuple[RunRecord, Path]:
    """A challenge pool (references under private/) and a good submission folder."""
    pool, sub = root / "pool", root / "sub"
    ref = pool / "private"
    ref.mkdir(parents=True)
    sub.mkdir()
    if challenge == "ldct-iqa":
        for folder, csv in ((ref, "reference.csv"), (sub, "submission.csv")):
            pd.DataFrame({"image_id": [f"s{i:02d}" for i in range(10)],
                          "quality_score": [float(i) for i in range(10)]}).to_csv(
                folder / csv, index=False)
    else:
        mask = np.zeros((32, 32), np.uint16)
        mask[4:10, 4:10], mask[20:28, 18:30] = 1, 2
        for folder, csv in ((ref, "reference.csv"), (sub, "submission.csv")):
            np.save(folder / "a.npy", mask)
            pd.DataFrame({"image_id": ["a"], "predicted_mask_path": ["a.npy"]}).to_csv(
                folder / csv, index=False)
    run = RunRecord(run_id=f"malformed-{challenge}", agent=replay_agent("m", "x", "p"),
                    task_id=challenge, track=Track.CHALLENGE, status=RunStatus.COMPLETED,
                    pool_url=str(pool), pool_id=challenge, pool_version=1, pool_hash="h")
    return run, sub


@pytest.mark.parametrize("case", CHALLENGE_CASES, ids=[c.name for c in CHALLENGE_CASES])
def test_challenge_case(case: MalformedChallenge, tmp_path: Path) -> None:
    run, sub = _challenge(tmp_path, case.challenge)
    good = kit_for(Track.CHALLENGE).score(run, sub)
    assert good.invalid_reason is None and good.task_score is not None
    case.files(sub)
    before = snapshot(tmp_path)
    card = kit_for(Track.CHALLENGE).score(run, sub)
    assert snapshot(tmp_path) == before
    strict_json(card)
    assert card.task_score is None and card.metrics == {}
    assert card.invalid_reason and case.rule in card.invalid_reason, card.invalid_reason


# --- memory: the bombs in a subprocess ----------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    jobs = json.loads(sys.argv[1])
    from tasks_lib.imaging.registry import imaging_kit
    from tasks_lib.imaging.pool import load_task
    from tasks_lib.tracks import catalog  # the child's composition root: every kit registered
    from tasks_lib.tracks.base import kit_for
    from tasks_lib.records import RunRecord
    from tasks_lib.uploads import copy_submission, submission_digest
    from tasks_lib.storage import Storage
    out = []
    for job in jobs:
        if job["kind"] == "imaging":
            card = load_task(job["task"])
            card = card.model_copy(update={"metrics": [m for m in card.metrics
                                                       if m.name == card.primary_metric]})
            got = imaging_kit(card.track).score_folder(card, job["url"], Path(job["sub"]),
                                                       use_dask=False)
            out.append([c.reason for c in got.per_case if not c.valid])
            submission_digest(Path(job["sub"]))
            copy_submission(Path(job["sub"]), Storage(job["copy"]))
        else:
            got = kit_for("challenge").score(RunRecord.model_validate(job["run"]),
                                             Path(job["sub"]))
            out.append([got.invalid_reason])
    peak = PEAK
    print(json.dumps({"peak_bytes": peak, "reasons": out}))
""").replace("PEAK", PEAK_SNIPPET)  # the child's own peak (ru_maxrss survives fork + exec)


def test_bombs_stay_under_one_gib(built: dict[str, Built], tmp_path: Path) -> None:
    jobs: list[dict[str, object]] = []
    heavy = [c for c in IMAGING_CASES if c.heavy]
    for case in heavy:
        b = built[case.task]
        sub = tmp_path / case.name
        shutil.copytree(b.good, sub)
        case.apply(sub, b.m)
        jobs.append({"kind": "imaging", "task": case.task, "url": b.url, "sub": str(sub),
                     "copy": str(tmp_path / "copies" / case.name)})
    heavy_challenge = [c for c in CHALLENGE_CASES if c.heavy]
    for case in heavy_challenge:
        run, sub = _challenge(tmp_path / case.name, case.challenge)
        case.files(sub)
        jobs.append({"kind": "challenge", "run": run.model_dump(mode="json"), "sub": str(sub)})
    assert len(jobs) >= 10
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(jobs)], capture_output=True,
                          text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["peak_bytes"] < GiB, result["peak_bytes"]
    for case, reasons in zip([*heavy, *heavy_challenge], result["reasons"], strict=True):
        assert any(case.rule in (r or "") for r in reasons) or (
            isinstance(case, Malformed) and case.scope == "extra"), (case.name, reasons)
    copied = tmp_path / "copies" / "brain-tissue-seg-extra-4GiB-sparse"
    assert copied.is_dir() and not (copied / "huge.bin").exists()  # over the cap: not copied
