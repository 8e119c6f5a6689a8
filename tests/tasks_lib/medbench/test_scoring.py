"""The MedBench kit on a hand-built pool: metric by answer type, task → dimension → overall,
missing items, a malformed submission, judge errors recorded (never 0)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import FakeOpenAIServer

from evaluators.core import InvalidSubmissionError, RunStatus, Track
from tasks_lib.agents import upload_agent
from tasks_lib.medbench.items import (
    AnswerType,
    Dimension,
    MedBenchManifest,
    PublicItem,
    Reference,
    TaskEntry,
)
from tasks_lib.medbench.scoring import score_predictions
from tasks_lib.records import RunRecord
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for

A = AnswerType
TASKS = {"t-choice": (Dimension.CMR, A.SINGLE_CHOICE, ["shuffled_accuracy"]),
         "t-labels": (Dimension.MLU, A.MULTI_LABEL, ["micro_f1"]),
         "t-string": (Dimension.MLU, A.STRING, ["one_minus_ned"]),
         "t-region": (Dimension.MM_PERCEPTION, A.REGION, ["iou_set"]),
         "t-open": (Dimension.HSE, A.OPEN_ENDED, ["keypoint_macro_recall", "rubric_judge"])}
REFS: list[dict[str, Any]] = [
    {"item_id": "t-choice/q#s0", "letter": "C"}, {"item_id": "t-choice/q#s1", "letter": "A"},
    {"item_id": "t-labels/1", "labels": ["a", "b", "c"]}, {"item_id": "t-labels/2",
                                                           "labels": ["e"]},
    {"item_id": "t-labels/3", "labels": []},
    {"item_id": "t-string/1", "text": "kitten"},
    {"item_id": "t-region/1", "boxes": [[0, 0, 10, 10]]},
    {"item_id": "t-open/1", "text": "ref", "key_points": ["fever", "cough", "rash", "nausea"],
     "rubric_id": "general_qa"},
    {"item_id": "t-open/2", "text": "ref", "key_points": ["insulin"], "rubric_id": "general_qa"},
]
ANSWERS = {"t-choice/q#s0": "C", "t-choice/q#s1": "C.", "t-labels/1": ["a", "b", "d"],
           "t-labels/2": [], "t-labels/3": ["f"], "t-string/1": "sitting",
           "t-region/1": [[0, 0, 10, 5]], "t-open/1": "fever, cough and a rash"}


def _pool(root: Path) -> str:
    store = Storage(str(root))
    refs, items = [], []
    for r in REFS:
        task = r["item_id"].split("/")[0]
        dim, kind, _ = TASKS[task]
        refs.append(Reference.model_validate({"task_id": task, "answer_type": kind, **r}))
        items.append(PublicItem(item_id=r["item_id"], task_id=task, dimension=dim,
                                specialty="x", answer_type=kind, prompt=f"prompt {r['item_id']}",
                                answer_schema="s"))
    tasks = {t: TaskEntry(dimension=d, specialty="x", answer_type=k, metrics=m,
                          n_items=sum(r.task_id == t for r in refs), source="hand")
             for t, (d, k, m) in TASKS.items()}
    manifest = MedBenchManifest(pool_id="hand", version=1, content_hash="h",
                                created_at=datetime.now(UTC), seed=0, tasks=tasks,
                                n_items=len(refs))
    store.write_jsonl("public/items.jsonl", items)
    store.write_jsonl("private/references.jsonl", refs)
    store.write_json("manifest.json", manifest)
    return store.root_url


def _run(url: str) -> RunRecord:
    return RunRecord(run_id="r", agent=upload_agent("t"), task_id="hand", track=Track.MEDBENCH,
                     status=RunStatus.COMPLETED, pool_url=url, pool_id="hand", pool_version=1,
                     pool_hash="h")


def _submit(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_hand_computed_card(tmp_path: Path) -> None:
    url = _pool(tmp_path / "pool")
    sub = _submit(tmp_path / "sub", [json.dumps({"item_id": k, "answer": v})
                                     for k, v in ANSWERS.items()])
    card = kit_for(Track.MEDBENCH).score(_run(url), sub)
    g = card.groups
    assert g["t-choice"]["score"] == 50.0  # C right, "C." where gold is A wrong
    assert g["t-labels"]["micro_f1"] == 0.5 and g["t-string"]["score"] == 50.0
    assert g["t-region"]["score"] == 50.0
    # open: recall (3/4 + 0 for the missing item)/2; rules judge round(5·3/4)=4 → 0.8 (the
    # missing item is not judged); task = mean of both
    assert g["t-open"]["keypoint_macro_recall"] == 0.375 and g["t-open"]["rubric_judge"] == 0.8
    assert g["t-open"]["score"] == pytest.approx(58.75)
    assert g["dimension/MLU"]["score"] == 50.0 and g["dimension/HSE"]["score"] == 58.75
    assert card.task_score == pytest.approx((50 + 50 + 58.75 + 50) / 4)
    assert card.metrics["overall/llm"] == pytest.approx((50 + 58.75 + 50) / 3)
    assert card.metrics["overall/multimodal"] == 50.0
    assert card.metrics["acc_all_variants"] == 0.0
    assert card.coverage == pytest.approx(8 / 9)
    missing = next(c for c in card.per_case if c.case_id == "t-open/2")
    assert not missing.valid and missing.reason == "no answer"


def test_malformed_line_refuses_the_submission(tmp_path: Path) -> None:
    url = _pool(tmp_path / "pool")
    sub = _submit(tmp_path / "sub", ['{"item_id": "t-string/1", "answer": "x"}',
                                     '{"item_id": "t-string/1", "answer": {"no": 1}}'])
    with pytest.raises(InvalidSubmissionError, match=r"predictions.jsonl:2: answer: must be"):
        kit_for(Track.MEDBENCH).score(_run(url), sub)


def test_unreadable_judgements_are_errors_not_zero(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.medbench.items import (
        read_manifest,
        read_predictions,
        read_public_items,
        read_references,
    )

    url = _pool(tmp_path / "pool")
    sub = _submit(tmp_path / "sub", [json.dumps({"item_id": k, "answer": v})
                                     for k, v in ANSWERS.items()]
                  + [json.dumps({"item_id": "t-open/2", "answer": "insulin"})])

    def judge(body: dict[str, Any]) -> str:
        return "<score>4</score>" if "t-open/2" in body["messages"][0]["content"] else "great"

    with FakeOpenAIServer(judge) as srv:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", srv.base_url)
        reset_settings()
        try:
            scored = score_predictions(read_manifest(url), read_public_items(url),
                                       read_references(url),
                                       read_predictions(Storage(str(sub))), "openai/judge")
        finally:
            reset_settings()
    g = scored.groups["t-open"]
    assert g["judge_errors"] == 1.0 and g["rubric_judge"] == 0.8  # only t-open/2 judged
    assert scored.metrics["judge_errors"] == 1.0
    assert scored.judge_errors["t-open/1"].startswith("judge_error")
    assert any("no judge value" in n for n in scored.notes)
