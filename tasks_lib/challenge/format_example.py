"""The public sample submission of a challenge pool: a format example with uninformative values.

A sample submission shows the layout (the CSV columns, the file names, the file formats, array
shapes and dtypes, JSON keys); it must not carry information about the test answers, or copying
it places on the leaderboard (measured before this module: a copied sample won bronze on isles22
and gold on ldct-iqa). So it is written from the layout of the synthetic case's own sample with
every value made uninformative, never from the references:

* CSV value columns: ``0`` in every row;
* arrays (NIfTI, PNG, TIFF, NPY): zeros of the same shape and dtype (NIfTI keeps its header);
* JSON: lists of objects become empty, numbers become 1 (a box keeps its keys and length and
  is one voxel wide, the smallest valid box).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks_lib.challenge.card import layout
from tasks_lib.taskspec import TaskSpec

ZERO = "0"
"""The value of every CSV value column in a format example."""


def _blank_json(value: Any) -> Any:
    """``value`` with its structure kept and no information: object lists emptied, numbers 1."""
    if isinstance(value, dict):
        return {k: _blank_json(v) for k, v in value.items()}
    if isinstance(value, list):
        if any(isinstance(v, dict | list) for v in value):
            return []
        return [_blank_json(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return 1


def _blank_file(src: Path, dst: Path) -> None:
    """Write the uninformative version of one submission file."""
    name = src.name.lower()
    if name.endswith((".nii", ".nii.gz")):
        import nibabel as nib

        image: Any = nib.load(src)
        zeros = np.zeros(image.shape, dtype=image.get_data_dtype())
        blank: Any = nib.Nifti1Image
        nib.save(blank(zeros, image.affine, image.header), dst)
    elif name.endswith((".tif", ".tiff")):
        import tifffile

        tifffile.imwrite(dst, np.zeros_like(tifffile.imread(src)))
    elif name.endswith(".png"):
        import imageio.v3 as iio

        iio.imwrite(dst, np.zeros_like(iio.imread(src)))
    elif name.endswith(".npy"):
        np.save(dst, np.zeros_like(np.load(src, allow_pickle=False)))
    elif name.endswith(".json"):
        dst.write_text(json.dumps(_blank_json(json.loads(src.read_text())), indent=1))
    else:
        shutil.copyfile(src, dst)


def write_format_example(card: TaskSpec, sample_dir: Path, out: Path) -> Path:
    """Write into ``out`` the format example of ``sample_dir`` (a submission folder in the
    card's layout): same files and columns, uninformative values (module docstring)."""
    value_columns = layout(card).value_columns
    for src in sorted(p for p in sample_dir.rglob("*") if p.is_file()):
        dst = out / src.relative_to(sample_dir)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".csv":
            table = pd.read_csv(src, dtype=str, keep_default_na=False)
            for column in value_columns:
                if column in table.columns:
                    table[column] = ZERO
            table.to_csv(dst, index=False)
        else:
            _blank_file(src, dst)
    return out
