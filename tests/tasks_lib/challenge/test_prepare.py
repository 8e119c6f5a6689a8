"""``challenge prepare`` on small replicas of the official releases: the pool holds ReX-MLE's
split (80 % public with labels as the validation split, 20 % test with private labels), the
challenge kit's perfect baseline scores what the official code gives identical maps, and a
wrong layout is refused with one error naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.tasks_lib.challenge import replicas
from tests.tasks_lib.challenge.prepared import broken, perfect_metrics, prepare, refusal, split

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def topcow_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replicas.topcow(tmp_path_factory.mktemp("topcow") / "TopCoW2024_Data_Release")


TOPCOW_PERFECT = {
    1: {"dice": 1.0, "cldice": 1.0, "b0_error": 0.0, "hd95": 0.0, "f1_grp2": 1.0,
        "anterior_graph_acc": 1.0, "posterior_graph_acc": 1.0, "anterior_topology": 1.0,
        "posterior_topology": 1.0},
    2: {"boundary_iou": 1.0, "iou": 1.0},
    3: {"anterior_acc": 1.0, "posterior_acc": 1.0},
}
"""What TopCoW_Eval_Metrics gives a prediction identical to the reference (every label present
in both maps: class Dice 1, clDice 1, Betti-0 error 0, HD95 0, group-2 detections all TP;
identical boxes: IoU 1; identical edge lists: every variant right)."""


@pytest.mark.parametrize("track,modality", [(1, "ct"), (2, "mr")])
@pytest.mark.parametrize("task", [1, 2, 3])
def test_topcow_release_prepares_with_rexmle_split(topcow_release: Path, tmp_path: Path,
                                                   track: int, modality: str,
                                                   task: int) -> None:
    task_id = f"topcow-track{track}-task{task}"
    pool = prepare(task_id, topcow_release, tmp_path / "v1")
    val, test = split(pool, ["001", "002", "003", "004", "005"])
    images = sorted(p.name for p in (pool / "public" / "images").iterdir())
    assert images == [f"{i}.nii.gz" for i in sorted(test)]
    src = topcow_release / "imagesTr" / f"topcow_{modality}_{test[0]}_0000.nii.gz"
    assert (pool / "public" / "images" / f"{test[0]}.nii.gz").read_bytes() == src.read_bytes()
    assert sorted(p.name for p in (pool / "public" / "validation" / "images").iterdir()) == \
        [f"{i}.nii.gz" for i in sorted(val)]
    assert not (pool / "public" / "labels").exists()
    assert "Official release" in (pool / "public" / "brief.md").read_text()
    assert perfect_metrics(task_id, pool, tmp_path) == TOPCOW_PERFECT[task]


def test_topcow_answers_are_the_official_files(topcow_release: Path, tmp_path: Path) -> None:
    """Task 2: the ROI text as the box JSON (size, location); task 3: the yml's edges as
    the card's columns."""
    pool = prepare("topcow-track1-task2", topcow_release, tmp_path / "box")
    row = pd.read_csv(pool / "private" / "test_labels.csv", dtype=str).iloc[0]
    box = json.loads((pool / "private" / row["predicted_bbox_path"]).read_text())
    txt = (topcow_release / "roi_loc_labelsTr" / f"topcow_ct_{row['image_id']}.txt")
    lines = txt.read_text().splitlines()
    assert box == {"size": [int(v) for v in lines[1].split(":")[1].split()],
                   "location": [int(v) for v in lines[2].split(":")[1].split()]}
    pool = prepare("topcow-track2-task3", topcow_release, tmp_path / "edges")
    row = pd.read_csv(pool / "private" / "test_labels.csv", dtype=str).iloc[0]
    import yaml

    doc = yaml.safe_load((topcow_release / "antpos_edges_labelsTr" /
                          f"topcow_mr_{row['image_id']}.yml").read_text())
    assert int(row["third_a2"]) == doc["anterior"]["3rd-A2"]
    assert int(row["r_pcom"]) == doc["posterior"]["R-Pcom"]


def test_topcow_refusals_name_the_file(topcow_release: Path, tmp_path: Path) -> None:
    import nibabel as nib

    rel = broken(topcow_release, tmp_path)
    shutil.rmtree(rel / "roi_loc_labelsTr")
    assert refusal("topcow-track1-task2", rel, tmp_path) == (
        f"{rel / 'roi_loc_labelsTr'}: folder not found; the official release layout has "
        "roi_loc_labelsTr/topcow_ct_{id}.txt")
    (rel / "cow_seg_labelsTr" / "topcow_ct_003.nii.gz").unlink()
    assert refusal("topcow-track1-task1", rel, tmp_path) == (
        f"{rel / 'cow_seg_labelsTr' / 'topcow_ct_003.nii.gz'}: missing: the label of case 003 "
        "(official layout: cow_seg_labelsTr/topcow_ct_{id}.nii.gz)")
    (rel / "imagesTr" / "topcow_mr_002_0000.nii.gz").rename(
        rel / "imagesTr" / "topcow_mr_002_0000.mha")
    assert refusal("topcow-track2-task1", rel, tmp_path) == (
        f"{rel / 'imagesTr' / 'topcow_mr_002_0000.mha'}: wrong extension '.mha': the official "
        "release names it imagesTr/topcow_mr_{id}_0000.nii.gz (.nii.gz)")
    label = rel / "cow_seg_labelsTr" / "topcow_ct_001.nii.gz"
    shutil.copy(topcow_release / "cow_seg_labelsTr" / "topcow_ct_003.nii.gz",
                rel / "cow_seg_labelsTr" / "topcow_ct_003.nii.gz")
    data = np.asarray(nib.load(label).dataobj).copy()
    data[0, 0, 0] = 13
    replicas.nifti(label, data)
    assert refusal("topcow-track1-task1", rel, tmp_path) == (
        f"{label}: label value(s) [13] outside the label map (0 Background, 1 BA, 2 R-PCA, "
        "3 L-PCA, 4 R-ICA, 5 R-MCA, 6 L-ICA, 7 L-MCA, 8 R-Pcom, 9 L-Pcom, 10 Acom, 11 R-ACA, "
        "12 L-ACA, 15 3rd-A2)")
    edges = rel / "antpos_edges_labelsTr" / "topcow_ct_004.yml"
    edges.write_text("anterior:\n  Acom: 1\n")
    assert refusal("topcow-track1-task3", rel, tmp_path) == (
        f"{edges}: anterior.L-A1 must be 0 or 1, got None")


def _cli(*args: str) -> object:
    from typer.testing import CliRunner

    import flows.cli.challenge  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    return CliRunner().invoke(app, ["challenge", "prepare", *args])


@pytest.mark.usefixtures("prefect_harness")
def test_prepare_command_end_to_end(topcow_release: Path, tmp_path: Path) -> None:
    """`medflows challenge prepare`: the construct tail (write, exploit audit, ledger) on the
    prepared release; the pool is not illustrative and its perfect baseline places first."""
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.cells import score_challenge
    from tasks_lib.ledger import store

    result = _cli("--task", "topcow-track2-task3", "--from", str(topcow_release), "--out",
                  str(tmp_path / "pool"), "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["illustrative"] is False and summary["n_cases"] == 1
    pool = Path(summary["manifest"].removesuffix("/manifest.json"))
    assert json.loads((pool / "audit.json").read_text())["report"]["clean"]
    assert store.pools(pool_id="topcow-track2-task3", kind="pool")
    from tasks_lib.challenge.baselines import _perfect

    scored = score_challenge(load_challenge("topcow-track2-task3"), pool,
                             _perfect(str(pool), tmp_path / "perfect"), "r", "h", "v")
    assert scored.metrics == TOPCOW_PERFECT[3]
    assert scored.groups["leaderboard"]["illustrative"] == 0.0
    assert not any(n.startswith("illustrative") for n in scored.notes)


def test_prepare_command_refuses_a_wrong_layout(topcow_release: Path, tmp_path: Path) -> None:
    rel = broken(topcow_release, tmp_path)
    shutil.rmtree(rel / "antpos_edges_labelsTr")
    result = _cli("--task", "topcow-track1-task3", "--from", str(rel), "--out",
                  str(tmp_path / "pool"))
    assert result.exit_code == 2
    assert result.stderr == (f"error: {rel / 'antpos_edges_labelsTr'}: folder not found; the "
                             "official release layout has antpos_edges_labelsTr/"
                             "topcow_ct_{id}.yml\n")
    assert not (tmp_path / "pool").exists()
    unknown = _cli("--task", "nope", "--from", str(rel))
    assert unknown.exit_code == 2 and unknown.stderr.startswith("error: unknown challenge 'nope'")
    assert "topcow-track1-task3" in unknown.stderr and unknown.stderr.count("\n") == 1


def test_every_card_has_a_release_reader() -> None:
    """The 20 cards each have one of the 10 family readers, with a layout and the release's
    data terms; an unknown family name lists the registered ones."""
    from tasks_lib.challenge.card import list_challenges
    from tasks_lib.challenge.prepare.catalog import reader_for
    from tasks_lib.challenge.prepare.readers import READERS

    families = {c: reader_for(c).family for c in list_challenges()}
    assert len(families) == 20 and len(set(families.values())) == 10
    assert all(reader_for(c).layouts[c].terms for c in families)
    with pytest.raises(KeyError, match="unknown release reader 'nope'; known release readers: "):
        READERS.get("nope")


AUDITED = {
    "topcow-track1-task2": lambda root: replicas.topcow(root, ("001", "002", "003"), ("ct",)),
    "topbrain-track2": lambda root: replicas.topbrain(root),
    "isles22": lambda root: replicas.isles22(root),
    "panther-task1": lambda root: replicas.panther(root, 1),
    "seg_a": lambda root: replicas.seg_a(root),
    "puma-track2-task1": lambda root: replicas.puma(root),
    "puma-track1-task2": lambda root: replicas.puma(root),
    "dentex": lambda root: replicas.dentex(root),
    "neurips-cellseg": lambda root: replicas.cellseg(root),
    "ldct-iqa": lambda root: replicas.ldct(root),
    "usenhance": lambda root: replicas.usenhance(root),
}
"""One card per family (and per answer kind) and the replica of its release."""


@pytest.mark.parametrize("task_id", sorted(AUDITED))
def test_prepared_pool_passes_the_exploit_audit(tmp_path: Path, task_id: str) -> None:
    """No public file repeats or names a private answer (the perfect submission's files are
    under predictions/, as a synthetic case's), the null agents and the format example stay
    below the floors: the publish gate passes without an override."""
    from tasks_lib.audit import audit_pool

    pool = prepare(task_id, AUDITED[task_id](tmp_path / "release"), tmp_path / "v1")
    report = audit_pool(str(pool), judge_model="rules", sandbox=False)
    assert report.clean, [(f.check, f.evidence[:3]) for f in report.findings if not f.passed]
