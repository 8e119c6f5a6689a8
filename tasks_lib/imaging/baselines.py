"""Baseline submissions per task: ``perfect``, ``empty``, ``constant`` and one ``classical`` method.

* perfect — the private references in the submission layout (validates the evaluator: best score).
* empty — well-formed but empty outputs: background-only masks, zero images, no boxes, blank text.
* constant — one value everywhere: the task's lowest label, the input's mean, one whole-image box
  of the lowest declared class, ``yes``, one fixed normal report.
* classical — segmentation: Otsu foreground mask + k-means on intensity with one class per label
  the task declares plus background (darkest → background, then the labels in ascending order:
  GM, WM on the brain tissue tasks; a one-label folder pool gets a two-class map); enhancement:
  total-variation denoising (Chambolle, weight 0.08) for low-dose CT, unsharp masking (radius 2,
  amount 0.5) for k-space truncation; detection, VQA and
  reports: a blob detector (residual against a 25-px median background; bright components of
  ≥ 20 px → hyperintensity, dark components of ≥ 60 px → mass, grown by the 1-px rim; on a
  detection pool, only the classes its task declares), whose lesions feed the VQA answer rules
  and a fixed report template.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from tasks_lib.imaging import codecs
from tasks_lib.imaging.baseline_kind import BaselineKind as BaselineKind
from tasks_lib.imaging.lesions import Lesion, LesionClass
from tasks_lib.imaging.reports import describe
from tasks_lib.imaging.types import CaseEntry, PoolManifest
from tasks_lib.imaging.vqa_items import answers_for
from tasks_lib.sources import KSpaceSuperResSource
from tasks_lib.storage import Storage

NORMAL_REPORT = "No focal mass or hyperintensity is identified. Impression: normal study."


def kmeans_segmentation(img: NDArray[np.floating], labels: Sequence[int] = (1, 2)
                        ) -> NDArray[np.uint8]:
    """Otsu foreground, then k-means on foreground intensities with ``len(labels) + 1`` clusters;
    clusters sorted by centre map to background (0), then ``labels`` in ascending order, so the
    map holds no value the task does not declare."""
    from skimage.filters import threshold_otsu
    from sklearn.cluster import KMeans

    values = np.asarray([0, *sorted(labels)], dtype=np.uint8)
    otsu: Callable[..., float] = threshold_otsu
    fg = img > otsu(img)
    km = KMeans(n_clusters=len(values), n_init=3, random_state=0).fit(img[fg].reshape(-1, 1))
    rank = np.empty(len(values), dtype=np.uint8)
    rank[np.argsort(km.cluster_centers_.ravel())] = values
    out = np.zeros(img.shape, dtype=np.uint8)
    out[fg] = rank[km.labels_]
    return out


def tv_denoise(img: NDArray[np.floating]) -> NDArray[np.float32]:
    """Chambolle total-variation denoising."""
    from skimage.restoration import denoise_tv_chambolle

    tv: Callable[..., NDArray[np.float64]] = denoise_tv_chambolle
    return np.asarray(tv(img, weight=0.08), dtype=np.float32)


def unsharp(img: NDArray[np.floating]) -> NDArray[np.float32]:
    """Unsharp masking (radius 2, amount 0.5) against k-space truncation blur."""
    from skimage.filters import unsharp_mask

    sharpen: Callable[..., NDArray[np.float64]] = unsharp_mask
    return np.asarray(sharpen(img, radius=2, amount=0.5, preserve_range=True), dtype=np.float32)


def restore(task_id: str, img: NDArray[np.floating]) -> NDArray[np.float32]:
    """The classical restoration for the task's degradation (TV for noise, unsharp for blur)."""
    from tasks_lib.imaging.pool import load_task

    if isinstance(load_task(task_id).source, KSpaceSuperResSource):
        return unsharp(img)
    return tv_denoise(img)


def detect_blobs(img: NDArray[np.uint8]) -> list[Lesion]:
    """Bright and dark compact blobs against a median background, as lesions."""
    x = img.astype(np.float64) / 255.0
    resid = x - ndimage.median_filter(x, size=25)
    out = []
    for label, mask, min_px, grow in ((LesionClass.HYPERINTENSITY, resid > 0.25, 20, 0),
                                      (LesionClass.MASS, resid < -0.3, 60, 1)):
        comps, _ = ndimage.label(ndimage.binary_opening(mask))
        for idx, sl in enumerate(ndimage.find_objects(comps), start=1):
            if sl is None or int((comps[sl] == idx).sum()) < min_px:
                continue
            ys, xs = sl
            x1, y1 = max(0, xs.start - grow), max(0, ys.start - grow)
            x2, y2 = min(img.shape[1], xs.stop + grow), min(img.shape[0], ys.stop + grow)
            side = "left" if (x1 + x2) / 2 < img.shape[1] / 2 else "right"
            out.append(Lesion(label=label, box=[float(x1), float(y1), float(x2), float(y2)],
                              side=side, diameter_mm=2.0 * (x2 - x1)))
    return out


def _contrast(img: NDArray[np.uint8], les: Lesion) -> float:
    x1, y1, x2, y2 = (int(v) for v in les.box)
    return float(np.clip(np.abs(img[y1:y2, x1:x2].astype(float).mean() - img.mean()) / 255, 0, 1))


def _public(pool: Storage, key: str) -> bytes:
    return pool.read_bytes(f"public/{key}")


def _array_case(kind: BaselineKind, m: PoolManifest, pool: Storage, c: CaseEntry,
                seg: bool) -> bytes:
    if kind == BaselineKind.PERFECT:
        return pool.read_bytes(f"private/{c.reference}")
    img = (codecs.nifti_array(codecs.nifti_load(_public(pool, c.image))).astype(np.float64)
           if seg else codecs.npy_load(_public(pool, c.image)).astype(np.float64))
    if seg:
        labels = m.labels or [1]
        img = img[..., 0] if img.ndim == 4 else img  # a release's channels last: the first
        lab = {BaselineKind.EMPTY: np.zeros(img.shape, np.uint8),
               BaselineKind.CONSTANT: np.full(img.shape, min(labels), np.uint8)}.get(kind)
        return codecs.nifti_bytes(kmeans_segmentation(img, labels) if lab is None else lab,
                                  c.spacing)
    if kind == BaselineKind.EMPTY:
        return codecs.npy_bytes(np.zeros(img.shape, np.float32))
    if kind == BaselineKind.CONSTANT:
        return codecs.npy_bytes(np.full(img.shape, img.mean(), np.float32))
    return codecs.npy_bytes(restore(m.task_id, img))


def _detection_case(kind: BaselineKind, m: PoolManifest, pool: Storage, c: CaseEntry) -> bytes:
    classes = set(m.classes) or {int(v) for v in LesionClass}
    if kind == BaselineKind.PERFECT:
        ref = json.loads(pool.read_bytes(f"private/{c.reference}"))
        obj = {**ref, "scores": [1.0] * len(ref["boxes"])}
    elif kind == BaselineKind.EMPTY:
        obj = {"boxes": [], "labels": [], "scores": []}
    elif kind == BaselineKind.CONSTANT:
        h, w = c.shape
        obj = {"boxes": [[0.0, 0.0, float(w), float(h)]], "labels": [min(classes)],
               "scores": [1.0]}
    else:
        img = codecs.png_load(_public(pool, c.image))
        found = [les for les in detect_blobs(img) if int(les.label) in classes]
        obj = {"boxes": [les.box for les in found], "labels": [int(les.label) for les in found],
               "scores": [_contrast(img, les) for les in found]}
    return json.dumps(obj).encode()


def _text_table(kind: BaselineKind, m: PoolManifest, pool: Storage, vqa: bool) -> bytes:
    detected: dict[str, list[Lesion]] = {}
    rows = []
    for n, c in enumerate(m.cases):
        if kind == BaselineKind.PERFECT:
            text = pool.read_bytes(f"private/{c.reference}").decode()
        elif kind == BaselineKind.EMPTY:
            text = ""
        elif kind == BaselineKind.CONSTANT:
            text = "yes" if vqa else NORMAL_REPORT
        elif vqa and not c.case_id.rpartition("-q")[2].isdigit():
            text = "yes"  # not a generated lesion question (a release, your folder): constant
        else:
            if c.image not in detected:
                detected[c.image] = detect_blobs(codecs.png_load(_public(pool, c.image)))
            found = detected[c.image]
            if vqa:
                q = int(c.case_id.rpartition("-q")[2])
                answers = answers_for(found)
                text = answers[q][2] if q < len(answers) else "left"
            else:
                text = describe(found, n, 0)
        rows.append([c.case_id, text])
    header = ["question_id", "answer"] if vqa else ["case_id", "report"]
    return codecs.csv_bytes(header, rows)


BaselineFiles = Callable[[BaselineKind, str, PoolManifest], list[tuple[str, bytes]]]
"""``(kind, pool URL, manifest) → [(file name, bytes)]``: a kit's baseline writer."""


def label_map_baseline(kind: BaselineKind, pool_url: str, m: PoolManifest
                       ) -> list[tuple[str, bytes]]:
    """One NIfTI label map per case (segmentation)."""
    pool = Storage(pool_url)
    return [(c.output, _array_case(kind, m, pool, c, seg=True)) for c in m.cases]


def image_baseline(kind: BaselineKind, pool_url: str, m: PoolManifest) -> list[tuple[str, bytes]]:
    """One restored NPY image per case (enhancement)."""
    pool = Storage(pool_url)
    return [(c.output, _array_case(kind, m, pool, c, seg=False)) for c in m.cases]


def boxes_baseline(kind: BaselineKind, pool_url: str, m: PoolManifest) -> list[tuple[str, bytes]]:
    """One boxes JSON per image (detection)."""
    pool = Storage(pool_url)
    return [(c.output, _detection_case(kind, m, pool, c)) for c in m.cases]


def answers_baseline(kind: BaselineKind, pool_url: str, m: PoolManifest
                     ) -> list[tuple[str, bytes]]:
    """One answers CSV (VQA)."""
    return [(m.cases[0].output, _text_table(kind, m, Storage(pool_url), vqa=True))]


def reports_baseline(kind: BaselineKind, pool_url: str, m: PoolManifest
                     ) -> list[tuple[str, bytes]]:
    """One reports CSV (report generation)."""
    return [(m.cases[0].output, _text_table(kind, m, Storage(pool_url), vqa=False))]


def baseline_files(kind: BaselineKind, pool_url: str, m: PoolManifest) -> list[tuple[str, bytes]]:
    """``(file name, bytes)`` of a baseline submission for the pool (its track's kit writes it)."""
    from tasks_lib.imaging.registry import imaging_kit

    return imaging_kit(m.track).baseline(kind, pool_url, m)


def write_submission(files: list[tuple[str, bytes]], out: Path) -> Path:
    """Write submission files into ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files:
        (out / name).write_bytes(data)
    return out


def write_baseline(kind: BaselineKind, pool_url: str, out: Path) -> list[str]:
    """Write the ``kind`` baseline of the built pool at ``pool_url`` into ``out``; file names."""
    from tasks_lib.imaging.pool import read_manifest

    files = baseline_files(kind, pool_url, read_manifest(pool_url))
    write_submission(files, out)
    return [name for name, _ in files]
