"""Connected components of binary masks (lesions, instances) with ``cc3d``.

``components`` returns the same label map as ``scipy.ndimage.label`` with the matching
structuring element (components numbered 1..N in C order of their first voxel, 0 = background),
labelling only the mask's bounding box. Default connectivity is full (26 in 3D, 8 in 2D), the
lesion convention of ISLES'22 and most lesion-wise metrics; face connectivity is 6 / 4. Masks that
are not 2D or 3D fall back to scipy.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import cc3d
import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from evaluators.surface_geometry import union_bbox

_FULL: dict[int, Literal[8, 26]] = {2: 8, 3: 26}
_FACE: dict[int, Literal[4, 6]] = {2: 4, 3: 6}


class Components(NamedTuple):
    """A label map of connected components and their number.

    Attributes:
        labels: int32 array, 0 = background, components numbered 1..n in C order of their
            first voxel.
        n: number of components.
    """

    labels: NDArray[np.int32]
    n: int


def components(mask: NDArray[np.generic], *, full: bool = True) -> Components:
    """Connected components of ``mask != 0``.

    Args:
        mask: binary (or any; non-zero = foreground) 2D or 3D array; other ranks use scipy.
        full: full connectivity (26 / 8) if True, face connectivity (6 / 4) if False.

    Returns:
        The label map and the number of components, equal to ``scipy.ndimage.label``'s.
    """
    binary = np.asarray(mask) != 0
    if binary.ndim not in _FULL:
        structure = ndimage.generate_binary_structure(binary.ndim, binary.ndim if full else 1)
        labelled, n = ndimage.label(binary, structure=structure)
        return Components(np.asarray(labelled, dtype=np.int32), int(n))
    connectivity: Literal[4, 6, 8, 26] = _FULL[binary.ndim] if full else _FACE[binary.ndim]
    labels = np.zeros(binary.shape, dtype=np.int32)
    box = union_bbox(binary, binary)
    if box is None:
        return Components(labels, 0)
    crop = np.ascontiguousarray(binary[box])
    raw, n = cc3d.connected_components(crop, connectivity=connectivity, return_N=True)
    labels[box] = _raster_order(np.asarray(raw), int(n))
    return Components(labels, int(n))


def _raster_order(raw: NDArray[np.integer], n: int) -> NDArray[np.int32]:
    """Renumber components 1..n by the C-order position of their first voxel."""
    flat = raw.ravel()
    where = np.flatnonzero(flat)
    first = np.full(n + 1, where.size, dtype=np.int64)
    np.minimum.at(first, flat[where].astype(np.int64), np.arange(where.size, dtype=np.int64))
    order = np.argsort(first[1:], kind="stable")
    if np.array_equal(order, np.arange(n)):
        return raw.astype(np.int32)
    table = np.zeros(n + 1, dtype=np.int32)
    table[1:][order] = np.arange(1, n + 1, dtype=np.int32)
    return np.asarray(table[raw], dtype=np.int32)
