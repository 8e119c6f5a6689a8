"""Locks that hold (issue 21, point 5): scoring refuses a pool or subset whose locked content
changed, naming the file; an unaudited pool folder is refused for execute and scoring; an
upload's identity covers every entry it holds, and what cannot be stored makes it invalid."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from support.imaging_pools import build_pool
from support.medbench_pool import activate_subset_of, answers_for, write_pool

from evaluators.core import RunStatus, Track
from tasks_lib import pool_lock, scoring
from tasks_lib.agents import upload_agent
from tasks_lib.imaging import steps
from tasks_lib.imaging.baselines import BaselineKind, write_baseline
from tasks_lib.imaging.pool import load_task, read_manifest
from tasks_lib.medbench.items import REFERENCES, SUBMISSION_FILE, read_public_items
from tasks_lib.medbench.items import read_manifest as mb_manifest
from tasks_lib.pool_lock import LOCK_JSON, LockOrigin, PoolUnusableError
from tasks_lib.records import SUBMISSION, RunRecord, read_run, run_store
from tasks_lib.rotation import resolve_pool
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for
from tasks_lib.uploads import register_upload

TASK = "brain-lesion-vqa"
MiB = 1024 * 1024
RACY_S = pool_lock.RACY_NS / 1e9 + 0.05


class HashCounter:
    """Counts the files :mod:`tasks_lib.pool_lock` reads to hash them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        real = pool_lock.file_sha256

        def counted(root: Storage, key: str) -> str:
            self.keys.append(key)
            return real(root, key)

        monkeypatch.setattr(pool_lock, "file_sha256", counted)


@pytest.fixture(scope="module")
def vqa_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    url: str = build_pool(TASK, tmp_path_factory.mktemp("locks"))[0]
    return url


def _medbench_run(subset_url: str, body: str) -> str:
    """Store ``body`` as a MedBench answer upload on the subset (what an accepted upload
    becomes) and record the run; its id."""
    m = mb_manifest(subset_url)
    run = RunRecord(run_id=f"lock-{uuid.uuid4().hex[:10]}", agent=upload_agent("lock-test"),
                    task_id=m.pool_id, track=Track.MEDBENCH, status=RunStatus.COMPLETED,
                    pool_url=subset_url, pool_id=m.pool_id, pool_version=m.version,
                    pool_hash=m.content_hash)
    run_store(run.run_id).child(SUBMISSION).write_text(SUBMISSION_FILE, body)
    scoring.record_run(run)
    return run.run_id


def _swap_letters(path: Path) -> None:
    """Move the gold letter of every single-choice reference one option on (a wrong key)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for r in rows:
        if r.get("letter"):
            r["letter"] = {"A": "B", "B": "C", "C": "D", "D": "A"}[r["letter"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_editing_a_locked_medbench_subset_refuses_the_next_scoring(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = write_pool(Storage(str(tmp_path / "mbpool" / "v1")))
    subset = activate_subset_of(pool, f"lock-sub-{uuid.uuid4().hex[:6]}", size=5)
    assert Storage(subset).exists(LOCK_JSON)
    body = answers_for([it.model_dump() for it in read_public_items(subset)])
    first = scoring.score_one(_medbench_run(subset, body))
    assert first.task_score is not None and first.task_score > 0
    refs = Path(subset) / REFERENCES
    original = refs.read_bytes()
    _swap_letters(refs)
    again = _medbench_run(subset, body)
    with pytest.raises(PoolUnusableError, match=r"private/references\.jsonl: changed since "):
        scoring.score_one(again)
    assert read_run(again).error is not None
    assert "private/references.jsonl" in (read_run(again).error or "")
    with pytest.raises(PoolUnusableError, match=r"references\.jsonl"):
        resolve_pool(subset)  # execute and downloads refuse it too
    refs.write_bytes(original)  # restored: the same upload scores as before, the note cleared
    assert scoring.score_one(again).task_score == first.task_score
    assert read_run(again).error is None
    calls: list[str] = []

    def counted(url: str, digest: str) -> pool_lock.PoolLock:
        calls.append(url)
        return pool_lock.verify_pool(url, digest)

    monkeypatch.setattr(scoring, "verify_pool", counted)
    chunk = scoring.score_chunk([_medbench_run(subset, body) for _ in range(3)])
    assert [c.task_score for c in chunk] == [first.task_score] * 3
    assert calls == [subset]  # one pool version, verified once per chunk


def _upload(pool: str, folder: Path) -> RunRecord:
    m = read_manifest(pool)
    return register_upload(TASK, folder, pool, m.task_id, m.version, m.content_hash,
                           m.track.value, wanted=[c.output for c in m.cases])


@pytest.mark.slow
def test_editing_an_imaging_reference_refuses_and_unchanged_pools_cost_a_stat(
        vqa_pool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = tmp_path / "sub"
    write_baseline(BaselineKind.PERFECT, vqa_pool, sub)
    time.sleep(RACY_S)  # files written in the last second are hashed again (racily clean)
    hashed = HashCounter(monkeypatch)
    first = scoring.score_one(_upload(vqa_pool, sub).run_id)
    lock = pool_lock.read_lock(Storage(vqa_pool))
    assert lock is not None and lock.origin is LockOrigin.PUBLISH
    assert set(hashed.keys) <= set(lock.files)  # the first scoring may hash (fresh files)
    hashed.keys.clear()
    (sub / "note.txt").write_text("another upload, same answers")
    second = scoring.score_one(_upload(vqa_pool, sub).run_id)
    assert second.run_id != first.run_id and second.task_score == first.task_score
    hashed.keys.clear()
    time.sleep(RACY_S)  # whatever the scorings hashed last is cached now
    pool_lock.verify_pool(vqa_pool)
    pool_lock.verify_pool(vqa_pool)
    assert hashed.keys == [] or set(hashed.keys) == set(lock.files)  # at most one re-hash
    hashed.keys.clear()
    pool_lock.verify_pool(vqa_pool)
    assert hashed.keys == []  # an unchanged pool: one stat per file, nothing read
    private = sorted(k for k in lock.files if k.startswith("private/"))
    target = Path(vqa_pool) / private[0]
    os.utime(target)  # touched, same bytes: hashed again until it is older than RACY_NS
    time.sleep(RACY_S)
    pool_lock.verify_pool(vqa_pool)
    pool_lock.verify_pool(vqa_pool)
    assert hashed.keys == [private[0]]
    original = target.read_bytes()
    target.write_bytes(original.replace(b"yes", b"no!", 1) if b"yes" in original
                       else original + b"\n")
    (sub / "note2.txt").write_text("a third upload")
    try:
        with pytest.raises(PoolUnusableError, match=f"{private[0]}: changed since"):
            scoring.score_one(_upload(vqa_pool, sub).run_id)
    finally:
        target.write_bytes(original)


@pytest.fixture(scope="module")
def unaudited_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A pool version written by the construct tail, which was killed before its audit
    gate: no ``audit.json``, no lock, no ledger row."""
    card = load_task(TASK)
    rendered = steps.render.fn(card)
    published = steps.publish.fn(card, str(tmp_path_factory.mktemp("unaudited") / "pool"),
                                 rendered, steps.deidentify_step.fn(card, rendered))
    steps.sample_submission.fn(published.url, published.manifest)
    return published.url


NOT_AUDITED = r"audit\.json: no audit record .* medflows audit pool .*\(medflows pool build"


def test_a_pool_whose_audit_did_not_finish_is_refused(unaudited_pool: str,
                                                      tmp_path: Path) -> None:
    from flows.score import register_upload_step

    sub = tmp_path / "sub"
    write_baseline(BaselineKind.PERFECT, unaudited_pool, sub)
    with pytest.raises(PoolUnusableError, match=NOT_AUDITED):
        register_upload_step.fn(TASK, str(sub), unaudited_pool)  # score submission --pool
    with pytest.raises(PoolUnusableError, match=NOT_AUDITED):
        resolve_pool(unaudited_pool)  # what execute resolves --pool with
    assert not (Path(unaudited_pool) / LOCK_JSON).exists()  # a refused pool is not locked


@pytest.mark.slow
def test_score_submission_cli_refuses_an_unaudited_pool_in_one_line(
        prefect_harness: None, unaudited_pool: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import imaging  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    sub = tmp_path / "sub"
    write_baseline(BaselineKind.PERFECT, unaudited_pool, sub)
    done = CliRunner().invoke(app, ["score", "submission", "--task", TASK, "--submission",
                                    str(sub), "--pool", unaudited_pool, "--json"])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {unaudited_pool}/audit.json: no audit record")
    assert done.stderr.count("\n") == 1 and "medflows audit pool" in done.stderr


def test_audit_records_of_other_content_or_unclean_without_reason_are_refused(
        tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "v1")))  # passed the gate with an override
    pool_lock.require_usable(pool)
    audit = Path(pool) / pool_lock.AUDIT_JSON
    record = json.loads(audit.read_text())
    audit.write_text(json.dumps({**record, "override": None}))
    with pytest.raises(PoolUnusableError, match="not clean and gives no override reason"):
        resolve_pool(pool)
    record["report"]["pool_hash"] = "0" * 64
    audit.write_text(json.dumps(record))
    with pytest.raises(PoolUnusableError, match=r"audit record .* is of other content"):
        resolve_pool(pool)


def test_a_pool_published_before_locks_is_locked_at_first_use(tmp_path: Path) -> None:
    pool = tmp_path / "old"
    shutil.copytree(Path(write_pool(Storage(str(tmp_path / "v1")))), pool)
    (pool / LOCK_JSON).unlink()
    lock = pool_lock.verify_pool(str(pool))
    assert lock.origin is LockOrigin.FIRST_USE and REFERENCES in lock.files
    assert pool_lock.AUDIT_JSON not in lock.files and LOCK_JSON not in lock.files
    (pool / REFERENCES).write_text("")
    with pytest.raises(PoolUnusableError, match=r"references\.jsonl: changed since .* bytes"):
        pool_lock.verify_pool(str(pool))


def test_an_upload_with_an_oversized_file_is_invalid_and_another_run(
        vqa_pool: str, tmp_path: Path) -> None:
    m = read_manifest(vqa_pool)
    clean = tmp_path / "clean"
    write_baseline(BaselineKind.PERFECT, vqa_pool, clean)
    base = _upload(vqa_pool, clean)
    assert base.status is RunStatus.COMPLETED and base.violations == []
    extra = tmp_path / "extra"
    shutil.copytree(clean, extra)
    with (extra / "weights.bin").open("wb") as f:
        f.truncate(5 * 2**30)  # sparse: no disk used
    run = _upload(vqa_pool, extra)
    limit = kit_for(Track.VQA).limits.max_file_bytes
    assert limit < 300 * MiB
    rule = f"weights.bin: {5 * 2**30} bytes, larger than {limit} bytes (rule: file_size)"
    assert run.run_id != base.run_id and run.status is RunStatus.INVALID
    assert run.violations == [rule]
    card = scoring.score_one(run.run_id)
    assert card.invalid_reason == rule and card.task_score is None
    assert _upload(vqa_pool, extra).run_id == run.run_id  # the same folder: the same run
    big = tmp_path / "big-case"
    shutil.copytree(clean, big)
    with (big / m.cases[0].output).open("r+b") as f:
        f.truncate(300 * MiB)
    case_run = _upload(vqa_pool, big)
    card = scoring.score_one(case_run.run_id)
    assert card.invalid_reason == (f"{m.cases[0].output}: {300 * MiB} bytes, larger than "
                                   f"{limit} bytes (rule: file_size)")
    assert "missing" not in card.invalid_reason


def test_entries_that_cannot_be_stored_are_named(vqa_pool: str, tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    write_baseline(BaselineKind.PERFECT, vqa_pool, folder)
    (folder / "nested").mkdir()
    os.mkfifo(folder / "pipe")
    run = _upload(vqa_pool, folder)
    assert run.status is RunStatus.INVALID
    assert sorted(run.violations) == ["nested: not a regular file (rule: files_safe)",
                                      "pipe: not a regular file (rule: files_safe)"]
