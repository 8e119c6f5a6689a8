"""Papercut (issue #26): the ``classical`` baseline of a one-label bring-your-own pool writes only
the label the pool declares, so no case is rejected for an unexpected label value.

Data: scikit-image's ``coins`` crops of :func:`tests.tasks_lib.imaging.test_ingest.png_folder`
(label 1 = pixel > 160); the ``classical`` method is Otsu foreground + k-means on intensity.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tasks_lib.imaging import codecs
from tasks_lib.imaging.baselines import kmeans_segmentation
from tests.tasks_lib.imaging.test_ingest import png_folder


def test_kmeans_writes_background_and_the_declared_labels_only() -> None:
    """Clusters sorted by centre map to 0 then the labels in ascending order."""
    from skimage import data

    coins = data.coins()[:150, :190].astype(np.float64)
    assert set(np.unique(kmeans_segmentation(coins, [1]))) == {0, 1}
    three = kmeans_segmentation(coins, [4, 2])
    assert set(np.unique(three)) == {0, 2, 4}
    fg = three > 0
    assert coins[three == 4].mean() > coins[three == 2].mean() > coins[~fg].mean()


@pytest.mark.usefixtures("prefect_harness")
def test_classical_baseline_of_a_one_label_folder_pool_is_scored(tmp_path: Path) -> None:
    from flows.cli import imaging as _imaging  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    runner = CliRunner()
    folder, pool, sub = png_folder(tmp_path / "coins"), tmp_path / "pool", tmp_path / "sub"
    built = runner.invoke(app, ["pool", "build", "imaging", "--from", str(folder), "--track",
                                "segmentation", "--task-id", "byo-coins-classical",
                                "--out", str(pool)])
    assert built.exit_code == 0, built.output
    made = runner.invoke(app, ["baseline", "--task", "byo-coins-classical", "--kind",
                               "classical", "--pool", str(pool), "--out", str(sub)])
    assert made.exit_code == 0, made.output
    scored = runner.invoke(app, ["score", "submission", "--task", "byo-coins-classical",
                                 "--submission", str(sub), "--pool", str(pool), "--json"])
    assert scored.exit_code == 0, scored.output
    card = json.loads(scored.stdout)
    assert card["invalid_reason"] is None
    assert [c["valid"] for c in card["per_case"]] == [True, True], card["per_case"]
    # Otsu on the coins finds the bright faces: far better than the empty map's Dice of 0
    assert card["metrics"]["dice_macro"] > 0.5
    files = sorted(sub.iterdir())
    assert [f.name for f in files] == ["coins-bottom.nii.gz", "coins-top.nii.gz"]
    for f in files:
        assert set(np.unique(codecs.nifti_array(codecs.nifti_load(f.read_bytes())))) == {0, 1}


def test_classical_boxes_of_a_one_class_folder_pool_use_that_class(tmp_path: Path) -> None:
    """The blob detector finds a dark 'mass' (class 2) between the coins of the bottom crop;
    on a pool declaring only class 1 (coin) it is left out, and the constant box is class 1."""
    from evaluators.core import Track
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.baselines import BaselineKind, baseline_files
    from tasks_lib.imaging.intake import folder_card
    from tests.tasks_lib.imaging.test_ingest import detection_folder

    folder = detection_folder(tmp_path / "coins")
    card = folder_card(folder, Track.DETECTION, "byo-det-classical")
    rendered = steps.ingest.fn(card, str(folder))
    published = steps.publish.fn(card, str(tmp_path / "pool"), rendered,
                                 steps.deidentify_step.fn(card, rendered))
    m = published.manifest
    assert m.classes == {1: "coin"}
    for kind in (BaselineKind.CLASSICAL, BaselineKind.CONSTANT):
        files = dict(baseline_files(kind, published.url, m))
        labels = {v for data in files.values() for v in json.loads(data)["labels"]}
        assert labels == {1}, (kind, labels)
    boxes = dict(baseline_files(BaselineKind.CLASSICAL, published.url, m))
    assert len(json.loads(boxes["bottom.json"])["boxes"]) == 7  # the 7 coins, not the gap
