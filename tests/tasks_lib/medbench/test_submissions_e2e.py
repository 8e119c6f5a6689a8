"""End to end under the Prefect test harness: ``medflows medbench download`` + ``upload`` in
answer-upload mode, scored by the one score flow into the ledger with its lock; a malformed file
is one ``error:`` line (exit 2) and changes nothing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from support.medbench_pool import MLU, OVERALL, answers_for, secret_strings, write_pool
from typer.testing import CliRunner

import flows.score  # noqa: F401  (Prefect's log handlers keep the streams of their import:
from flows.cli import medbench_submit  # noqa: F401  not a CliRunner's, closed afterwards)
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _cli(*args: str, code: int = 0) -> tuple[str, str]:
    from flows.cli.groups import app

    out = CliRunner().invoke(app, list(args))
    if out.exit_code != code and out.exc_info:
        import traceback
        print("".join(traceback.format_exception(*out.exc_info))[-6000:])
    assert out.exit_code == code, out.exception
    return out.stdout, out.stderr


def _predictions(split_file: Path) -> str:
    return answers_for([json.loads(line) for line in split_file.read_text().splitlines()])


def test_download_upload_scored_into_the_ledger_with_its_lock(tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    name = "e2e" + uuid.uuid4().hex[:6]
    split_file = tmp_path / "split.jsonl"
    out, _ = _cli("medbench", "download", "--out", str(split_file), "--pool", pool,
                  "--submitter", name, "--seed", "11")
    split = json.loads(out)
    assert (split["pool_id"], split["pool_version"], split["n_items"]) == ("mbhand", 1, 7)
    assert [s for s in secret_strings() if s in split_file.read_text()] == []
    preds = tmp_path / "preds.jsonl"
    preds.write_text(_predictions(split_file))

    first = json.loads(_cli("medbench", "upload", str(preds), "--submitter", name,
                            "--model-version", "2026.11", "--json")[0])
    sub, card = first["submission"], first["score_card"]
    assert (sub["version"], sub["pool_id"], sub["pool_version"], sub["evaluator_version"],
            sub["model_version"], sub["split_id"]) == (1, "mbhand", 1, "medbench/1", "2026.11",
                                                       split["split_id"])
    assert card["task_score"] == pytest.approx(OVERALL)
    assert card["metrics"]["dimension/MLU"] == pytest.approx(MLU)
    assert sub["scored"] and sub["task_score"] == pytest.approx(OVERALL)
    [score] = store.scores_for([sub["run_id"]])
    assert (score.evaluator_version, score.task_score) == ("medbench/1", pytest.approx(OVERALL))

    again = json.loads(_cli("medbench", "upload", str(preds), "--submitter", name,
                            "--model-version", "2026.11", "--json")[0])["submission"]
    assert again["version"] == 2 and again["run_id"] != sub["run_id"]
    rows = ledger.submissions(submitter=name)
    assert [(r.version, r.model_version) for r in rows] == [(1, "2026.11"), (2, "2026.11")]
    assert all(store.scores_for([r.run_id]) for r in rows)
    listed = json.loads(_cli("medbench", "submissions", "--submitter", name)[0])
    assert [(s["version"], s["task_score"]) for s in listed] == [(1, pytest.approx(OVERALL)),
                                                                (2, pytest.approx(OVERALL))]
    for text in (json.dumps(first), json.dumps(again)):
        assert [s for s in secret_strings() if s in text] == []


def test_a_malformed_upload_is_one_error_line_and_changes_nothing(tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    name = "bad" + uuid.uuid4().hex[:6]
    split_file = tmp_path / "split.jsonl"
    _cli("medbench", "download", "--out", str(split_file), "--pool", pool, "--submitter", name)
    good = _predictions(split_file).splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([good[0], "[1, 2]", good[1], '{"item_id": "x"}']) + "\n")
    n_runs = len(store.runs())
    _, err = _cli("medbench", "upload", str(bad), "--submitter", name, "--json", code=2)
    assert err.count("\n") == 1 and err.startswith(f"error: {bad}:2: ")
    assert f"{bad}:4: " in err and "nothing stored" in err
    assert ledger.submissions(submitter=name) == [] and len(store.runs()) == n_runs
    _, err = _cli("medbench", "download", "--out", str(split_file), code=2)
    assert "give exactly one" in err
