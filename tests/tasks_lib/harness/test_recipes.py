"""The scripted baseline's segmentation recipe on a multi-channel release image (channels last,
as MSD's BraTS): one 3-D label map on the image's grid, tissue classes from the first channel."""

from __future__ import annotations

import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from tasks_lib.harness.recipes import SEGMENTATION


def test_the_segmentation_recipe_writes_a_3d_map_for_a_4d_image(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nibabel.testing import data_path

    t1 = np.asarray(nib.load(f"{data_path}/anatomical.nii").dataobj, dtype=np.float32)[..., :8]
    image = np.stack([t1, t1.max() - t1], axis=-1)  # a second, inverted channel
    inputs, out = tmp_path / "inputs", tmp_path / "submission"
    inputs.mkdir()
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    nib.save(nib.Nifti1Image(image, affine), inputs / "case-000.nii.gz")
    code = SEGMENTATION.replace("/public/inputs", str(inputs)).replace(
        "/workspace/submission", str(out))
    monkeypatch.setattr(sys, "argv", ["method.py"])
    exec(compile(code, "method.py", "exec"), {"__name__": "__main__"})
    labels = nib.load(out / "case-000.nii.gz")
    assert labels.shape == t1.shape and np.allclose(labels.affine, affine)
    values = np.asarray(labels.dataobj)
    assert set(np.unique(values).tolist()) == {0, 1, 2}
    # the classes follow the first channel's intensity: white matter is brighter than grey
    assert t1[values == 2].mean() > t1[values == 1].mean()
