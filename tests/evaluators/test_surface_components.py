"""``evaluators.components`` (cc3d) equals ``scipy.ndimage.label``, numbering included."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from evaluators.components import components


def test_hand_case_full_and_face_connectivity() -> None:
    m = np.zeros((4, 5), dtype=np.uint8)
    m[0, 0] = m[1, 1] = 1  # diagonal neighbours: one lesion (8-conn), two (4-conn)
    m[3, 3:5] = 7
    full, face = components(m), components(m, full=False)
    assert full.n == 2 and face.n == 3
    assert full.labels[0, 0] == full.labels[1, 1] == 1 and full.labels[3, 4] == 2
    assert face.labels[1, 1] == 2 and face.labels[3, 3] == 3
    assert components(np.zeros((3, 3, 3))).n == 0


@pytest.mark.parametrize("shape", [(40, 50, 60), (120, 130), (200,)])
@pytest.mark.parametrize("full", [True, False])
def test_equals_scipy_label(shape: tuple[int, ...], full: bool) -> None:
    rng = np.random.default_rng(len(shape) + full)
    mask = ndimage.gaussian_filter(rng.normal(size=shape), 2.0) > 0.05
    mask[tuple(slice(0, 3) for _ in shape)] = False  # the bounding box does not start at 0
    ours = components(mask, full=full)
    structure = ndimage.generate_binary_structure(mask.ndim, mask.ndim if full else 1)
    theirs, n = ndimage.label(mask, structure=structure)
    assert ours.n == n and n > 3
    assert np.array_equal(ours.labels, theirs)
