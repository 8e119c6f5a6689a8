"""Published QA pools: layout, files and reading (the format, hash and writer are the shared
:mod:`tasks_lib.pool_format`).

Layout under a pool root::

    manifest.json                  PoolManifest (the shared header + the QA body)
    public/items.jsonl             PublicQAItem per line (no answers), selection order
    public/exemplars.jsonl         few-shot exemplars per dataset (never pool items)
    private/references.jsonl       QAReference per line
    audit/{rejects,difficulty,meld}.jsonl   provenance; no source text
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from tasks_lib.errors import InputDataError
from tasks_lib.pool_format import PoolFiles, jsonl_bytes, read_manifest
from tasks_lib.qa.types import Exemplar, PoolManifest, PublicQAItem, QAItem, QAReference
from tasks_lib.storage import Storage

M = TypeVar("M", bound=BaseModel)
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


def pool_files(items: Iterable[PublicQAItem], references: Iterable[QAReference],
               exemplars: Iterable[Exemplar],
               provenance: dict[str, Iterable[BaseModel]] | None = None) -> PoolFiles:
    """The files of a QA pool (public items, exemplars, references; ``provenance``: role →
    rows of the ``audit/`` files, not hashed)."""
    return PoolFiles(
        content={FILES["public_items"]: jsonl_bytes(items),
                 FILES["exemplars"]: jsonl_bytes(exemplars),
                 FILES["references"]: jsonl_bytes(references)},
        provenance={FILES[role]: jsonl_bytes(rows) for role, rows in (provenance or {}).items()})


class LoadedPool(NamedTuple):
    """A pool read back from storage."""

    manifest: PoolManifest
    items: list[PublicQAItem]
    references: dict[str, QAReference]
    exemplars: dict[str, list[Exemplar]]


def _reason(exc: BaseException) -> str:
    """One line saying what is wrong with a pool file's content."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "row"
        return f"{where}: {first['msg']}"[:300]
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _read_rows(root: Storage, key: str, model: type[M]) -> list[M]:
    rows: list[M] = []
    try:
        for row in root.read_jsonl(key):
            rows.append(model.model_validate(row))
    except FileNotFoundError:
        raise InputDataError(root.url(key), f"not a pool: {key} not found") from None
    except (ValueError, RecursionError) as exc:
        # pool files have no blank lines: the failing row is line len(rows) + 1
        raise InputDataError(root.url(key), f"invalid row: {_reason(exc)}",
                             line=len(rows) + 1) from None
    return rows


def load_pool(root: Storage) -> LoadedPool:
    """Read manifest, public items, exemplars and references of the pool at ``root``.

    Raises:
        InputDataError: a file is missing or its content is not a pool's (file, line, reason).
    """
    manifest = read_manifest(root.root_url, PoolManifest)
    items = _read_rows(root, FILES["public_items"], PublicQAItem)
    refs = _read_rows(root, FILES["references"], QAReference)
    exemplars: dict[str, list[Exemplar]] = {}
    for ex in _read_rows(root, FILES["exemplars"], Exemplar):
        exemplars.setdefault(ex.dataset, []).append(ex)
    return LoadedPool(manifest, items, {f"{r.dataset}/{r.realidx}": r for r in refs}, exemplars)
