"""The RWE kit scores a stored run from its files and the pool alone (no database once the id
index is stored, no agent): metrics, SR after screening, invalid runs, hidden fields."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evaluators.core import Track
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.domain import RunStatus
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.rwe.pool_files import POOL_FILES, RWEPoolManifest, cohort_key
from tasks_lib.rwe.session import SessionRecord
from tasks_lib.rwe.types import SchemaNames
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for
from tests.tasks_lib.rwe.study_fixture import make_study

STUDY, KEY = make_study()
REFERENCE = pd.DataFrame({"subject_id": range(10000001, 10000011), "anchor_age": range(40, 50)})
RIGHT = {"q1": "A", "n": 10, "female": 50.0, "or": 0.6, "or_lo": 0.45, "or_hi": 0.8,
         "p": "0.002"}


@pytest.fixture
def pool(tmp_path: Path) -> str:
    root = Storage(str(tmp_path / "pool"))
    root.write_jsonl(POOL_FILES["studies"], [STUDY])
    root.write_jsonl(POOL_FILES["answers"], [KEY])
    root.write_bytes(cohort_key("tiny"), REFERENCE.to_csv(index=False).encode())
    digest = f"kit-test-{tmp_path.name}"
    manifest = RWEPoolManifest(pool_id="tiny-pool", version=1, content_hash=digest,
                               table_hashes={}, seed=0, n_patients=20, database="none",
                               schemas=SchemaNames(), studies=["tiny"], created_at="2026",
                               files=POOL_FILES)
    root.write_json("manifest.json", manifest.model_dump(mode="json"))
    index = {"subjects": list(range(10000001, 10000021)), "admissions": [], "stays": []}
    Storage.from_settings().child("rwe").child("index").write_text(f"{digest}.json",
                                                                    json.dumps(index))
    return root.root_url


def score(tmp_path: Path, pool: str, answers: dict[str, object], cohort: pd.DataFrame,
          status: RunStatus = RunStatus.COMPLETED) -> ScoreCard:
    sub = tmp_path / "submission"
    sub.mkdir(exist_ok=True)
    record = SessionRecord(study_id="tiny", answers=answers, order=list(answers), steps=4,  # type: ignore[arg-type]
                           cohort_sha256="x")
    (sub / "answers.json").write_text(record.model_dump_json())
    cohort.to_csv(sub / "cohort.csv", index=False)
    run = RunRecord(run_id="run-kit", task_id="tiny", track=Track.RWE, status=status,
                    agent=AgentSpec(agent_id="a", harness=Harness.SCRIPTED, model="scripted"),
                    pool_url=pool, pool_id="tiny-pool", pool_version=1,
                    pool_hash=json.loads(Path(pool, "manifest.json").read_text())["content_hash"],
                    turns=4, sandbox="local", judge_model="rules",
                    violations=["database_access: permission denied for table pg_authid"]
                    if status is RunStatus.INVALID else [])
    return kit_for(Track.RWE).score(run, sub)


def test_right_answers_and_cohort_score_sr_1(tmp_path: Path, pool: str) -> None:
    card = score(tmp_path, pool, RIGHT, REFERENCE)
    m = card.metrics
    assert (m["rwe_acc"], m["rwe_rar"], m["rwe_smr"], m["rwe_sr"], m["rwe_cr"]) == (1, 1, 1, 1, 1)
    assert (m["rwe_steps"], m["rwe_sr_screened"], m["cohort_precision"]) == (4, 1, 1)
    assert card.task_score == 1.0 and card.primary_metric == "rwe_sr"


def test_a_fabricated_id_fails_sr_after_screening(tmp_path: Path, pool: str) -> None:
    cohort = pd.concat([REFERENCE, pd.DataFrame({"subject_id": [19999999], "anchor_age": [50]})])
    card = score(tmp_path, pool, RIGHT, cohort)
    m = card.metrics
    assert m["rwe_sr"] == 1.0 and m["rwe_sr_screened"] == 0.0 and m["cohort_valid"] == 0.0
    assert m["cohort_precision"] == 10 / 11 and m["cohort_recall"] == 1.0
    assert any("fabricated_ids: 1 row(s)" in n and "19999999" in n for n in card.notes)


def test_wrong_gate_and_invalid_run(tmp_path: Path, pool: str) -> None:
    card = score(tmp_path, pool, {"q1": "B", "n": 10, "female": 50.0}, REFERENCE)
    m = card.metrics
    assert (m["rwe_acc"], m["rwe_rar"], m["rwe_smr"], m["rwe_sr"], m["rwe_cr"]) == (0, 0, 0, 0, 1)
    assert any(n.startswith("hidden") and "or_lo" in n for n in card.notes)
    invalid = score(tmp_path, pool, RIGHT, REFERENCE, RunStatus.INVALID)
    assert invalid.metrics["rwe_sr"] == 0.0
    assert (invalid.invalid_reason or "").startswith("isolation: database_access")
