"""The acceptance commands of the QA slice, run as a user runs them (subprocess, JSON stdout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.paths import QA_SOURCE

from flows.pipeline import HARD_MODELS

pytestmark = pytest.mark.usefixtures("prefect_harness")
MEDFLOWS = str(Path(sys.executable).parent / "medflows")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    return subprocess.run([MEDFLOWS, *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def hard_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "pool"
    proc = _run("pool", "build", "qa", "--source", str(QA_SOURCE),
                "--predictions", str(QA_SOURCE / "predictions" / "full.csv.gz"),
                "--models", ",".join(HARD_MODELS), "--select", "first", "--per-dataset", "100",
                "--auto-approve", "--no-meld", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["manifest"].endswith("manifest.json")
    return out


def test_pool_build_manifest_matches_published_hard_set(hard_pool: Path) -> None:
    manifest = json.loads((hard_pool / "manifest.json").read_text())
    hard = pd.read_csv(QA_SOURCE / "predictions" / "hard.csv.gz", dtype={"realidx": str})
    assert sum(d["n_items"] for d in manifest["datasets"].values()) == 862
    for ds, entry in manifest["datasets"].items():
        assert entry["n_items"] == len(entry["realidx"])
        published = list(dict.fromkeys(hard.loc[(hard["dataset"] == ds)
                                                & (hard["model"] == "gpt-4o")
                                                & (hard["method"] == "zero_shot"), "realidx"]))
        assert set(entry["realidx"]) == set(published), ds
        source_order = [str(json.loads(line)["realidx"]) for line in
                        (QA_SOURCE / "questions" / f"{ds}.test.jsonl").read_text().splitlines()]
        assert entry["realidx"] == [r for r in source_order if r in set(published)], ds


def test_qa_replay_json_with_pool(hard_pool: Path) -> None:
    proc = _run("qa", "replay", "--predictions", str(QA_SOURCE / "predictions" / "hard.csv.gz"),
                "--pool", str(hard_pool), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    assert {tuple(sorted(r)) for r in rows} == {("accuracy", "dataset", "method", "model", "n")}
    hard = pd.read_csv(QA_SOURCE / "predictions" / "hard.csv.gz", dtype=str,
                       keep_default_na=False)
    groups = hard[["dataset", "model", "method"]].drop_duplicates()
    assert len(rows) == len(groups) == 326  # every recorded group is scored, once
    medqa_r1 = next(r for r in rows if (r["dataset"], r["model"], r["method"])
                    == ("medqa", "DeepSeek-R1", "zero_shot"))
    sel = hard[(hard.dataset == "medqa") & (hard.model == "DeepSeek-R1")
               & (hard.method == "zero_shot")].drop_duplicates("realidx")
    answers = {str(json.loads(line)["realidx"]): json.loads(line)["answer_idx"] for line in
               (QA_SOURCE / "questions" / "medqa.test.jsonl").read_text().splitlines()}
    expected = sum(answers[str(r)] == p for r, p in zip(sel.realidx, sel.predicted_answer,
                                                        strict=True)) / len(sel)
    assert medqa_r1["n"] == 100 and medqa_r1["accuracy"] == pytest.approx(expected)
    assert all(0 <= r["accuracy"] <= 1 for r in rows)


def test_qa_replay_without_pool_uses_cards(tmp_path: Path) -> None:
    preds = tmp_path / "p.csv"
    preds.write_text(
        "dataset,split,model,method,realidx,predicted_answer,prompt_tokens,completion_tokens,"
        "time_s,cost_usd\n"
        "medqa,full,m,zero_shot,0,B,1,1,1,\n"      # correct (answer_idx B)
        "medqa,full,m,zero_shot,0,A,1,1,1,\n"      # duplicate: first row wins
        "medqa,full,m,zero_shot,1,A,1,1,1,\n"
        "medqa,full,m,zero_shot,999999,A,1,1,1,\n"  # unknown item: reported, not scored
    )
    proc = _run("qa", "replay", "--predictions", str(preds), "--source", str(QA_SOURCE), "--json")
    assert proc.returncode == 0, proc.stderr
    first_two = [json.loads(x)["answer_idx"] for x in
                 (QA_SOURCE / "questions" / "medqa.test.jsonl").read_text().splitlines()[:2]]
    expected = (first_two[0] == "B") + (first_two[1] == "A")
    assert json.loads(proc.stdout) == [{"dataset": "medqa", "model": "m", "method": "zero_shot",
                                        "n": 2, "accuracy": expected / 2}]
    assert "1 prediction rows name items" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pool", "build", "qa", "--datasets", "medqa-typo", "--no-meld", "--auto-approve"],
         "unknown qa task card 'medqa-typo'; known qa task cards: medbullets"),
        (["qa", "replay", "--predictions", "/nonexistent/p.csv", "--json"],
         "predictions file not found"),
    ],
)
def test_bad_input_gives_one_clear_line(args: list[str], message: str) -> None:
    proc = _run(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
