"""Reading one challenge prediction or reference file: arrays (NPY, PNG, TIFF, NIfTI) with
their voxel spacing, or a JSON document (boxes, polygons, detections) read within the
submission limits. Sizes and header-declared shapes are checked before any data is read."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from tasks_lib.errors import InvalidSubmissionError
from tasks_lib.sources import FileFormat
from tasks_lib.submission_limits import (
    DEFAULT_LIMITS,
    SubmissionLimits,
    loads_json,
    read_capped,
    violation,
)


def load_case(path: Path, fmt: FileFormat,
              limits: SubmissionLimits = DEFAULT_LIMITS) -> tuple[Any, tuple[float, ...]]:
    """Read one prediction/reference file and its voxel spacing in mm (``.npy`` always works).

    Spacing comes from the NIfTI header; other formats have no spacing and get 1.0 per axis.
    A JSON file is returned parsed (within ``limits``), with an empty spacing.
    """
    if fmt is FileFormat.JSON:
        return loads_json(read_capped(path, path.name, limits.max_json_bytes), path.name,
                          limits), ()
    if path.suffix == ".npy":
        array = np.asarray(np.load(path, allow_pickle=False))
    elif fmt is FileFormat.NIFTI:
        import nibabel as nib

        image = nib.load(path)
        array = np.asarray(image.get_fdata())  # type: ignore[attr-defined]
        zooms = image.header.get_zooms()[: array.ndim]  # type: ignore[attr-defined]
        return array, tuple(float(z) for z in zooms)
    elif fmt is FileFormat.TIFF and path.suffix in (".tif", ".tiff"):
        import tifffile

        array = np.asarray(tifffile.imread(path))
    else:
        from PIL import Image

        with Image.open(path) as img:  # a palette PNG gives its indices (label maps), as PIL
            array = np.asarray(img)    # reads it for the official PUMA evaluation
    return array, (1.0,) * array.ndim


def declared_shape(path: Path, fmt: FileFormat) -> tuple[int, ...] | None:
    """The array shape a file's header declares, read without loading the data (None when the
    format has no cheap header we read, or is not an array)."""
    if fmt is FileFormat.JSON:
        return None
    if path.suffix == ".npy":
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)  # type: ignore[no-untyped-call,unused-ignore]
            if version == (1, 0):
                return tuple(np.lib.format.read_array_header_1_0(f)[0])  # type: ignore[no-untyped-call,unused-ignore]
            if version == (2, 0):
                return tuple(np.lib.format.read_array_header_2_0(f)[0])  # type: ignore[no-untyped-call,unused-ignore]
            raise ValueError(f"unsupported NPY version {version}")
    if fmt is FileFormat.NIFTI:
        import nibabel as nib

        return tuple(int(n) for n in nib.load(path).shape)  # type: ignore[attr-defined]
    if fmt is FileFormat.TIFF and path.suffix in (".tif", ".tiff"):
        import tifffile

        with tifffile.TiffFile(path) as tif:
            return tuple(int(n) for n in tif.series[0].shape)
    from PIL import Image

    with Image.open(path) as img:
        w, h = img.size
        bands = len(img.getbands())
    return (h, w) if bands == 1 else (h, w, bands)


def case_file(folder: Path, rel: object, fmt: FileFormat, case: str,
              expected: tuple[int, ...] | None = None,
              limits: SubmissionLimits = DEFAULT_LIMITS) -> Any:
    """A prediction file (array or parsed JSON), its size and header-declared shape checked
    (against the reference's ``expected`` shape) before its data is read."""
    path = (folder / str(rel)).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise InvalidSubmissionError(f"case {case}: path {rel!r} leaves the submission folder")
    if not path.is_file():
        raise InvalidSubmissionError(f"case {case}: prediction file {rel!r} not found")
    name = f"case {case}: {rel}"
    if path.stat().st_size > limits.max_file_bytes:
        raise violation(name, "file_size", f"larger than {limits.max_file_bytes} bytes")
    try:
        shape = declared_shape(path, fmt)
    except Exception as exc:  # any header parser fault is the file's
        rule = "array_size" if "DecompressionBomb" in type(exc).__name__ else "file_format"
        raise InvalidSubmissionError(f"case {case}: cannot read {rel!r}: "
                                     f"{type(exc).__name__}: {exc} (rule: {rule})") from None
    if shape is not None and expected is not None \
            and math.prod(shape) > max(math.prod(expected), 1) * limits.grid_factor:
        raise violation(name, "array_size", f"header declares shape {shape}; the "
                                            f"reference is {expected}")
    if shape is not None and math.prod(shape) * 8 > limits.max_array_bytes:
        raise violation(name, "array_size", f"header declares shape {shape} (over "
                                            f"{limits.max_array_bytes} bytes as float64)")
    try:
        return load_case(path, fmt, limits)[0]
    except (OSError, ValueError, MemoryError) as exc:
        raise InvalidSubmissionError(f"case {case}: cannot read {rel!r}: {exc}") from None


def check_shape(case: str, pred: Any, truth: Any) -> None:
    """An array prediction must have the reference's shape (JSON documents are not checked)."""
    if isinstance(truth, np.ndarray) and np.shape(pred) != truth.shape:
        raise InvalidSubmissionError(
            f"case {case}: prediction shape {np.shape(pred)} differs from {truth.shape}")


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of an array reference (None for a JSON document)."""
    return tuple(value.shape) if isinstance(value, np.ndarray) else None

