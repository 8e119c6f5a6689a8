"""Published QA pools: layout, content hash, writing and reading.

Layout under a pool root::

    manifest.json                  PoolManifest
    public/items.jsonl             PublicQAItem per line (no answers), selection order
    public/exemplars.jsonl         few-shot exemplars per dataset (never pool items)
    private/references.jsonl       QAReference per line
    audit/{rejects,difficulty,meld}.jsonl   provenance; no source text
"""

from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

from tasks_lib.qa.types import Exemplar, PoolManifest, PublicQAItem, QAItem, QAReference
from tasks_lib.storage import Storage

FILES = {
    "public_items": "public/items.jsonl",
    "exemplars": "public/exemplars.jsonl",
    "references": "private/references.jsonl",
    "rejects": "audit/rejects.jsonl",
    "difficulty": "audit/difficulty.jsonl",
    "meld": "audit/meld.jsonl",
}


def public_view(item: QAItem) -> PublicQAItem:
    """What agents may see of an item."""
    return PublicQAItem(dataset=item.dataset, realidx=item.realidx, question=item.question,
                        options=item.options, meta_info=item.meta_info)


def reference(item: QAItem) -> QAReference:
    """The private answer of an item."""
    return QAReference(dataset=item.dataset, realidx=item.realidx, answer_idx=item.answer_idx,
                       answer=item.answer)


def exemplar(item: QAItem) -> Exemplar:
    """A solved item for few-shot prompts."""
    return Exemplar(dataset=item.dataset, question=item.question, options=item.options,
                    answer_idx=item.answer_idx)


def content_hash(items: list[QAItem]) -> str:
    """sha256 over the canonical JSON of public items and references, in order."""
    h = hashlib.sha256()
    for it in items:
        row = {"public": public_view(it).model_dump(mode="json"),
               "private": reference(it).model_dump(mode="json")}
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


class LoadedPool(NamedTuple):
    """A pool read back from storage."""

    manifest: PoolManifest
    items: list[PublicQAItem]
    references: dict[str, QAReference]
    exemplars: dict[str, list[Exemplar]]


def load_pool(root: Storage) -> LoadedPool:
    """Read manifest, public items, exemplars and references of the pool at ``root``."""
    manifest = PoolManifest.model_validate(root.read_json("manifest.json"))
    items = [PublicQAItem.model_validate(r) for r in root.read_jsonl(FILES["public_items"])]
    refs = [QAReference.model_validate(r) for r in root.read_jsonl(FILES["references"])]
    exemplars: dict[str, list[Exemplar]] = {}
    for row in root.read_jsonl(FILES["exemplars"]):
        ex = Exemplar.model_validate(row)
        exemplars.setdefault(ex.dataset, []).append(ex)
    return LoadedPool(manifest, items, {f"{r.dataset}/{r.realidx}": r for r in refs}, exemplars)
