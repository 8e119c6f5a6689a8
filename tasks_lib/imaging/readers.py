"""Bounded readers of a user's image files (NIfTI, PNG, TIFF, DICOM bytes), for ingest.

Every file goes through the readers of :mod:`tasks_lib.submission_limits` (size cap before reading,
streamed gzip with a cap, header-declared array size checked before the data is allocated). A
file that breaks a limit or does not parse is the user's mistake: :class:`InputDataError` naming
the file (relative to the folder given on the command line).
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from nibabel.filebasedimages import ImageFileError
from nibabel.spatialimages import HeaderDataError
from nibabel.wrapstruct import WrapStructError
from numpy.typing import NDArray

from evaluators.core import InputDataError, InvalidSubmissionError
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits, gunzip_capped, read_capped

INGEST_LIMITS = SubmissionLimits(max_file_bytes=1024 * 1024 * 1024,
                                 max_decompressed_bytes=2 * 1024 * 1024 * 1024,
                                 max_array_bytes=2 * 1024 * 1024 * 1024)
"""What one ingested file may cost: 1 GiB on disk, 2 GiB inflated or as a declared array (a
1 mm whole-body CT fits; a corrupt header declaring terabytes does not)."""
NIFTI_SUFFIXES = (".nii.gz", ".nii")
RASTER_SUFFIXES = (".png", ".tif", ".tiff")
NIFTI_ERRORS = (OSError, EOFError, ValueError, zlib.error, ImageFileError, WrapStructError,
                HeaderDataError)
"""What nibabel raises on a corrupt or truncated file."""


class Volume(NamedTuple):
    """A decoded image or label map with its voxel-to-world affine (mm)."""

    array: NDArray[Any]
    affine: NDArray[np.float64]


def stem(name: str) -> str:
    """The case id a file stands for: its name without ``.nii.gz``/``.nii``/image suffixes."""
    for suffix in (*NIFTI_SUFFIXES, *RASTER_SUFFIXES, ".json", ".txt"):
        if name.lower().endswith(suffix):
            return name[:-len(suffix)]
    return name


def read_bytes(path: Path, name: str, limits: SubmissionLimits = INGEST_LIMITS) -> bytes:
    """The bytes of a user's file within ``limits.max_file_bytes``."""
    try:
        return read_capped(path, name, limits.max_file_bytes)
    except InvalidSubmissionError as exc:
        raise InputDataError(name, str(exc).removeprefix(f"{name}: ")) from None
    except OSError as exc:
        raise InputDataError(name, f"unreadable: {exc.strerror or exc}") from None


def spacing_of(affine: NDArray[np.float64]) -> list[float]:
    """Voxel size (mm) along each array axis: the column norms of the affine's 3×3 part."""
    return [float(v) for v in np.sqrt((np.asarray(affine)[:3, :3] ** 2).sum(axis=0))]


def nifti_raw(data: bytes, name: str, limits: SubmissionLimits = INGEST_LIMITS) -> bytes:
    """Plain NIfTI-1 bytes (inflated within the cap when gzip-compressed)."""
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gunzip_capped(data, name, limits.max_decompressed_bytes,
                             label="unreadable NIfTI: ")
    except InvalidSubmissionError as exc:
        raise InputDataError(name, str(exc).removeprefix(f"{name}: ")) from None


def read_nifti(data: bytes, name: str, limits: SubmissionLimits = INGEST_LIMITS) -> Volume:
    """A NIfTI-1 volume: header checked (declared array size) before its data is read."""
    import nibabel as nib

    raw = nifti_raw(data, name, limits)
    try:
        img: Any = nib.Nifti1Image.from_bytes(raw)
        shape = [int(n) for n in img.header.get_data_shape()]
        need = math.prod(shape) * img.header.get_data_dtype().itemsize
        if need > limits.max_array_bytes:
            raise InputDataError(name, f"its header declares {need} bytes of voxel data "
                                       f"(limit {limits.max_array_bytes})")
        return Volume(np.asarray(img.dataobj), np.asarray(img.affine, dtype=np.float64))
    except InputDataError:
        raise
    except NIFTI_ERRORS as exc:
        raise InputDataError(name, f"unreadable NIfTI: {type(exc).__name__}: {exc}") from None


def read_raster(data: bytes, name: str, rgb: bool = True,
                limits: SubmissionLimits = DEFAULT_LIMITS) -> NDArray[Any]:
    """A 2D PNG/TIFF image as stored: greyscale, or RGB(A) reduced to luminance when ``rgb``
    (a label map must be single-channel)."""
    import imageio.v3 as iio

    png = name.lower().endswith(".png")
    ext, plugin = (".png", "pillow") if png else (".tif", "tifffile")
    try:
        meta = iio.improps(data, extension=ext, plugin=plugin)
        need = math.prod(int(n) for n in meta.shape) * np.dtype(meta.dtype).itemsize
        if need > limits.max_array_bytes:
            raise InputDataError(name, f"declares {need} bytes of pixels "
                                       f"(limit {limits.max_array_bytes})")
        arr = np.asarray(iio.imread(data, extension=ext, plugin=plugin))
    except InputDataError:
        raise
    except (OSError, EOFError, ValueError, SyntaxError, zlib.error) as exc:  # Pillow, tifffile
        raise InputDataError(name, f"unreadable image: {type(exc).__name__}: {exc}") from None
    if arr.ndim == 3 and arr.shape[2] in (3, 4) and not rgb:
        raise InputDataError(name, "a label map must be single-channel (one label per pixel), "
                                   "not RGB")
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        weights = np.array([0.2125, 0.7154, 0.0721])  # ITU-R BT.709 luma, as skimage.rgb2gray
        arr = np.asarray(arr[..., :3].astype(np.float64) @ weights)
    if arr.ndim != 2:
        raise InputDataError(name, f"a 2D greyscale or RGB image is expected, got an array of "
                                   f"shape {list(arr.shape)}")
    return arr


def raster_affine(spacing: list[float] | None) -> NDArray[np.float64]:
    """The affine of a 2D image stored as a one-slice volume: ``spacing`` (rows, columns[,
    slice]) in mm, default 1 mm."""
    sp = list(spacing or [1.0, 1.0])
    sp = sp + [1.0] * (3 - len(sp))
    return np.diag([*sp[:3], 1.0])


def to_uint8(arr: NDArray[Any]) -> NDArray[np.uint8]:
    """An image as 8-bit greyscale: uint8 kept; anything else rescaled linearly min→0, max→255."""
    if arr.dtype == np.uint8:
        return arr
    x = np.asarray(arr, dtype=np.float64)
    lo, hi = float(x.min()), float(x.max())
    scaled = (x - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(x)
    return np.asarray(np.round(scaled), dtype=np.uint8)
