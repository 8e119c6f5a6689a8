"""A tiny MedBench pool written by hand in the pool layout of :mod:`tasks_lib.medbench.items`
(for the submission and service tests), and the reference strings that must never leave the
server."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from support.audited import record_override
from tasks_lib.medbench.items import MANIFEST, PUBLIC_ITEMS, REFERENCES
from tasks_lib.storage import Storage

OPTIONS = {"A": "Metformin", "B": "Insulin glargine", "C": "Aspirin", "D": "Warfarin"}
ITEMS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"item_id": "q1#s0", "task_id": "mcq", "dimension": "MKQA", "specialty": "endocrinology",
      "answer_type": "single_choice", "prompt": "First-line drug for type 2 diabetes?",
      "options": OPTIONS, "answer_schema": "one option letter"},
     {"item_id": "q1#s0", "task_id": "mcq", "answer_type": "single_choice", "letter": "A",
      "permutation": ["A", "B", "C", "D"], "text": "Metformin"}),
    ({"item_id": "q1#s1", "task_id": "mcq", "dimension": "MKQA", "specialty": "endocrinology",
      "answer_type": "single_choice", "prompt": "First-line drug for type 2 diabetes?",
      "options": {"A": "Aspirin", "B": "Warfarin", "C": "Metformin", "D": "Insulin glargine"},
      "answer_schema": "one option letter"},
     {"item_id": "q1#s1", "task_id": "mcq", "answer_type": "single_choice", "letter": "C",
      "permutation": ["C", "D", "A", "B"], "text": "Metformin"}),
    ({"item_id": "o1", "task_id": "open", "dimension": "MLG", "specialty": "cardiology",
      "answer_type": "open_ended", "prompt": "Explain how to take a statin safely.",
      "answer_schema": "free text"},
     {"item_id": "o1", "task_id": "open", "answer_type": "open_ended",
      "text": "Take atorvastatin once nightly and report unexplained muscle pain promptly",
      "key_points": ["report unexplained muscle pain", "check liver enzymes at baseline"],
      "rubric_id": "medication"}),
    ({"item_id": "m1", "task_id": "findings", "dimension": "MLU", "specialty": "radiology",
      "answer_type": "multi_label", "prompt": "Findings named in: 'Small left effusion.'",
      "answer_schema": "list of finding labels"},
     {"item_id": "m1", "task_id": "findings", "answer_type": "multi_label",
      "labels": ["pleural effusion left side"]}),
    ({"item_id": "e1", "task_id": "header", "dimension": "MLU", "specialty": "radiology",
      "answer_type": "extraction", "prompt": "Extract (type, value) pairs from the header.",
      "answer_schema": "list of [type, value]"},
     {"item_id": "e1", "task_id": "header", "answer_type": "extraction",
      "tuples": [["Modality", "computed tomography series"]]}),
    ({"item_id": "s1", "task_id": "codes", "dimension": "MLU", "specialty": "cardiology",
      "answer_type": "string", "prompt": "ICD-10 code of the diagnosis in the note.",
      "answer_schema": "one code string"},
     {"item_id": "s1", "task_id": "codes", "answer_type": "string", "text": "I21.4-secretcode"}),
    ({"item_id": "r1", "task_id": "nodule", "dimension": "MM-A1", "specialty": "radiology",
      "answer_type": "region", "prompt": "Box the nodule.", "answer_schema": "list of boxes"},
     {"item_id": "r1", "task_id": "nodule", "answer_type": "region",
      "boxes": [[11.5, 22.25, 33.75, 44.125]]}),
]
TASKS = {
    "mcq": ("MKQA", "endocrinology", "single_choice", ["shuffled_accuracy"]),
    "open": ("MLG", "cardiology", "open_ended", ["keypoint_macro_recall"]),
    "findings": ("MLU", "radiology", "multi_label", ["micro_f1"]),
    "header": ("MLU", "radiology", "extraction", ["micro_f1"]),
    "codes": ("MLU", "cardiology", "string", ["one_minus_ned"]),
    "nodule": ("MM-A1", "radiology", "region", ["iou_set"]),
}


MLU = (100 + 100 + 100 * (1 - 1 / 16)) / 3
"""Score of :func:`answers_for` on MLU: labels and extraction exact (F1 = 1), the code one
substitution off 16 characters (1 - 1/16)."""
OVERALL = (100 + 0 + MLU + 100) / 4
"""Overall of :func:`answers_for`: dimensions MKQA (both shuffles right), MLG (the open item left
out: key-point recall 0), MLU, MM-A1 (the box exact: IoU 1)."""


def answers_for(split_items: list[dict[str, Any]]) -> str:
    """The predictions file a submitter writes from a downloaded split alone (the MCQ by its
    option text, the open item left out)."""
    fixed: dict[str, Any] = {
        "multi_label": ["pleural effusion left side"],
        "extraction": [["Modality", "computed tomography series"]],
        "string": "I21.9-secretcode", "region": [[11.5, 22.25, 33.75, 44.125]]}
    rows = []
    for item in split_items:
        kind = item["answer_type"]
        if kind == "single_choice":
            letter = next(k for k, v in item["options"].items() if v == "Metformin")
            rows.append({"item_id": item["item_id"], "answer": letter})
        elif kind in fixed:
            rows.append({"item_id": item["item_id"], "answer": fixed[kind]})
    return "".join(json.dumps(r) + "\n" for r in rows)


IMAGE = "public/images/nodule-r1.png"
IMAGE_BYTES = b"\x89PNG\r\n\x1a\n" + b"stand-in bytes of the nodule image"
"""With ``image=True`` the region item names this image (bytes are a stand-in: only copied)."""


def write_pool(root: Storage, pool_id: str = "mbhand", version: int = 1,
               image: bool = False) -> str:
    """Write the pool under ``root`` (``image``: the region item has an image); returns its
    root URL."""
    items = [({**p, "image": IMAGE} if image and p["answer_type"] == "region" else p, r)
             for p, r in ITEMS]
    if image:
        root.write_bytes(IMAGE, IMAGE_BYTES)
    h = hashlib.sha256()
    for public, private in items:
        h.update(json.dumps({"public": public, "private": private}, sort_keys=True).encode())
    tasks = {t: {"dimension": d, "specialty": s, "answer_type": a, "metrics": m,
                 "n_items": sum(p["task_id"] == t for p, _ in ITEMS), "source": "hand-written"}
             for t, (d, s, a, m) in TASKS.items()}
    root.write_text(PUBLIC_ITEMS, "".join(json.dumps(p) + "\n" for p, _ in items))
    root.write_text(REFERENCES, "".join(json.dumps(r) + "\n" for _, r in ITEMS))
    root.write_json(MANIFEST, {
        "pool_id": pool_id, "version": version, "content_hash": h.hexdigest(),
        "created_at": datetime(2026, 11, 24, tzinfo=UTC).isoformat(), "seed": 7,
        "tasks": tasks, "n_items": len(ITEMS)})
    record_override(root.root_url, "medbench")
    return root.root_url


def secret_strings() -> list[str]:
    """Reference strings that never appear in public items (what a leak scan looks for):
    open-ended texts, key points, labels, tuple values, strings and box numbers."""
    public = json.dumps([p for p, _ in ITEMS])
    found: list[str] = []
    for _, ref in ITEMS:
        for key in ("text", "labels", "tuples", "key_points", "boxes"):
            value = ref.get(key)
            values = value if isinstance(value, list) else [value]
            for v in values:
                for s in (v if isinstance(v, list) else [v]):
                    text = str(s) if s is not None else ""
                    if len(text) >= 6 and text not in public:
                        found.append(text)
    return sorted(set(found))


def activate_subset_of(pool_url: str, subset_id: str, size: int = 5, seed: int = 1) -> str:
    """Ledger the hand-written pool, rotate a subset of it with the rotate flow's steps and
    make that version active (so ``active:<subset_id>`` names it); returns the subset's root URL."""
    from tasks_lib.ledger import store
    from tasks_lib.ledger.tables import PoolRow
    from tasks_lib.medbench.items import read_manifest
    from tasks_lib.rotation.subsets import (
        activate_subset,
        draw_subset,
        publish_subset,
        resolve_parents,
        strata_fields,
    )
    from tasks_lib.rotation.types import SubsetRequest

    m = read_manifest(pool_url)
    store.record_pool(PoolRow(pool_id=m.pool_id, version=m.version, track="medbench",
                              content_hash=m.content_hash, manifest_url=f"{pool_url}/{MANIFEST}",
                              n_items=m.n_items))
    parents = resolve_parents.fn([f"{m.pool_id}@v{m.version}"])  # the rotate flow's steps,
    fields = strata_fields(parents.track, None)  # without a Prefect server
    request = SubsetRequest(subset_id=subset_id, seed=seed, size=size, stratify_by=fields,
                            parents=parents.pools)
    subset = publish_subset.fn(parents, request, draw_subset.fn(parents, fields, size, seed))
    activate_subset.fn(subset)
    return subset.url
