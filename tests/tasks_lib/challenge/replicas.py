"""Small replicas of the official challenge releases: the official folder and file names,
formats and label maps (each family's docstring cites where they come from), a few tiny
cases with seeded content. Test data only: they check layouts and grading, not models."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SHAPE = (14, 12, 10)


def nifti(path: Path, array: np.ndarray, spacing: tuple[float, ...] = (0.5, 0.5, 0.8)) -> Path:
    """Write ``array`` as NIfTI with ``spacing`` (the releases' own format)."""
    import nibabel as nib

    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(array, np.diag([*spacing, 1.0]))
    image.header.set_zooms(spacing)
    nib.save(image, path)
    return path


def vessels(rng: np.random.Generator, labels: list[int], shape: tuple[int, ...] = SHAPE
            ) -> np.ndarray:
    """A label map with one short tube per label (straight runs of voxels, seeded)."""
    out = np.zeros(shape, dtype=np.uint8)
    for i, label in enumerate(labels):
        z = 1 + (i % (shape[2] - 2))
        x0 = int(rng.integers(1, shape[0] - 6))
        y = 1 + (i * 3) % (shape[1] - 2)
        out[x0:x0 + 5, y, z] = label
    return out


TOPCOW_LABELS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15]


def topcow(root: Path, ids: tuple[str, ...] = ("001", "002", "003", "004", "005"),
           modalities: tuple[str, ...] = ("ct", "mr")) -> Path:
    """``TopCoW2024_Data_Release``: ``imagesTr/topcow_<m>_<id>_0000.nii.gz``,
    ``cow_seg_labelsTr/topcow_<m>_<id>.nii.gz`` (MUL_CLASS_LABEL_MAP of TopCoW_Eval_Metrics
    constants.py), ``roi_loc_labelsTr/topcow_<m>_<id>.txt`` (the organisers' ROI text, as their
    test_assets/box_metrics/test_ROI-1_Metadata.txt) and ``antpos_edges_labelsTr/
    topcow_<m>_<id>.yml`` (as test_assets/edg_metrics/topcow_ct_003.yml)."""
    rng = np.random.default_rng(0)
    for m in modalities:
        for n, i in enumerate(ids):
            nifti(root / "imagesTr" / f"topcow_{m}_{i}_0000.nii.gz",
                  rng.normal(size=SHAPE).astype(np.float32))
            labels = TOPCOW_LABELS[n % 3:]
            nifti(root / "cow_seg_labelsTr" / f"topcow_{m}_{i}.nii.gz", vessels(rng, labels))
            size = [int(v) for v in rng.integers(3, 8, size=3)]
            where = [int(v) for v in rng.integers(0, 4, size=3)]
            (root / "roi_loc_labelsTr").mkdir(parents=True, exist_ok=True)
            (root / "roi_loc_labelsTr" / f"topcow_{m}_{i}.txt").write_text(
                "--- ROI Meta Data ---\n"
                f"Size (Voxels): {' '.join(map(str, size))}\n"
                f"Location (Voxels): {' '.join(map(str, where))}\n")
            bits = [int(b) for b in rng.integers(0, 2, size=8)]
            (root / "antpos_edges_labelsTr").mkdir(parents=True, exist_ok=True)
            (root / "antpos_edges_labelsTr" / f"topcow_{m}_{i}.yml").write_text(
                f"anterior:\n    3rd-A2:  {bits[2]}\n\n    Acom:    {bits[1]}\n\n"
                f"    R-A1:    {bits[3]}\n\n    L-A1:    {bits[0]}\n"
                f"posterior:\n    L-Pcom:  {bits[4]}\n    L-P1:    {bits[5]}\n"
                f"    R-P1:    {bits[6]}\n    R-Pcom:  {bits[7]}\n")
    return root
