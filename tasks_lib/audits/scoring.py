"""Scoring for the audit's checks: a submission folder scored by the track's kit, exactly as the
score flow does, and the plain submissions the checks score (a constant QA letter, an imaging
baseline)."""

from __future__ import annotations

import json
from pathlib import Path

from evaluators.core import RunStatus, Track
from tasks_lib.audits.pool import PoolInfo, qa_rows
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.storage import Storage


def _run(info: PoolInfo, run_id: str) -> RunRecord:
    from tasks_lib.agents import upload_agent

    return RunRecord(run_id=run_id, agent=upload_agent("audit"), task_id=info.task_id,
                     track=info.track, status=RunStatus.COMPLETED, pool_url=info.url,
                     pool_id=info.pool_id, pool_version=info.version, pool_hash=info.pool_hash)


def score_folder(info: PoolInfo, folder: Path, name: str) -> ScoreCard:
    """The track kit's score card of ``folder`` (in process, exactly as the score flow's kit
    call; Dask off for imaging: the values are the same)."""
    from tasks_lib.tracks.base import kit_for

    if info.track is Track.QA:
        return kit_for(info.track).score(_run(info, f"audit-{name}"), folder)
    from tasks_lib.imaging.kit import imaging_kit
    from tasks_lib.imaging.pool import load_task

    return imaging_kit(info.track).score_folder(load_task(info.task_id), info.url, folder,
                                                f"audit-{name}", use_dask=False)


def write_answers(root: Storage, folder: Path, letter: str) -> None:
    """A QA submission in ``folder`` answering ``letter`` to every public item."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"dataset": it.get("dataset"), "realidx": it.get("realidx"), "answer": letter,
             "raw": letter, "calls": 0, "prompt_tokens": None, "completion_tokens": None,
             "time_s": None, "cost_usd": None} for it in qa_rows(root, "public_items")]
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                          encoding="utf-8")


def imaging_baseline(info: PoolInfo, kind: str, folder: Path) -> None:
    """The imaging baseline ``kind`` (``empty``, ``constant``) written as a submission."""
    from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
    from tasks_lib.imaging.pool import read_manifest

    write_submission(baseline_files(BaselineKind(kind), info.url, read_manifest(info.url)),
                     folder)
