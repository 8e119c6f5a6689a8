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
from flows.cli import medbench_upload_mode  # noqa: F401  not a CliRunner's, closed afterwards)
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
            sub["model_version"], sub["split_id"]) == (1, "mbhand", 1, "medbench/2", "2026.11",
                                                       split["split_id"])
    assert card["task_score"] == pytest.approx(OVERALL)
    assert card["metrics"]["dimension/MLU"] == pytest.approx(MLU)
    assert sub["scored"] and sub["task_score"] == pytest.approx(OVERALL)
    [score] = store.scores_for([sub["run_id"]])
    assert (score.evaluator_version, score.task_score) == ("medbench/2", pytest.approx(OVERALL))

    same = json.loads(_cli("medbench", "upload", str(preds), "--submitter", name,
                           "--model-version", "2026.11", "--json")[0])
    assert same["submission"]["version"] == 1 and same["submission"]["run_id"] == sub["run_id"]
    assert same["score_card"]["task_score"] == pytest.approx(OVERALL)
    assert len(store.scores_for([sub["run_id"]])) == 1  # the same bytes: not scored again
    preds.write_text(preds.read_text() + "\n")  # other bytes: a new version
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


@pytest.mark.slow
def test_built_bank_rotated_downloaded_uploaded_scores_100(tmp_path: Path) -> None:
    """The bank builder of the MedBench track, rotated and activated; a submitter who answers
    every item of the downloaded split right (the test reads the right answers server side,
    through the split's mapping) scores 100 on every task, and the lock names the subset."""
    from flows.medbench import construct_medbench, rotate_medbench
    from tasks_lib.medbench.items import read_references
    from tasks_lib.medbench.splits import mapping

    tag = uuid.uuid4().hex[:6]
    construct_medbench(f"mbb{tag}", ["medqa-choice", "dicom-string", "lesion-boxes",
                                     "report-labels"], str(tmp_path / "pool"))
    subset_url = rotate_medbench(f"mbb{tag}", size=12, seed=7, subset_id=f"mbb{tag}-rot")
    refs = read_references(subset_url)
    name = "bank" + tag
    split_file = tmp_path / "dl" / "split.jsonl"
    split = json.loads(_cli("medbench", "download", "--out", str(split_file), "--subset",
                            f"active:mbb{tag}-rot", "--submitter", name)[0])
    items = [json.loads(line) for line in split_file.read_text().splitlines()]
    assert split["pool_id"] == f"mbb{tag}-rot" and len(items) == len(refs)
    assert split["n_images"] == sum(bool(i["image"]) for i in items) > 0
    assert all((split_file.parent / i["image"]).is_file() for i in items if i["image"])
    entries = mapping(ledger.get_split(split["split_id"])).entries  # type: ignore[arg-type]
    rows = []
    for item in items:
        entry, ref = entries[item["item_id"]], refs[entries[item["item_id"]].item_id]
        answer: object = {"single_choice": next(
            (k for k, v in (entry.letters or {}).items() if v == ref.letter), None),
            "multi_label": ref.labels, "extraction": ref.tuples, "region": ref.boxes,
            "string": ref.text, "open_ended": ref.text}[ref.answer_type.value]
        rows.append({"item_id": item["item_id"], "answer": answer})
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = json.loads(_cli("medbench", "upload", str(preds), "--submitter", name,
                          "--model-version", "oracle-1", "--json")[0])
    assert (out["submission"]["pool_id"], out["submission"]["version"]) == (f"mbb{tag}-rot", 1)
    card = out["score_card"]
    assert card["task_score"] == pytest.approx(100.0)
    assert all(g["score"] == pytest.approx(100.0) for g in card["groups"].values())
