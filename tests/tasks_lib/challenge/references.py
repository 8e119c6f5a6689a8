"""Reference values of every challenge metric on a synthetic case, computed independently of
``evaluators/``: by the reference packages (pycocotools, DeepMind surface-distance, MONAI,
SimpleITK, scikit-image, scikit-learn, scipy, cc3d) following each challenge's official or
ReX-MLE grading rule, or by hand where no package exists (PUMA centroid matching, TopCoW box
sets). Files are read directly (nibabel, imageio, tifffile, json), not through the grader."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

Case = tuple[Any, Any, tuple[float, ...]]  # prediction, reference, reference spacing


def _read(path: Path) -> tuple[Any, tuple[float, ...]]:
    name = path.name
    if name.endswith(".json"):
        return json.loads(path.read_text()), ()
    if name.endswith(".nii.gz"):
        import nibabel as nib

        image = nib.load(path)
        data = np.asarray(image.get_fdata())
        return data, tuple(float(z) for z in image.header.get_zooms()[:data.ndim])
    if name.endswith((".tif", ".tiff")):
        import tifffile

        return np.asarray(tifffile.imread(path)), ()
    import imageio.v3 as iio

    return np.asarray(iio.imread(path)), ()


def load_pairs(sub_dir: Path, ref_dir: Path, id_column: str, column: str) -> list[Case]:
    """(prediction, reference, spacing) per case, in reference order."""
    ref = pd.read_csv(ref_dir / "test_labels.csv", dtype={id_column: str}).set_index(id_column)
    sub = pd.read_csv(sub_dir / "submission.csv", dtype={id_column: str}).set_index(id_column)
    out = []
    for case in ref.index:
        truth, spacing = _read(ref_dir / ref.at[case, column])
        pred, _ = _read(sub_dir / sub.at[case, column])
        out.append((pred, truth, spacing))
    return out


def value_tables(sub_dir: Path, ref_dir: Path, id_column: str) -> tuple[pd.DataFrame,
                                                                           pd.DataFrame]:
    ref = pd.read_csv(ref_dir / "test_labels.csv", dtype={id_column: str}).set_index(id_column)
    sub = pd.read_csv(sub_dir / "submission.csv", dtype={id_column: str}).set_index(id_column)
    return sub.loc[ref.index], ref


# --- binary masks ----------------------------------------------------------------------------

def dice_sklearn(pred: Any, ref: Any) -> float:
    from sklearn.metrics import f1_score

    p, r = np.asarray(pred).ravel() > 0, np.asarray(ref).ravel() > 0
    if not p.any() and not r.any():
        return 1.0
    return float(f1_score(r, p, zero_division=0.0))


def isles(cases: list[Case]) -> dict[str, float]:
    """ISLES'22 official rules with cc3d components (26-connectivity)."""
    import cc3d

    dice, f1, count, volume = [], [], [], []
    for pred, ref, spacing in cases:
        p, r = np.asarray(pred) > 0, np.asarray(ref) > 0
        lp, n_p = cc3d.connected_components(p, connectivity=26, return_N=True)
        lr, n_r = cc3d.connected_components(r, connectivity=26, return_N=True)
        tp = len(set(np.unique(lr[p])) - {0})
        fp = n_p - len(set(np.unique(lp[r])) - {0})
        fn = n_r - tp
        f1.append(1.0 if tp + fp + fn == 0 else tp / (tp + (fp + fn) / 2))
        dice.append(dice_sklearn(p, r))
        count.append(abs(n_r - n_p))
        volume.append(abs(int(r.sum()) - int(p.sum())) * float(np.prod(spacing)) / 1000)
    return {"dice": float(np.mean(dice)), "lesion_f1": float(np.mean(f1)),
            "lesion_count_diff": float(np.mean(count)), "abs_volume_diff": float(np.mean(volume))}


def seg_a(cases: list[Case]) -> dict[str, float]:
    """SEG.A. as the card's official semantics reads the challenge: medians of Dice and of the
    symmetric Hausdorff distance (the larger of MONAI's two directed maxima) in mm from the
    reference spacing; both empty 0, one empty the image diagonal in mm."""
    from monai.metrics.utils import get_mask_edges, get_surface_distance

    hd, dsc = [], []
    for pred, ref, spacing in cases:
        p, r = (np.asarray(pred) > 0).astype(np.uint8), (np.asarray(ref) > 0).astype(np.uint8)
        dsc.append(dice_sklearn(p, r))
        if not p.any() and not r.any():
            hd.append(0.0)
        elif not p.any() or not r.any():
            hd.append(float(np.sqrt(sum((n * s) ** 2 for n, s in zip(p.shape, spacing,
                                                                       strict=True)))))
        elif np.array_equal(p, r):
            hd.append(0.0)
        else:
            ep, er = get_mask_edges(p, r)
            hd.append(max(float(np.asarray(get_surface_distance(a, b, "euclidean",
                                                                spacing)).max())
                          for a, b in ((ep, er), (er, ep))))
    return {"hd_50pc": float(np.median(hd)), "dsc_50pc": float(np.median(dsc))}


def panther(cases: list[Case]) -> dict[str, float]:
    """PANTHER as the organisers' Evaluation/evaluate_local.py grades it with DeepMind
    surface-distance: SimpleITK's (x, y, z) spacing on its (z, y, x) array, i.e. on these
    (x, y, z) nibabel arrays the zooms reversed; a two-valued map with 0 read as ``> 0``."""
    from surface_distance import metrics as sd

    rows = []
    for pred, ref, zooms in cases:
        spacing = tuple(zooms)[::-1]
        p = np.asarray(pred)
        values = set(np.unique(p).tolist())
        if not (values <= {0, 1} or (len(values) == 2 and 0 in values)):
            raise ValueError(f"not binary: {sorted(values)}")
        p = (p == 1) if values <= {0, 1} else (p > 0)
        g = np.asarray(ref) == 1
        voxel = float(np.prod(spacing))
        if p.all() or not p.any():
            diag = float(np.linalg.norm(np.array(g.shape) * np.array(spacing)))
            rows.append((0.0, 0.0, diag, diag, g.sum() * voxel))
            continue
        dist = sd.compute_surface_distances(g, p, spacing_mm=spacing)
        a, b = sd.compute_average_surface_distance(dist)
        rows.append((sd.compute_dice_coefficient(g, p),
                     sd.compute_surface_dice_at_tolerance(dist, tolerance_mm=5),
                     sd.compute_robust_hausdorff(dist, percent=95), (a + b) / 2,
                     abs(p.sum() * voxel - g.sum() * voxel)))
    arr = np.array(rows, dtype=np.float64)
    return {"dsc": arr[:, 0].mean(), "msd": arr[:, 1].mean(), "hd95": arr[:, 2].mean(),
            "masd": arr[:, 3].mean(), "rmse": float(np.sqrt(np.mean(arr[:, 4] ** 2)))}


# --- images ----------------------------------------------------------------------------------

def tissue(cases: list[Case]) -> dict[str, float]:
    """PUMA micro Dice by hand (classes 1-5 pooled over images, absent everywhere = 0)."""
    scores = []
    for c in range(1, 6):
        inter = sum(int(((p == c) & (r == c)).sum()) for p, r, _ in cases)
        union = sum(int((p == c).sum() + (r == c).sum()) for p, r, _ in cases)
        scores.append(0.0 if union == 0 or inter == 0 else (2 * inter + 1e-5) / (union + 1e-5))
    return {"dice": float(np.mean(scores))}


def cells(cases: list[Case]) -> dict[str, float]:
    """NeurIPS-CellSeg: skimage clear_border (2 px) + the official matching cost (scipy), each
    image's F1 rounded to 4 decimals (np.round) as the official script does (the synthetic
    images are far below its 25 M-pixel tiling size)."""
    from scipy.optimize import linear_sum_assignment
    from skimage.segmentation import clear_border, relabel_sequential

    out: dict[str, list[float]] = {f"f1_{t}": [] for t in ("0.5", "0.6", "0.7", "0.8", "0.9")}
    for pred, ref, _ in cases:
        p = relabel_sequential(clear_border(np.asarray(pred, dtype=np.int64), 1))[0]
        r = relabel_sequential(clear_border(np.asarray(ref, dtype=np.int64), 1))[0]
        iou = np.zeros((int(r.max()), int(p.max())))
        for i in range(1, int(r.max()) + 1):
            for j in range(1, int(p.max()) + 1):
                inter = np.sum((r == i) & (p == j))
                iou[i - 1, j - 1] = inter / np.sum((r == i) | (p == j))
        for key in out:
            t = float(key.split("_")[1])
            if iou.size == 0:
                out[key].append(0.0)
                continue
            cost = -(iou >= t).astype(float) - iou / (2 * min(iou.shape))
            rows, cols = linear_sum_assignment(cost)
            tp = int((iou[rows, cols] >= t).sum())
            prec, rec = (tp / iou.shape[1], tp / iou.shape[0]) if tp else (0, 0)
            out[key].append(0.0 if tp == 0 else float(np.round(2 * prec * rec / (prec + rec),
                                                                4)))
    return {k: float(np.mean(v)) for k, v in out.items()}


def enhance(cases: list[Case]) -> dict[str, float]:
    """skimage SSIM (Gaussian, data range of the reference), PSNR; LNCC by scipy filters."""
    from scipy.ndimage import uniform_filter
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    lncc, ssim, psnr = [], [], []
    for pred, ref, _ in cases:
        p, r = np.asarray(pred, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        rng = float(r.max() - r.min())
        ssim.append(structural_similarity(r, p, data_range=rng, gaussian_weights=True,
                                          sigma=1.5, use_sample_covariance=False))
        psnr.append(min(peak_signal_noise_ratio(r, p, data_range=rng), 100.0))
        a = (p - p.min()) / (p.max() - p.min() + 1e-8)
        b = (r - r.min()) / (r.max() - r.min() + 1e-8)

        def mean(x: Any) -> Any:
            return uniform_filter(x, size=11, mode="mirror")

        va, vb = mean(a * a) - mean(a) ** 2, mean(b * b) - mean(b) ** 2
        cov = mean(a * b) - mean(a) * mean(b)
        ok = (va > 1e-10) & (vb > 1e-10)
        lncc.append(float(np.mean(cov[ok] / np.sqrt(va[ok] * vb[ok]))))
    return {"lncc": float(np.mean(lncc)), "ssim": float(np.mean(ssim)),
            "psnr": float(np.mean(psnr))}


# --- value tables ----------------------------------------------------------------------------

def quality(sub: pd.DataFrame, ref: pd.DataFrame) -> dict[str, float]:
    from scipy.stats import kendalltau, pearsonr, spearmanr

    p, r = sub["quality_score"].to_numpy(float), ref["quality_score"].to_numpy(float)
    return {"score": float(abs(pearsonr(p, r)[0]) + abs(spearmanr(p, r)[0])
                           + abs(kendalltau(p, r)[0]))}


def edges(sub: pd.DataFrame, ref: pd.DataFrame) -> dict[str, float]:
    """TopCoW task 3: sklearn balanced accuracy over variant strings."""
    from sklearn.metrics import balanced_accuracy_score

    out = {}
    for name, cols in (("anterior_acc", ["l_a1", "acom", "third_a2", "r_a1"]),
                       ("posterior_acc", ["l_pcom", "l_p1", "r_p1", "r_pcom"])):
        def variant(frame: pd.DataFrame, cols: list[str] = cols) -> list[str]:
            return ["_".join(str(int(v)) for v in row) for row in frame[cols].to_numpy()]

        out[name] = float(balanced_accuracy_score(variant(ref), variant(sub)))
    return out


Reference = Callable[[list[Case]], dict[str, float]]
FILE_REFERENCES: dict[str, Reference] = {
    "isles22": isles, "seg_a": seg_a, "panther-task1": panther, "panther-task2": panther,
    "puma-track1-task1": tissue, "puma-track2-task1": tissue, "neurips-cellseg": cells,
    "usenhance": enhance,
}
VALUE_REFERENCES = {"ldct-iqa": quality, "topcow-track1-task3": edges,
                    "topcow-track2-task3": edges}


def box_points(size: list[int], location: list[int], ratio: float) -> set[tuple[int, ...]]:
    """The official TopCoW boundary point set (coordinate tuples), face by face."""
    dist = [math.ceil(s * ratio) for s in size]
    lo = location
    hi = [a + s - 1 for a, s in zip(location, size, strict=True)]
    points = set()
    for axis in range(3):
        for i in range(dist[axis]):
            for plane in (lo[axis] + i, hi[axis] - i):
                ranges = [range(lo[k], hi[k] + 1) if k != axis else [plane] for k in range(3)]
                points.update((x, y, z) for x in ranges[0] for y in ranges[1]
                              for z in ranges[2])
    return points


def cow_boxes(cases: list[Case]) -> dict[str, float]:
    out: dict[str, list[float]] = {"boundary_iou": [], "iou": []}
    for pred, ref, _ in cases:
        for key, ratio in (("boundary_iou", 0.2), ("iou", 0.5)):
            a = box_points(pred["size"], pred["location"], ratio)
            b = box_points(ref["size"], ref["location"], ratio)
            out[key].append(len(a & b) / len(a | b))
    return {k: float(np.mean(v)) for k, v in out.items()}


FILE_REFERENCES["topcow-track1-task2"] = cow_boxes
FILE_REFERENCES["topcow-track2-task2"] = cow_boxes
