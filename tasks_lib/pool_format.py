"""One pool format: the manifest header, the content hash and the reader every kit shares; the
writer and the construct tail (``write vN → exploit audit → publish``) that use them are in
:mod:`tasks_lib.pool_publish`.

A pool version lives at ``pools/<pool_id>/v<N>/`` under the storage root (or at ``--out``)::

    manifest.json      the kit's manifest: :class:`PoolHeader` fields + the kit's body
    public/…           what an agent may see            } the content hash covers these
    private/…          references, never shown         }
    audit/…            provenance (rejects, panels, build notes): not hashed
    audit.json, lock.json   the publish gate's records (:mod:`tasks_lib.audit`)

The content hash is one rule for every kit (:func:`content_hash`): sha256 over the sorted
``key NUL sha256(bytes)`` of the pool's public and private files, plus named entries a kit adds
for what its content depends on without being a file (RWE: the EHR). The same content gets the
same version (:func:`tasks_lib.ledger.store.reserve_pool_version`).

This module imports no Prefect, ledger or audit code: the manifest types that subclass
:class:`PoolHeader` are read inside agent sandboxes too (the RWE scripted analysts import
:mod:`tasks_lib.rwe.types` there).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, Field, ValidationError

from evaluators.core import Frozen, InputDataError
from tasks_lib.storage import Storage

MANIFEST = "manifest.json"
BUILD_HINT = "medflows pool build --task TASK"
HASHED_PREFIXES = ("public/", "private/")
"""Keys the content hash covers: what agents see and what graders use."""


class PoolHeader(Frozen):
    """The fields every pool manifest starts with; a kit's manifest subclasses it and adds its
    body (cases, datasets, studies, tasks …)."""

    pool_kind: ClassVar[str] = "a pool"
    """How errors name a manifest of this kind ("not an imaging pool …")."""

    pool_id: str = Field(description="Pool name (``pools/<pool_id>/vN``; a subset: its id).")
    version: int = Field(ge=1, description="Version, 1-based; same content ⇒ same version.")
    content_hash: str = Field(description="sha256 over the pool's public and private files "
                                          "(:func:`tasks_lib.pool_format.content_hash`).")
    track: str = Field(description="Track of the pool (its kit reads and scores it).")
    created_at: datetime | None = Field(
        default=None, description="When the version was written (UTC; None: an older pool).")
    cards: list[str] = Field(default_factory=list,
                             description="Task ids (cards) the pool serves.")
    parents: list[str] = Field(default_factory=list, description="``pool_id@vN`` the pool "
                               "derives from (a rotation subset); empty for a built pool.")


M = TypeVar("M", bound=BaseModel)


def content_hash(files: Mapping[str, bytes]) -> str:
    """sha256 over ``key NUL sha256(bytes)`` of every entry, in key order: independent of the
    order files were produced in, changed by any byte or key."""
    digest = hashlib.sha256()
    for key in sorted(files):
        digest.update(key.encode() + b"\0" + hashlib.sha256(files[key]).digest())
    return digest.hexdigest()


def jsonl_bytes(rows: Iterable[BaseModel | dict[str, Any]]) -> bytes:
    """One JSON object per line, as :meth:`tasks_lib.storage.Storage.write_jsonl` writes them."""
    lines = [json.dumps(r.model_dump(mode="json") if isinstance(r, BaseModel) else r,
                        ensure_ascii=False, sort_keys=True) for r in rows]
    return ("\n".join(lines) + ("\n" if lines else "")).encode()


@dataclass(frozen=True)
class PoolFiles:
    """The files of one pool version before a version is known."""

    content: dict[str, bytes]
    """``public/…`` and ``private/…`` keys → bytes: written and hashed."""
    provenance: dict[str, bytes] = field(default_factory=dict)
    """Other keys (``audit/…``) → bytes: written, not hashed."""
    identity: dict[str, bytes] = field(default_factory=dict)
    """Named entries hashed but not written (e.g. ``ehr`` → the RWE EHR hash)."""

    @property
    def digest(self) -> str:
        """The pool's content hash (:func:`content_hash`)."""
        unhashed = [k for k in self.content if not k.startswith(HASHED_PREFIXES)]
        if unhashed:  # our bug: the content of a pool is its public and private files
            raise ValueError(f"pool content outside public/ and private/: {unhashed[:3]}")
        return content_hash({**{f"#{k}": v for k, v in self.identity.items()}, **self.content})


def read_manifest(url: str, model: type[M]) -> M:
    """The manifest of the pool version at ``url``, as ``model`` (a :class:`PoolHeader`
    subclass, or any model of a ``manifest.json``).

    Raises:
        InputDataError: no manifest (names the build command), or one that is not ``model``'s
            (names the pool and track it holds and the first wrong field).
    """
    root = Storage(url)
    if not root.exists(MANIFEST):
        raise InputDataError(root.url(MANIFEST), f"no pool here; build one with: {BUILD_HINT}")
    try:
        data = json.loads(root.read_text(MANIFEST))
    except (ValueError, RecursionError) as exc:
        raise InputDataError(root.url(MANIFEST), f"invalid {MANIFEST}: "
                             f"{' '.join(str(exc).split())[:200]}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        found = data if isinstance(data, dict) else {}
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "manifest"
        kind = getattr(model, "pool_kind", f"a {model.__name__}")
        raise InputDataError(root.url(MANIFEST), f"not {kind}: its manifest names "
                             f"{found.get('pool_id') or found.get('task_id')!r} of track "
                             f"{found.get('track')!r} ({where}: {first['msg']})"[:400]) from None
