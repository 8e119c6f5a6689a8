"""TopCoW 2024 task 2 (CoW region of interest): boundary IoU and IoU of 3D boxes, as the
official TopCoW_Eval_Metrics code defines them (``boundary_iou_from_tuple``).

A box is ``{"size": [sx, sy, sz], "location": [x, y, z]}`` in voxels, ``location`` the
**minimum** corner (0-indexed) and the last voxel ``location + size − 1`` (the challenge's
``cow-roi.json``). Its *boundary band* at ratio ``r`` keeps the voxels within
``d = ceil(r · size)`` voxels of a face, per axis, **inside** the box; boundary IoU is the IoU of
the two bands as voxel sets. With ``r = 0.5`` the band is the whole box, so the same function
gives the plain box IoU (the official ``IoU``); the official boundary IoU uses ``r = 0.2``.

*Departure of the ReX-MLE port, not followed here*: it dilates the filled box **outward** by
``ceil(r · size)`` per side, which is neither the official boundary IoU nor the box IoU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InvalidSubmissionError
from evaluators.metrics import Direction, metric


def parse_box(doc: Any) -> tuple[list[int], list[int]]:
    """``(size, location)`` of a box document, as integers (the official parser's ``int``)."""
    if not isinstance(doc, Mapping) or "size" not in doc or "location" not in doc:
        raise InvalidSubmissionError("a box needs 'size' and 'location' (3 numbers each)")
    size, location = doc["size"], doc["location"]
    if not all(isinstance(v, Sequence) and len(v) == 3 for v in (size, location)):
        raise InvalidSubmissionError("'size' and 'location' must hold 3 numbers each")
    try:
        s, loc = [int(v) for v in size], [int(v) for v in location]
    except (TypeError, ValueError):
        raise InvalidSubmissionError("box coordinates must be numbers") from None
    if min(s) < 1:
        raise InvalidSubmissionError(f"box size {s} must be at least 1 voxel per axis")
    return s, loc


def band(size: Sequence[int], location: Sequence[int], ratio: float,
         origin: Sequence[int], shape: Sequence[int]) -> NDArray[np.bool_]:
    """The box's boundary band at ``ratio`` on a grid starting at ``origin``."""
    out = np.zeros(tuple(shape), dtype=bool)
    lo = [loc - o for loc, o in zip(location, origin, strict=True)]
    hi = [a + s for a, s in zip(lo, size, strict=True)]
    out[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = True
    dist = [math.ceil(s * ratio) for s in size]
    inner = tuple(slice(a + d, b - d) for a, b, d in zip(lo, hi, dist, strict=True))
    if all(b - d > a + d for a, b, d in zip(lo, hi, dist, strict=True)):
        out[inner] = False
    return out


@metric("box_boundary_iou", direction=Direction.HIGHER, averaging="mean over cases",
        missing=0.0,
        description="IoU of the inner boundary bands of two 3D boxes at a ratio of their size "
                    "(official TopCoW task 2; ratio 0.5 = box IoU)")
def box_boundary_iou(prediction: Any, reference: Any, *, ratio: float = 0.2) -> float:
    """Boundary IoU of a predicted and a reference box document (see the module docstring)."""
    if not 0 < ratio <= 0.5:
        raise ValueError(f"ratio must be in (0, 0.5], not {ratio}")
    (ps, pl), (rs, rl) = parse_box(prediction), parse_box(reference)
    origin = [min(a, b) for a, b in zip(pl, rl, strict=True)]
    end = [max(a + s, b + t) for a, s, b, t in zip(pl, ps, rl, rs, strict=True)]
    shape = [e - o for e, o in zip(end, origin, strict=True)]
    p, r = band(ps, pl, ratio, origin, shape), band(rs, rl, ratio, origin, shape)
    union = int((p | r).sum())
    return 0.0 if union == 0 else int((p & r).sum()) / union
