"""Bounded decoders of one submitted output's bytes: NIfTI label maps, NPY images, detection JSON.

Each decoder works within the track kit's :class:`~tasks_lib.submission_limits.SubmissionLimits`:
an array's header-declared size is checked against the case's grid before anything is allocated
or inflated, pickles are refused, JSON is parsed with size, depth and length caps. A file that
breaks a limit or does not parse raises :class:`InvalidSubmissionError` naming the rule; the
folder reading and the measurement rows live in :mod:`tasks_lib.imaging.submission`.
"""

from __future__ import annotations

import io
import math
import zlib
from collections.abc import Sequence
from typing import Any

import nibabel as nib
import numpy as np
from nibabel.filebasedimages import ImageFileError
from nibabel.spatialimages import HeaderDataError
from nibabel.wrapstruct import WrapStructError
from numpy.typing import NDArray

from tasks_lib.errors import InvalidSubmissionError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.types import CaseEntry
from tasks_lib.submission_limits import (
    DEFAULT_LIMITS,
    SubmissionLimits,
    iter_gunzip,
    loads_json,
    violation,
)

NIFTI_HEADER_BYTES = 348


def shape_text(shape: Sequence[int]) -> str:
    """``(48, 56, 48)`` → ``'48x56x48'`` (the form suites compare)."""
    return "x".join(str(int(n)) for n in shape)


def check_declared(name: str, shape: Sequence[int], itemsize: int, case: CaseEntry | None,
                   limits: SubmissionLimits) -> None:
    """Refuse an array whose *header* declares more than the case's grid allows (before any
    allocation): more than ``grid_factor`` × the manifest grid's elements, or more than
    ``max_array_bytes``."""
    dims = [int(n) for n in shape]
    if any(n < 0 for n in dims):
        raise violation(name, "array_size", f"header declares a negative dimension {dims}")
    elements = math.prod(dims)
    if case is not None and case.shape:
        grid = math.prod(case.shape)
        if elements > grid * limits.grid_factor:
            raise violation(name, "array_size", f"header declares a {shape_text(dims)} array "
                            f"({elements} elements); the case's grid is {shape_text(case.shape)}"
                            f" (at most {limits.grid_factor}x its {grid} elements)")
    if elements * itemsize > limits.max_array_bytes:
        raise violation(name, "array_size", f"header declares {elements * itemsize} bytes of "
                                            f"data (limit {limits.max_array_bytes})")


def _nifti_raw(data: bytes, name: str, case: CaseEntry | None,
               limits: SubmissionLimits) -> bytes:
    """The uncompressed NIfTI bytes, the header checked against the grid before the data is
    inflated (a gzip bomb stops at the declared size)."""
    gz = data[:2] == b"\x1f\x8b"
    chunks = (iter_gunzip(data, name, limits.max_decompressed_bytes, label="unreadable NIfTI: ")
              if gz else iter([data]))
    head = bytearray()
    for chunk in chunks:
        head += chunk
        if len(head) >= NIFTI_HEADER_BYTES:
            break
    hdr = nib.Nifti1Header.from_fileobj(io.BytesIO(bytes(head)))  # type: ignore[no-untyped-call]
    shape = hdr.get_data_shape()
    itemsize = hdr.get_data_dtype().itemsize
    check_declared(name, shape, itemsize, case, limits)
    offset = int(hdr.get_data_offset())
    if offset > limits.max_header_bytes:
        raise violation(name, "nifti_format", f"unreadable NIfTI: data offset {offset} is past "
                                              f"the {limits.max_header_bytes} bytes a header "
                                              "and its extensions may take")
    declared = offset + math.prod(int(n) for n in shape) * itemsize
    cap = declared + 64 * 1024
    for chunk in chunks:
        head += chunk
        if len(head) > cap:
            raise violation(name, "decompressed_size", f"inflates past the {declared} bytes "
                                                       "its header declares")
    return bytes(head)


def load_label_map(data: bytes, name: str = "NIfTI", case: CaseEntry | None = None,
                   limits: SubmissionLimits = DEFAULT_LIMITS) -> NDArray[Any]:
    """Parse a NIfTI label map within ``limits`` (the header's declared size is checked against
    the case's grid first); :class:`InvalidSubmissionError` if corrupt, truncated or too big."""
    try:
        raw = _nifti_raw(data, name, case, limits)
        return codecs.nifti_array(nib.Nifti1Image.from_bytes(raw))
    except (OSError, EOFError, ValueError, zlib.error, ImageFileError, WrapStructError,
            HeaderDataError) as exc:
        if isinstance(exc, InvalidSubmissionError):
            raise
        raise violation(name, "nifti_format", f"unreadable NIfTI: {type(exc).__name__}: "
                                              f"{exc}") from None


def load_image(data: bytes, name: str = "NPY", case: CaseEntry | None = None,
               limits: SubmissionLimits = DEFAULT_LIMITS) -> NDArray[Any]:
    """Parse an NPY image within ``limits`` (header checked before the array is allocated;
    pickles refused); :class:`InvalidSubmissionError` if not NPY, corrupt or too big."""
    f = io.BytesIO(data)
    fmt: Any = np.lib.format  # untyped in some numpy releases
    try:
        version = fmt.read_magic(f)
    except ValueError:
        raise violation(name, "npy_format", "not an NPY file (no NPY magic string)") from None
    try:
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(f)
        else:
            raise violation(name, "npy_format", f"unsupported NPY version {version}")
    except (ValueError, SyntaxError, TypeError) as exc:
        if isinstance(exc, InvalidSubmissionError):
            raise
        raise violation(name, "npy_format", f"unreadable NPY header: {exc}") from None
    if dtype.hasobject:
        raise violation(name, "npy_format", "an object array (pickled data) is not allowed")
    check_declared(name, shape, dtype.itemsize, case, limits)
    need = math.prod(int(n) for n in shape) * dtype.itemsize
    if len(data) - f.tell() < need:
        raise violation(name, "npy_format", f"truncated: its header declares {need} bytes of "
                                            f"data, it holds {len(data) - f.tell()}")
    try:
        return codecs.npy_load(data)
    except (OSError, EOFError, ValueError) as exc:
        raise violation(name, "npy_format", f"unreadable NPY: {type(exc).__name__}: "
                                            f"{exc}") from None


def parse_boxes(data: bytes, name: str = "JSON", case: CaseEntry | None = None,
                limits: SubmissionLimits = DEFAULT_LIMITS) -> dict[str, list[Any]]:
    """Parse one detection JSON within ``limits`` (size, depth, number magnitude, list length):
    an object with lists ``boxes``, ``scores``, ``labels`` (structure only; the suite judges
    their contents)."""
    obj = loads_json(data, name, limits)
    if not isinstance(obj, dict) or not all(
            isinstance(obj.get(k), list) for k in ("boxes", "scores", "labels")):
        raise violation(name, "detection_layout",
                        "JSON must be an object with lists boxes, scores, labels")
    return obj
