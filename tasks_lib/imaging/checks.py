"""The validate step of construct: the rules every imaging pool's files obey, generated or
ingested from a user's folder, checked before anything is written. Each imaging kit names its
case rule (``case_check``); this module holds the rules:

* label maps (:func:`check_label_map_case`) — image and label map on the same grid (shape),
  with the same spacing and affine (orientation and origin, within :data:`AFFINE_TOL_MM`); the
  manifest's grid and spacing are the image's; the image is finite; label values are 0 or
  declared labels.
* boxes (:func:`check_boxes_case`) — ``x1 < x2``, ``y1 < y2`` inside the image; box labels are
  declared classes.
* reference texts (:func:`check_text_case`) — every reference text is non-empty.
* image pairs (:func:`check_image_pair_case`) — input and reference have the same shape and are
  finite.

A broken rule is an :class:`InputDataError` naming the user's file (``Rendered.sources``) or,
for generated tasks, the pool key — the generator's bug, surfaced the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InputDataError, Track
from tasks_lib.imaging import codecs
from tasks_lib.imaging.readers import Volume, read_nifti, spacing_of
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry

AFFINE_TOL_MM = 1e-3
"""Largest difference (mm, or direction-cosine × spacing) between image and label affines."""


class CaseFiles:
    """Artifacts by key, and the name to blame for each."""

    def __init__(self, rendered: Rendered) -> None:
        self.by_key: dict[str, Artifact] = {a.key: a for a in rendered.artifacts}
        self.sources = rendered.sources or {}

    def name(self, key: str) -> str:
        return self.sources.get(key, key)

    def data(self, key: str) -> bytes:
        if key not in self.by_key:
            raise ValueError(f"no pool file {key!r} was rendered")  # our bug, not the user's
        return self.by_key[key].data

    def volume(self, key: str) -> Volume:
        return read_nifti(self.data(key), self.name(key))


def _shape(a: Any) -> str:
    return "x".join(str(int(n)) for n in a)


def _fmt(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


CaseCheck = Callable[[CaseFiles, CaseEntry, Rendered], None]
"""``(files, case, rendered task) → None``; raises on a broken rule."""


def check_label_map_case(files: CaseFiles, c: CaseEntry, rendered: Rendered) -> None:
    """One image/label-map pair (see the module docstring)."""
    img, ref = files.volume(c.image), files.volume(c.reference)
    name, ref_name = files.name(c.image), files.name(c.reference)
    grid = img.array.shape[:3] if img.array.ndim == 4 else img.array.shape  # channels last
    if ref.array.ndim != 3:
        raise InputDataError(ref_name, f"a label map is a 3-D volume, got shape "
                                       f"{_shape(ref.array.shape)}")
    if grid != ref.array.shape:
        raise InputDataError(ref_name, f"grid mismatch: label map {_shape(ref.array.shape)}, "
                                       f"image {_shape(grid)} ({name})")
    if list(grid) != list(c.shape):
        raise ValueError(f"{c.case_id}: manifest shape {c.shape} is not the image's")
    sp, ref_sp = spacing_of(img.affine), spacing_of(ref.affine)
    if not np.allclose(sp, ref_sp, atol=AFFINE_TOL_MM, rtol=0):
        raise InputDataError(ref_name, f"spacing mismatch: label map {_fmt(ref_sp)} mm, image "
                                       f"{_fmt(sp)} mm ({name})")
    if not np.allclose(img.affine, ref.affine, atol=AFFINE_TOL_MM, rtol=0):
        raise InputDataError(ref_name, "affine mismatch: the label map's orientation or origin "
                                       f"differs from the image's ({name})")
    if c.spacing and not np.allclose(c.spacing, sp, rtol=1e-6, atol=1e-6):
        raise ValueError(f"{c.case_id}: manifest spacing {c.spacing} is not the image's {sp}")
    if img.array.dtype.kind == "f" and not np.all(np.isfinite(img.array)):
        raise InputDataError(name, "the image holds NaN or infinite values")
    _check_labels(ref.array, rendered.labels, ref_name, rendered.declared_in)


def _check_labels(arr: NDArray[Any], labels: list[int], name: str, declared_in: str) -> None:
    values = np.unique(arr)
    allowed = np.asarray([0, *labels])
    unknown = values[~np.isin(values, allowed)]
    if unknown.size:
        shown = ", ".join(f"{v:g}" for v in unknown[:10].tolist())
        raise InputDataError(name, f"label values {shown} are not in the declared labels "
                                   f"{', '.join(map(str, labels))} (0 = background; declare "
                                   f"labels in {declared_in})")


def check_boxes_case(files: CaseFiles, c: CaseEntry, rendered: Rendered) -> None:
    """One image's reference boxes (see the module docstring)."""
    name, classes = files.name(c.reference), rendered.classes
    ref = json.loads(files.data(c.reference))
    h, w = codecs.png_load(files.data(c.image)).shape[:2]
    for box, label in zip(ref["boxes"], ref["labels"], strict=True):
        x1, y1, x2, y2 = box
        if not (0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h):
            raise InputDataError(name, f"box {box} is not inside the {w}x{h} image with "
                                       "x1 < x2, y1 < y2")
        if label not in classes:
            raise InputDataError(name, f"box label {label} is not a declared class "
                                       f"({', '.join(map(str, sorted(classes)))}; declare "
                                       "classes in dataset.yaml)")


def check_image_pair_case(files: CaseFiles, c: CaseEntry, rendered: Rendered) -> None:
    """One degraded/clean pair (see the module docstring)."""
    img, ref = codecs.npy_load(files.data(c.image)), codecs.npy_load(files.data(c.reference))
    if img.shape != ref.shape:
        raise InputDataError(files.name(c.reference), f"grid mismatch: {_shape(ref.shape)} vs "
                                                      f"input {_shape(img.shape)}")
    for key, arr in ((c.image, img), (c.reference, ref)):
        if not np.all(np.isfinite(arr)):
            raise InputDataError(files.name(key), "holds NaN or infinite values")


def check_text_case(files: CaseFiles, c: CaseEntry, rendered: Rendered) -> None:
    """One reference text (VQA answers, reports): not empty."""
    if not files.data(c.reference).decode("utf-8").strip():
        raise InputDataError(files.name(c.reference), "an empty reference text")


def check_rendered(track: Track, rendered: Rendered) -> None:
    """Hold a task's rendered or ingested files to its track kit's case rule (module docstring).

    Raises:
        InputDataError: a rule is broken; the message names the file at fault.
        ValueError: the manifest entries disagree with the files (our bug).
    """
    from tasks_lib.imaging.registry import imaging_kit

    check = imaging_kit(track).case_check
    files = CaseFiles(rendered)
    if not rendered.cases:
        raise InputDataError("images/", "no cases")
    for c in rendered.cases:
        check(files, c, rendered)
