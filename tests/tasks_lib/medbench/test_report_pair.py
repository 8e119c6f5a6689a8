"""``medflows report medbench --pair BASE AGENT`` on real scored runs in the test ledger: the
per-dimension and overall scores and differences of a hand-computable case, the paired
bootstrap interval and p equal a direct ``scipy.stats.bootstrap`` over base questions whose
statistic is written here by plain loops, Holm over the dimensions equals ``statsmodels``;
items one run left unanswered and items only one pool version has are listed; backbones are
compared; the error cases; the command through the CLI (JSON, markdown, HTML)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from support.cli import invoke, invoke_json

from evaluators.core import RunStatus, Track
from evaluators.significance import SEED, SignificanceSettings
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.audit import audit_pool, require_clean
from tasks_lib.errors import InputDataError
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
)
from tasks_lib.medbench.report_pair import MedBenchPair, build_pair
from tasks_lib.medbench.report_pair_view import to_markdown
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.scoring import record_run, score_one
from tasks_lib.storage import Storage

A = AnswerType
CHOICE = [f"choice-q{q}#s{k}" for q in range(4) for k in range(2)]
SAFETY = [f"safety-q{q}#s0" for q in range(3)]
CODES = [f"codes-{i}" for i in range(4)]
LABELS = {"labels-0": ["effusion"], "labels-1": ["effusion", "nodule"], "labels-2": []}
TASKS = {"choice": (Dimension.CMR, A.SINGLE_CHOICE, ["shuffled_accuracy"], CHOICE),
         "codes": (Dimension.MLU, A.STRING, ["one_minus_ned"], CODES),
         "labels": (Dimension.MLU, A.MULTI_LABEL, ["micro_f1"], list(LABELS)),
         "safety": (Dimension.HSE, A.SINGLE_CHOICE, ["shuffled_accuracy"], SAFETY)}
LETTER = {i: "ABCD"[n % 4] for n, i in enumerate(
    [*CHOICE, *SAFETY, "choice-q9#s0", "choice-q9#s1", "other-q0#s0", "other-q1#s0"])}
"""The gold letter of each single-choice item (of every pool version here)."""
RIGHT: dict[str, Any] = {**{i: LETTER[i] for i in CHOICE + SAFETY},
                         **{c: f"I2{c[-1]}.4" for c in CODES}, **LABELS}
"""Every item's right answer."""
BASE = {**RIGHT, "choice-q1#s1": "E", "choice-q2#s0": "E", "choice-q2#s1": "E",
        "choice-q3#s0": None, "choice-q3#s1": None, **dict.fromkeys(SAFETY, "E")}
"""Base: CMR 3 of 8 shuffles right (37.5; q3 unanswered), HSE 0, MLU 100: overall 45.83."""
AGENT = {**RIGHT, "codes-3": None}
"""Agent: CMR 100, HSE 100, MLU (75 + 100) / 2 = 87.5: overall 95.83; Δ = 50."""


def _pool(pool_id: str, version: int = 1, tasks: dict[str, Any] = TASKS) -> str:
    """A MedBench pool version of the ``tasks`` (items named by their ids), audited."""
    root = Storage.from_settings().child(f"pools/{pool_id}/v{version}")
    items, refs = [], []
    for task, (dim, kind, _, ids) in tasks.items():
        for i in ids:
            items.append(PublicItem(item_id=i, task_id=task, dimension=dim, specialty="x",
                                    answer_type=kind, prompt=f"prompt {i}", answer_schema="s"))
            ref: dict[str, Any] = {"item_id": i, "task_id": task, "answer_type": kind}
            ref |= ({"letter": LETTER[i]} if kind is A.SINGLE_CHOICE else {"labels": LABELS[i]}
                    if kind is A.MULTI_LABEL else {"text": RIGHT[i]})
            refs.append(Reference.model_validate(ref))
    root.write_jsonl("public/items.jsonl", items)
    root.write_jsonl("private/references.jsonl", refs)
    entries = {t: TaskEntry(dimension=d, specialty="x", answer_type=k, metrics=m,
                            n_items=len(ids), source="hand")
               for t, (d, k, m, ids) in tasks.items()}
    manifest = MedBenchManifest(pool_id=pool_id, version=version, content_hash=uuid.uuid4().hex,
                                created_at=datetime(2026, 12, 1, tzinfo=UTC), seed=0,
                                tasks=entries, n_items=len(items))
    root.write_json(MANIFEST, manifest)
    require_clean(audit_pool(root.root_url, sandbox=False), None)
    store.record_pool(PoolRow(pool_id=pool_id, version=version, track="medbench",
                              content_hash=manifest.content_hash,
                              manifest_url=f"{root.root_url}/{MANIFEST}", n_items=len(items)))
    return root.root_url


def _run(url: str, agent: str, model: str, answers: dict[str, Any], replicate: int = 0,
         score: bool = True, status: RunStatus = RunStatus.COMPLETED) -> str:
    """A completed run of ``agent`` (backbone ``model``) answering ``answers``, scored."""
    m = MedBenchManifest.model_validate(Storage(url).read_json(MANIFEST))
    run_id = f"{m.pool_id}-v{m.version}-{agent}-{replicate}"
    lines = "".join(json.dumps({"item_id": k, "answer": v}) + "\n" for k, v in answers.items()
                    if v is not None)  # items not in the pool version: ignored by scoring
    run_store(run_id).child(SUBMISSION).write_text("predictions.jsonl", lines)
    spec = AgentSpec(agent_id=agent, harness=Harness.UPLOAD, model=model, method="hand")
    record_run(RunRecord(run_id=run_id, agent=spec, task_id=m.pool_id, track=Track.MEDBENCH,
                         replicate=replicate, status=status, pool_url=url,
                         pool_id=m.pool_id, pool_version=m.version, pool_hash=m.content_hash,
                         n_items=m.n_items))
    if score:
        score_one(run_id)
    return run_id


OTHER = {"other": (Dimension.MKQA, A.SINGLE_CHOICE, ["shuffled_accuracy"], ["other-q0#s0",
                                                                           "other-q1#s0"])}
"""A task with no item in common with :data:`TASKS`."""


class Ledger(NamedTuple):
    url: str
    pool_id: str
    base: str
    agent: str
    pair: MedBenchPair


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    pool_id = f"mbpair-{uuid.uuid4().hex[:6]}"
    url = _pool(pool_id)
    base = _run(url, "base-chat", "gpt-4o-mini", BASE)
    agent = _run(url, "tool-agent", "openai/gpt-4o-mini", AGENT)
    return Ledger(url, pool_id, base, agent, build_pair(base, agent))


def test_hand_computed_scores_and_differences(ledger: Ledger) -> None:
    pair = ledger.pair
    rows = {r.scope: r for r in [pair.overall, *pair.dimensions]}
    assert list(rows) == ["overall", "CMR", "HSE", "MLU"]
    expected = {"overall": (45.8333333, 95.8333333, 50.0), "CMR": (37.5, 100.0, 62.5),
                "HSE": (0.0, 100.0, 100.0), "MLU": (100.0, 87.5, -12.5)}
    for scope, (b, a, d) in expected.items():
        assert (rows[scope].base, rows[scope].agent, rows[scope].difference) == pytest.approx(
            (b, a, d), abs=1e-6)
    assert pair.base.overall == pytest.approx(45.8333333) and pair.agent.overall == (
        pytest.approx(95.8333333))  # the cards' own overall: every item is paired
    assert (rows["CMR"].n_items, rows["CMR"].n_questions) == (8, 4)
    assert (rows["overall"].n_items, rows["overall"].n_questions) == (18, 14)
    assert pair.only_agent_answered == ["choice-q3#s0", "choice-q3#s1"]
    assert pair.only_base_answered == ["codes-3"]
    assert (rows["CMR"].only_agent_answered, rows["MLU"].only_base_answered) == (2, 1)
    assert rows["overall"].both_answered == 15 and rows["overall"].neither_answered == 0
    assert pair.only_in_base == pair.only_in_agent == [] and pair.n_paired_items == 18
    assert pair.backbone_match is True and pair.warnings == []
    assert (pair.base.backbone, pair.agent.backbone) == ("gpt-4o-mini", "gpt-4o-mini")


def _question_values(answers: dict[str, Any], ids: list[str]) -> list[float]:
    """Per base question: the share of its shuffles answered right (by hand, from the
    answers)."""
    by_q: dict[str, list[float]] = {}
    for i in ids:
        by_q.setdefault(i.split("#s")[0], []).append(float(answers[i] == LETTER[i]))
    return [sum(v) / len(v) for v in by_q.values()]


def _direct(strata: dict[str, list[float]], statistic: Any) -> Any:
    """``scipy.stats.bootstrap`` of ``statistic`` over the units of each stratum (one sample
    per stratum in task order, resampled on its own), as the report's settings say."""
    data = tuple(np.arange(len(v), dtype=float) for v in strata.values())
    return stats.bootstrap(data, statistic, paired=False, vectorized=False, n_resamples=2000,
                           method="percentile", confidence_level=0.95,
                           rng=np.random.default_rng(SEED))


def _p(distribution: np.ndarray) -> float:
    below = (np.sum(distribution <= 0) + 1) / 2001
    above = (np.sum(distribution >= 0) + 1) / 2001
    return float(min(1.0, 2 * min(below, above)))


def test_interval_p_and_holm_equal_a_direct_computation(ledger: Ledger) -> None:
    rows = {r.scope: r for r in ledger.pair.dimensions}
    cmr = np.subtract(_question_values(AGENT, CHOICE), _question_values(BASE, CHOICE))
    codes = np.array([float(AGENT[c] is not None) - 1.0 for c in CODES])  # base: all right
    diffs = {"CMR": {"choice": cmr}, "HSE": {"safety": np.ones(3)},
             "MLU": {"codes": codes, "labels": np.zeros(3)}}  # labels: both perfect
    p_values = []
    for scope, strata in diffs.items():
        def dim(*samples: np.ndarray, strata: dict[str, np.ndarray] = strata) -> float:
            return float(np.mean([100 * np.mean(v[s.astype(int)])
                                  for v, s in zip(strata.values(), samples, strict=True)]))
        res = _direct(strata, dim)
        row = rows[scope]
        assert (row.ci_low, row.ci_high) == pytest.approx(
            (res.confidence_interval.low, res.confidence_interval.high), abs=1e-9)
        assert row.ci_low <= row.difference <= row.ci_high
        assert row.p_value == pytest.approx(_p(res.bootstrap_distribution))
        assert row.test == "paired-bootstrap" and row.reason is None
        p_values.append(row.p_value)
    assert (rows["HSE"].ci_low, rows["HSE"].ci_high, rows["HSE"].p_value) == pytest.approx(
        (100.0, 100.0, 2 / 2001))  # every question differs by 100: every resample does
    reject, adjusted, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    assert [rows[d].p_adjusted for d in diffs] == pytest.approx(list(adjusted))
    assert [rows[d].significant for d in diffs] == [bool(r) for r in reject] == [
        True, True, False]
    order = sorted(diffs, key=lambda d: rows[d].p_value or 0)  # Holm's step-down order
    assert order == ["HSE", "CMR", "MLU"] and rows["HSE"].p_adjusted == pytest.approx(
        3 * rows["HSE"].p_value)

    def overall(c: np.ndarray, k: np.ndarray, _l: np.ndarray, s: np.ndarray) -> float:
        mlu = (100 * np.mean(codes[k.astype(int)]) + 0.0) / 2
        return float((100 * np.mean(cmr[c.astype(int)]) + 100.0 + mlu) / 3)
    res = _direct({"choice": cmr, "codes": codes, "labels": np.zeros(3), "safety": np.ones(3)},
                  overall)
    top = ledger.pair.overall
    assert (top.ci_low, top.ci_high) == pytest.approx(
        (res.confidence_interval.low, res.confidence_interval.high), abs=1e-9)
    assert top.p_value == pytest.approx(_p(res.bootstrap_distribution))
    assert top.p_adjusted is None and top.significant is True


def test_agent_ids_resolve_to_their_newest_scored_run(ledger: Ledger) -> None:
    newer = _run(ledger.url, "tool-agent", "gpt-4o-mini", RIGHT, replicate=1)
    _run(ledger.url, "tool-agent", "gpt-4o-mini", BASE, replicate=2, score=False)  # unscored
    pair = build_pair("base-chat", "tool-agent", ledger.url,
                      settings=SignificanceSettings(n_resamples=200, seed=1))
    assert (pair.base.run_id, pair.agent.run_id) == (ledger.base, newer)
    assert pair.agent.resolved == "newest scored run of the agent on the pool"
    assert pair.overall.difference == pytest.approx(100 - 45.8333333)
    assert pair.statistics.n_resamples == 200 and pair.only_base_answered == []
    with pytest.raises(InputDataError, match="tool-agent is an agent id: give --pool POOL"):
        build_pair(ledger.base, "tool-agent")


def test_versions_of_one_pool_pair_on_their_common_items(ledger: Ledger) -> None:
    v2 = {"choice": (*TASKS["choice"][:3], [*CHOICE[1:4], "choice-q9#s0", "choice-q9#s1"]),
          "safety": TASKS["safety"]}
    run = _run(_pool(ledger.pool_id, 2, v2), "v2-agent", "gpt-4o", RIGHT)
    pair = build_pair(ledger.base, run)
    assert [r.scope for r in pair.dimensions] == ["CMR", "HSE"]
    cmr = pair.dimensions[0]
    assert (cmr.n_items, cmr.n_questions) == (3, 3)  # q0 has 1 shuffle in common, q1 2
    assert (cmr.base, cmr.agent) == (pytest.approx(200 / 3), pytest.approx(100.0))
    assert pair.notes == ["choice: its questions have unequal numbers of common shuffles, so "
                          "its evaluation items are resampled one by one"]
    assert pair.only_in_agent == ["choice-q9#s0", "choice-q9#s1"]
    assert pair.only_in_base == sorted([CHOICE[0], *CHOICE[4:], *CODES, *LABELS])
    assert pair.backbone_match is False
    assert any(w.startswith("backbones differ: base gpt-4o-mini") for w in pair.warnings)
    assert any("different versions of" in w for w in pair.warnings)
    disjoint = _run(_pool(ledger.pool_id, 3, OTHER), "v3-agent", "gpt-4o-mini", {})
    with pytest.raises(InputDataError, match=f"runs {ledger.base} and {disjoint} have no "
                                             "common items"):
        build_pair(ledger.base, disjoint)


def test_errors_name_what_is_wrong(ledger: Ledger) -> None:
    with pytest.raises(InputDataError, match="base: no run or agent 'nope' in the ledger"):
        build_pair("nope", ledger.agent)
    unscored = _run(ledger.url, "late", "gpt-4o-mini", RIGHT, score=False)
    with pytest.raises(InputDataError, match=f"run {unscored} is not scored yet \\(score it: "
                                             f"medflows score --run {unscored}\\)"):
        build_pair(ledger.base, unscored)
    elsewhere = _run(_pool(f"mbpair-other-{uuid.uuid4().hex[:4]}"), "x", "gpt-4o-mini", RIGHT)
    with pytest.raises(InputDataError, match="the runs used different pools"):
        build_pair(ledger.base, elsewhere)
    failed = _run(ledger.url, "refused", "gpt-4o-mini", RIGHT, status=RunStatus.INVALID)
    with pytest.raises(InputDataError, match=f"agent run {failed}: the submission was refused "
                                             "when it was stored: an uncredited run has no "
                                             "score to compare"):
        build_pair(ledger.base, failed)
    with pytest.raises(InputDataError, match="is the base run"):
        build_pair(ledger.base, ledger.base)
    with pytest.raises(InputDataError, match=r"ran on .* not on --pool"):
        build_pair(ledger.base, elsewhere, pool=ledger.url)


def test_cli_json_markdown_and_html(ledger: Ledger, tmp_path: Path) -> None:
    got = invoke_json("report", "medbench", "--pair", ledger.base, ledger.agent, "--json",
                      "--resamples", "500", "--seed", "3", "--html", str(tmp_path / "site"))
    assert got["statistics"]["n_resamples"] == 500 and got["statistics"]["seed"] == 3
    assert got["backbone_match"] is True and got["overall"]["difference"] == pytest.approx(50)
    assert set(got["overall"]) >= {"n_items", "base", "agent", "difference", "ci_low",
                                   "ci_high", "p_value", "p_adjusted", "significant"}
    page = Path(got["html"])
    text = page.read_text(encoding="utf-8")
    assert page.parent.name == "medbench" and "+62.5" in text and "choice-q3#s0" in text
    assert f'href="../runs/{ledger.base}.html"' in text
    assert (tmp_path / "site" / "runs" / f"{ledger.base}.html").exists()
    out = invoke("report", "medbench", "--pair", ledger.base, ledger.agent)
    assert out.exit_code == 0, out.output
    assert out.stdout == to_markdown(ledger.pair)
    assert "| CMR | 8 | 4 | 37.5 | 100.0 | +62.5 |" in out.stdout
    other = _run(ledger.url, "other-backbone", "anthropic/claude-sonnet-4-5", RIGHT)
    out = invoke("report", "medbench", "--pair", ledger.base, other, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["backbone_match"] is False
    assert "warning: backbones differ: base gpt-4o-mini" in out.stderr
    bad = invoke("report", "medbench", "--pair", ledger.base, "nope")
    assert bad.exit_code == 2 and "error: agent: no run or agent 'nope'" in bad.stderr
    bad = invoke("report", "medbench", "--seed", "3", "--pool", ledger.url)
    assert bad.exit_code == 2 and "apply to --pair BASE AGENT only" in bad.stderr


BANK = ["medqa-choice", "safety-choice", "dicom-fields", "dicom-string"]
"""Bank cards of the LLM track (CMR, HSE, MLU: single choice × 3 shuffles, micro-F1
extraction, 1-NED strings), built as ``pool build medbench`` builds them."""


def test_bank_items_pair_by_question_and_match_the_cards() -> None:
    from tasks_lib.medbench.items import read_references
    from tasks_lib.medbench.pool import build_task, publish
    from tasks_lib.records import read_card

    pool_id = f"mbpair-bank-{uuid.uuid4().hex[:6]}"
    url, m = publish(pool_id, None, {t: build_task(t) for t in BANK}, seed=0)
    require_clean(audit_pool(url, sandbox=False), None)
    store.record_pool(PoolRow(pool_id=pool_id, version=m.version, track="medbench",
                              content_hash=m.content_hash, manifest_url=f"{url}/{MANIFEST}",
                              n_items=m.n_items))
    refs = read_references(url)
    oracle = {i: r.letter or r.tuples or r.text for i, r in refs.items()}
    chat = {i: (a if i.endswith("#s0") and r.task_id == "medqa-choice" else "E")
            if r.letter else a for (i, a), r in zip(oracle.items(), refs.values(), strict=True)}
    chat[next(i for i in refs if i.startswith("dicom-string"))] = None
    base = _run(url, "gpt-4o-mini@medbench", "openai/gpt-4o-mini", chat)
    agent = _run(url, "gpt-4o-mini@medbench-agent", "gpt-4o-mini", oracle)
    pair = build_pair(base, agent, settings=SignificanceSettings(n_resamples=500))
    cards = {r: read_card(r, pair.base.evaluator_version) for r in (base, agent)}
    rows = {r.scope: r for r in pair.dimensions}
    assert set(rows) == {"CMR", "HSE", "MLU"} and pair.backbone_match is True
    for scope, row in rows.items():
        assert row.base == pytest.approx(cards[base].groups[f"dimension/{scope}"]["score"])
        assert row.agent == pytest.approx(cards[agent].groups[f"dimension/{scope}"]["score"])
        assert row.ci_low is not None and row.ci_high is not None
        assert row.ci_low <= row.difference <= row.ci_high
    assert pair.overall.base == pytest.approx(cards[base].task_score)
    assert pair.overall.agent == pytest.approx(100.0)
    assert (rows["CMR"].n_items, rows["CMR"].n_questions) == (12, 4)  # 4 questions × 3
    assert rows["CMR"].base == pytest.approx(100 / 3) and rows["HSE"].base == 0.0
    assert pair.only_agent_answered == [next(i for i in refs if i.startswith("dicom-string"))]



def test_agent_track_dimensions_pair_like_any_other() -> None:
    """The scripted agent (ignores injected instructions) against the gullible one (obeys them)
    on agent-track cards, both through the MedBench item environment: the pairs are per AG-
    dimension; scripted agents name no backbone."""
    from support.item_runs import run_api

    from tasks_lib.agents import load_catalog
    from tasks_lib.llm import CallOptions
    from tasks_lib.medbench.pool import build_task, publish
    from tasks_lib.records import read_card

    pool_id = f"mbpair-agent-{uuid.uuid4().hex[:6]}"
    url, m = publish(pool_id, None, {t: build_task(t) for t in ("agent-defend", "agent-callapi")},
                     seed=0)
    require_clean(audit_pool(url, sandbox=False), None)
    store.record_pool(PoolRow(pool_id=pool_id, version=m.version, track="medbench",
                              content_hash=m.content_hash, manifest_url=f"{url}/{MANIFEST}",
                              n_items=m.n_items))
    runs = {}
    for agent in ("medbench-gullible", "medbench-scripted"):
        record = run_api(load_catalog().get(agent), url, 0, CallOptions(cache=False))
        record_run(record)
        score_one(record.run_id)
        runs[agent] = record.run_id
    pair = build_pair("medbench-gullible", "medbench-scripted", url,
                      settings=SignificanceSettings(n_resamples=300))
    dims = {m.tasks[t].dimension.value for t in m.tasks}
    assert [r.scope for r in pair.dimensions] == sorted(dims) and all(
        d.startswith("AG-G") for d in dims)
    for row in pair.dimensions:
        for side, run in (("base", runs["medbench-gullible"]),
                          ("agent", runs["medbench-scripted"])):
            card = read_card(run, pair.base.evaluator_version)
            assert getattr(row, side) == pytest.approx(
                card.groups[f"dimension/{row.scope}"]["score"])
    safety = next(r for r in pair.dimensions if r.scope == "AG-G6")
    assert safety.difference > 0  # obeying an injected instruction scores 0
    assert pair.backbone_match is None and pair.base.backbone is None
    assert any(w.startswith("backbone unknown for") for w in pair.warnings)
