"""Persistent cache of model calls, stored through :class:`~tasks_lib.storage.Storage`.

A call's key is the SHA-256 of everything that decides the reply (model, messages, sampling
parameters, tools, response format, and which repetition of the same request it is) but nothing
about where it is sent (api_base, api_key, timeouts), so a run re-pointed at a proxy still hits.
Values live at ``llm-cache/<k[:2]>/<k>.json`` below the storage root (local folder or S3).

Writers of the same key write the same bytes; on a local folder each writes a private temporary
file and renames it into place (atomic on POSIX), on object stores a PUT is atomic. A reader that
finds an unreadable or invalid file treats it as a miss (and says so in the log), never as a reply.

Which entries a run used is recorded beside the run (:func:`call_journal`,
:func:`write_journal`): ``runs/<run_id>/calls/<part>.txt``, one key per line, one file per
execute step that called a model (a chunk of items, a research cell), so a replay capsule
(:mod:`tasks_lib.capsule`) carries exactly those entries and the run re-executes from them
offline.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from fsspec.implementations.local import LocalFileSystem
from pydantic import BaseModel, ValidationError

from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

CACHE_PREFIX = "llm-cache"
"""Folder of the call cache below the storage root."""
KEY_VERSION = 1
"""Bumped when the key material changes, so old entries are never misread."""
TRANSPORT_PARAMS = frozenset({
    "api_base", "base_url", "api_key", "api_version", "organization", "timeout", "headers",
    "extra_headers", "num_retries", "max_retries",
})
"""Call parameters that say how a request travels, not what it asks: excluded from the key."""

CALLS = "calls"
"""Folder below a run (``runs/<run_id>/calls/``) listing the cache keys its model calls used."""

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
_JOURNAL: ContextVar[set[str] | None] = ContextVar("medflows_call_journal", default=None)


def call_key(model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
             occurrence: int = 0, branch: Sequence[int] = (), salt: str = "") -> str:
    """SHA-256 hex key of one model call.

    Args:
        model: litellm model string.
        messages: Chat messages as sent.
        params: Sampling and request parameters (temperature, seed, max_tokens, tools,
            response_format, …); transport parameters are ignored.
        occurrence: How many identical requests the same caller made before this one on the
            same branch (0 for the first), so repeated samples of one prompt are distinct entries.
        branch: Which of a caller's concurrent calls this is (:func:`tasks_lib.llm_scope.gather`
            indices; empty for a call made in sequence).
        salt: What makes otherwise identical work distinct (a run's replicate), if anything.
    """
    material: dict[str, Any] = {
        "v": KEY_VERSION, "model": model, "messages": list(messages), "occurrence": occurrence,
        "params": {k: v for k, v in params.items() if k not in TRANSPORT_PARAMS},
    }
    if branch:
        material["branch"] = list(branch)
    if salt:
        material["salt"] = salt
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def cache_path(key: str) -> str:
    """Storage key of a cache entry: ``llm-cache/<k[:2]>/<k>.json``."""
    return f"{CACHE_PREFIX}/{key[:2]}/{key}.json"


class CallCache:
    """Get and put call replies (pydantic models) under content keys.

    Args:
        storage: The storage root the ``llm-cache/`` folder lives under.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @classmethod
    def from_settings(cls) -> CallCache | None:
        """The cache under the configured storage root; None when ``MEDFLOWS_LLM_CACHE=false``."""
        if not get_settings().llm_cache:
            return None
        return cls(Storage.from_settings())

    def get(self, key: str, kind: type[M]) -> M | None:
        """The stored reply for ``key``, or None on a miss (absent, partial or invalid file)."""
        try:
            data = self.storage.read_bytes(cache_path(key))
        except FileNotFoundError:
            return None
        try:
            return kind.model_validate_json(data)
        except ValidationError as exc:
            log.warning("llm cache entry %s is unreadable (%s errors); treating it as a miss",
                        key, exc.error_count())
            return None

    def put(self, key: str, value: BaseModel) -> None:
        """Store ``value`` under ``key`` (concurrent writers of one key leave a valid file)."""
        data = value.model_dump_json().encode("utf-8")
        path = cache_path(key)
        if not isinstance(self.storage.fs, LocalFileSystem):
            self.storage.write_bytes(path, data)  # an object PUT replaces atomically
            return
        final = self.storage.path(path)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        temporary = f"{final}.{uuid.uuid4().hex}.tmp"
        with open(temporary, "wb") as fh:
            fh.write(data)
        os.replace(temporary, final)

    def __repr__(self) -> str:
        return f"CallCache({self.storage.root_url!r})"


@contextmanager
def call_journal() -> Iterator[set[str]]:
    """Collect the cache keys of the model calls made inside the block (in this thread and in
    threads started with a copy of its context: item workers, :func:`~tasks_lib.llm_scope.
    gather` branches); the set is filled as calls are made."""
    keys: set[str] = set()
    token = _JOURNAL.set(keys)
    try:
        yield keys
    finally:
        _JOURNAL.reset(token)


def note_call(key: str) -> None:
    """Add ``key`` to the innermost open :func:`call_journal` (none open: nothing)."""
    keys = _JOURNAL.get()
    if keys is not None:
        keys.add(key)


def write_journal(run_folder: Storage, part: str, keys: set[str]) -> None:
    """Store ``keys`` as ``calls/<part>.txt`` below a run folder (no keys: nothing written)."""
    if keys:
        run_folder.write_text(f"{CALLS}/{part}.txt", "".join(f"{k}\n" for k in sorted(keys)))


def read_journal(run_folder: Storage) -> list[str]:
    """Every cache key a run's journal files list, sorted and deduplicated."""
    keys = {line.strip() for name in run_folder.list(CALLS) if name.endswith(".txt")
            for line in run_folder.read_text(name).splitlines() if line.strip()}
    return sorted(keys)
