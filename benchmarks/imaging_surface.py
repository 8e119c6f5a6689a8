"""Our surface metrics (HD95, ASSD, NSD) vs MONAI, SimpleITK and DeepMind's surface-distance.

Cases: the 1 mm MNI152 grey- and white-matter maps that nilearn ships (197×233×189). Case ``k``
warps both maps with a seeded smooth random displacement (reference) and warps them again with a
smaller second field and a jittered threshold (prediction); the pairs are GM and WM masks of each
case. Each reference runs in its own convention and is compared where conventions agree:

* voxel convention (our registered metrics) = MONAI ``compute_hausdorff_distance``
  (percentile 95: our ``hd95``; no percentile: our ``hd``),
  ``compute_average_surface_distance(symmetric=True)`` (our ``assd``), ``compute_surface_dice``
  (our ``nsd_1mm``). SimpleITK's ``HausdorffDistanceImageFilter`` measures from *every* mask
  voxel, not only surface voxels: its HD equals ours unless a surface voxel of one mask lies
  inside the other mask farther from its surface than the HD (or a mask encloses a cavity), and
  its "average Hausdorff distance" is a different quantity. It is timed; its HD is reported as
  "same in k of n pairs", not asserted.
* surfel convention (``surface_distances(..., convention="surfel")`` + helpers) =
  ``surface_distance.compute_surface_distances`` + ``compute_robust_hausdorff`` /
  ``compute_average_surface_distance`` / ``compute_surface_dice_at_tolerance``.

Times are wall-clock sums over the pairs, one call per pair and metric after a warm-up call; each
of our metrics is timed from scratch (``clear_memo`` first), although on a score card the metrics
of one mask pair share one distance computation (also printed). ``hd95_vs_fastest`` is the
fastest reference's Hausdorff time (MONAI HD95, SimpleITK HD, surface-distance robust HD95) over
ours; ``max_abs_diff_mm`` is the largest difference over every compared distance. Agreement means
within 1e-6 mm, or within MONAI's float32 rounding (half a float32 step) where that is coarser.
Run: ``.venv/bin/python benchmarks/imaging_surface.py [--cases 5]``. Last line ``RESULT …``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from scipy import ndimage

from evaluators import surface as S

Pair = tuple[np.ndarray, np.ndarray, tuple[float, ...], str]


def _field(rng: np.random.Generator, shape: tuple[int, ...], amp_mm: float) -> np.ndarray:
    """Smooth displacement (voxels, 1 mm grid): noise on a 16 mm control grid, cubic-upsampled."""
    ctrl = [s // 16 + 3 for s in shape]
    out = np.empty((len(shape), *shape), dtype=np.float32)
    for ax in range(len(shape)):
        coarse = rng.normal(0.0, amp_mm, size=ctrl)
        out[ax] = ndimage.zoom(coarse, [(s + 0.5) / c for s, c in zip(shape, ctrl, strict=True)],
                               order=3, grid_mode=True, mode="grid-constant")[
            tuple(slice(0, s) for s in shape)]
    return out


def _warp(maps: list[np.ndarray], disp: np.ndarray) -> list[np.ndarray]:
    coords = np.indices(maps[0].shape, dtype=np.float32) + disp
    return [ndimage.map_coordinates(m, coords, order=1, mode="nearest") for m in maps]


def mni_pairs(n_cases: int) -> Iterator[Pair]:
    """GM and WM (reference, prediction) masks of ``n_cases`` seeded warps of the 1 mm maps."""
    from nilearn import datasets

    maps = [np.asarray(img.get_fdata(), dtype=np.float32)
            for img in (datasets.load_mni152_gm_template(resolution=1),
                        datasets.load_mni152_wm_template(resolution=1))]
    for k in range(n_cases):
        rng = np.random.default_rng(1000 + k)
        ref_disp = _field(rng, maps[0].shape, 3.0)
        refs = _warp(maps, ref_disp)
        preds = _warp(maps, ref_disp + _field(rng, maps[0].shape, 1.5))
        cut = 0.5 + rng.uniform(-0.08, 0.08)
        for name, r, p in zip(("GM", "WM"), refs, preds, strict=True):
            yield p > cut, r > 0.5, (1.0, 1.0, 1.0), f"case{k}-{name}"


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _references(p: np.ndarray, r: np.ndarray, sp: tuple[float, ...]
                ) -> dict[str, tuple[Any, float]]:
    """Every reference call on one pair: name → (value, seconds)."""
    import SimpleITK as sitk
    import surface_distance as sdl
    import torch
    from monai.metrics import (
        compute_average_surface_distance,
        compute_hausdorff_distance,
        compute_surface_dice,
    )

    tp, tr = torch.from_numpy(np.ascontiguousarray(p)[None, None]), torch.from_numpy(
        np.ascontiguousarray(r)[None, None])

    def sitk_hd() -> tuple[float, float]:
        images = []
        for m in (p, r):
            img = sitk.GetImageFromArray(m.astype(np.uint8))
            img.SetSpacing(sp[::-1])
            images.append(img)
        f = sitk.HausdorffDistanceImageFilter()
        f.Execute(*images)
        return f.GetHausdorffDistance(), f.GetAverageHausdorffDistance()

    out = {
        "monai_hd95": _timed(lambda: float(compute_hausdorff_distance(
            tp, tr, percentile=95, spacing=list(sp)).item())),
        "monai_hd": _timed(lambda: float(compute_hausdorff_distance(
            tp, tr, spacing=list(sp)).item())),
        "monai_assd": _timed(lambda: float(compute_average_surface_distance(
            tp, tr, symmetric=True, spacing=list(sp)).item())),
        "monai_nsd": _timed(lambda: float(compute_surface_dice(
            tp, tr, class_thresholds=[1.0], spacing=list(sp), include_background=True).item())),
        "sitk_hd": _timed(sitk_hd),
    }
    dists, t_sd = _timed(lambda: sdl.compute_surface_distances(r, p, sp))
    for key, fn in (("sd_hd95", lambda: sdl.compute_robust_hausdorff(dists, 95)),
                    ("sd_asd", lambda: sdl.compute_average_surface_distance(dists)),
                    ("sd_nsd", lambda: sdl.compute_surface_dice_at_tolerance(dists, 1.0))):
        value, t = _timed(fn)
        out[key] = (value, t_sd + t)
    return out


def _cold(fn: Callable[[], Any]) -> tuple[Any, float]:
    S.clear_memo()  # each metric pays for its own distances
    return _timed(fn)


def _ours(p: np.ndarray, r: np.ndarray, sp: tuple[float, ...]) -> dict[str, tuple[Any, float]]:
    out = {"hd95": _cold(lambda: S.hd95(p, r, sp)), "assd": _cold(lambda: S.assd(p, r, sp)),
           "nsd": _cold(lambda: S.nsd_1mm(p, r, sp)), "hd": _cold(lambda: S.hd(p, r, sp))}
    S.clear_memo()
    out["all4"] = _timed(lambda: [fn(p, r, sp) for fn in (S.hd95, S.assd, S.nsd_1mm, S.hd)])
    dists, t_sd = _cold(lambda: S.surface_distances(p, r, sp, convention="surfel"))
    for key, fn in (("surfel_hd95", lambda: S.robust_hausdorff(dists, 95)),
                    ("surfel_asd", lambda: tuple(S.average_surface_distance(dists))),
                    ("surfel_nsd", lambda: S.surface_dice_at_tolerance(dists, 1.0))):
        value, t = _timed(fn)
        out[key] = (value, t_sd + t)
    return out


COMPARED = [  # (ours, reference, unit): values that must agree
    ("hd95", "monai_hd95", "mm"), ("assd", "monai_assd", "mm"), ("nsd", "monai_nsd", "1"),
    ("hd", "monai_hd", "mm"), ("surfel_hd95", "sd_hd95", "mm"), ("surfel_asd", "sd_asd", "mm"),
    ("surfel_nsd", "sd_nsd", "1")]


def _tolerance(reference: str, value: Any) -> float:
    """1e-6 mm, or half a float32 step of the value for MONAI (it returns float32 tensors)."""
    if not reference.startswith("monai"):
        return 1e-6
    return max(1e-6, float(np.spacing(np.float32(np.max(np.abs(value))))) / 2)


def _diff(ours: Any, theirs: Any) -> float:
    a, b = np.atleast_1d(np.asarray(ours, dtype=float)), np.atleast_1d(np.asarray(theirs, float))
    return float(np.max(np.abs(a - b)))


def run(pairs: Iterator[Pair]) -> tuple[dict[str, float], dict[str, float], int]:
    """Time and compare every pair; returns (seconds per call name, max |diff| per name, pairs)."""
    times: dict[str, float] = {}
    diffs: dict[str, float] = {}
    n = 0
    for p, r, sp, label in pairs:
        ours, refs = _ours(p, r, sp), _references(p, r, sp)
        for name, (_, t) in {**ours, **refs}.items():
            times[name] = times.get(name, 0.0) + t
        for mine, theirs, _ in COMPARED:
            diff = _diff(ours[mine][0], refs[theirs][0])
            diffs[mine] = max(diffs.get(mine, 0.0), diff)
            if diff > _tolerance(theirs, refs[theirs][0]):
                diffs["disagreements"] = diffs.get("disagreements", 0.0) + 1
        sitk = _diff(ours["hd"][0], refs["sitk_hd"][0][0])  # (HD, average over mask voxels)
        diffs["sitk_hd_max"] = max(diffs.get("sitk_hd_max", 0.0), sitk)
        diffs["sitk_hd_same"] = diffs.get("sitk_hd_same", 0.0) + (sitk < 1e-6)
        n += 1
        print(f"{label}: hd95 {ours['hd95'][0]:.4f} mm (MONAI {refs['monai_hd95'][0]:.4f}), "
              f"HD {ours['hd'][0]:.3f} (MONAI {refs['monai_hd'][0]:.3f}, "
              f"SimpleITK all-voxel {refs['sitk_hd'][0][0]:.3f}), "
              f"ours {ours['hd95'][1]:.3f}s vs MONAI {refs['monai_hd95'][1]:.3f}s", flush=True)
    return times, diffs, n


def _warm_up() -> None:
    p = np.zeros((12, 12, 12), dtype=bool)
    p[3:8, 3:8, 3:8] = True
    _ours(p, np.roll(p, 1, 0), (1.0, 1.0, 1.0))
    _references(p, np.roll(p, 1, 0), (1.0, 1.0, 1.0))


def report(times: dict[str, float], diffs: dict[str, float], n: int) -> dict[str, str]:
    """Print the table; return the figures of the RESULT line (key → formatted value)."""
    groups = {"hd95": ("monai_hd95", "sitk_hd", "sd_hd95"), "assd": ("monai_assd", "sd_asd"),
              "nsd": ("monai_nsd", "sd_nsd")}
    print(f"\n{'metric':8} {'ours s':>8}  reference times (s) → ratio fastest/ours")
    ratios = {}
    for ours, refs in groups.items():
        fastest = min(refs, key=lambda k: times[k])
        ratios[ours] = times[fastest] / times[ours]
        cells = "  ".join(f"{k}={times[k]:.2f}" for k in refs)
        print(f"{ours:8} {times[ours]:8.2f}  {cells}  → {ratios[ours]:.1f}× ({fastest})")
    surfel = times["sd_hd95"] / times["surfel_hd95"]
    print(f"all four (hd95, assd, nsd_1mm, hd) of a pair, sharing one distance computation: "
          f"{times['all4']:.2f} s")
    print(f"surfel   {times['surfel_hd95']:8.2f}  surface-distance={times['sd_hd95']:.2f} → "
          f"{surfel:.1f}×")
    print("\nmax |ours − reference|: " + ", ".join(
        f"{m} vs {r}: {diffs[m]:.1e} {u}" for m, r, u in COMPARED))
    same = f"{diffs['sitk_hd_same']:.0f}/{n}"
    print(f"SimpleITK HD (all mask voxels, a different convention) = our hd in {same} pairs; "
          f"largest difference {diffs['sitk_hd_max']:.3f} mm")
    mm = max(diffs[m] for m, _, u in COMPARED if u == "mm")
    nsd = max(diffs[m] for m, _, u in COMPARED if u == "1")
    return {"hd95_vs_fastest": f"{ratios['hd95']:.2f}", "max_abs_diff_mm": f"{mm:.1e}",
            "assd_vs_fastest": f"{ratios['assd']:.2f}", "nsd_vs_fastest": f"{ratios['nsd']:.2f}",
            "surfel_vs_surface_distance": f"{surfel:.2f}", "max_abs_diff_nsd": f"{nsd:.1e}",
            "pairs": str(n), "sitk_hd_same": same}


def compare(pairs: Iterator[Pair]) -> dict[str, str]:
    """Warm up, time and compare every pair, print the table; returns the RESULT figures."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    _warm_up()
    times, diffs, n = run(pairs)
    figures = report(times, diffs, n)
    assert "disagreements" not in diffs, "a metric disagrees with its reference"
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5, help="seeded 1 mm cases (2 pairs each)")
    figures = compare(mni_pairs(parser.parse_args().cases))
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
