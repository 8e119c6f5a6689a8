"""The malformed QA-input corpus (tests/support/malformed_qa_inputs.py), end to end.

For every case: the readers never raise anything but ``InputDataError`` (no traceback); the CLI
(`medflows pool build qa`, `medflows qa replay`) either exits 2 with one ``error:`` line naming the
file, the line and the rule, or builds the pool with the bad line skipped and reported
(``audit/rejects.jsonl``, ``n_rejected``) and every good line still in the pool. Gzip bombs are
refused while streaming, with the peak memory of the process measured (< 1 GiB).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.malformed_qa_inputs import (
    GOOD_IDS,
    QACase,
    all_cases,
    prediction_row,
    predictions_with,
    question,
    questions_with,
    write,
)
from support.memory import PEAK_SNIPPET
from support.paths import QA_SOURCE
from typer.testing import CliRunner, Result

from tasks_lib.errors import InputDataError
from tasks_lib.qa.ingest import normalize_item, read_questions
from tasks_lib.qa.predictions import load_predictions
from tasks_lib.qa.types import QAItem, Reject

CASES = all_cases()
QUESTION_BUILD_CASES = [c for c in CASES if c.target == "questions" and c.outcome != "refused"]
DATASETS = ("medqa", "medbullets", "medmcqa", "medexqa", "mmlu", "mmlu-pro", "pubmedqa",
            "medxpertqa-r", "medxpertqa-u")
WITH_TRAIN = {"medexqa", "medxpertqa-r", "medxpertqa-u", "mmlu", "mmlu-pro", "pubmedqa"}
GIB = 1 << 30
TRAIN_COPY = "A train item that reuses the id of test item 0?"


def _ids(cases: list[QACase]) -> list[str]:
    return [c.name for c in cases]


def test_corpus_covers_the_reported_crashes() -> None:
    names = {c.name for c in CASES}
    assert len(CASES) >= 40 and len(names) == len(CASES)
    assert {"realidx-5000-digits", "nested-100000-deep", "plain-file-named-gz",
            "truncated-csv-gz", "non-utf8-byte", "realidx-1.0-beside-1", "tokens-not-numeric",
            "negative-cost", "gzip-bomb-rows"} <= names
    assert {c.outcome for c in CASES} == {"refused", "skipped", "accepted"}


def _assert_error(message: str, path: Path, case: QACase) -> None:
    """One line naming the file, the line (when the case has one) and the rule."""
    assert "\n" not in message.strip(), message
    where = f"{path}:{case.line}:" if case.line is not None else f"{path}:"
    assert where in message, (where, message)
    assert case.rule in message, (case.rule, message)


def _normalized(dataset: str, path: Path) -> tuple[list[QAItem], list[Reject]]:
    got = read_questions(dataset, str(path))
    items: list[QAItem] = []
    rejects = list(got.rejects)
    for it in got.items:
        out = normalize_item(it, str(path))
        if isinstance(out, Reject):
            rejects.append(out)
        else:
            items.append(out)
    assert len(items) + len(rejects) == got.n_lines
    return items, rejects


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_reader(case: QACase, tmp_path: Path) -> None:
    """The library readers: refusal as one InputDataError, or the bad line as a reject."""
    path = write(case, tmp_path)
    if case.target == "predictions":
        if case.outcome == "refused":
            with pytest.raises(InputDataError) as err:
                load_predictions(str(path))
            _assert_error(str(err.value), path, case)
        else:
            frame = load_predictions(str(path))
            assert sorted(frame["realidx"]) == sorted(GOOD_IDS)
            assert frame["prompt_tokens"].tolist() == [10.0] * 3
        return
    if case.outcome == "refused":
        with pytest.raises(InputDataError) as err:
            read_questions("medqa", str(path))
        _assert_error(str(err.value), path, case)
        return
    items, rejects = _normalized("medqa", path)
    assert [it.realidx for it in items] == list(case.good)
    if case.outcome == "accepted":
        assert rejects == []
        return
    assert [(r.line, r.step) for r in rejects] == [(case.line, case.step)]
    assert case.rule in rejects[0].reason and rejects[0].source == str(path)
    assert "\n" not in rejects[0].reason and len(rejects[0].reason) < 300


# ------------------------------------------------------------------------------------ the CLI


def _cli(*args: str) -> Result:
    """Invoke the CLI in-process. Prefect's console log handlers are muted meanwhile: they keep
    the stream of the first CliRunner that created them (closed afterwards), and what is checked
    here is what the command itself prints."""
    from prefect.logging.handlers import PrefectConsoleHandler

    from flows.cli import qa  # noqa: F401  (register the commands)
    from flows.cli.groups import app

    loggers = [logging.getLogger(), *(lg for lg in logging.root.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    muted = [(h, h.level) for lg in loggers for h in lg.handlers
             if isinstance(h, PrefectConsoleHandler)]
    for handler, _ in muted:
        handler.setLevel(logging.CRITICAL + 1)
    try:
        return CliRunner().invoke(app, list(args))
    finally:
        for handler, level in muted:
            handler.setLevel(level)


def _assert_refused(result: Result, path: Path, case: QACase) -> None:
    assert result.exit_code == 2, result.output[-2000:]
    assert isinstance(result.exception, SystemExit), result.exception
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, result.stderr[-2000:]
    _assert_error(errors[0], path, case)
    assert "Traceback" not in result.stdout


def _source(folder: Path, files: dict[str, bytes]) -> Path:
    """A source folder with the given question files, train files where cards want them, and a
    predictions file that answers every good item wrong (so every good item is hard)."""
    rows = []
    for dataset, data in files.items():
        (folder / "questions").mkdir(parents=True, exist_ok=True)
        (folder / "questions" / f"{dataset}.test.jsonl").write_bytes(data)
        if dataset in WITH_TRAIN:  # the train file shares id 0 with the test file
            train = [json.dumps(question(0, question=TRAIN_COPY)), json.dumps(question("t1"))]
            (folder / "questions" / f"{dataset}.train.jsonl").write_text("\n".join(train) + "\n")
        rows += [prediction_row(i).replace("medqa,", f"{dataset},", 1) for i in GOOD_IDS]
    (folder / "predictions").mkdir(parents=True, exist_ok=True)
    header = predictions_with([]).decode().splitlines()[0]
    (folder / "predictions" / "p.csv").write_text("\n".join([header, *rows]) + "\n")
    return folder


def _build(source: Path, datasets: list[str], out: Path) -> Result:
    return _cli("pool", "build", "qa", "--source", str(source), "--predictions",
                str(source / "predictions" / "p.csv"), "--datasets", ",".join(datasets),
                "--no-meld", "--auto-approve", "--out", str(out))


@pytest.fixture(scope="module")
def question_builds(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
                    ) -> dict[str, tuple[str, Path, dict[str, Any], list[dict[str, Any]]]]:
    """The skipped and accepted question cases, one dataset each, nine to a build:
    case name → (dataset, question file, manifest, rejects of the pool)."""
    built: dict[str, tuple[str, Path, dict[str, Any], list[dict[str, Any]]]] = {}
    for start in range(0, len(QUESTION_BUILD_CASES), len(DATASETS)):
        group = dict(zip(DATASETS, QUESTION_BUILD_CASES[start:start + len(DATASETS)],
                         strict=False))
        folder = tmp_path_factory.mktemp("qbuild")
        source = _source(folder / "src", {ds: c.content() for ds, c in group.items()})
        result = _build(source, list(group), folder / "pool")
        assert result.exit_code == 0, result.output[-3000:]
        manifest = json.loads((folder / "pool" / "manifest.json").read_text())
        exemplars = [json.loads(x) for x in
                     (folder / "pool" / "public" / "exemplars.jsonl").read_text().splitlines()]
        manifest["exemplars"] = exemplars  # kept beside the manifest for the checks below
        rejects = [json.loads(x) for x in
                   (folder / "pool" / "audit" / "rejects.jsonl").read_text().splitlines()]
        for ds, case in group.items():
            built[case.name] = (ds, source / "questions" / f"{ds}.test.jsonl", manifest, rejects)
    return built


@pytest.mark.parametrize("case", QUESTION_BUILD_CASES, ids=_ids(QUESTION_BUILD_CASES))
def test_pool_build_skips_and_reports_bad_lines(
    case: QACase, question_builds: dict[str, tuple[str, Path, dict[str, Any], list[Any]]]
) -> None:
    dataset, path, manifest, rejects = question_builds[case.name]
    entry = manifest["datasets"][dataset]
    assert entry["realidx"] == list(case.good)
    if dataset in WITH_TRAIN:  # an id in both files: never shown as an exemplar of the pool
        shown = [e["question"] for e in manifest["exemplars"] if e["dataset"] == dataset]
        assert shown == ["Question number t1: pick one."]
    mine = [r for r in rejects if r["dataset"] == dataset]
    assert entry["n_rejected"] == len(mine)
    assert entry["n_ingested"] == len(case.good) + len(mine)
    if case.outcome == "accepted":
        assert mine == []
        return
    assert [(r["line"], r["step"], r["source"]) for r in mine] == [(case.line, case.step,
                                                                    str(path))]
    assert case.rule in mine[0]["reason"]


FILE_CASES = [c for c in CASES if c.target == "questions" and c.outcome == "refused"]


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("case", FILE_CASES, ids=_ids(FILE_CASES))
def test_pool_build_refuses_unusable_question_file(case: QACase, tmp_path: Path) -> None:
    source = _source(tmp_path / "src", {"medqa": case.content()})
    result = _build(source, ["medqa"], tmp_path / "pool")
    _assert_refused(result, source / "questions" / "medqa.test.jsonl", case)
    assert not (tmp_path / "pool" / "manifest.json").exists()


PREDICTION_CASES = [c for c in CASES if c.target == "predictions"]


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("case", PREDICTION_CASES, ids=_ids(PREDICTION_CASES))
def test_cli_on_recorded_predictions(case: QACase, tmp_path: Path) -> None:
    path = write(case, tmp_path)
    replay = _cli("qa", "replay", "--predictions", str(path), "--source", str(QA_SOURCE),
                  "--json")
    if case.outcome == "accepted":
        assert replay.exit_code == 0, replay.output[-2000:]
        answers = [json.loads(x)["answer_idx"] for x in
                   (QA_SOURCE / "questions" / "medqa.test.jsonl").read_text().splitlines()[:3]]
        rows = json.loads(replay.stdout)
        assert [(r["dataset"], r["n"]) for r in rows] == [("medqa", case.extra["n"])]
        predicted = ["B", "A" if case.extra["correct"] else "B", "B"]
        expected = sum(a == p for a, p in zip(answers, predicted, strict=True)) / 3
        assert rows[0]["accuracy"] == pytest.approx(expected)
        return
    _assert_refused(replay, path, case)
    source = _source(tmp_path / "src", {"medqa": questions_with([])})
    build = _cli("pool", "build", "qa", "--source", str(source), "--predictions", str(path),
                 "--datasets", "medqa", "--no-meld", "--auto-approve", "--out",
                 str(tmp_path / "pool"))
    _assert_refused(build, path, case)


# ------------------------------------------------------------- real processes, peak memory

RUNNER = """
import contextlib, io, json, sys, traceback
from flows.cli import _environment
_environment()
from flows.cli import qa
from flows.cli.groups import app
out = []
for args in json.loads(sys.argv[1]):
    stdout, stderr, code, tb = io.StringIO(), io.StringIO(), None, ""
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = app(args, standalone_mode=False)
        except BaseException:
            tb = traceback.format_exc()
    peak = PEAK
    out.append({"code": code or 0, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
                "traceback": tb, "peak": peak})
print(json.dumps(out))
""".replace("PEAK", PEAK_SNIPPET)  # the child's own peak (ru_maxrss survives fork + exec)

SUBPROCESS_CASES = [c for c in CASES if c.bomb or c.name in ("realidx-5000-digits",
                                                            "truncated-csv-gz",
                                                            "plain-file-named-gz")]


def test_medflows_process_refuses_with_bounded_memory(tmp_path: Path) -> None:
    """In a fresh process, as the CLI runs: one ``error:`` line, no traceback, and the peak RSS
    after each command (a running maximum, so each bomb is covered) under 1 GiB."""
    commands: list[list[str]] = []
    paths: list[Path] = []
    for case in SUBPROCESS_CASES:
        folder = tmp_path / case.name
        if case.target == "predictions":
            paths.append(write(case, folder))
            commands.append(["qa", "replay", "--predictions", str(paths[-1])])
            continue
        # a bad question line, read through qa replay's card references: skipped, not fatal
        (folder / "questions").mkdir(parents=True)
        for ds in DATASETS:
            src = QA_SOURCE / "questions" / f"{ds}.test.jsonl"
            (folder / "questions" / src.name).symlink_to(src)
        (folder / "questions" / "medqa.test.jsonl").unlink()
        paths.append(write(case, folder))
        (folder / "p.csv").write_bytes(predictions_with([]))
        commands.append(["qa", "replay", "--predictions", str(folder / "p.csv"), "--source",
                         str(folder), "--json"])
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(commands)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PREFECT_API_URL": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    for case, path, got in zip(SUBPROCESS_CASES, paths, results, strict=True):
        assert got["traceback"] == "", (case.name, got["traceback"][-2000:])
        assert got["peak"] < GIB, (case.name, got["peak"])
        if case.target == "predictions":
            assert got["code"] == 2, (case.name, got)
            errors = [ln for ln in got["stderr"].splitlines() if ln.startswith("error:")]
            assert len(errors) == 1, (case.name, got["stderr"])
            _assert_error(errors[0], path, case)
        else:
            assert got["code"] == 0, (case.name, got)
            assert json.loads(got["stdout"])[0]["n"] == 3
