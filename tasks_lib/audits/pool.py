"""The audited pool and the audit's own data: the pool's identity (:func:`pool_info`), its stored
files and their digests, its QA rows, and the floors and injection payloads under
``datasets/audit/``."""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import yaml

from evaluators.core import InputDataError, Track
from tasks_lib.domain import Frozen
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

DIGESTS = ("md5", "sha1", "sha256")


class PoolInfo(Frozen):
    """Identity and layout of the audited pool."""

    url: str
    pool_id: str
    version: int
    pool_hash: str
    track: Track
    task_id: str


def pool_info(pool_url: str) -> PoolInfo:
    """Read the manifest of the pool at ``pool_url`` (QA pool root or imaging version folder).

    Raises:
        InputDataError: no manifest, or not a pool manifest.
    """
    root = Storage(pool_url)
    if not root.exists("manifest.json"):
        raise InputDataError(root.url("manifest.json"), "no pool here (build one with medflows "
                                                        "pool build …)")
    try:
        data = root.read_json("manifest.json")
        track = Track(data["track"])
        pool_id = str(data.get("pool_id") or data["task_id"])
        return PoolInfo(url=root.root_url, pool_id=pool_id, version=int(data["version"]),
                        pool_hash=str(data["content_hash"]), track=track,
                        task_id=str(data.get("task_id") or pool_id))
    except (KeyError, ValueError, TypeError) as exc:
        raise InputDataError(root.url("manifest.json"), f"not a pool manifest: {exc}") from None


def _data(name: str) -> Any:
    path = get_settings().datasets_dir / "audit" / name
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputDataError(str(path), "audit data file missing") from None


@lru_cache(maxsize=4)
def _floors(datasets_dir: str) -> dict[str, dict[str, dict[str, Any]]]:
    floors: dict[str, dict[str, dict[str, Any]]] = _data("floors.yaml")
    return floors


def floors() -> dict[str, dict[str, dict[str, Any]]]:
    """``datasets/audit/floors.yaml``: track → null agent → ``{floor, source[, tolerance]}``."""
    return _floors(str(get_settings().datasets_dir))


def injections() -> list[dict[str, str]]:
    """``datasets/audit/injections.yaml``: the prompt-injection payloads (``id``, ``text``)."""
    rows: list[dict[str, str]] = _data("injections.yaml")
    return rows


def pool_files(root: Storage, prefix: str) -> Iterator[str]:
    """Every file key under ``prefix`` (recursive, sorted)."""
    base = root.path(prefix)
    if not root.fs.exists(base):
        return
    for p in sorted(root.fs.find(base)):
        yield posixpath.relpath(str(p), root.root_path)


def file_digests(root: Storage, key: str) -> dict[str, str]:
    """md5, sha1 and sha256 hex digests of a stored file, streamed."""
    hashes = {name: hashlib.new(name) for name in DIGESTS}
    with root.open(key) as fh:
        while chunk := fh.read(2**20):
            for h in hashes.values():
                h.update(chunk)
    return {name: h.hexdigest() for name, h in hashes.items()}


def qa_rows(root: Storage, key: str) -> list[dict[str, Any]]:
    """Rows of a QA pool file read as plain JSON (a leaky row with extra fields still reads)."""
    from tasks_lib.qa.pool import FILES

    try:
        return [r for r in root.read_jsonl(FILES[key]) if isinstance(r, dict)]
    except FileNotFoundError:
        raise InputDataError(root.url(FILES[key]), "not a QA pool: file missing") from None
    except (ValueError, RecursionError) as exc:
        raise InputDataError(root.url(FILES[key]), f"unreadable: {exc}") from None
