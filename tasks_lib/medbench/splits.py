"""Answer-upload mode, download side: a randomized public split of a pool or rotation subset.

Every download is a new split (spec §6.2, §6.4): a random ``split_id``, the items in a seeded
random order, fresh opaque item ids (``<split_id>-<10 hex>``, so ids cannot be correlated across
splits or cycles) and, for single-choice items, a fresh permutation of the option letters. What
leaves the server is :class:`~tasks_lib.medbench.items.PublicItem` rows only (prompt, options,
answer schema); the mapping back to pool item ids and original letters is kept in the ledger's
split row, with the submitter, the seed and an expiry, so an upload is checked against exactly
the split it answers.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from pydantic import Field

from evaluators.core import Frozen, InputDataError
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger.tables import SplitRow
from tasks_lib.medbench.items import AnswerType, PublicItem, read_manifest, read_public_items
from tasks_lib.rotation import resolve_pool
from tasks_lib.storage import Storage

IMAGES_DIR = "images"
"""Folder (beside the downloaded split file) of the split's images."""
SPLIT_VALIDITY_S = 14 * 86_400.0
"""How long a split accepts uploads (spec §6.2: 14 days)."""


class SplitEntry(Frozen):
    """Where one split item comes from (server side only)."""

    item_id: str = Field(description="The pool's evaluation item id.")
    answer_type: AnswerType = Field(description="Answer type (checked on upload).")
    letters: dict[str, str] | None = Field(
        default=None, description="Single choice: letter shown in the split → the pool item's "
                                  "letter.")
    image: str | None = Field(default=None, description="The pool's image path of the item "
                                                        "(the split names it by its split id).")


class SplitMapping(Frozen):
    """Split item id → :class:`SplitEntry` (the ledger's ``mapping_json``)."""

    entries: dict[str, SplitEntry] = Field(description="Split item id → entry.")


class SplitInfo(Frozen):
    """What a downloader is told about a split (no private field)."""

    split_id: str = Field(description="Random split id (prefix of every item id).")
    pool_id: str = Field(description="Pool or subset id.")
    pool_version: int = Field(description="Its version (the submission's lock).")
    pool_hash: str = Field(description="Its content hash.")
    submitter: str | None = Field(description="Who may upload against it (None: anyone the "
                                              "operator names).")
    seed: int = Field(description="Seed of the order and option permutations.")
    n_items: int = Field(description="Items in the split.")
    expires_at: datetime = Field(description="Uploads are refused after this time (UTC).")


class Split(Frozen):
    """A new split: its info and its public items, in split order."""

    info: SplitInfo = Field(description="Identity of the split.")
    items: list[PublicItem] = Field(description="Public items with split ids and options.")


def split_item_id(split_id: str, item_id: str) -> str:
    """The opaque id of a pool item in one split."""
    return f"{split_id}-{hashlib.sha256(f'{split_id}:{item_id}'.encode()).hexdigest()[:10]}"


def split_of(item_id: str) -> str:
    """The split id a split item id belongs to ('' if it has none)."""
    return item_id.rsplit("-", 1)[0] if "-" in item_id else ""


def split_image(opaque: str, pool_image: str) -> str:
    """The name a split gives an item's image (``images/<split item id><suffix>``): pool file
    names would let items be matched across splits."""
    return f"{IMAGES_DIR}/{opaque}{PurePosixPath(pool_image).suffix}"


def _shuffled(item: PublicItem, sid: str, rng: random.Random) -> tuple[PublicItem, SplitEntry]:
    opaque = split_item_id(sid, item.item_id)
    update: dict[str, object] = {"item_id": opaque}
    if item.image:
        update["image"] = split_image(opaque, item.image)
    if item.answer_type is not AnswerType.SINGLE_CHOICE or not item.options:
        entry = SplitEntry(item_id=item.item_id, answer_type=item.answer_type, image=item.image)
        return item.model_copy(update=update), entry
    shown = sorted(item.options)
    source = shown.copy()
    rng.shuffle(source)
    update["options"] = {new: item.options[old] for new, old in zip(shown, source, strict=True)}
    entry = SplitEntry(item_id=item.item_id, answer_type=item.answer_type, image=item.image,
                       letters=dict(zip(shown, source, strict=True)))
    return item.model_copy(update=update), entry


def info(row: SplitRow) -> SplitInfo:
    """The public description of a stored split."""
    return SplitInfo(split_id=row.split_id, pool_id=row.pool_id, pool_version=row.pool_version,
                     pool_hash=row.pool_hash, submitter=row.submitter, seed=row.seed,
                     n_items=row.n_items,
                     expires_at=datetime.fromtimestamp(row.expires_at, UTC))


def make_split(pool: str, submitter: str | None = None, seed: int | None = None,
               now: float | None = None, validity_s: float = SPLIT_VALIDITY_S,
               charge: Callable[[int], None] | None = None) -> Split:
    """Draw and record a new randomized split of ``pool`` (a root URL or ``active:<id>``).

    Args:
        pool: Pool or subset version to split.
        submitter: The only account that may upload against it (None: the operator names the
            submitter at upload).
        seed: Seed of the order and permutations (None: a random one, recorded).
        now: Current unix time (tests).
        validity_s: Seconds the split accepts uploads.
        charge: Called with the number of items before anything is recorded (the submitter's
            items-per-minute limit; it raises to refuse).
    """
    url = resolve_pool(pool)
    manifest = read_manifest(url)
    items = read_public_items(url)
    if not items:
        raise InputDataError(url, "the pool has no items")
    seed = secrets.randbelow(2 ** 31) if seed is None else seed
    sid = "sp" + secrets.token_hex(6)
    rng = random.Random(f"{manifest.content_hash}:{submitter or ''}:{seed}")
    order = items.copy()
    rng.shuffle(order)
    pairs = [_shuffled(item, sid, rng) for item in order]
    now = time.time() if now is None else now
    row = SplitRow(split_id=sid, submitter=submitter, pool_id=manifest.pool_id,
                   pool_version=manifest.version, pool_hash=manifest.content_hash, pool_url=url,
                   seed=seed, n_items=len(pairs), expires_at=now + validity_s,
                   mapping_json=SplitMapping(entries={p.item_id: e for p, e in pairs})
                   .model_dump_json())
    if charge is not None:
        charge(len(pairs))
    ledger.add_split(row)
    return Split(info=info(row), items=[p for p, _ in pairs])


def mapping(row: SplitRow) -> SplitMapping:
    """The private mapping of a stored split."""
    return SplitMapping.model_validate(json.loads(row.mapping_json))


def split_jsonl(split: Split) -> str:
    """The downloaded file: one public item per line."""
    return "".join(item.model_dump_json() + "\n" for item in split.items)


def image_bytes(row: SplitRow, name: str) -> bytes | None:
    """The bytes of the split image ``images/<name>`` (None: the split has no such image)."""
    for opaque, entry in mapping(row).entries.items():
        if entry.image and split_image(opaque, entry.image) == f"{IMAGES_DIR}/{name}":
            return Storage(row.pool_url).read_bytes(entry.image)
    return None


def write_images(split: Split, folder: Path) -> int:
    """Copy the split's images into ``folder`` (as ``images/<split item id><suffix>``, the
    names its items carry); returns how many."""
    row = ledger.get_split(split.info.split_id)
    assert row is not None
    pool = Storage(row.pool_url)
    n = 0
    for opaque, entry in mapping(row).entries.items():
        if entry.image:
            target = folder / split_image(opaque, entry.image)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(pool.read_bytes(entry.image))
            n += 1
    return n
