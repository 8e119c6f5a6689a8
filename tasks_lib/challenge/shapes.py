"""Seeded shape generators for the synthetic challenge cases (see
:mod:`tasks_lib.challenge.synthetic`): each returns a few cases, each with an input image, the
answer (array, JSON document or CSV values) and an imperfect prediction of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage
from skimage import data
from skimage.transform import resize

Rng = np.random.Generator


class SyntheticItem(NamedTuple):
    """One synthetic test case."""

    case_id: str
    image: NDArray[Any] | None
    truth: Any
    sample: Any
    spacing: tuple[float, ...] = ()


def ball(shape: tuple[int, ...], centre: NDArray[np.float64], radius: float,
         spacing: tuple[float, ...] | None = None) -> NDArray[np.bool_]:
    """Voxels within ``radius`` (mm when ``spacing`` is given) of ``centre`` (voxels)."""
    step = np.asarray(spacing if spacing else (1.0,) * len(shape))
    grid = np.indices(shape, dtype=np.float64)
    dist2 = sum(((g - c) * s) ** 2 for g, c, s in zip(grid, centre, step, strict=True))
    return np.asarray(dist2 <= radius ** 2)


def _noisy(rng: Rng, mask: NDArray[Any], scale: float = 40.0) -> NDArray[np.float32]:
    base = ndimage.gaussian_filter(np.asarray(mask, dtype=np.float32) * 100.0, 1.0)
    return np.asarray(base + rng.normal(0.0, scale / 4, mask.shape), dtype=np.float32)


# --- ISLES'22: binary stroke lesions in a 3D volume ---------------------------------------------

def lesions(rng: Rng) -> list[SyntheticItem]:
    """Four 3D cases with 1–3 ball lesions; the sample shifts them, misses one, adds one."""
    shape, spacing = (32, 32, 12), (1.5, 1.5, 3.0)
    items = []
    for i in range(4):
        truth = np.zeros(shape, dtype=np.uint8)
        sample = np.zeros(shape, dtype=np.uint8)
        for k in range(int(rng.integers(1, 4))):
            centre = rng.uniform([6, 6, 3], [26, 26, 9])
            radius = float(rng.uniform(3.0, 6.0))
            truth[ball(shape, centre, radius, spacing)] = 1
            if not (i == 1 and k == 0):
                shifted = centre + rng.integers(-1, 2, size=3)
                sample[ball(shape, shifted, radius + float(rng.uniform(-1, 1)), spacing)] = 1
        if i == 2:
            sample[ball(shape, np.array([3.0, 3.0, 2.0]), 3.0, spacing)] = 1
        items.append(SyntheticItem(f"case_{i:03d}", _noisy(rng, truth), truth, sample, spacing))
    return items


# --- NeurIPS-CellSeg: 2D instance label maps --------------------------------------------------

def cells(rng: Rng) -> list[SyntheticItem]:
    """Three 64² images with 6–9 disk cells; the sample jitters, drops and adds cells."""
    shape = (64, 64)
    items = []
    for i in range(3):
        truth = np.zeros(shape, dtype=np.uint16)
        sample = np.zeros(shape, dtype=np.uint16)
        n = int(rng.integers(6, 10))
        for k in range(n):
            centre = rng.uniform(4, 60, size=2)
            radius = float(rng.uniform(3.0, 6.0))
            truth[ball(shape, centre, radius)] = k + 1
            if k != 0:
                jitter = centre + rng.normal(0, 0.8, size=2)
                sample[ball(shape, jitter, radius + float(rng.uniform(-1.5, 1.0)))] = k + 1
        sample[ball(shape, rng.uniform(10, 54, size=2), 4.0)] = n + 1
        image = np.asarray(np.clip(_noisy(rng, truth > 0) * 2, 0, 255), dtype=np.uint8)
        items.append(SyntheticItem(f"cell_{i:03d}", image, truth, sample))
    return items


# --- USenhance: grey-level images -------------------------------------------------------------

def enhance(rng: Rng) -> list[SyntheticItem]:
    """Three 64² crops of scikit-image's camera image; input and sample add noise."""
    camera = data.camera()  # type: ignore[no-untyped-call]
    items = []
    for i in range(3):
        y, x = rng.integers(0, 512 - 128, size=2)
        crop = resize(camera[y:y + 128, x:x + 128], (64, 64),  # type: ignore[no-untyped-call]
                      preserve_range=True, anti_aliasing=True)
        truth = np.asarray(np.clip(crop, 0, 255), dtype=np.uint8)
        noisy = np.clip(truth + rng.normal(0, 25, truth.shape), 0, 255).astype(np.uint8)
        sample = np.clip(truth + rng.normal(0, 8, truth.shape), 0, 255).astype(np.uint8)
        items.append(SyntheticItem(f"us_{i:03d}", noisy, truth, sample))
    return items


# --- PUMA tissue: 2D class maps 0-5 -----------------------------------------------------------

def tissue(rng: Rng) -> list[SyntheticItem]:
    """Three 64² class maps of rectangles of 3–4 of the classes 1–5; the sample shifts them."""
    shape = (64, 64)
    items = []
    for i in range(3):
        truth = np.zeros(shape, dtype=np.uint8)
        sample = np.zeros(shape, dtype=np.uint8)
        for c in rng.choice([1, 2, 3, 4, 5], size=int(rng.integers(3, 5)), replace=False):
            y, x = rng.integers(0, 44, size=2)
            h, w = rng.integers(8, 20, size=2)
            truth[y:y + h, x:x + w] = c
            dy, dx = rng.integers(-3, 4, size=2)
            sample[max(y + dy, 0):y + dy + h, max(x + dx, 0):x + dx + w] = c
        image = np.asarray(np.clip(truth * 40 + rng.normal(0, 10, shape), 0, 255), dtype=np.uint8)
        items.append(SyntheticItem(f"tissue_{i:03d}", image, truth, sample))
    return items


# --- LDCT-IQA: quality scores of noisy slices (CSV) -------------------------------------------

def quality(rng: Rng) -> list[SyntheticItem]:
    """Eight 64² Shepp–Logan slices at increasing noise; the score falls with the noise."""
    phantom = resize(data.shepp_logan_phantom(),  # type: ignore[no-untyped-call]
                     (64, 64), anti_aliasing=True)
    items = []
    for i, sigma in enumerate(rng.permutation(np.linspace(0.02, 0.4, 8))):
        image = np.clip((phantom + rng.normal(0, sigma, phantom.shape)) * 255, 0, 255)
        score = round(float(4.0 - 10.0 * sigma), 3)
        items.append(SyntheticItem(
            f"slice_{i:03d}", image.astype(np.uint8), {"quality_score": score},
            {"quality_score": round(score + float(rng.normal(0, 0.4)), 3)}))
    return items


# --- TopCoW task 3: Circle-of-Willis edge lists (CSV) -----------------------------------------

EDGES = ["l_a1", "acom", "third_a2", "r_a1", "l_pcom", "l_p1", "r_p1", "r_pcom"]


def edge_lists(rng: Rng) -> list[SyntheticItem]:
    """Six cases of random edge presences; the sample flips one edge in two of them."""
    items = []
    for i in range(6):
        truth = {e: int(v) for e, v in zip(EDGES, rng.integers(0, 2, size=8), strict=True)}
        sample = dict(truth)
        if i in (0, 3):
            flip = EDGES[int(rng.integers(0, 8))]
            sample[flip] = 1 - sample[flip]
        items.append(SyntheticItem(f"cow_{i:03d}", None, truth, sample))
    return items


# --- 3D volumes: PANTHER tumour + pancreas, SEG.A. aorta, TopCoW/TopBrain vessel labels -----

def tube(shape: tuple[int, ...], a: NDArray[np.float64], b: NDArray[np.float64],
         radius: float) -> NDArray[np.bool_]:
    """Voxels within ``radius`` of the segment ``a``–``b`` (voxel units)."""
    grid = np.indices(shape, dtype=np.float64).reshape(len(shape), -1).T
    ab = b - a
    t = np.clip((grid - a) @ ab / max(float(ab @ ab), 1e-9), 0.0, 1.0)
    dist = np.linalg.norm(grid - (a + t[:, None] * ab), axis=1)
    return np.asarray(dist <= radius).reshape(shape)


def pancreas(rng: Rng) -> list[SyntheticItem]:
    """Four volumes: a pancreas with a tumour ball in the image; the reference labels the
    tumour only (1), as the organisers' label set declares (background 0, tumour 1), so the
    official evaluation script, which counts any non-zero reference voxel as tumour, reads it
    as the card does. The sample moves and resizes the tumour, and is empty in one case."""
    shape, spacing = (32, 32, 16), (1.2, 1.2, 2.5)
    items = []
    for i in range(4):
        organ = tube(shape, np.array([6.0, 16, 8]), np.array([26.0, 14, 8]), 5.0)
        centre = rng.uniform([10, 12, 6], [22, 18, 10])
        radius = float(rng.uniform(3.0, 6.0))
        tumour = ball(shape, centre, radius, spacing)
        truth = tumour.astype(np.uint8)
        sample = np.zeros(shape, dtype=np.uint8)
        if i != 3:
            moved = ball(shape, centre + rng.integers(-2, 3, size=3), radius + 1.0, spacing)
            sample[moved] = 1
        items.append(SyntheticItem(f"panther_{i:03d}", _noisy(rng, organ | tumour), truth,
                                   sample, spacing))
    return items


def aorta(rng: Rng) -> list[SyntheticItem]:
    """Four volumes with an aorta-like tube and a branch; the sample is shifted, thinner, and
    misses the branch in one case and everything in another."""
    shape, spacing = (32, 32, 24), (0.8, 0.8, 1.5)
    items = []
    for i in range(4):
        top = rng.uniform([12, 12, 22], [20, 20, 23])
        bottom = rng.uniform([12, 12, 1], [20, 20, 2])
        branch_end = rng.uniform([2, 2, 12], [8, 30, 18])
        truth = (tube(shape, top, bottom, 4.0)
                 | tube(shape, (top + bottom) / 2, branch_end, 2.0)).astype(np.uint8)
        shift = rng.integers(-1, 2, size=3).astype(np.float64)
        sample = tube(shape, top + shift, bottom + shift, 3.5)
        if i != 1:
            sample |= tube(shape, (top + bottom) / 2 + shift, branch_end, 2.0)
        if i == 2:
            sample[:] = False
        items.append(SyntheticItem(f"aorta_{i:03d}", _noisy(rng, truth), truth,
                                   sample.astype(np.uint8), spacing))
    return items


def vessel_labels(labels: list[int]) -> Callable[[Rng], list[SyntheticItem]]:
    """A generator of three volumes of chained vessel segments labelled from ``labels``; the
    sample drops a label, relabels another (a wrong neighbour), shifts one case and adds a
    spurious blob."""

    def generate(rng: Rng) -> list[SyntheticItem]:
        shape, spacing = (36, 36, 20), (0.6, 0.6, 0.9)
        items = []
        for i in range(3):
            chosen = [int(c) for c in rng.choice(labels, size=len(labels) - 2, replace=False)]
            truth = np.zeros(shape, dtype=np.uint8)
            point = rng.uniform([4, 4, 4], [32, 32, 16])
            for c in chosen:
                end = np.clip(point + rng.normal(0, 8, size=3), [2, 2, 2], [33, 33, 17])
                truth[tube(shape, point, end, 1.6) & (truth == 0)] = c
                point = end
            sample: NDArray[np.uint8] = truth.copy()
            sample[sample == chosen[-1]] = 0
            sample[sample == chosen[1]] = chosen[-2] if i == 1 else chosen[1]
            if i == 2:
                sample = np.asarray(np.roll(sample, 1, axis=0), dtype=np.uint8)
            sample[ball(shape, np.array([3.0, 33.0, 3.0]), 1.5)] = labels[0] if i else 0
            items.append(SyntheticItem(f"vessels_{i:03d}", _noisy(rng, truth > 0), truth,
                                       sample, spacing))
        return items

    return generate
