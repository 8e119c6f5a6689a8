"""Paired statistics of the MedBench report on scored runs: the stratified bootstrap interval
of each agent's overall and the paired bootstrap tests between adjacent agents equal a direct
``scipy.stats.bootstrap`` / ``statsmodels`` computation whose statistic is written here from the
stored cards' per-item values by plain loops (micro-F1 tasks: F1 of the resampled items' summed
TP/FP/FN); the shared board (``report --pool``) gives the same numbers; the markdown shows the
intervals and the mark; cards scored before per-item counts were stored say so."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from support.medbench_pool import TASKS as HAND_TASKS
from support.medbench_pool import write_pool

from evaluators.core import RunStatus, Track
from evaluators.significance import SEED
from tasks_lib.agents import upload_agent
from tasks_lib.audit import audit_pool, require_clean
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.medbench.items import (
    MANIFEST,
    AnswerType,
    Dimension,
    MedBenchManifest,
    PublicItem,
    Reference,
    TaskEntry,
    read_manifest,
)
from tasks_lib.medbench.report import MedBenchReport, build_report, to_markdown
from tasks_lib.medbench.report_stats import STALE
from tasks_lib.records import RUN_JSON, SUBMISSION, RunRecord, card_key, run_store
from tasks_lib.report import report_board
from tasks_lib.scoring import record_run, score_one
from tasks_lib.storage import Storage
from tasks_lib.tracks.medbench import MedBenchKit

A = AnswerType
TASKS = {"choice": (Dimension.CMR, A.SINGLE_CHOICE, ["shuffled_accuracy"], 10),
         "choice2": (Dimension.CMR, A.SINGLE_CHOICE, ["shuffled_accuracy"], 4),
         "codes": (Dimension.MLU, A.STRING, ["one_minus_ned"], 5),
         "boxes": (Dimension.MM_PERCEPTION, A.REGION, ["iou_set"], 4),
         "single": (Dimension.MM_PERCEPTION, A.STRING, ["one_minus_ned"], 1),
         "open": (Dimension.HSE, A.OPEN_ENDED, ["keypoint_macro_recall", "rubric_judge"], 5),
         "labels": (Dimension.MLU, A.MULTI_LABEL, ["micro_f1"], 6),
         "pairs": (Dimension.MLU, A.EXTRACTION, ["micro_f1"], 3)}
KEY_POINTS = ["fever", "cough", "rash", "nausea"]
LABELS = ["effusion", "nodule", "atelectasis"]


def _ref(task: str, i: int) -> dict[str, Any]:
    kind = TASKS[task][1]
    item = {"item_id": f"{task}-{i}", "task_id": task, "answer_type": kind}
    if kind is A.SINGLE_CHOICE:
        return item | {"letter": "ABCD"[i % 4]}
    if kind is A.STRING:
        return item | {"text": f"I2{i}.4"}
    if kind is A.REGION:
        return item | {"boxes": [[0, 0, 10, 10 + i]]}
    if kind is A.MULTI_LABEL:  # item 0 has no label: an empty answer is right (F1 1)
        return item | {"labels": LABELS[: i % 4]}
    if kind is A.EXTRACTION:
        return item | {"tuples": [["Modality", f"CT {i}"], ["Contrast", "yes"]][: 1 + i % 2]}
    return item | {"text": "ref", "key_points": KEY_POINTS[: 1 + i % 4], "rubric_id": "general_qa"}


def _answer(ref: dict[str, Any], skill: float, rng: np.random.Generator) -> Any:
    """An answer that is right with probability ``skill`` (partly right otherwise)."""
    right = rng.random() < skill
    kind = ref["answer_type"]
    if kind is A.SINGLE_CHOICE:
        return ref["letter"] if right else "E"
    if kind is A.STRING:
        return ref["text"] if right else ref["text"][:2] + "9"
    if kind is A.REGION:
        return ref["boxes"] if right else [[0, 0, 5, 10]]
    if kind in (A.MULTI_LABEL, A.EXTRACTION):
        gold, wrong = (ref["labels"], "wrong") if kind is A.MULTI_LABEL else (ref["tuples"],
                                                                               ["Wrong", "x"])
        return gold if right else (None if rng.random() < 0.3 else [*gold[:1], wrong])
    kept = ref["key_points"] if right else ref["key_points"][:1]
    return None if rng.random() > 0.5 + skill / 2 else " and ".join(kept)


def _pool(pool_id: str) -> str:
    """A pool of per-item metrics only, in the layout of :mod:`support.medbench_pool`."""
    root = Storage.from_settings().child(f"pools/{pool_id}/v1")
    refs = [_ref(t, i) for t, spec in TASKS.items() for i in range(spec[3])]
    items = [PublicItem(item_id=r["item_id"], task_id=r["task_id"],
                        dimension=TASKS[r["task_id"]][0], specialty="x",
                        answer_type=r["answer_type"], prompt=f"prompt {r['item_id']}",
                        answer_schema="s") for r in refs]
    tasks = {t: TaskEntry(dimension=d, specialty="x", answer_type=k, metrics=m, n_items=n,
                          source="hand") for t, (d, k, m, n) in TASKS.items()}
    root.write_jsonl("public/items.jsonl", items)
    root.write_jsonl("private/references.jsonl", [Reference.model_validate(r) for r in refs])
    root.write_json(MANIFEST, MedBenchManifest(
        pool_id=pool_id, version=1, content_hash=uuid.uuid4().hex,
        created_at=datetime(2026, 11, 24, tzinfo=UTC), seed=0, tasks=tasks, n_items=len(refs)))
    require_clean(audit_pool(root.root_url, sandbox=False), None)  # audited: its runs rank
    return root.root_url


def _scored_run(url: str, agent: str, replicate: int, answers: dict[str, Any]) -> str:
    """Record a completed upload-style run with ``answers`` and score it into the ledger."""
    m = read_manifest(url)
    store.record_pool(PoolRow(pool_id=m.pool_id, version=m.version, track="medbench",
                              content_hash=m.content_hash, manifest_url=f"{url}/{MANIFEST}",
                              n_items=m.n_items))
    run_id = f"{m.pool_id}-{agent}-{replicate}"
    lines = "".join(json.dumps({"item_id": k, "answer": v}) + "\n" for k, v in answers.items()
                    if v is not None)
    run_store(run_id).child(SUBMISSION).write_text("predictions.jsonl", lines)
    record_run(RunRecord(run_id=run_id, agent=upload_agent(agent), task_id=m.pool_id,
                         track=Track.MEDBENCH, replicate=replicate, status=RunStatus.COMPLETED,
                         pool_url=url, pool_id=m.pool_id, pool_version=m.version,
                         pool_hash=m.content_hash, n_items=m.n_items))
    score_one(run_id)
    return run_id


class Board(NamedTuple):
    url: str
    report: MedBenchReport
    runs: dict[str, list[str]]


@pytest.fixture(scope="module")
def board() -> Board:
    url = _pool(f"mbstat-{uuid.uuid4().hex[:6]}")
    refs = [_ref(t, i) for t, spec in TASKS.items() for i in range(spec[3])]
    rng = np.random.default_rng(5)
    runs: dict[str, list[str]] = defaultdict(list)
    for agent, skill, replicates in (("strong", 0.95, 2), ("middle", 0.45, 1),
                                     ("close", 0.4, 1)):
        for rep in range(replicates):
            answers = {r["item_id"]: _answer(r, skill, rng) for r in refs}
            runs[f"upload:{agent}"].append(_scored_run(url, agent, rep, answers))
    return Board(url, build_report(url), dict(runs))


CARD = card_key(MedBenchKit.evaluator_version)
"""Where the stored cards are (the version that stores per-item counts)."""


def _cards(run_ids: list[str]) -> list[dict[str, Any]]:
    """The stored cards as plain JSON (read without the code under test)."""
    return [json.loads(run_store(r).read_text(CARD)) for r in run_ids]


def _micro_f1(rows: list[dict[str, float]]) -> float:
    """Micro-F1 of the items ``rows`` from their summed counts: 2TP / (2TP + FP + FN), 1 when
    there is nothing to find and nothing was found."""
    tp, fp, fn = (sum(r[k] for r in rows) for k in ("tp", "fp", "fn"))
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def _direct_overall(cards: list[dict[str, Any]], picks: dict[str, list[str]],
                    tasks: dict[str, tuple[str, list[str]]]) -> float:
    """The agent's overall on the items ``picks`` (task → item ids, repeats allowed): per card,
    each task's metrics as scoring defines them (micro-F1 from the summed counts of the picked
    items), task = 100 × mean of its metrics, dimension = mean of tasks, overall = mean of
    dimensions; then the mean over cards. ``tasks``: task → (dimension, listed metrics)."""
    overalls = []
    for card in cards:
        per_case = {c["case_id"]: c["values"] for c in card["per_case"]}
        by_dim: dict[str, list[float]] = defaultdict(list)
        for task, (dim, listed) in tasks.items():
            rows = [per_case[i] for i in picks[task]]
            metrics = {}
            for name in listed:
                got = [r[name] for r in rows if name in r]
                if name == "micro_f1":
                    metrics[name] = _micro_f1(rows)
                elif got:
                    metrics[name] = sum(got) / len(got)
                elif name == "keypoint_macro_recall":
                    metrics[name] = 0.0
            by_dim[dim].append(100 * sum(metrics.values()) / len(metrics))
        dims = [sum(v) / len(v) for v in by_dim.values()]
        overalls.append(sum(dims) / len(dims))
    return sum(overalls) / len(overalls)


OWN = {t: (d.value, listed) for t, (d, _, listed, _) in TASKS.items()}
IDS = {t: sorted(f"{t}-{i}" for i in range(spec[3])) for t, spec in TASKS.items()}
"""Item ids per task, sorted (the positions the report resamples)."""


VARIED = sorted(t for t, spec in TASKS.items() if spec[3] >= 2)
"""Tasks with 2 or more items, in the order the report draws them (by task id)."""


def _statistic(cards: list[dict[str, Any]]) -> Any:
    def overall(*samples: np.ndarray) -> float:
        picks = {t: [IDS[t][int(x)] for x in s] for t, s in zip(VARIED, samples, strict=True)}
        return _direct_overall(cards, picks | {"single": IDS["single"]}, OWN)
    return overall


def _bootstrap(statistic: Any) -> Any:
    data = tuple(np.arange(TASKS[t][3], dtype=float) for t in VARIED)
    return stats.bootstrap(data, statistic, paired=False, vectorized=False, n_resamples=2000,
                           method="percentile", confidence_level=0.95,
                           rng=np.random.default_rng(SEED))


def test_intervals_and_tests_equal_a_direct_computation(board: Board) -> None:
    rows = {a.agent_id: a for a in board.report.agents}
    order = [a.agent_id for a in board.report.agents if a.rank is not None]
    assert order[0] == "upload:strong" and set(order[1:]) == {"upload:middle", "upload:close"}
    cards = {a: _cards(board.runs[a]) for a in order}
    stat = {a: _statistic(cards[a]) for a in order}
    p_values = []
    for a in order:
        row = rows[a]
        for card in cards[a]:  # the counts give the card's own micro-F1
            rows_of = {c["case_id"]: c["values"] for c in card["per_case"]}
            for task in ("labels", "pairs"):
                assert _micro_f1([rows_of[i] for i in IDS[task]]) == pytest.approx(
                    card["groups"][task]["micro_f1"], abs=1e-12)
        assert _direct_overall(cards[a], IDS, OWN) == pytest.approx(row.overall.mean, abs=1e-9)
        ci = _bootstrap(stat[a]).confidence_interval
        assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high), abs=1e-9)
        assert row.n_items == sum(spec[3] for spec in TASKS.values()) and row.ci_reason is None
        assert row.ci_low < row.overall.mean < row.ci_high
    for a, b in pairwise(order):
        d = _bootstrap(lambda *s, a=a, b=b: stat[a](*s) - stat[b](*s)).bootstrap_distribution
        p = min(1.0, 2 * min((np.sum(d <= 0) + 1) / 2001, (np.sum(d >= 0) + 1) / 2001))
        assert rows[a].p_value == pytest.approx(p) and rows[a].test == "paired-bootstrap"
        assert rows[a].paired_difference == pytest.approx(
            rows[a].overall.mean - rows[b].overall.mean)
        assert rows[a].vs_next_agent == b and rows[a].n_pairs == rows[a].n_items
        p_values.append(p)
    reject, adjusted, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    assert [rows[a].p_adjusted for a in order[:-1]] == pytest.approx(list(adjusted))
    assert [rows[a].significant for a in order[:-1]] == list(reject)
    assert list(reject) == [True, False]  # strong ≫ middle; middle ≈ close
    assert rows[order[-1]].p_value is None and rows[order[-1]].vs_next_agent is None


def test_markdown_shows_intervals_and_marks(board: Board) -> None:
    text = to_markdown(board.report)
    top, second = board.report.agents[0], board.report.agents[1]
    assert f"| [{top.ci_low:.1f}, {top.ci_high:.1f}] | {top.p_adjusted:.2g} * |" in text
    assert f"| [{second.ci_low:.1f}, {second.ci_high:.1f}] | {second.p_adjusted:.2g} |" in text
    assert "stratified bootstrap percentile interval" in text and "No interval" not in text


def test_shared_board_gives_medbench_rows_the_same_statistics(board: Board) -> None:
    rows = {r.agent_id: r for r in report_board(pool=board.url, matrix=False).rows}
    assert len(rows) == len(board.report.agents)
    for a in board.report.agents:
        shared = rows[a.agent_id]
        assert shared.task_score == pytest.approx(a.overall.mean) and shared.rank == a.rank
        assert (shared.ci_low, shared.ci_high, shared.n_items, shared.ci_reason) == (
            a.ci_low, a.ci_high, a.n_items, None)
        assert (shared.vs_next_agent, shared.p_value, shared.p_adjusted, shared.test) == (
            a.vs_next_agent, a.p_value, a.p_adjusted, a.test)


def _hand_pool() -> str:
    pool_id = f"mbws-{uuid.uuid4().hex[:6]}"
    return write_pool(Storage.from_settings().child(f"pools/{pool_id}/v1"), pool_id=pool_id)


HAND: dict[str, dict[str, Any]] = {
    "one": {"q1#s0": "A", "q1#s1": "B", "s1": "I21.4-secretcode", "m1": ["effusion"],
            "e1": [["Modality", "computed tomography series"], ["Contrast", "no"]]},
    "two": {"q1#s0": "A", "m1": ["pleural effusion left side"]}}
"""Answers on the hand-written pool (its micro-F1 tasks findings and header: one item each)."""


def test_micro_f1_tasks_of_the_hand_written_pool_get_intervals() -> None:
    url = _hand_pool()
    runs = {a: _scored_run(url, a, 0, answers) for a, answers in HAND.items()}
    report = build_report(url)  # the fixture pool is audit-flagged: credited, not ranked
    items = {it["item_id"]: it["task_id"] for it in Storage(url).read_jsonl(
        "public/items.jsonl")}
    ids = {t: sorted(i for i, task in items.items() if task == t) for t in HAND_TASKS}
    tasks = {t: (d, m) for t, (d, _, _, m) in HAND_TASKS.items()}
    assert len(report.agents) == 2
    for row in report.agents:
        cards = _cards([runs[row.agent_id.removeprefix("upload:")]])
        for task in ("findings", "header"):
            assert cards[0]["groups"][task]["micro_f1"] == pytest.approx(
                _micro_f1([c["values"] for c in cards[0]["per_case"] if c["case_id"] in ids[task]]))
        assert _direct_overall(cards, ids, tasks) == pytest.approx(row.overall.mean, abs=1e-9)

        def overall(sample: np.ndarray, cards: list[dict[str, Any]] = cards) -> float:
            return _direct_overall(cards, ids | {"mcq": [ids["mcq"][int(x)] for x in sample]},
                                   tasks)
        ci = stats.bootstrap((np.arange(2.0),), overall, vectorized=False, n_resamples=2000,
                             method="percentile", confidence_level=0.95,
                             rng=np.random.default_rng(SEED)).confidence_interval
        assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high), abs=1e-9)
        assert row.ci_reason is None and row.n_items == len(items) and row.p_value is None
        assert row.ci_low < row.ci_high  # one MCQ shuffle right, one not


def test_cards_without_per_item_counts_say_so() -> None:
    url = _hand_pool()
    run_id = _scored_run(url, "old", 0, HAND["one"])
    card = json.loads(run_store(run_id).read_text(CARD))
    for case in card["per_case"]:  # as a card scored before the counts were stored
        case["values"] = {k: v for k, v in case["values"].items() if k not in ("tp", "fp", "fn")}
    run_store(run_id).write_text(CARD, json.dumps(card))
    (row,) = build_report(url).agents
    assert row.overall.mean is not None and row.ci_low is None and row.ci_high is None
    assert row.ci_reason == f"findings, header (micro-F1): {STALE}"
    assert STALE == "scored before per-item counts were stored (re-score)"
    assert to_markdown(build_report(url)).count(f"No interval: findings, header (micro-F1): "
                                                f"{STALE}.") == 1
    (shared,) = report_board(pool=url, matrix=False).rows  # the shared board: the same reason
    assert shared.ci_low is None and shared.ci_reason == row.ci_reason
    Path(run_store(run_id).path(RUN_JSON)).unlink()  # ledger rows without the stored run
    (shared,) = report_board(pool=url, matrix=False).rows
    assert shared.ci_reason == f"no stored run record: {run_id}"
