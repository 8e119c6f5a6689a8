"""``medflows demo``: each protocol's demo, checked against numbers computed here from the raw data
(recorded answers, golden baselines, the challenge's human leaderboard, the pool's references); a
second run reuses what the first built. The tests share one storage root and ledger (the demo's
own ``.medflows``, as a user's re-runs do): the per-protocol first runs build the pools, the
all-five run is their second run (it reuses them, with the same scores) and builds RWE's."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.isolated import own_storage_and_ledger
from support.paths import DATA_ROOT, PROJECT_ROOT

if TYPE_CHECKING:
    from tasks_lib.demo import DemoRow, Progress

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's storage root and ledger folder, shared by the module's tests."""
    return tmp_path_factory.mktemp("demo-root")


@pytest.fixture
def lines() -> list[str]:
    """Progress lines the demo printed."""
    return []


def _progress(protocol: str, lines: list[str]) -> Progress:
    from tasks_lib.demo import Progress

    return Progress(protocol, lines.append)


class FirstRun:
    """A protocol's first demo run on the module's root: its row and progress lines."""

    def __init__(self, root: Path, protocol: str, run: Callable[[Progress], DemoRow]) -> None:
        self.lines: list[str] = []
        with own_storage_and_ledger(root):
            self.row = run(_progress(protocol, self.lines))


@pytest.fixture(scope="module")
def qa_first(root: Path) -> FirstRun:
    """The QA demo's first run, on the all-five run's pool (5 hard questions per dataset)."""
    from flows.demo import qa

    return FirstRun(root, "qa", lambda progress: qa(progress, per_dataset=5))


@pytest.fixture(scope="module")
def imaging_first(root: Path) -> FirstRun:
    """The imaging demo's first run."""
    from flows.demo import imaging

    return FirstRun(root, "imaging", imaging)


@pytest.fixture(scope="module")
def medbench_first(root: Path) -> FirstRun:
    """The MedBench demo's first run."""
    from flows.demo import medbench

    return FirstRun(root, "medbench", medbench)


def _protocol_lines(lines: list[str], protocol: str) -> list[str]:
    """The progress lines of ``protocol`` (``[  t s] PROTOCOL step: …``)."""
    return [line for line in lines if line.split("] ", 1)[1].split()[0] == protocol]


def _upload_runs(lines: list[str]) -> list[str]:
    """The run ids the imaging demo's "score (upload mode)" lines name."""
    return [line.split("run ")[1].split()[0] for line in lines if "upload mode" in line]


def _expected_best(manifest: dict[str, object]) -> tuple[float, int]:
    """Best macro accuracy over datasets of the recorded (model, method) answers on the pool's
    items (first row per item; an item without an answer is wrong), and how many groups."""
    datasets = manifest["datasets"]
    assert isinstance(datasets, dict)
    gold = {}
    for ds, info in datasets.items():
        keep = set(info["realidx"])
        with (DATA_ROOT / "medagentsbench" / "questions" / f"{ds}.test.jsonl").open() as f:
            for line in f:
                q = json.loads(line)
                if str(q["realidx"]) in keep:
                    gold[(ds, str(q["realidx"]))] = q["answer_idx"]
    answers: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    with gzip.open(DATA_ROOT / "medagentsbench" / "predictions" / "hard.csv.gz", "rt") as f:
        for row in csv.DictReader(f):
            agent = answers.setdefault((row["model"], row["method"]), {})
            agent.setdefault((row["dataset"], row["realidx"]), row["predicted_answer"])
    best = 0.0
    for agent in answers.values():
        per_ds = [sum(agent.get(k) == v for k, v in gold.items() if k[0] == ds)
                  / sum(k[0] == ds for k in gold) for ds in datasets]
        best = max(best, sum(per_ds) / len(per_ds))
    return best, len(answers)


def test_qa_replay_ranks_the_recorded_answers(root: Path, qa_first: FirstRun,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The first run builds the pool and ranks the recorded agents as computed here from the
    raw data (its re-run, reusing the pool: the all-five test)."""
    from flows.cli.demo import _qa_leaderboard
    from tasks_lib.storage import Storage

    row, lines = qa_first.row, qa_first.lines
    with own_storage_and_ledger(root):
        assert row.report and Path(row.report).is_file()
        pool = root / "storage" / "pools" / "medagentsbench-hard-demo" / "v1"
        assert row.pool == str(pool)
        manifest = Storage(str(pool)).read_json("manifest.json")
        best, agents = _expected_best(manifest)
        assert row.scores["best"] == pytest.approx(best)
        assert row.scores["agents"] == agents == 37
        assert "15 hard questions" in row.what and "built" in lines[0]

        _qa_leaderboard(row.report, str(row.pool))  # `demo --protocol qa` prints it first
    shown = capsys.readouterr().out
    assert shown.startswith("# Leaderboard — medagentsbench-hard-demo-v1")
    assert f"{agents} (model, method) agents scored on pool {pool}\n" in shown


def test_imaging_scores_the_classical_baseline(root: Path, imaging_first: FirstRun) -> None:
    """The first run scores the classical baseline as the golden baselines say (its re-run:
    the all-five test)."""
    golden = json.loads((PROJECT_ROOT / "tests" / "golden" / "imaging_baselines.json")
                        .read_text())["ldct-denoise"]["classical"]["metrics"]
    row = imaging_first.row
    assert row.scores == pytest.approx(golden)
    board = Path(row.report or "").read_text()
    assert "| 1 | upload:ldct-denoise-classical | upload |  | 0.9126 [" in board  # + its CI
    assert len(list((root / "demo" / "imaging" / "ldct-denoise-classical").iterdir())) == 8
    assert len(_upload_runs(imaging_first.lines)) == 1


def test_medbench_upload_is_scored_once_per_sheet(root: Path, medbench_first: FirstRun) -> None:
    """The first run's upload is scored as computed here from the pool's references, and the
    split it downloaded holds no reference answer (its re-run: the all-five test)."""
    from tasks_lib.storage import Storage

    row = medbench_first.row
    with own_storage_and_ledger(root):
        pool = Storage(str(root / "storage" / "pools" / "medbench-demo" / "v1"))
        refs = list(pool.read_jsonl("private/references.jsonl"))
        boxes = [r for r in refs if r["task_id"] == "lesion-boxes"]
        # The sheet leaves every box list empty: IoU-set credits exactly the empty references.
        assert row.scores["MM-A1"] == pytest.approx(
            100 * sum(not r.get("boxes") for r in boxes) / len(boxes))
        assert row.scores["HSE"] == 0.0  # "I do not know." covers no key point
        dims = {k: v or 0.0 for k, v in row.scores.items() if k != "overall"}
        assert row.scores["overall"] == pytest.approx(sum(dims.values()) / len(dims))
        split = (root / "demo" / "medbench" / "split.jsonl").read_text().splitlines()
        sheet = (root / "demo" / "medbench" / "answers.jsonl").read_text().splitlines()
        assert len(split) == len(sheet) == len(refs)
        secrets = [r["text"] for r in refs if r["answer_type"] == "open_ended"]
        assert secrets and not any(text in "".join(split) for text in secrets)


def test_a_challenge_without_sandbox_is_skipped_with_the_reason(
        root: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.challenge import construct_challenge
    from flows.demo import CHALLENGE, challenge
    from tasks_lib.demo import summary_table

    found = shutil.which
    with own_storage_and_ledger(root):
        construct_challenge(CHALLENGE)
        monkeypatch.setattr(shutil, "which",
                            lambda name, *a, **k: None if name == "bwrap" else found(name, *a, **k))
        row = challenge(_progress("challenge", lines))
    assert row.report is None and row.scores == {}
    assert row.headline == ("skipped: no sandbox (bwrap not found: install the Debian package "
                            "bubblewrap)")
    assert "reused" in lines[0] and "cell (sandbox): skipped: bwrap not found" in lines[1]
    assert f"challenge (none: {row.headline})" in summary_table([row], 1.0)


def test_offline_judge_only_when_none_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.demo import offline_judge
    from tasks_lib.settings import get_settings

    monkeypatch.delenv("MEDFLOWS_JUDGE_MODEL")
    with offline_judge() as judge:
        assert judge == get_settings().judge_model == "rules"
    assert "MEDFLOWS_JUDGE_MODEL" not in os.environ
    monkeypatch.setenv("MEDFLOWS_JUDGE_MODEL", "openai/local")
    with offline_judge() as judge:
        assert judge == "openai/local"


def test_unknown_protocol_is_one_error_line() -> None:
    import typer
    from typer.testing import CliRunner

    from flows.cli.demo import demo

    app = typer.Typer()
    app.command()(demo)
    out = CliRunner().invoke(app, ["--protocol", "qa,dicom"])
    assert out.exit_code == 2
    assert out.stderr.strip().splitlines() == [
        "error: --protocol: unknown dicom; known: all, qa, imaging, challenge, medbench, rwe"]


@pytest.fixture
def own_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh RWE cluster folder the PostgreSQL user can reach (removed afterwards)."""
    from tasks_lib.rwe.cluster import Cluster

    folder = Path(tempfile.mkdtemp(prefix="medflows-demo-rwe-"))
    os.chmod(folder, 0o755)
    port = 54400 + os.getpid() % 400
    monkeypatch.setenv("MEDFLOWS_RWE_CLUSTER_DIR", str(folder / "state"))
    monkeypatch.setenv("MEDFLOWS_RWE_CLUSTER_PORT", str(port))
    monkeypatch.delenv("MEDFLOWS_RWE_DB_URL", raising=False)
    try:
        yield folder / "state"
    finally:
        Cluster(folder / "state", port).destroy()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap sandbox not installed")
def test_every_protocol_then_rwe_again(root: Path, own_cluster: Path, lines: list[str],
                                       qa_first: FirstRun, imaging_first: FirstRun,
                                       medbench_first: FirstRun) -> None:
    """All five after the per-protocol first runs: QA, imaging and MedBench reuse their pools
    and give the first runs' scores (imaging: the same folder is the same run; MedBench: the
    same sheet is the same submission version); then RWE again reuses its pool."""
    from flows.demo import PROTOCOLS, run_demo
    from tasks_lib.demo import MEDBENCH_SUBMITTER, summary_table
    from tasks_lib.ledger import medbench as ledger
    from tasks_lib.rwe.cluster import default_cluster
    from tasks_lib.service_scope import command_scope

    with own_storage_and_ledger(root), command_scope(["demo"]):
        rows = run_demo(list(PROTOCOLS), lines.append, per_dataset=5)
        assert [r.protocol for r in rows] == list(PROTOCOLS)
        assert all(r.report and Path(r.report).is_file() for r in rows)
        by = {r.protocol: r for r in rows}
        for first in (qa_first, imaging_first, medbench_first):
            protocol = first.row.protocol
            again = _protocol_lines(lines, protocol)
            assert again[0].split("pool: ")[1].startswith("reused"), again[0]
            assert by[protocol].scores == first.row.scores
        [first_upload] = _upload_runs(imaging_first.lines)
        assert _upload_runs(lines) == [first_upload]  # the same folder: the same run
        assert "the same answer sheet again" in _protocol_lines(lines, "medbench")[1]
        assert [r.version for r in ledger.submissions(submitter=MEDBENCH_SUBMITTER)] == [1]
        humans = list(csv.DictReader((DATA_ROOT / "rexmle" / "ldct-iqa" / "leaderboard.csv")
                                     .open()))
        # The scripted baseline submits the public format example (quality 0 everywhere): its
        # correlations are undefined and graded 0, below every human entry.
        assert by["challenge"].scores["percentile"] == 0.0
        assert by["challenge"].scores["mean_rank"] == len(humans) + 1
        assert by["rwe"].scores == {"honest_sr": 1.0, "fabricate_sr_screened": 0.0,
                                    "fabricate_cohort_valid": 0.0}
        assert "fabricated_ids" in by["rwe"].headline
    assert default_cluster().pid() is None  # the command started it and stopped it
    with own_storage_and_ledger(root):
        table = summary_table(rows, 1.0)
        assert all(f"| {p}" in table and str(by[p].report) in table for p in PROTOCOLS)

        lines.clear()
        with command_scope(["demo", "--protocol", "rwe"]):
            again = run_demo(["rwe"], lines.append)
        assert lines[0].split("pool: ")[1].startswith("reused")
        assert again[0].scores == by["rwe"].scores
        assert default_cluster().pid() is None
