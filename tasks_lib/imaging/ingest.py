"""Bring your own data: a folder of images with labels → the files of an imaging pool.

The folder convention (docs/imaging.md, "Bring your own data")::

    DIR/dataset.yaml            optional: title, description, license, labels, classes, spacing,
                                metrics (:class:`DatasetConfig`)
    DIR/images/<case>.nii.gz    a NIfTI volume (.nii too), a PNG/TIFF image, or
    DIR/images/<case>/          a folder of DICOM slices (one series → one volume)
    DIR/labels/<case>.*         segmentation: a label map (NIfTI, PNG, TIFF) on the image's grid
    DIR/labels/<case>.json      detection: {"boxes": [[x1, y1, x2, y2], ...], "labels": [...]}
    DIR/questions.csv           vqa: question_id, case_id, question, answer
    DIR/reports.csv             report_generation: case_id, report

:func:`~tasks_lib.imaging.intake.ingest_folder` reads it (bounded readers, DICOM de-identified
on the way in) into the same :class:`~tasks_lib.imaging.render.Rendered` a generated task
renders; the construct flow then runs
the same validate → de-identify → publish steps on both. Every mistake is an
:class:`InputDataError` naming the file (relative to ``DIR``); nothing is written before all
files passed.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from evaluators.core import InputDataError, InvalidSubmissionError, Track
from tasks_lib.imaging import codecs
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.readers import (
    NIFTI_SUFFIXES,
    RASTER_SUFFIXES,
    Volume,
    raster_affine,
    read_bytes,
    read_nifti,
    read_raster,
    spacing_of,
    stem,
    to_uint8,
)
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, Visibility
from tasks_lib.submission_limits import DEFAULT_LIMITS, csv_table, loads_json

PUB, PRIV = Visibility.PUBLIC, Visibility.PRIVATE
CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""What a case or question id may look like (it becomes a file name in pools and submissions)."""


def _entries(folder: Path, name: str) -> list[Path]:
    """Visible entries of a folder, sorted (hidden files such as .DS_Store skipped)."""
    if not folder.is_dir():
        raise InputDataError(name, "missing: the folder convention is in docs/imaging.md")
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _case_id(name: str, rel: str) -> str:
    cid = stem(name)
    if not CASE_ID.match(cid):
        raise InputDataError(rel, f"case id {cid!r} must be letters, digits, '.', '_' or '-' "
                                  "(it becomes a file name)")
    return cid


def scan_images(root: Path, track: Track, volumes: bool = False) -> dict[str, Path]:
    """Case id → image path under ``DIR/images``: PNG/TIFF files, and with ``volumes`` also
    NIfTI files and folders of DICOM slices (``track`` names the track in messages)."""
    allowed = (*NIFTI_SUFFIXES, *RASTER_SUFFIXES) if volumes else RASTER_SUFFIXES
    out: dict[str, Path] = {}
    for p in _entries(root / "images", "images/"):
        rel = f"images/{p.name}"
        if p.is_symlink():
            raise InputDataError(rel, "a symlink; give the file itself")
        if p.is_dir() and not volumes:
            raise InputDataError(rel, f"a DICOM series cannot be a {track.value} image "
                                      "(PNG or TIFF expected)")
        if p.is_file() and not p.name.lower().endswith(allowed):
            raise InputDataError(rel, f"unsupported file type; {track.value} images are "
                                      f"{', '.join(allowed)}" + (" or a folder of DICOM slices"
                                                                 if volumes else ""))
        cid = _case_id(p.name, rel)
        if cid in out:
            raise InputDataError(rel, f"a second image of case {cid!r}")
        out[cid] = p
    if not out:
        raise InputDataError("images/", "no images: an empty folder")
    return out


def _pair_files(root: Path, images: dict[str, Path], suffixes: tuple[str, ...],
                what: str) -> dict[str, Path]:
    """Case id → its file under ``DIR/labels`` (each image one, no strays)."""
    found: dict[str, Path] = {}
    for p in _entries(root / "labels", "labels/"):
        rel = f"labels/{p.name}"
        if not p.is_file() or p.is_symlink() or not p.name.lower().endswith(suffixes):
            raise InputDataError(rel, f"unsupported file type; {what} files are "
                                      f"{', '.join(suffixes)}")
        cid = _case_id(p.name, rel)
        if cid not in images:
            raise InputDataError(rel, f"no image of case {cid!r} in images/")
        if cid in found:
            raise InputDataError(rel, f"a second {what} of case {cid!r}")
        found[cid] = p
    for cid, img in images.items():
        if cid not in found:
            raise InputDataError(f"images/{img.name}", f"missing {what}: no labels/{cid}."
                                 f"{{{','.join(s.lstrip('.') for s in suffixes)}}}")
    return found


def nifti_volume_bytes(vol: Volume) -> bytes:
    """A volume as the gzip-compressed NIfTI-1 bytes a pool stores (units mm)."""
    import nibabel as nib

    img: Any = nib.Nifti1Image(vol.array, vol.affine)  # type: ignore[no-untyped-call]
    img.header.set_xyzt_units("mm")
    return gzip.compress(img.to_bytes(), mtime=0)


def nifti_file(path: Path, rel: str) -> tuple[Volume, bytes]:
    """A user's NIfTI file as a volume and the bytes to store (gzip-compressed if plain)."""
    data = read_bytes(path, rel)
    vol = read_nifti(data, rel)
    return vol, data if data[:2] == b"\x1f\x8b" else gzip.compress(data, mtime=0)


def integer_label_map(vol: Volume, data: bytes, rel: str) -> bytes:
    """The bytes to store of a NIfTI label map: as given when its voxels are integers; a map
    stored as floats (some releases do) re-encoded as uint8/uint16 when every value is a whole
    number, so the perfect submission (a copy of the reference) is an integer label map."""
    arr = vol.array
    if arr.dtype.kind in "biu":
        return data
    whole = (arr.dtype.kind == "f" and bool(np.all(np.isfinite(arr)))
             and bool(np.all(arr == np.round(arr))) and arr.size > 0
             and float(arr.min()) >= 0 and float(arr.max()) <= 65535)
    if not whole:
        raise InputDataError(rel, "a label map holds whole numbers 0–65535 (one label value per "
                                  f"voxel), not {arr.dtype} values such as probabilities")
    dtype = np.uint8 if float(arr.max()) < 256 else np.uint16
    return nifti_volume_bytes(Volume(arr.astype(dtype), vol.affine))


def _volume(path: Path, rel: str, cfg: DatasetConfig, removed: Counter[str],
            label: bool) -> tuple[Volume, bytes, int]:
    """A segmentation image or label map as a volume, the NIfTI bytes to store and the number
    of DICOM slices it was read from."""
    if path.is_dir():
        from tasks_lib.imaging.dicom_series import read_series

        vol, n = read_series(path, rel, removed)
        return vol, nifti_volume_bytes(vol), n
    if path.name.lower().endswith(NIFTI_SUFFIXES):
        vol, data = nifti_file(path, rel)
        if vol.array.ndim != 3:
            raise InputDataError(rel, f"a 3D volume is expected, got shape {list(vol.array.shape)}"
                                      " (give 2D images as PNG/TIFF; a multi-channel release "
                                      "with --layout, see docs/imaging.md)")
        return vol, integer_label_map(vol, data, rel) if label else data, 0
    arr = read_raster(read_bytes(path, rel), rel, rgb=not label)
    vol = Volume(arr[..., None], raster_affine(cfg.spacing))
    return vol, nifti_volume_bytes(vol), 0


def read_segmentation(root: Path, cfg: DatasetConfig) -> Rendered:
    """Volumes (NIfTI, DICOM series, PNG/TIFF as one slice) with label maps on their grids."""
    images = scan_images(root, Track.SEGMENTATION, volumes=True)
    labels = _pair_files(root, images, (*NIFTI_SUFFIXES, *RASTER_SUFFIXES), "label map")
    cases, arts, removed, n_dicom = [], [], Counter[str](), 0
    sources: dict[str, str] = {}
    for cid, path in images.items():
        rel, lrel = f"images/{path.name}", f"labels/{labels[cid].name}"
        vol, data, n = _volume(path, rel, cfg, removed, label=False)
        _, ldata, n_label = _volume(labels[cid], lrel, cfg, removed, label=True)
        n_dicom += n + n_label
        img_key, ref_key = f"inputs/{cid}.nii.gz", f"references/{cid}.nii.gz"
        arts += [Artifact(key=img_key, visibility=PUB, data=data),
                 Artifact(key=ref_key, visibility=PRIV, data=ldata)]
        sources |= {img_key: rel, ref_key: lrel}
        cases.append(CaseEntry(case_id=cid, output=f"{cid}.nii.gz", reference=ref_key,
                               shape=list(vol.array.shape), spacing=spacing_of(vol.affine),
                               origin=rel, image=img_key))
    deid = DeidRecord(files=n_dicom, fields_cleared=sorted(removed),
                      removed=dict(sorted(removed.items())))
    return Rendered(cases, arts, sorted(cfg.labels), dict(sorted(cfg.labels.items())), sources,
                    deid if n_dicom else None)


def _png(path: Path, rel: str, cfg: DatasetConfig) -> tuple[NDArray[np.uint8], bytes]:
    img = to_uint8(read_raster(read_bytes(path, rel), rel))
    return img, codecs.png_bytes(img)


def _boxes_file(path: Path, rel: str) -> dict[str, list[Any]]:
    """A reference boxes file, structurally checked (classes and bounds: the validate step)."""
    try:
        obj = loads_json(read_bytes(path, rel), rel, DEFAULT_LIMITS)
    except InvalidSubmissionError as exc:
        raise InputDataError(rel, str(exc).removeprefix(f"{rel}: ")) from None
    if not isinstance(obj, dict) or set(obj) - {"boxes", "labels"} or "boxes" not in obj:
        raise InputDataError(rel, 'expected {"boxes": [[x1, y1, x2, y2], ...], "labels": '
                                  "[class id, ...]}")
    boxes, classes = obj["boxes"], obj.get("labels", [1] * len(obj["boxes"]))
    ok = (isinstance(boxes, list) and isinstance(classes, list) and len(boxes) == len(classes)
          and all(isinstance(b, list) and len(b) == 4 and all(
              isinstance(v, int | float) and not isinstance(v, bool) for v in b) for b in boxes)
          and all(isinstance(c, int) and not isinstance(c, bool) for c in classes))
    if not ok:
        raise InputDataError(rel, "boxes must be [x1, y1, x2, y2] number lists and labels one "
                                  "integer class id per box")
    return {"boxes": [[float(v) for v in b] for b in boxes], "labels": classes}


def read_detection(root: Path, cfg: DatasetConfig) -> Rendered:
    """PNG/TIFF images with a boxes file each."""
    images = scan_images(root, Track.DETECTION)
    boxes = _pair_files(root, images, (".json",), "boxes file")
    cases, arts = [], []
    sources: dict[str, str] = {}
    for cid, path in images.items():
        rel, brel = f"images/{path.name}", f"labels/{boxes[cid].name}"
        img, png = _png(path, rel, cfg)
        ref = json.dumps(_boxes_file(boxes[cid], brel), sort_keys=True).encode()
        key, ref_key = f"images/{cid}.png", f"references/{cid}.json"
        arts += [Artifact(key=key, visibility=PUB, data=png),
                 Artifact(key=ref_key, visibility=PRIV, data=ref)]
        sources |= {key: rel, ref_key: brel}
        cases.append(CaseEntry(case_id=cid, output=f"{cid}.json", reference=ref_key,
                               shape=list(img.shape), origin=rel, image=key))
    return Rendered(cases, arts, [], dict(sorted(cfg.classes.items())), sources)


def _table(root: Path, name: str, columns: tuple[str, ...]) -> list[dict[str, str]]:
    path = root / name
    if not path.is_file():
        raise InputDataError(name, "missing: the folder convention is in docs/imaging.md")
    try:
        rows = csv_table(read_bytes(path, name), name, DEFAULT_LIMITS)
    except InvalidSubmissionError as exc:
        raise InputDataError(name, str(exc).removeprefix(f"{name}: ")) from None
    if not rows or set(columns) - set(rows[0]):
        raise InputDataError(name, f"needs a header with {', '.join(columns)} and one row per "
                                   "item")
    for n, row in enumerate(rows, start=2):
        empty = [c for c in columns if not (row.get(c) or "").strip()]
        if empty:
            raise InputDataError(name, f"empty {', '.join(empty)}", line=n)
    return rows


class TextTable(NamedTuple):
    """The table of a text track's folder: its file, columns, and which column is what."""

    track: Track
    name: str
    columns: tuple[str, ...]
    item: str
    text: str
    output: str
    row_kind: str
    questions: bool
    """Publish the items (question_id, case_id, question) as ``public/questions.csv``."""


VQA_TABLE = TextTable(Track.VQA, "questions.csv", ("question_id", "case_id", "question",
                                                   "answer"), "question_id", "answer",
                      "answers.csv", "question", questions=True)
REPORTS_TABLE = TextTable(Track.REPORT_GENERATION, "reports.csv", ("case_id", "report"),
                          "case_id", "report", "reports.csv", "report", questions=False)


def read_vqa(root: Path, cfg: DatasetConfig) -> Rendered:
    """PNG/TIFF images with ``questions.csv`` (question_id, case_id, question, answer)."""
    return _text_track(root, cfg, VQA_TABLE)


def read_reports(root: Path, cfg: DatasetConfig) -> Rendered:
    """PNG/TIFF images with ``reports.csv`` (case_id, report)."""
    return _text_track(root, cfg, REPORTS_TABLE)


def _text_track(root: Path, cfg: DatasetConfig, table: TextTable) -> Rendered:
    """Images and one text reference per row of ``table``."""
    images = scan_images(root, table.track)
    name = table.name
    rows = _table(root, name, table.columns)
    arts, keys = [], {}
    sources: dict[str, str] = {}
    for cid, path in images.items():
        rel = f"images/{path.name}"
        keys[cid] = f"images/{cid}.png"
        arts.append(Artifact(key=keys[cid], visibility=PUB, data=_png(path, rel, cfg)[1]))
        sources[keys[cid]] = rel
    cases, public, seen = [], [], set()
    for n, row in enumerate(rows, start=2):
        item = row[table.item].strip()
        image = row["case_id"].strip()
        if not CASE_ID.match(item) or item in seen:
            raise InputDataError(name, f"id {item!r} is invalid or repeated", line=n)
        if image not in images:
            raise InputDataError(name, f"case_id {image!r} names no image in images/", line=n)
        seen.add(item)
        ref_key = f"references/{item}.txt"
        arts.append(Artifact(key=ref_key, visibility=PRIV, data=row[table.text].strip().encode()))
        sources[ref_key] = f"{name}:{n}"
        public.append([item, image, row["question"].strip()] if table.questions else [])
        cases.append(CaseEntry(case_id=item, output=table.output, reference=ref_key,
                               origin=f"{name}:{n}", image=keys[image]))
    covered = {c.image for c in cases}
    for cid, path in images.items():
        if keys[cid] not in covered:
            raise InputDataError(f"images/{path.name}", f"missing {table.row_kind}: no row of "
                                 f"{name} names case {cid!r}")
    if table.questions:
        arts.append(Artifact(key="questions.csv", visibility=PUB, data=codecs.csv_bytes(
            ["question_id", "case_id", "question"], public)))
    return Rendered(cases, arts, [], dict(sorted(cfg.classes.items())), sources)
