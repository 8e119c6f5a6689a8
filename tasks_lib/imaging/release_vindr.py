"""VinDr-CXR (Nguyen et al., Sci. Data 9:429, 2022; PhysioNet ``vindr-cxr`` 1.0.0, and the
Kaggle VinBigData competition's copy) in its own layout, read as AutoMedBench's
``eval_det2d/stage_data.py`` reads a local download::

    annotations/annotations_train.csv   PhysioNet (or annotations_train.csv / train.csv at the top:
                                        the Kaggle copy, AutoMedBench's two names)
    train/<image_id>.dicom              the training images (.dcm, .png, .jpg also accepted)

The CSV has one row per radiologist finding: ``image_id, rad_id, class_name, x_min, y_min,
x_max, y_max`` (Kaggle adds ``class_id``); a ``No finding`` row has empty coordinates. As
AutoMedBench stages it: every finding of every radiologist is one box of the one class
``abnormality``; images without a file are skipped; ``n_cases`` images (default 10) are drawn
with ``random.Random(42)``: ``n_cases − 2`` with a box and 2 without, then shuffled; pixels are
``pixel_array`` inverted when MONOCHROME1, then ``(x − min) / max · 255`` truncated to uint8.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InputDataError, InvalidSubmissionError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.readers import INGEST_LIMITS, read_bytes
from tasks_lib.imaging.release_types import Release, ReleaseCase, case_id_of
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry, Visibility
from tasks_lib.sources import PublicReleaseSource
from tasks_lib.submission_limits import DEFAULT_LIMITS, csv_table

SPLIT = "train"
CSV_NAMES = (f"annotations/annotations_{SPLIT}.csv", f"annotations_{SPLIT}.csv", f"{SPLIT}.csv")
COLUMNS = ("image_id", "class_name", "x_min", "y_min", "x_max", "y_max")
SUFFIXES = (".dicom", ".dcm", ".png", ".jpg", ".jpeg")
CLASSES = {1: "abnormality"}
SEED, N_CASES, N_NEGATIVE = 42, 10, 2
"""AutoMedBench's draw: seed 42, 10 images, 2 of them without a finding."""
LICENSE = ("PhysioNet Credentialed Health Data License 1.5.0 (VinDr-CXR 1.0.0; credentialed "
           "access, data use agreement)")
INPUTS = ("public/images/<case_id>.png — the chest X-ray as 8-bit greyscale at its original "
          "resolution (AutoMedBench's conversion of the DICOM pixels)")


def _csv(root: Path) -> str:
    for name in CSV_NAMES:
        if (root / name).is_file():
            return name
    raise InputDataError(CSV_NAMES[0], f"missing: a VinDr-CXR release has its {SPLIT} box "
                                       f"annotations as {' or '.join(CSV_NAMES)}")


def _boxes(root: Path, name: str) -> dict[str, list[list[float]]]:
    """image_id → its boxes ``[x1, y1, x2, y2]``, images in the CSV's order (AutoMedBench's)."""
    try:
        rows = csv_table(read_bytes(root / name, name, INGEST_LIMITS), name, DEFAULT_LIMITS)
    except InvalidSubmissionError as exc:
        raise InputDataError(name, str(exc).removeprefix(f"{name}: ")) from None
    if not rows or set(COLUMNS) - set(rows[0]):
        raise InputDataError(name, f"needs the columns {', '.join(COLUMNS)} (VinDr-CXR's "
                                   "annotation CSV)")
    out: dict[str, list[list[float]]] = {}
    for n, row in enumerate(rows, start=2):
        image_id, finding = row["image_id"].strip(), (row["class_name"] or "").strip()
        boxes = out.setdefault(image_id, [])
        if not finding or finding.lower() == "no finding":
            continue
        try:
            box = [float(row[c]) for c in COLUMNS[2:]]
        except (TypeError, ValueError):
            raise InputDataError(name, f"{finding!r} of {image_id} has no numeric "
                                       "x_min, y_min, x_max, y_max", line=n) from None
        boxes.append(box)
    return out


def _image_file(root: Path, image_id: str) -> str | None:
    for suffix in SUFFIXES:
        rel = f"{SPLIT}/{image_id}{suffix}"
        if (root / rel).is_file() and not (root / rel).is_symlink():
            return rel
    return None


def vindr_release(root: Path) -> Release:
    """The annotated training images that have a file (a partial download is fine)."""
    name = _csv(root)
    if not (root / SPLIT).is_dir():
        raise InputDataError(f"{SPLIT}/", "missing: the images are train/<image_id>.dicom")
    cases = []
    for image_id in _boxes(root, name):
        rel = _image_file(root, case_id_of(image_id, f"{name}: image_id {image_id!r}"))
        if rel is not None:
            cases.append(ReleaseCase(image_id, [rel], name))
    if not cases:
        raise InputDataError(f"{SPLIT}/", f"no image of {name} is there "
                                          f"(train/<image_id>{{{','.join(SUFFIXES)}}})")
    config = DatasetConfig(title="VinDr-CXR", description="VinDr-CXR training chest X-rays "
                           "with radiologists' boxes", license=LICENSE, classes=dict(CLASSES))
    return Release("vindr-cxr", config, [], cases, inputs=INPUTS, declared_in=name)


def select(boxes: dict[str, list[list[float]]], ids: list[str], total: int) -> list[str]:
    """AutoMedBench's ``select_cases``: ``total − 2`` images with a box and 2 without, drawn
    with ``random.Random(42)`` in that order, then shuffled by the same generator."""
    rng = random.Random(SEED)
    positives = [i for i in ids if boxes[i]]
    negatives = [i for i in ids if not boxes[i]]
    n_pos = max(total - N_NEGATIVE, 0)
    n_neg = max(total - n_pos, 0)
    if len(positives) < n_pos or len(negatives) < n_neg:
        raise InputDataError(SPLIT + "/", f"{len(positives)} images with a finding and "
                                          f"{len(negatives)} without; the card takes {n_pos} "
                                          f"and {n_neg} (a partial download?)")
    chosen = rng.sample(positives, n_pos) + rng.sample(negatives, n_neg)
    rng.shuffle(chosen)
    return chosen


def _pixels(data: bytes, rel: str) -> NDArray[np.uint8]:
    """The image as AutoMedBench converts it: DICOM ``pixel_array`` (MONOCHROME1 inverted) or
    a PNG/JPEG's luminance, then min–max scaled and truncated to uint8."""
    if rel.endswith((".dicom", ".dcm")):
        import pydicom
        from pydicom.errors import InvalidDicomError

        try:
            ds = pydicom.dcmread(io.BytesIO(data))
            need = int(ds.Rows) * int(ds.Columns) * ((int(ds.BitsAllocated) + 7) // 8)
            if need > INGEST_LIMITS.max_array_bytes:
                raise InputDataError(rel, f"declares {need} bytes of pixels")
            arr: NDArray[Any] = np.asarray(ds.pixel_array)
        except InputDataError:
            raise
        except (InvalidDicomError, AttributeError, ValueError, RuntimeError, OSError) as exc:
            raise InputDataError(rel, f"unreadable DICOM pixels: {type(exc).__name__}: {exc} "
                                      "(a compressed transfer syntax needs pylibjpeg or "
                                      "gdcm)") from None
        if str(getattr(ds, "PhotometricInterpretation", "")) == "MONOCHROME1":
            arr = arr.max() - arr
    else:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(data)) as img:
                arr = np.asarray(img.convert("L"))
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise InputDataError(rel, f"unreadable image: {exc}") from None
    if arr.ndim != 2:
        raise InputDataError(rel, f"a 2-D greyscale image is expected, got {list(arr.shape)}")
    x = arr.astype(np.float32)
    x -= x.min()
    top = x.max()
    if top > 0:
        x /= top
    return np.asarray((x * 255).clip(0, 255).astype(np.uint8))


def read_vindr(root: Path, release: Release, card: PublicReleaseSource | None) -> Rendered:
    """The drawn images (the card's ``n_cases``, default AutoMedBench's 10) as PNG with their
    boxes."""
    name = release.declared_in
    boxes = _boxes(root, name)
    files = {c.case_id: c.images[0] for c in release.cases}
    total = card.n_cases if card is not None and card.n_cases is not None else N_CASES
    cases, arts, sources = [], [], dict[str, str]()
    for image_id in select(boxes, list(files), total):
        rel = files[image_id]
        img = _pixels(read_bytes(root / rel, rel), rel)
        ref = {"boxes": boxes[image_id], "labels": [1] * len(boxes[image_id])}
        key, ref_key = f"images/{image_id}.png", f"references/{image_id}.json"
        arts += [Artifact(key=key, visibility=Visibility.PUBLIC, data=codecs.png_bytes(img)),
                 Artifact(key=ref_key, visibility=Visibility.PRIVATE,
                          data=json.dumps(ref, sort_keys=True).encode())]
        sources |= {key: rel, ref_key: f"{name} (image_id {image_id})"}
        cases.append(CaseEntry(case_id=image_id, output=f"{image_id}.json", reference=ref_key,
                               shape=list(img.shape), origin=rel, image=key))
    return Rendered(cases, arts, [], dict(CLASSES), sources, declared_in=name)
