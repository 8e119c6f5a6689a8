"""Persistent cache of model calls, stored through :class:`~tasks_lib.storage.Storage`.

A call's key is the SHA-256 of everything that decides the reply (model, messages, sampling
parameters, tools, response format, and which repetition of the same request it is) but nothing
about where it is sent (api_base, api_key, timeouts), so a run re-pointed at a proxy still hits.
Values live at ``llm-cache/<k[:2]>/<k>.json`` below the storage root (local folder or S3).

Writers of the same key write the same bytes; on a local folder each writes a private temporary
file and renames it into place (atomic on POSIX), on object stores a PUT is atomic. A reader that
finds an unreadable or invalid file treats it as a miss (and says so in the log), never as a reply.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
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

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


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
