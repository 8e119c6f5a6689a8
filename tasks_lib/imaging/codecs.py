"""Bytes ↔ arrays for the file formats of the imaging tracks (NIfTI, NPY, PNG, JSON, CSV)."""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Sequence
from typing import Any

import nibabel as nib
import numpy as np
from numpy.typing import NDArray

NIFTI_TEXT_FIELDS = ("descrip", "aux_file", "intent_name", "db_name")
"""Free-text NIfTI-1 header fields that may carry identifying text."""


def nifti_bytes(data: NDArray[np.generic], spacing: Sequence[float],
                descrip: str = "") -> bytes:
    """A gzip-compressed NIfTI-1 file with a diagonal affine of ``spacing``."""
    img: Any = nib.Nifti1Image(np.asarray(data), np.diag([*map(float, spacing), 1.0]))  # type: ignore[no-untyped-call]
    img.header["descrip"] = descrip.encode("ascii")[:80]
    img.header.set_xyzt_units("mm")
    return gzip.compress(img.to_bytes(), mtime=0)


def nifti_load(data: bytes) -> nib.Nifti1Image:
    """Parse (gzip-compressed or plain) NIfTI-1 bytes; fails on truncated/corrupt input."""
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return nib.Nifti1Image.from_bytes(raw)


def nifti_array(img: nib.Nifti1Image) -> NDArray[np.generic]:
    """The stored array in its on-disk dtype (fully read, so truncation is detected)."""
    return np.asarray(img.dataobj)


def npy_bytes(arr: NDArray[np.generic]) -> bytes:
    """``numpy.save`` output as bytes."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr), allow_pickle=False)
    return buf.getvalue()


def npy_load(data: bytes) -> NDArray[np.generic]:
    """Parse NPY bytes (pickles refused)."""
    return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))


def png_bytes(img: NDArray[np.uint8]) -> bytes:
    """An 8-bit greyscale PNG."""
    import imageio.v3 as iio

    return bytes(iio.imwrite("<bytes>", np.asarray(img, dtype=np.uint8), extension=".png"))


def png_load(data: bytes) -> NDArray[np.uint8]:
    """Parse PNG bytes."""
    import imageio.v3 as iio

    return np.asarray(iio.imread(data, extension=".png"))


def csv_bytes(header: Sequence[str], rows: Sequence[Sequence[str]]) -> bytes:
    """UTF-8 CSV with a header row."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def csv_rows(data: bytes) -> list[dict[str, str]]:
    """Rows of a UTF-8 CSV, a leading BOM tolerated (``UnicodeDecodeError`` otherwise)."""
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))
