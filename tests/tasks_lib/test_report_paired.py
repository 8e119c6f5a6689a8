"""Paired statistics in the reports: on a QA pool of real questions answered by replayed agents,
an imaging pool scored from its baselines and RWE score rows, each row's interval and each
adjacent pair's test equal a direct scipy.stats / statsmodels computation on the per-item
outcomes of the stored score cards, and the markdown shows the intervals and the marks."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any
from uuid import uuid4

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from support.isolated import own_storage_and_ledger
from support.paths import QA_SOURCE
from typer.testing import CliRunner

from evaluators.significance import SEED
from tasks_lib.records import read_card

AGENTS = ("DeepSeek-R1", "gpt-4o", "gpt-4o-mini")
"""Replayed (zero-shot) agents of the QA pool: far apart on these questions."""


@pytest.fixture(scope="module", autouse=True)
def _own_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A storage root and ledger of this module's own, and every pool ranked as if clean (the
    test pools are published with an audit override, which leaves their runs unranked)."""
    with own_storage_and_ledger(tmp_path_factory.mktemp("paired")) as mp:
        mp.setattr("tasks_lib.report.board.pool_flags", lambda runs: {})
        yield


def _store(folder: Path, pool_url: str, agent: str, **fields: object) -> str:
    from support.kit_pools import store_run

    from tasks_lib.audits.pool import pool_info
    from tasks_lib.scoring import score_one

    run_id = str(store_run(pool_info(pool_url), folder, agent, **fields))
    score_one(run_id)
    return run_id


@pytest.fixture(scope="module")
def qa_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    """30 + 30 real questions, each agent's recorded answers replayed and scored."""
    from support.ops_support import publish_test_pool

    from tasks_lib.agents import replay_agent
    from tasks_lib.pricing import price_snapshot
    from tasks_lib.qa.pool import load_pool
    from tasks_lib.qa.runner import replay
    from tasks_lib.storage import Storage

    pool = publish_test_pool("paired-qa", {"medqa": 30, "medbullets": 24})
    items = load_pool(Storage(pool.url)).items
    root = tmp_path_factory.mktemp("answers")
    for model in AGENTS:
        agent = replay_agent(model, "zero_shot", str(QA_SOURCE / "predictions" / "full.csv.gz"))
        Storage(str(root / model)).write_jsonl("answers.jsonl",
                                               replay(agent, items, price_snapshot()))
        _store(root / model, pool.url, model, cost_usd=0.01)
    return str(pool.url)


def _outcomes(run_id: str, version: str) -> dict[str, float]:
    card = read_card(run_id, version)
    return {c.case_id: c.values[card.primary_metric] for c in card.per_case}


def _cli(*args: str) -> dict[str, Any]:
    from flows.cli import qa, runs  # noqa: F401  (register the report commands)
    from flows.cli.groups import app

    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def _board_outcomes(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    from tasks_lib.ledger import store

    runs = {r.agent_id: r.run_id for r in store.runs()}
    return {r["agent_id"]: _outcomes(runs[r["agent_id"]], r["evaluator_version"]) for r in rows}


def test_qa_report_json_has_intervals_and_adjacent_tests_equal_to_scipy(qa_pool: str) -> None:
    report = _cli("report", "qa", "--pool", qa_pool, "--json")
    rows = report["rows"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert report["statistics"]["ci_method"] == "bootstrap-percentile"
    assert report["statistics"]["seed"] == SEED
    outcomes = _board_outcomes(rows)
    ids = sorted(outcomes[rows[0]["agent_id"]])
    sizes = Counter(i.split("/")[0] for i in ids)
    w = np.array([1 / (len(sizes) * sizes[i.split("/")[0]]) for i in ids])  # macro weights
    for r in rows:
        x = np.array([outcomes[r["agent_id"]][i] for i in ids])
        assert np.sum(w * x) / np.sum(w) == pytest.approx(r["task_score"])
        direct = stats.bootstrap(
            (x, w), lambda u, v, axis: np.sum(u * v, axis=axis) / np.sum(v, axis=axis),
            paired=True, vectorized=True, n_resamples=2000, method="percentile",
            confidence_level=0.95, rng=np.random.default_rng(SEED)).confidence_interval
        assert (r["ci_low"], r["ci_high"]) == (pytest.approx(direct.low),
                                               pytest.approx(direct.high))
        assert r["n_items"] == 54 and r["ci_reason"] is None
    p_values = []
    for upper, lower in pairwise(rows):
        a, b = (np.array([outcomes[r["agent_id"]][i] for i in ids]) for r in (upper, lower))
        k, n = int(np.sum((a == 1) & (b == 0))), int(np.sum(a != b))
        p_values.append(stats.binomtest(k, n, 0.5).pvalue)
        assert upper["vs_next_agent"] == lower["agent_id"] and upper["n_pairs"] == 54
        assert upper["test"] == "mcnemar-exact"
        assert upper["p_value"] == pytest.approx(p_values[-1], abs=1e-12)
    reject, adjusted, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    assert [r["p_adjusted"] for r in rows[:2]] == pytest.approx(list(adjusted))
    assert [r["significant"] for r in rows[:2]] == list(reject)
    last = rows[-1]
    assert last["vs_next_agent"] is None and last["p_value"] is None and last["ci_low"]
    matrix = report["pairwise"]
    assert len(matrix) == 3 and {c["agent_a"] for c in matrix} == {r["agent_id"] for r in rows[:2]}
    top = next(c for c in matrix if (c["agent_a"], c["agent_b"]) == (rows[0]["agent_id"],
                                                                       rows[2]["agent_id"]))
    all_p = [c["p_value"] for c in matrix]
    assert top["p_adjusted"] == pytest.approx(
        multipletests(all_p, method="holm")[1][all_p.index(top["p_value"])])
    assert top["significant"]  # DeepSeek-R1 vs gpt-4o-mini: 0.88 vs 0.59


def test_qa_markdown_and_files_show_intervals_marks_and_the_matrix(qa_pool: str) -> None:
    from tasks_lib.storage import Storage

    report = _cli("report", "--pool", qa_pool, "--json")
    rows, files = report["rows"], report["files"]
    md = Path(files["markdown"]).read_text()
    for r in rows:
        cell = f"{r['task_score']:.4g} [{r['ci_low']:.4g}, {r['ci_high']:.4g}]"
        marked = bool(r["significant"]) and r["paired_difference"] > 0
        assert (cell + (" *" if marked else "") + " |") in md, (cell, md)
    assert "`*`: significantly better than the next ranked row" in md and "| p vs next |" in md
    stored = Storage(str(Path(files["pairwise_json"]).parent)).read_json("pairwise.json")
    assert stored["cells"] == report["pairwise"] and stored["statistics"]["correction"] == "holm"
    csv = Path(files["pairwise_csv"]).read_text().splitlines()
    assert csv[0].startswith("task_id,tier,agent_a,agent_b") and len(csv) == 4
    frame = Path(files["csv"]).read_text().splitlines()[0].split(",")
    assert {"ci_low", "ci_high", "p_value", "p_adjusted", "significant"} <= set(frame)


def test_imaging_board_tests_continuous_outcomes_by_permutation(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from support.imaging_pools import build_pool

    from tasks_lib.imaging.baseline_kind import BaselineKind
    from tasks_lib.imaging.baselines import baseline_files, write_submission
    from tasks_lib.report import to_markdown
    from tasks_lib.report.build import report_board

    root = tmp_path_factory.mktemp("imaging")
    url, manifest = build_pool("ldct-denoise", root)  # 8 cases, SSIM: continuous
    ids = []
    for kind, reps in ((BaselineKind.CLASSICAL, 2), (BaselineKind.CONSTANT, 1)):
        folder = write_submission(baseline_files(kind, url, manifest), root / kind.value)
        ids += [_store(folder, url, kind.value, replicate=rep, cost_usd=0.0)
                for rep in range(reps)]
    board = report_board(run_ids=ids)
    classical, constant = board.rows
    assert (classical.agent_id, classical.rank, classical.n_replicates) == (
        "upload:classical", 1, 2)
    version = classical.evaluator_version
    replicas = [_outcomes(i, version) for i in ids[:2]]
    cases = sorted(replicas[0])
    x = np.array([(replicas[0][c] + replicas[1][c]) / 2 for c in cases])  # clustered by replicate
    y = np.array([_outcomes(ids[2], version)[c] for c in cases])
    ci = stats.bootstrap((x, np.ones(len(x))),
                         lambda u, v, axis: np.sum(u * v, axis=axis) / np.sum(v, axis=axis),
                         paired=True, vectorized=True, n_resamples=2000, method="percentile",
                         rng=np.random.default_rng(SEED)).confidence_interval
    assert classical.ci_low == pytest.approx(ci.low)
    assert classical.ci_high == pytest.approx(ci.high)
    assert classical.n_items == len(cases) == len(manifest.cases)
    differ = x != y
    direct = stats.permutation_test(
        (x[differ], y[differ]), lambda u, v, axis: np.sum(u - v, axis=axis) / len(x),
        permutation_type="samples", vectorized=True, n_resamples=2000,
        rng=np.random.default_rng(SEED))
    assert classical.test == "paired-permutation" and classical.n_pairs == len(cases)
    assert classical.p_value == pytest.approx(direct.pvalue)
    assert classical.p_adjusted == pytest.approx(direct.pvalue)  # a family of one
    assert classical.paired_difference == pytest.approx(float(np.mean(x - y)))
    md = to_markdown(board.rows)
    assert f"[{classical.ci_low:.4g}, {classical.ci_high:.4g}]" in md and "p vs next" in md
    [cell] = board.pairwise
    assert (cell.agent_a, cell.agent_b, cell.p_value) == (
        classical.agent_id, constant.agent_id, classical.p_value)


def test_rwe_report_tests_studies_and_a_single_case_cell_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.ledger import store
    from tasks_lib.ledger.tables import RunRow, ScoreRow
    from tasks_lib.report import leaderboard, scored_runs, to_markdown
    from tasks_lib.rwe.report import markdown, rwe_report
    from tasks_lib.scoring import select_runs

    prefix = uuid4().hex[:6]  # one prefix: the report orders studies by id, as listed here
    studies = [f"rwe-{prefix}-{i:02d}" for i in range(12)]
    sr = {"honest": [1.0] * 11 + [0.0], "sloppy": [1.0] * 8 + [0.0] * 4, "null": [0.0] * 12}
    for agent, values in sr.items():
        for study, value in zip(studies, values, strict=True):
            run_id = f"t-{uuid4().hex[:12]}"
            store.upsert_run(RunRow(run_id=run_id, agent_id=agent, task_id=study, tier="lite",
                                    replicate=0, track="rwe", model=agent, method="m",
                                    status="completed", cost_usd=0.0))
            store.append_score(ScoreRow(
                run_id=run_id, evaluator_version="v1", task_score=value, primary_metric="rwe_sr",
                metrics_json=json.dumps({"rwe_sr": value, "rwe_acc": value, "n_fields": 3.0})))
    report = rwe_report(studies)
    rows = {r.agent_id: r for r in report.rows}
    assert [r.agent_id for r in report.rows] == ["honest", "sloppy", "null"]
    for agent, values in sr.items():
        x = np.array(values)
        ci = stats.bootstrap((x, np.ones(12)),
                             lambda u, v, axis: np.sum(u * v, axis=axis) / np.sum(v, axis=axis),
                             paired=True, vectorized=True, n_resamples=2000,
                             method="percentile",
                             rng=np.random.default_rng(SEED)).confidence_interval
        assert rows[agent].ci_low == pytest.approx(100 * ci.low)
        assert rows[agent].ci_high == pytest.approx(100 * ci.high)
    # honest vs sloppy: 3 studies only honest solved, none only sloppy (p = 2/2³ = 0.25);
    # sloppy vs null: 8 vs 0 (p = 2/2⁸); Holm: 2·2/2⁸ = 0.016 rejected, 0.25 not
    p = [stats.binomtest(3, 3, 0.5).pvalue, stats.binomtest(8, 8, 0.5).pvalue]
    assert p == pytest.approx([0.25, 2 / 2**8])
    adjusted = multipletests(p, method="holm")[1]
    assert [rows["honest"].p_value, rows["sloppy"].p_value] == pytest.approx(p)
    assert [rows["honest"].p_adjusted, rows["sloppy"].p_adjusted] == pytest.approx(adjusted)
    assert rows["sloppy"].significant is True and rows["honest"].significant is False
    assert rows["null"].p_value is None and len(report.pairwise) == 3
    md = markdown(report)
    assert f"{rows['sloppy'].values['SR'].mean:.1f} [{rows['sloppy'].ci_low:.1f}, " \
           f"{rows['sloppy'].ci_high:.1f}] *" in md and "`*`: significantly better" in md
    # the one board: each study is its own (task, tier) cell with one case (no stored card)
    cell = leaderboard(scored_runs(select_runs(task_id=studies[0])))
    assert all(r.ci_low is None and r.p_value is None for r in cell)
    assert all("no stored score card" in str(r.ci_reason) for r in cell)
    assert "no interval: no stored score card" in to_markdown(cell)
