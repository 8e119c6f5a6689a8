"""Surface-distance metrics on binary masks (HD95, HD, MASD, ASSD, NSD), in mm using voxel spacing.

Two conventions, both computed on the band around the masks (:mod:`evaluators.surface_geometry`):

* ``"voxel"`` (the registered metrics; equal to MONAI's ``compute_hausdorff_distance``,
  ``compute_average_surface_distance`` and ``compute_surface_dice``): surface voxels are the mask
  minus its face-connected erosion (voxels on the volume border count as surface); distances are
  Euclidean between surface-voxel centres; every surface voxel weighs 1; percentiles use numpy's
  linear interpolation.
* ``"surfel"`` (DeepMind's ``surface-distance``, used by e.g. PANTHER): boundary points are the
  voxel corners whose 2×2(×2) neighbourhood is mixed; each carries its marching-cubes surfel area
  (contour length in 2D) as weight; percentiles are the first distance whose cumulative weight
  reaches the fraction (:func:`robust_hausdorff`).

Empty masks (stated once, also on each :class:`~evaluators.metrics.MetricSpec`): for distances,
both empty → ``0.0``, exactly one empty → :data:`ONE_EMPTY_MM` (the BraTS penalty), a missing or
unreadable case → :data:`ONE_EMPTY_MM`; for NSD, both empty → 1, one empty or missing → 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from evaluators import surface_geometry as geo
from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric

ONE_EMPTY_MM = 373.13
"""Distance reported when exactly one mask is empty (BraTS convention)."""

Convention = Literal["voxel", "surfel"]
_AVERAGING = "per label, mean over labels, then mean over cases"


class SurfaceDistances(NamedTuple):
    """Nearest-surface distances of both masks, with the weight of each boundary point.

    Attributes:
        pred_to_ref: distance (mm) from each prediction boundary point to the reference boundary
            (``inf`` when the reference is empty; empty when the prediction is).
        ref_to_pred: distance (mm) from each reference boundary point to the prediction boundary.
        pred_weights: weight per prediction boundary point: surfel area (mm², contour length in
            mm in 2D) in the surfel convention, ones in the voxel convention.
        ref_weights: weight per reference boundary point, likewise.
    """

    pred_to_ref: NDArray[np.float64]
    ref_to_pred: NDArray[np.float64]
    pred_weights: NDArray[np.float64]
    ref_weights: NDArray[np.float64]


class AverageDistances(NamedTuple):
    """Weighted mean distances, in the order of ``compute_average_surface_distance``.

    Attributes:
        ref_to_pred: weighted mean distance (mm) from the reference boundary to the prediction.
        pred_to_ref: weighted mean distance (mm) from the prediction boundary to the reference.
    """

    ref_to_pred: float
    pred_to_ref: float


def _check(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> None:
    if pred.shape != ref.shape:
        raise InvalidSubmissionError(
            f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    if len(spacing) != pred.ndim:
        raise ValueError(f"spacing {tuple(spacing)} does not match {pred.ndim} dimensions")


def _empty() -> NDArray[np.float64]:
    return np.zeros(0, dtype=np.float64)


def surface_distances(prediction: NDArray[np.generic], reference: NDArray[np.generic],
                      spacing: Sequence[float], *, convention: Convention = "voxel"
                      ) -> SurfaceDistances:
    """Exact nearest-boundary distances between two masks (non-zero = foreground).

    Args:
        prediction: predicted mask.
        reference: reference mask, same shape.
        spacing: voxel size in mm per axis.
        convention: ``"voxel"`` (MONAI) or ``"surfel"`` (DeepMind ``surface-distance``; 2D/3D).

    Returns:
        Distances in C order of the boundary points (not sorted) with their weights, as read-only
        arrays: the last result is remembered (keyed by the masks' contents, spacing and
        convention), so the metrics of one mask pair share one computation.
    """
    global _last
    p, r = _binary(prediction), _binary(reference)
    _check(p, r, spacing)
    key = (convention, p.shape, tuple(float(s) for s in spacing), _fingerprint(p), _fingerprint(r))
    last = _last
    if last is not None and last[0] == key:
        return last[1]
    sd = _compute(p, r, spacing, convention)
    for arr in sd:
        arr.flags.writeable = False
    _last = (key, sd)
    return sd


def _binary(x: NDArray[np.generic]) -> NDArray[np.bool_]:
    a = np.asarray(x)
    return a if a.dtype == np.bool_ else np.asarray(a != 0)


def _fingerprint(m: NDArray[np.bool_]) -> tuple[bool, bytes]:
    """Memory order and a digest of the packed bits (a few ms for a 1 mm brain volume)."""
    fortran = bool(m.flags.f_contiguous and not m.flags.c_contiguous)
    bits = np.packbits(m.reshape(-1, order="A"))
    return fortran, hashlib.blake2b(bits.data, digest_size=20).digest()


_last: tuple[tuple[object, ...], SurfaceDistances] | None = None
"""The key and result of the last :func:`surface_distances` call."""


def clear_memo() -> None:
    """Forget the remembered result (benchmarks time each metric from scratch)."""
    global _last
    _last = None


def _compute(p: NDArray[np.bool_], r: NDArray[np.bool_], spacing: Sequence[float],
             convention: Convention) -> SurfaceDistances:
    box = geo.union_bbox(p, r)
    if box is None:
        return SurfaceDistances(_empty(), _empty(), _empty(), _empty())
    if convention == "voxel":
        band = geo.voxel_band(p, r, spacing, box)
    elif convention == "surfel":
        band = geo.surfel_band(p, r, spacing, box)
    else:
        raise ValueError(f"unknown convention {convention!r}; known: voxel, surfel")
    shells = geo.offset_shells(band.spacing, band.a.shape)
    pred_to_ref = geo.directed(band.a, band.b, band.spacing, shells)
    ref_to_pred = geo.directed(band.b, band.a, band.spacing, shells)
    if band.a_weight is None or band.b_weight is None:
        return SurfaceDistances(pred_to_ref, ref_to_pred, np.ones(pred_to_ref.size),
                                np.ones(ref_to_pred.size))
    return SurfaceDistances(pred_to_ref, ref_to_pred, band.a_weight[band.a],
                            band.b_weight[band.b])


def _weighted_percentile(d: NDArray[np.float64], w: NDArray[np.float64], percent: float) -> float:
    if d.size == 0:
        return float("inf")
    order = np.lexsort((w, d))  # by distance, then weight, as the package's sorted(zip(d, w))
    w_sorted = w[order]
    cum = np.cumsum(w_sorted) / np.sum(w_sorted)
    idx = int(np.searchsorted(cum, percent / 100.0))
    return float(d[order][min(idx, d.size - 1)])


def robust_hausdorff(sd: SurfaceDistances, percent: float) -> float:
    """Weighted ``percent``-th percentile Hausdorff distance (mm), as ``compute_robust_hausdorff``:
    per direction, the first sorted distance whose cumulative weight fraction reaches
    ``percent / 100``; the larger direction wins; ``inf`` if a side has no boundary."""
    return max(_weighted_percentile(sd.ref_to_pred, sd.ref_weights, percent),
               _weighted_percentile(sd.pred_to_ref, sd.pred_weights, percent))


def _weighted_mean(d: NDArray[np.float64], w: NDArray[np.float64]) -> float:
    total = float(np.sum(w))
    return float(np.sum(d * w) / total) if total > 0 else float("nan")


def average_surface_distance(sd: SurfaceDistances) -> AverageDistances:
    """Weighted mean distance per direction, as ``compute_average_surface_distance``."""
    return AverageDistances(_weighted_mean(sd.ref_to_pred, sd.ref_weights),
                            _weighted_mean(sd.pred_to_ref, sd.pred_weights))


def surface_dice_at_tolerance(sd: SurfaceDistances, tolerance_mm: float) -> float:
    """Weight of boundary within ``tolerance_mm`` of the other boundary over all boundary weight
    (NSD), as ``compute_surface_dice_at_tolerance``; ``nan`` when both boundaries are empty."""
    total = float(np.sum(sd.ref_weights) + np.sum(sd.pred_weights))
    if total == 0:
        return float("nan")
    near = (np.sum(sd.ref_weights[sd.ref_to_pred <= tolerance_mm])
            + np.sum(sd.pred_weights[sd.pred_to_ref <= tolerance_mm]))
    return float(near / total)


def surface(mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Boolean surface voxels of a binary mask (mask minus its face-connected erosion)."""
    m = np.asarray(mask, dtype=bool)
    core = (slice(1, -1),) * m.ndim
    return np.asarray(geo.voxel_boundary(np.pad(m, 1))[core])


def directed_distances(
    src: NDArray[np.bool_], dst: NDArray[np.bool_], spacing: Sequence[float]
) -> NDArray[np.float64]:
    """Distances (mm) from each surface voxel of ``src`` (C order) to the nearest surface voxel of
    ``dst`` (``inf`` when ``dst`` is empty)."""
    return surface_distances(src, dst, spacing).pred_to_ref


def _voxel(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float],
           ) -> tuple[float | None, SurfaceDistances]:
    """The empty-mask rule value (or None) and, when both masks have voxels, the distances."""
    p, r = _binary(pred), _binary(ref)
    _check(p, r, spacing)
    has_p, has_r = bool(p.any()), bool(r.any())
    empty = SurfaceDistances(_empty(), _empty(), _empty(), _empty())
    if not has_p and not has_r:
        return 0.0, empty
    if has_p != has_r:
        return ONE_EMPTY_MM, empty
    return None, surface_distances(p, r, spacing)


def _distance_metric(name: str, description: str
                     ) -> Callable[[Callable[..., float]], Callable[..., float]]:
    return metric(name, direction=Direction.LOWER, averaging=_AVERAGING, description=description,
                  missing=ONE_EMPTY_MM, both_empty=0.0, one_empty=ONE_EMPTY_MM)


@_distance_metric("hd95", "95th-percentile Hausdorff distance (mm): max of the two directed "
                  "95th percentiles (linear interpolation, voxel-centre surfaces)")
def hd95(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """HD95 between two binary masks.

    Args:
        pred: predicted mask (non-zero = foreground).
        ref: reference mask, same shape.
        spacing: voxel size in mm per axis.

    Returns:
        ``max(P95(d(pred→ref)), P95(d(ref→pred)))`` in mm, with the empty-mask conventions above.
    """
    rule, sd = _voxel(pred, ref, spacing)
    if rule is not None:
        return rule
    return float(max(np.percentile(sd.pred_to_ref, 95), np.percentile(sd.ref_to_pred, 95)))


@_distance_metric("hd", "Hausdorff distance (mm): largest distance from a surface voxel of either "
                  "mask to the other surface")
def hd(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """Hausdorff distance ``max(max d(pred→ref), max d(ref→pred))`` in mm."""
    rule, sd = _voxel(pred, ref, spacing)
    if rule is not None:
        return rule
    return float(max(sd.pred_to_ref.max(), sd.ref_to_pred.max()))


@_distance_metric("masd", "mean average surface distance (mm): mean of the two directed mean "
                  "distances")
def masd(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """Mean average surface distance: ``(mean d(pred→ref) + mean d(ref→pred)) / 2`` in mm."""
    rule, sd = _voxel(pred, ref, spacing)
    if rule is not None:
        return rule
    return float((sd.pred_to_ref.mean() + sd.ref_to_pred.mean()) / 2.0)


@_distance_metric("assd", "average symmetric surface distance (mm): mean over the surface voxels "
                  "of both masks (MONAI symmetric ASD)")
def assd(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """ASSD: ``(Σ d(pred→ref) + Σ d(ref→pred)) / (|∂pred| + |∂ref|)`` in mm."""
    rule, sd = _voxel(pred, ref, spacing)
    if rule is not None:
        return rule
    total = float(sd.pred_to_ref.sum() + sd.ref_to_pred.sum())
    return total / float(sd.pred_to_ref.size + sd.ref_to_pred.size)


def nsd(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float],
        tolerance_mm: float) -> float:
    """Normalized surface distance (surface Dice) at ``tolerance_mm``, voxel convention: the
    fraction of surface voxels of both masks within the tolerance of the other surface (MONAI
    ``compute_surface_dice``, ``use_subvoxels=False``). Both empty → 1, one empty → 0."""
    rule, sd = _voxel(pred, ref, spacing)
    if rule is not None:
        return 1.0 if rule == 0.0 else 0.0
    return surface_dice_at_tolerance(sd, tolerance_mm)


def _nsd_metric(tolerance_mm: float) -> Callable[[Callable[..., float]], Callable[..., float]]:
    return metric(f"nsd_{tolerance_mm:g}mm", direction=Direction.HIGHER, averaging=_AVERAGING,
                  missing=0.0, both_empty=1.0, one_empty=0.0,
                  description=f"normalized surface distance (surface Dice) at {tolerance_mm:g} mm:"
                  " fraction of both surfaces within the tolerance of the other")


@_nsd_metric(1.0)
def nsd_1mm(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """NSD at 1 mm, voxel convention (:func:`nsd`)."""
    return nsd(pred, ref, spacing, 1.0)


@_nsd_metric(2.0)
def nsd_2mm(pred: NDArray[np.generic], ref: NDArray[np.generic], spacing: Sequence[float]) -> float:
    """NSD at 2 mm, voxel convention (:func:`nsd`)."""
    return nsd(pred, ref, spacing, 2.0)
