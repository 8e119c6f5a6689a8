"""MNI152 axial slices with seeded synthetic lesions: one generator for detection, VQA and reports.

Each image is an axial slice of the nilearn MNI152 T1 template (2 mm, rotated so anterior is up,
scaled to 0..1), chosen uniformly from the middle 40 % of slices. 0..``max_lesions`` lesions are
drawn (count uniform) at brain positions that do not overlap:

* class 1 ``hyperintensity`` — a bright disk, radius 3–5 px, intensity + 0.45 (smooth edge);
* class 2 ``mass`` — a dark disk, radius 6–9 px, intensity × 0.25, with a bright 1-px rim.

Boxes are the exact pixel extent of each lesion footprint, ``[x1, y1, x2, y2]`` with ``x`` =
column, ``x2``/``y2`` exclusive edges. Side is the subject's side from the template affine
(world x < 0 → ``left``). Gaussian noise (``noise_sd``) is added last; images are 8-bit PNG.
"""

from __future__ import annotations

from enum import IntEnum
from functools import cache

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.sources import LesionSliceSource


class LesionClass(IntEnum):
    """Detection class ids."""

    HYPERINTENSITY = 1
    MASS = 2


CLASS_NAMES = {LesionClass.HYPERINTENSITY: "hyperintensity", LesionClass.MASS: "mass"}


class Lesion(Frozen):
    """One synthetic lesion with everything known about it."""

    label: LesionClass = Field(description="Detection class id.")
    box: list[float] = Field(description="[x1, y1, x2, y2] pixel extent (exclusive x2, y2).")
    side: str = Field(description="'left' or 'right' (subject's side).")
    diameter_mm: float = Field(description="Footprint diameter in mm (2 mm pixels).")


class LesionCase(Frozen):
    """One generated image and its lesions."""

    case_id: str = Field(description="Case identifier.")
    slice_z: int = Field(description="Axial slice index in the 2 mm template.")
    lesions: list[Lesion] = Field(description="Lesions drawn into the image.")


@cache
def _template() -> tuple[NDArray[np.float32], NDArray[np.float64]]:
    """The 2 mm MNI152 T1 (scaled to 0..1) and its affine, read-only; cached: nilearn loads and
    resamples it for seconds, and every lesion card draws on it."""
    from nilearn import datasets

    t1 = datasets.load_mni152_template(resolution=2)
    data = np.asarray(t1.get_fdata(), dtype=np.float32)
    vol, affine = data / max(float(data.max()), 1e-6), np.asarray(t1.affine)
    vol.setflags(write=False)
    affine.setflags(write=False)
    return vol, affine


def _slice(vol: NDArray[np.float32], z: int) -> NDArray[np.float32]:
    return np.ascontiguousarray(np.rot90(vol[:, :, z]))


def _draw(img: NDArray[np.float32], rng: np.random.Generator, brain: NDArray[np.bool_],
          taken: NDArray[np.bool_], label: LesionClass) -> NDArray[np.bool_] | None:
    r = int(rng.integers(3, 6)) if label == LesionClass.HYPERINTENSITY else int(rng.integers(6, 10))
    yy, xx = np.mgrid[: img.shape[0], : img.shape[1]]
    for _ in range(50):
        cy, cx = int(rng.integers(r, img.shape[0] - r)), int(rng.integers(r, img.shape[1] - r))
        disk = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        halo = (yy - cy) ** 2 + (xx - cx) ** 2 <= (r + 3) ** 2
        if brain[disk].all() and not taken[halo].any():
            if label == LesionClass.HYPERINTENSITY:
                img[disk] = np.minimum(img[disk] + 0.45, 1.0)
            else:
                rim = disk & ((yy - cy) ** 2 + (xx - cx) ** 2 > (r - 1) ** 2)
                img[disk & ~rim] *= 0.25
                img[rim] = np.minimum(img[rim] + 0.35, 1.0)
            return np.asarray(disk)
    return None


def lesion_cases(src: LesionSliceSource, prefix: str) -> list[tuple[LesionCase,
                                                                    NDArray[np.uint8]]]:
    """Generate the images (8-bit) and their lesion records (see the module docstring)."""
    vol, affine = _template()
    rng = np.random.default_rng(src.seed)
    nz = vol.shape[2]
    out = []
    for i in range(src.n_cases):
        z = int(rng.integers(int(0.4 * nz), int(0.6 * nz)))
        img = _slice(vol, z).copy()
        brain = img > 0.25
        taken = np.zeros_like(brain)
        lesions: list[Lesion] = []
        for _ in range(int(rng.integers(0, src.max_lesions + 1))):
            label = LesionClass(int(rng.integers(1, 3)))
            disk = _draw(img, rng, brain, taken, label)
            if disk is None:
                continue
            taken |= disk
            ys, xs = np.nonzero(disk)
            col = float(xs.mean())
            # rot90 maps template index i (x axis) to column i, so world x follows the column.
            world_x = float(affine[0, 0] * col + affine[0, 3])
            lesions.append(Lesion(
                label=label, box=[float(xs.min()), float(ys.min()), float(xs.max() + 1),
                                  float(ys.max() + 1)],
                side="left" if world_x < 0 else "right",
                diameter_mm=float((xs.max() - xs.min() + 1) * abs(affine[0, 0]))))
        img = np.clip(img + rng.normal(0.0, src.noise_sd, img.shape), 0.0, 1.0)
        out.append((LesionCase(case_id=f"{prefix}-{i:03d}", slice_z=z, lesions=lesions),
                    np.asarray(np.round(img * 255), dtype=np.uint8)))
    return out
