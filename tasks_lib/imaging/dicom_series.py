"""A folder of DICOM slices → one volume, de-identified on the way in.

Each slice is de-identified (:func:`tasks_lib.imaging.deid.ingest_dicom`) before anything else
reads it. The slices must form one geometrically consistent series: same size, pixel spacing and
orientation (and series UID when present); they are sorted by their position along the slice
normal (``ImagePositionPatient`` · (row × column cosines)), or by ``InstanceNumber`` when no slice
has a position; positions must lie on one line with equal gaps. The volume's array axes are
(column, row, slice), the affine maps them to RAS+ millimetres (DICOM's LPS with x and y negated,
as nibabel and dcm2niix do), so the spacing is (PixelSpacing[1], PixelSpacing[0], slice gap).
Pixel values are ``stored × RescaleSlope + RescaleIntercept``.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InputDataError
from tasks_lib.imaging.deid import ingest_dicom
from tasks_lib.imaging.readers import INGEST_LIMITS, Volume, read_bytes

GAP_TOLERANCE_MM = 0.01
"""How far a slice gap or an off-axis position may deviate (plus 1 % of the gap)."""
MAX_SLICES = 5000


class Slice(NamedTuple):
    """One parsed, de-identified slice and the file it came from."""

    name: str
    ds: Any


def _read_slices(folder: Path, name: str, removed: Counter[str]) -> list[Slice]:
    import pydicom
    from pydicom.errors import InvalidDicomError

    files = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    if not files:
        raise InputDataError(name, "an empty DICOM series folder")
    if len(files) > MAX_SLICES:
        raise InputDataError(name, f"{len(files)} files; a series may hold {MAX_SLICES}")
    out = []
    for path in files:
        fname = f"{name}/{path.name}"
        if not path.is_file() or path.is_symlink():
            raise InputDataError(fname, "not a regular file (a DICOM series folder holds only "
                                        "the slices)")
        try:
            clean = ingest_dicom(read_bytes(path, fname, INGEST_LIMITS), removed)
            ds = pydicom.dcmread(io.BytesIO(clean))
        except (InvalidDicomError, ValueError, OSError, EOFError, KeyError, TypeError) as exc:
            raise InputDataError(fname, f"not a readable DICOM file: {exc}") from None
        for kw in ("Rows", "Columns", "PixelSpacing", "PixelData"):
            if kw not in ds:
                raise InputDataError(fname, f"no {kw}: not an image slice")
        out.append(Slice(fname, ds))
    return out


def _floats(ds: Any, kw: str, n: int, name: str) -> NDArray[np.float64]:
    try:
        values = np.asarray([float(v) for v in ds.get(kw)], dtype=np.float64)
    except (TypeError, ValueError):
        raise InputDataError(name, f"unreadable {kw}") from None
    if values.shape != (n,) or not np.all(np.isfinite(values)):
        raise InputDataError(name, f"{kw} must hold {n} finite numbers")
    return values


def _check_same(slices: list[Slice]) -> None:
    """Every slice has the first slice's size, pixel spacing, orientation and series."""
    first = slices[0]
    for s in slices[1:]:
        ds, ref = s.ds, first.ds
        if (int(ds.Rows), int(ds.Columns)) != (int(ref.Rows), int(ref.Columns)):
            raise InputDataError(s.name, f"slice size {ds.Rows}x{ds.Columns} differs from "
                                         f"{ref.Rows}x{ref.Columns} of {first.name}")
        if not np.allclose(_floats(ds, "PixelSpacing", 2, s.name),
                           _floats(ref, "PixelSpacing", 2, first.name), atol=1e-4):
            raise InputDataError(s.name, f"PixelSpacing {list(ds.PixelSpacing)} differs from "
                                         f"{list(ref.PixelSpacing)} of {first.name}")
        if "ImageOrientationPatient" in ref and not np.allclose(
                _floats(ds, "ImageOrientationPatient", 6, s.name),
                _floats(ref, "ImageOrientationPatient", 6, first.name), atol=1e-4):
            raise InputDataError(s.name, f"ImageOrientationPatient differs from {first.name} "
                                         "(a series has one orientation)")
        uid, ref_uid = ds.get("SeriesInstanceUID"), ref.get("SeriesInstanceUID")
        if uid is not None and ref_uid is not None and str(uid) != str(ref_uid):
            raise InputDataError(s.name, f"SeriesInstanceUID differs from {first.name}: two "
                                         "series in one folder")


def _orientation(s: Slice) -> NDArray[np.float64]:
    if "ImageOrientationPatient" not in s.ds:
        return np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    return _floats(s.ds, "ImageOrientationPatient", 6, s.name)


def _sorted_positions(slices: list[Slice], normal: NDArray[np.float64]
                      ) -> tuple[list[Slice], NDArray[np.float64] | None]:
    """Slices in order along the normal with their positions, or by InstanceNumber."""
    with_pos = ["ImagePositionPatient" in s.ds for s in slices]
    if not any(with_pos):
        if any("InstanceNumber" not in s.ds for s in slices):
            bad = next(s for s in slices if "InstanceNumber" not in s.ds)
            raise InputDataError(bad.name, "neither ImagePositionPatient nor InstanceNumber: "
                                           "the slice order is unknown")
        return sorted(slices, key=lambda s: int(s.ds.InstanceNumber)), None
    if not all(with_pos):
        bad = slices[with_pos.index(False)]
        raise InputDataError(bad.name, "no ImagePositionPatient while other slices have one")
    pos = {s.name: _floats(s.ds, "ImagePositionPatient", 3, s.name) for s in slices}
    ordered = sorted(slices, key=lambda s: float(pos[s.name] @ normal))
    return ordered, np.stack([pos[s.name] for s in ordered])


def _check_gaps(ordered: list[Slice], pos: NDArray[np.float64],
                normal: NDArray[np.float64]) -> NDArray[np.float64]:
    """The step between consecutive slices (equal gaps on one line), as a vector."""
    if len(ordered) == 1:
        return normal * float(ordered[0].ds.get("SliceThickness") or 1.0)
    dist = pos @ normal
    gaps = np.diff(dist)
    step = (pos[-1] - pos[0]) / (len(ordered) - 1)
    typical = float(np.median(gaps))
    for k, gap in enumerate(gaps, start=1):
        if gap <= GAP_TOLERANCE_MM:
            raise InputDataError(ordered[k].name, f"the same position as {ordered[k - 1].name} "
                                                  "(a duplicated slice)")
        if abs(gap - typical) > GAP_TOLERANCE_MM + 0.01 * typical:
            raise InputDataError(ordered[k].name, f"inconsistent slice geometry: {gap:.4g} mm "
                                 f"after {ordered[k - 1].name}, other gaps {typical:.4g} mm "
                                 "(a missing slice or a mixed series)")
        off = pos[k] - (pos[0] + k * step)
        if float(np.linalg.norm(off)) > GAP_TOLERANCE_MM + 0.01 * typical:
            raise InputDataError(ordered[k].name, "inconsistent slice geometry: the position "
                                 "is off the series axis (gantry tilt or a mixed series)")
    return np.asarray(step, dtype=np.float64)


def _spacing_from_tags(s: Slice, normal: NDArray[np.float64]) -> NDArray[np.float64]:
    gap = s.ds.get("SpacingBetweenSlices") or s.ds.get("SliceThickness")
    if gap is None:
        raise InputDataError(s.name, "no ImagePositionPatient, SpacingBetweenSlices or "
                                     "SliceThickness: the slice spacing is unknown")
    return normal * float(gap)


def _pixels(s: Slice) -> NDArray[np.float64]:
    try:
        arr = np.asarray(s.ds.pixel_array, dtype=np.float64)
    except (ValueError, NotImplementedError, RuntimeError, AttributeError) as exc:
        raise InputDataError(s.name, f"pixel data cannot be decoded: {exc}") from None
    if arr.ndim != 2:
        raise InputDataError(s.name, f"one 2D frame per file is expected, got {arr.shape}")
    slope = float(s.ds.get("RescaleSlope", 1) or 1)
    return arr * slope + float(s.ds.get("RescaleIntercept", 0) or 0)


def read_series(folder: Path, name: str, removed: Counter[str]) -> tuple[Volume, int]:
    """The volume of a DICOM series folder and the number of slices read (see the module
    docstring); ``removed`` counts what de-identification changed."""
    slices = _read_slices(folder, name, removed)
    _check_same(slices)
    iop = _orientation(slices[0])
    row, col = iop[:3], iop[3:]
    normal = np.asarray(np.cross(row, col), dtype=np.float64)
    ordered, pos = _sorted_positions(slices, normal)
    step = (_check_gaps(ordered, pos, normal) if pos is not None
            else _spacing_from_tags(ordered[0], normal))
    ps = _floats(ordered[0].ds, "PixelSpacing", 2, ordered[0].name)
    lps = np.eye(4)
    lps[:3, 0], lps[:3, 1], lps[:3, 2] = row * ps[1], col * ps[0], step
    lps[:3, 3] = pos[0] if pos is not None else 0.0
    affine = np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps
    data = np.stack([_pixels(s).T for s in ordered], axis=-1)
    integral = np.all(np.mod(data, 1) == 0) and data.min() >= -32768 and data.max() <= 32767
    return Volume(data.astype(np.int16 if integral else np.float32), affine), len(ordered)
