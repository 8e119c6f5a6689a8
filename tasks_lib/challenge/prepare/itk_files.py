"""Reading the two ITK formats official releases use, without SimpleITK (a development
dependency only): MetaImage ``.mha`` (PANTHER) and NRRD ``.nrrd`` / ``.seg.nrrd`` (SEG.A.).

Both return the array in (x, y, z) order — nibabel's, so the NIfTI the pool writes keeps the
grid and the spacing (mm) of the release file. Supported: one attached data block, raw or
zlib/gzip compressed, scalar voxels; NRRD's 4-D segmentation with a single layer. Anything
else fails with an :class:`~tasks_lib.errors.InputDataError` naming the file.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from tasks_lib.errors import InputDataError

_MET = {"MET_CHAR": "i1", "MET_UCHAR": "u1", "MET_SHORT": "i2", "MET_USHORT": "u2",
        "MET_INT": "i4", "MET_UINT": "u4", "MET_LONG_LONG": "i8", "MET_ULONG_LONG": "u8",
        "MET_FLOAT": "f4", "MET_DOUBLE": "f8"}
_NRRD = {**dict.fromkeys(("signed char", "int8", "int8_t"), "i1"),
         **dict.fromkeys(("uchar", "unsigned char", "uint8", "uint8_t"), "u1"),
         **dict.fromkeys(("short", "short int", "signed short", "signed short int", "int16",
                          "int16_t"), "i2"),
         **dict.fromkeys(("ushort", "unsigned short", "unsigned short int", "uint16",
                          "uint16_t"), "u2"),
         **dict.fromkeys(("int", "signed int", "int32", "int32_t"), "i4"),
         **dict.fromkeys(("uint", "unsigned int", "uint32", "uint32_t"), "u4"),
         **dict.fromkeys(("longlong", "long long", "int64", "int64_t"), "i8"),
         **dict.fromkeys(("ulonglong", "unsigned long long", "uint64", "uint64_t"), "u8"),
         "float": "f4", "double": "f8"}


def _array(path: Path, data: bytes, dtype: str, sizes: list[int]) -> np.ndarray:
    """The data block as an (x, y, z…) array (the file stores x fastest)."""
    count = int(np.prod(sizes))
    if len(data) < count * np.dtype(dtype).itemsize:
        raise InputDataError(str(path), f"data block shorter than its header's {sizes} voxels")
    flat = np.frombuffer(data, dtype=dtype, count=count)
    return np.ascontiguousarray(flat.reshape(sizes[::-1]).transpose())


def read_mha(path: Path) -> tuple[np.ndarray, tuple[float, ...]]:
    """A MetaImage ``.mha`` file's array (x, y, z) and spacing."""
    raw = path.read_bytes()
    header: dict[str, str] = {}
    start = 0
    while start < len(raw):
        end = raw.index(b"\n", start) if b"\n" in raw[start:] else len(raw)
        key, _, value = raw[start:end].decode("latin-1").partition("=")
        header[key.strip()] = value.strip()
        start = end + 1
        if key.strip() == "ElementDataFile":
            break
    if header.get("ElementDataFile") != "LOCAL" or header.get("ElementType") not in _MET:
        raise InputDataError(str(path), "not a MetaImage with its data attached (ElementDataFile "
                                        "= LOCAL) of a scalar ElementType")
    if int(header.get("ElementNumberOfChannels", "1")) != 1:
        raise InputDataError(str(path), "a multi-channel MetaImage; a label map has one")
    msb = header.get("BinaryDataByteOrderMSB", header.get("ElementByteOrderMSB", "False"))
    dtype = (">" if msb == "True" else "<") + _MET[header["ElementType"]]
    data = raw[start:]
    if header.get("CompressedData") == "True":
        data = zlib.decompress(data)
    sizes = [int(v) for v in header["DimSize"].split()]
    spacing = header.get("ElementSpacing", header.get("ElementSize", " ".join("1" * len(sizes))))
    return _array(path, data, dtype, sizes), tuple(float(v) for v in spacing.split())


def _nrrd_spacing(header: dict[str, str], ndim: int) -> tuple[float, ...]:
    if "space directions" in header:
        vectors = [v for v in header["space directions"].split() if v != "none"]
        return tuple(float(np.linalg.norm([float(c) for c in v.strip("()").split(",")]))
                     for v in vectors)
    if "spacings" in header:
        return tuple(float(v) for v in header["spacings"].split() if v.lower() != "nan")
    return (1.0,) * ndim


def read_nrrd(path: Path) -> tuple[np.ndarray, tuple[float, ...]]:
    """An NRRD file's array (x, y, z) and spacing (a single-layer 4-D segmentation squeezed)."""
    raw = path.read_bytes()
    cut = raw.find(b"\n\n")
    if not raw.startswith(b"NRRD") or cut < 0:
        raise InputDataError(str(path), "not an NRRD file (magic NRRD000x, header, blank line)")
    header = {k.strip(): v.strip() for k, _, v in (
        line.partition(":") for line in raw[:cut].decode("latin-1").splitlines()[1:]
        if line and not line.startswith("#") and ":" in line)}
    if "data file" in header or "datafile" in header or header.get("type") not in _NRRD:
        raise InputDataError(str(path), "an NRRD with detached data or a non-scalar type")
    dtype = (">" if header.get("endian") == "big" else "<") + _NRRD[header["type"]]
    data = raw[cut + 2:]
    encoding = header.get("encoding", "raw")
    if encoding in ("gzip", "gz"):
        data = gzip.decompress(data)
    elif encoding != "raw":
        raise InputDataError(str(path), f"NRRD encoding {encoding!r} (read: raw, gzip)")
    sizes = [int(v) for v in header["sizes"].split()]
    array = _array(path, data, dtype, sizes)
    if array.ndim == 4:
        if array.shape[0] != 1:
            raise InputDataError(str(path), f"a {array.shape[0]}-layer segmentation; a label "
                                            "map has one layer")
        array = array[0]
    return array, _nrrd_spacing(header, array.ndim)[-array.ndim:]
