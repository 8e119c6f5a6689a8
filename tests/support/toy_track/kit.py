"""The ``toy_slides`` kit: slide-level classification of generated texture "slides".

A test-only sixth track, the worked example of docs/adding-a-track.md. Everything the track is
lives in this folder: this module (build, measure, score, baselines, recipe, audit floors), its
card (``cards/<task_id>/task.yaml``, :attr:`ToySlidesKit.cards_root`) and its Great
Expectations suite (``suite.json``, :attr:`ToySlidesKit.suite_file`). The shared imaging
pipeline does the rest: pool writer and manifest, construct tail, case rotation, the file-task
environment, the measurement frame, the one score flow.

Build (:func:`render`, reproducible from the card): for each slide, a class is dealt round-robin
over ``params.classes`` (scikit-image sample textures, ``skimage.data.<class>()``) and the order
shuffled with the card's seed; the slide is a ``size``×``size`` crop at a seeded position,
rotated by a seeded multiple of 90°, mirrored with probability ½, scaled in brightness by a
factor uniform in [0.9, 1.1], given Gaussian noise of s.d. ``noise_sd`` and rounded to 8 bits.
``examples_per_class`` labelled slides per class are drawn the same way after the cases.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import skimage.data
from pydantic import Field, ValidationError

from evaluators.core import Frozen, InputDataError, Track
from evaluators.metrics import METRICS
from tasks_lib.audits.baselines import (
    CONSTANT,
    EMPTY,
    NONE,
    SAMPLE,
    Baseline,
    copy_public_sample,
    perfect,
)
from tasks_lib.audits.pool import pool_files
from tasks_lib.imaging import codecs
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.checks import check_text_case
from tasks_lib.imaging.kit import ImagingKit
from tasks_lib.imaging.pool import read_manifest
from tasks_lib.imaging.registry import register
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.submission import measure_table, read_text_table
from tasks_lib.imaging.types import Artifact, CaseEntry, FrameRow, PoolManifest, Visibility
from tasks_lib.sources import GeneratedSource
from tasks_lib.storage import Storage
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits
from tasks_lib.taskspec import TaskSpec

HERE = Path(__file__).parent
TRACK = Track("toy_slides")
OUTPUT = "predictions.csv"
"""The submission: ``case_id,label`` rows, one per slide."""
EXAMPLES = "examples"
"""Public folder of labelled example slides (``<class>-<k>.png``)."""
FLOORS = {
    NONE: (0.0, "no predictions.csv: every slide is missing and scores 0"),
    EMPTY: (0.0, "empty labels match no class: accuracy 0"),
    CONSTANT: (0.34, "classes are dealt round-robin, so one label for every slide is right on "
                     "1/3 of them (3 classes)"),
    SAMPLE: (0.34, "the public sample submission is the constant baseline (constant floor)"),
}
"""Audit floors of the null agents (baseline name → (floor, where it comes from))."""


def texture_features(img: np.ndarray) -> np.ndarray:
    """Contrast and gradient energy relative to the mean (invariant to brightness scaling)."""
    a = np.asarray(img, dtype=np.float64)
    gy, gx = np.gradient(a)
    mean = max(float(a.mean()), 1.0)
    return np.array([a.std() / mean, np.hypot(gx, gy).mean() / mean])


def nearest_class(img: np.ndarray, examples: dict[str, list[np.ndarray]]) -> str:
    """The class of the labelled example whose features are nearest to ``img``'s."""
    f = texture_features(img)
    return min(sorted(examples), key=lambda c: min(
        float(np.linalg.norm(f - texture_features(x))) for x in examples[c]))


RECIPE = f'''\
"""Nearest labelled example by texture statistics (contrast and gradient energy)."""
import csv, glob, os, sys
import numpy as np
from skimage.io import imread

{inspect.getsource(texture_features)}

{inspect.getsource(nearest_class)}

SUB = "/workspace/submission"
examples = {{}}
for path in sorted(glob.glob("/public/{EXAMPLES}/*.png")):
    examples.setdefault(os.path.basename(path).rsplit("-", 1)[0], []).append(imread(path))
paths = sorted(glob.glob("/public/slides/*.png"))
os.makedirs(SUB, exist_ok=True)
rows = [(os.path.basename(p)[:-4], nearest_class(imread(p), examples))
        for p in (paths[:1] if sys.argv[1:] == ["--pilot"] else paths)]
with open(os.path.join(SUB, "{OUTPUT}"), "w", newline="", encoding="utf-8") as fh:
    writer = csv.writer(fh)
    writer.writerow(["case_id", "label"])
    writer.writerows(rows)
print("labels", len(rows), "of", len(paths), "format ok", all(label for _, label in rows))
'''
"""The scripted baseline agent's ``method.py`` (the same two functions the classical baseline
uses)."""


def _slide(texture: np.ndarray, rng: np.random.Generator, size: int,
           noise_sd: float) -> np.ndarray:
    y, x = (int(v) for v in rng.integers(0, texture.shape[0] - size, 2))
    tile = np.rot90(texture[y:y + size, x:x + size], int(rng.integers(4)))
    if rng.integers(2):
        tile = tile[:, ::-1]
    out = tile * rng.uniform(0.9, 1.1) + rng.normal(0.0, noise_sd, tile.shape)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


class ToyParams(Frozen):
    """``source.params`` of a toy_slides card."""

    classes: list[str] = Field(default=["brick", "grass", "gravel"],
                               description="Texture classes: skimage.data image names.")
    size: int = Field(default=96, ge=8, le=256, description="Slide side in pixels.")
    noise_sd: float = Field(default=3.0, ge=0, description="Gaussian noise s.d. (grey levels).")
    examples_per_class: int = Field(default=2, ge=1, description="Public labelled examples.")


def render(card: TaskSpec) -> Rendered:
    """Slides (public), labelled examples (public) and one reference label per slide
    (private), from the card's seed (module docstring)."""
    src = card.source
    if not isinstance(src, GeneratedSource):
        raise InputDataError(card.task_id, "a toy_slides card needs source.kind generated")
    try:
        p = ToyParams.model_validate(src.params)
    except ValidationError as exc:
        raise InputDataError(card.task_id, f"source.params: {exc}") from None
    classes, size, noise = p.classes, p.size, p.noise_sd
    unknown = [c for c in classes if not callable(getattr(skimage.data, c, None))]
    if unknown:
        raise InputDataError(card.task_id, f"source.params.classes: {unknown} are not "
                                           "skimage.data images")
    textures = {c: getattr(skimage.data, c)().astype(np.float64) for c in classes}
    rng = np.random.default_rng(src.seed)
    labels = [classes[int(i) % len(classes)] for i in rng.permutation(src.n_cases)]
    arts, cases = [], []
    for n, label in enumerate(labels):
        cid = f"s-{n:03d}"
        arts += [Artifact(key=f"slides/{cid}.png", visibility=Visibility.PUBLIC,
                          data=codecs.png_bytes(_slide(textures[label], rng, size, noise))),
                 Artifact(key=f"references/{cid}.txt", visibility=Visibility.PRIVATE,
                          data=label.encode())]
        cases.append(CaseEntry(case_id=cid, output=OUTPUT, reference=f"references/{cid}.txt",
                               image=f"slides/{cid}.png", origin="skimage.data texture crop"))
    for c in classes:
        for k in range(p.examples_per_class):
            arts.append(Artifact(key=f"{EXAMPLES}/{c}-{k}.png", visibility=Visibility.PUBLIC,
                                 data=codecs.png_bytes(_slide(textures[c], rng, size, noise))))
    return Rendered(cases, arts, [], dict(enumerate(classes)))


def measure(root: Path, m: PoolManifest,
            limits: SubmissionLimits = DEFAULT_LIMITS) -> list[FrameRow]:
    """Measurements of ``predictions.csv`` (``case_id,label``)."""
    return measure_table(root, m, "case_id", "label", limits)


def _labels(sub: Path, pool: Storage, m: PoolManifest, valid: list[str]
            ) -> list[tuple[str, str | None, str]]:
    """``(case id, predicted label or None if invalid, reference label)`` for every case."""
    given = dict(read_text_table(sub, OUTPUT, "case_id", "label")) if valid else {}
    return [(c.case_id, given[c.case_id] if c.case_id in valid else None,
             pool.read_text(f"{m.private_prefix}/{c.reference}")) for c in m.cases]


def score_cases(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
                names: list[str]) -> dict[str, dict[str, float]]:
    """Per-slide values of the requested metrics (``vqa_exact_match``: normalised label
    equality)."""
    return {cid: {n: float(METRICS.get(n)(pred, ref)) for n in names}
            for cid, pred, ref in _labels(sub, pool, m, valid) if pred is not None}


def score_task(sub: Path, pool: Storage, m: PoolManifest, valid: list[str],
               names: list[str]) -> dict[str, float]:
    """``variant_balanced_accuracy`` over every slide (class recall averaged over classes; a
    missing, invalid or unknown label is wrong)."""
    index = {name: i for i, name in m.classes.items()}
    rows = _labels(sub, pool, m, valid)
    pred = np.array([[index.get((p or "").strip().lower(), -1)] for _, p, _ in rows])
    ref = np.array([[index[r]] for _, _, r in rows])
    return {n: float(METRICS.get(n)(pred, ref)) for n in names}


def baseline(kind: BaselineKind, pool_url: str, m: PoolManifest) -> list[tuple[str, bytes]]:
    """``predictions.csv`` of a baseline: references (perfect), empty labels, the first class
    everywhere (constant), or the nearest labelled example (classical)."""
    pool = Storage(pool_url)
    examples: dict[str, list[np.ndarray]] = {}
    if kind == BaselineKind.CLASSICAL:
        for key in pool_files(pool, f"{m.public_prefix}/{EXAMPLES}"):
            name = Path(key).stem.rsplit("-", 1)[0]
            examples.setdefault(name, []).append(codecs.png_load(pool.read_bytes(key)))
    rows = []
    for c in m.cases:
        if kind == BaselineKind.PERFECT:
            label = pool.read_text(f"{m.private_prefix}/{c.reference}")
        elif kind == BaselineKind.CLASSICAL:
            image = codecs.png_load(pool.read_bytes(f"{m.public_prefix}/{c.image}"))
            label = nearest_class(image, examples)
        else:
            label = "" if kind == BaselineKind.EMPTY else m.classes[min(m.classes)]
        rows.append([c.case_id, label])
    return [(OUTPUT, codecs.csv_bytes(["case_id", "label"], rows))]


class ToySlidesKit(ImagingKit):
    """Texture slides → class labels; its cards and suite are kept beside this module."""

    evaluator_version = "toy-slides-1"
    cards_root = HERE / "cards"
    suite_file = HERE / "suite.json"

    def __init__(self, **parts: Any) -> None:
        super().__init__(TRACK, **parts)
        self.stage_rubric = None  # no S1–S3 judges: a cell's score card is score()'s alone

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """No submission, empty, constant, the public sample (held to :data:`FLOORS`) and
        perfect."""
        m = read_manifest(pool_url)

        def held(name: str, folder: Path) -> Baseline:
            floor, source = FLOORS[name]
            return Baseline(name=name, folder=folder, floor=floor, source=source)

        def write(kind: BaselineKind) -> Path:
            return write_submission(baseline_files(kind, pool_url, m), out / kind.value)

        (out / "none").mkdir(parents=True, exist_ok=True)
        (out / "sample").mkdir(parents=True, exist_ok=True)
        sample = [held(SAMPLE, out / "sample")] if copy_public_sample(pool_url,
                                                                      out / "sample") else []
        return [held(NONE, out / "none"), held(EMPTY, write(BaselineKind.EMPTY)),
                held(CONSTANT, write(BaselineKind.CONSTANT)), *sample,
                perfect(write(BaselineKind.PERFECT))]


KIT = ToySlidesKit(
    render=render, measure=measure, case_scorer=score_cases,
    case_metrics=("vqa_exact_match",), task_scorer=score_task,
    task_metrics=("variant_balanced_accuracy",), baseline=baseline,
    method="nearest labelled example by texture statistics", recipe=RECIPE,
    case_check=check_text_case)
register(KIT)
