"""Seeded detection-style synthetic cases (boxes and polygons, beside the masks of
:mod:`tasks_lib.challenge.shapes`): DENTEX tooth boxes (COCO JSON), PUMA nuclei polygons
(JSON) and TopCoW regions of interest (3D box JSON). See :mod:`tasks_lib.challenge.synthetic`."""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks_lib.challenge.shapes import Rng, SyntheticItem, ball


def _teeth_image(rng: Rng, boxes: list[list[float]], shape: tuple[int, int]) -> Any:
    image = rng.normal(40, 8, shape)
    for x, y, w, h in boxes:
        image[int(y):int(y + h), int(x):int(x + w)] += 120
    return np.clip(image, 0, 255).astype(np.uint8)


DENTEX_CATEGORIES = {
    "categories_1": [{"id": i, "name": str(i + 1)} for i in range(4)],
    "categories_2": [{"id": i, "name": str(i + 1)} for i in range(8)],
    "categories_3": [{"id": 0, "name": "Impacted"}, {"id": 1, "name": "Caries"},
                     {"id": 2, "name": "Periapical Lesion"}, {"id": 3, "name": "Deep Caries"}]}
"""The DENTEX release's category lists (0-based ids), as its annotation files carry them."""


def dentex(rng: Rng) -> list[SyntheticItem]:
    """Three 256×512 panoramic-like images with 6–8 tooth boxes, labelled as the DENTEX release
    labels them (0-based ids, with the release's ``categories_1/2/3``); the sample jitters
    boxes, writes half of them as corners (converted by the port's heuristic: heights > 50 px),
    drops one, mislabels one diagnosis and adds a false box."""
    items = []
    for i in range(3):
        anns: list[dict[str, Any]] = []
        dets: list[dict[str, Any]] = []
        for k in range(int(rng.integers(6, 9))):
            x, y = float(20 + 60 * k), float(rng.integers(40, 120))
            w, h = float(rng.integers(24, 40)), float(rng.integers(55, 80))
            labels = {"category_id_1": int(rng.integers(0, 4)),
                      "category_id_2": int(rng.integers(0, 8)),
                      "category_id_3": int(rng.integers(0, 4))}
            anns.append({"id": 100 * i + k + 1, "image_id": i + 1, "bbox": [x, y, w, h],
                         "area": w * h, "iscrowd": 0, **labels})
            if k == 1:
                continue
            jx, jy, jw, jh = (float(v) for v in rng.integers(-3, 4, size=4))
            box = [x + jx, y + jy, w + jw, h + jh]
            if k % 2:
                box = [box[0], box[1], box[0] + box[2], box[1] + box[3]]
            if k == 2:
                labels = {**labels, "category_id_3": (labels["category_id_3"] + 1) % 4}
            dets.append({"bbox": box, "score": round(float(rng.uniform(0.3, 1.0)), 3),
                         **labels})
        dets.append({"bbox": [400.0, 20.0, 30.0, 30.0], "score": 0.2, "category_id_1": 0,
                     "category_id_2": 0, "category_id_3": 0})
        truth = {"images": [{"id": i + 1, "file_name": f"pano_{i:03d}.png", "width": 512,
                             "height": 256}], "annotations": anns, **DENTEX_CATEGORIES}
        image = _teeth_image(rng, [list(a["bbox"]) for a in anns], (256, 512))
        items.append(SyntheticItem(f"pano_{i:03d}", image, truth, dets))
    return items


def _polygon(cx: int, cy: int, r: int) -> list[list[int]]:
    """An octagon with integer vertices whose vertex mean is exactly ``(cx, cy)``."""
    a = max(r - 1, 1)
    offsets = [(r, 0), (a, a), (0, r), (-a, a), (-r, 0), (-a, -a), (0, -r), (a, -a)]
    return [[cx + dx, cy + dy] for dx, dy in offsets]


def nuclei(classes: list[str], aliases: dict[str, str]) -> Any:
    """A generator of three 128² cases of 20–30 nuclei of ``classes``; the sample jitters
    centroids (one prediction exactly 15 px away, the < vs ≤ rule), drops, mislabels, renames
    through ``aliases`` (spelling → class) and adds nuclei."""
    spelled = {v: k for k, v in aliases.items() if k != v.lower()}

    def generate(rng: Rng) -> list[SyntheticItem]:
        items = []
        for i in range(3):
            truth, pred = [], []
            mask = np.zeros((128, 128), dtype=bool)
            for k in range(int(rng.integers(20, 31))):
                cx, cy = (int(v) for v in rng.integers(8, 120, size=2))
                name = str(rng.choice(classes))
                truth.append({"name": name, "path_points": _polygon(cx, cy, 4)})
                mask |= ball((128, 128), np.array([cy, cx], dtype=float), 4.0)
                if k % 7 == 3:
                    continue
                dx, dy = (9, 12) if k == 0 else (int(v) for v in rng.integers(-4, 5, size=2))
                if k % 5 == 4:
                    name = str(rng.choice(classes))
                shown = spelled.get(name, name) if k % 3 == 0 else name
                pred.append({"name": shown, "path_points": _polygon(cx + dx, cy + dy, 4),
                             "score": round(float(rng.uniform(0.2, 1.0)), 3)})
            pred.append({"name": "unknown_cell", "path_points": _polygon(60, 60, 4),
                         "score": 0.9})
            pred.append({"name": classes[0], "path_points": _polygon(5, 5, 3), "score": 0.5})
            image = np.clip(mask * 150 + rng.normal(60, 10, mask.shape), 0, 255)
            items.append(SyntheticItem(f"puma_{i:03d}", image.astype(np.uint8),
                                       {"polygons": truth}, {"polygons": pred}))
        return items

    return generate


def cow_boxes(rng: Rng) -> list[SyntheticItem]:
    """Four 40×40×24 volumes with a CoW region box; the sample jitters location and size."""
    shape = (40, 40, 24)
    items = []
    for i in range(4):
        size = [int(v) for v in rng.integers([12, 12, 6], [21, 21, 13])]
        location = [int(rng.integers(0, n - s)) for n, s in zip(shape, size, strict=True)]
        jitter_loc = [int(v) for v in rng.integers(-2, 3, size=3)]
        jitter_size = [int(v) for v in rng.integers(-2, 3, size=3)]
        sample = {"size": [max(s + j, 1) for s, j in zip(size, jitter_size, strict=True)],
                  "location": [max(a + j, 0) for a, j in zip(location, jitter_loc,
                                                               strict=True)]}
        image = rng.normal(20, 5, shape).astype(np.float32)
        image[tuple(slice(a, a + s) for a, s in zip(location, size, strict=True))] += 60
        items.append(SyntheticItem(f"cow_{i:03d}", image,
                                   {"size": size, "location": location}, sample,
                                   (0.5, 0.5, 0.8)))
    return items
