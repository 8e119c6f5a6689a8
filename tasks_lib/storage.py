"""Storage addressed by fsspec URLs: a local folder, ``memory://`` in tests, ``s3://`` via s3fs.

Keys are ``/``-separated relative paths under a root URL. Keys that try to leave the root
(``..``, absolute paths) are rejected, so a caller-supplied name can never address another prefix.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Iterator
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from pydantic import BaseModel

from tasks_lib.settings import get_settings


class StorageKeyError(ValueError):
    """A storage key is empty, absolute, or escapes its root."""


def _clean_key(key: str) -> str:
    if not key or key.startswith("/") or "\\" in key:
        raise StorageKeyError(f"invalid storage key {key!r}")
    norm = posixpath.normpath(key)
    if norm == ".." or norm.startswith("../") or norm == ".":
        raise StorageKeyError(f"storage key {key!r} escapes its root")
    return norm


class Storage:
    """A root URL plus the fsspec filesystem that serves it."""

    def __init__(self, root_url: str, **storage_options: Any) -> None:
        self.root_url = root_url.rstrip("/")
        self.fs, root_path = url_to_fs(self.root_url, **storage_options)
        self._root = root_path.rstrip("/")
        self._options = storage_options

    @classmethod
    def from_settings(cls) -> Storage:
        """The configured storage root."""
        s = get_settings()
        return cls(s.storage_url, **s.storage_options)

    def child(self, prefix: str) -> Storage:
        """A storage rooted at ``prefix`` below this one."""
        return Storage(f"{self.root_url}/{_clean_key(prefix)}", **self._options)

    def path(self, key: str) -> str:
        """Filesystem path (for this storage's fs) of ``key``."""
        return f"{self._root}/{_clean_key(key)}"

    def url(self, key: str) -> str:
        """Full URL of ``key``, suitable for manifests and the ledger."""
        return f"{self.root_url}/{_clean_key(key)}"

    def exists(self, key: str) -> bool:
        return bool(self.fs.exists(self.path(key)))

    def write_bytes(self, key: str, data: bytes) -> str:
        """Write ``data`` at ``key`` (parents created); returns the URL."""
        path = self.path(key)
        parent = posixpath.dirname(path)
        if parent:
            self.fs.makedirs(parent, exist_ok=True)
        with self.fs.open(path, "wb") as fh:
            fh.write(data)
        return self.url(key)

    def read_bytes(self, key: str) -> bytes:
        with self.fs.open(self.path(key), "rb") as fh:
            data: bytes = fh.read()
        return data

    def write_text(self, key: str, text: str) -> str:
        return self.write_bytes(key, text.encode("utf-8"))

    def read_text(self, key: str) -> str:
        return self.read_bytes(key).decode("utf-8")

    def write_json(self, key: str, obj: Any) -> str:
        """Write JSON (pydantic models are dumped in JSON mode), sorted and indented."""
        if isinstance(obj, BaseModel):
            obj = obj.model_dump(mode="json")
        return self.write_text(key, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))

    def read_json(self, key: str) -> Any:
        return json.loads(self.read_text(key))

    def write_jsonl(self, key: str, rows: Iterable[BaseModel | dict[str, Any]]) -> str:
        """Write one JSON object per line."""
        lines = []
        for row in rows:
            data = row.model_dump(mode="json") if isinstance(row, BaseModel) else row
            lines.append(json.dumps(data, ensure_ascii=False, sort_keys=True))
        return self.write_text(key, "\n".join(lines) + ("\n" if lines else ""))

    def read_jsonl(self, key: str) -> Iterator[dict[str, Any]]:
        for line in self.read_text(key).splitlines():
            if line.strip():
                yield json.loads(line)

    def list(self, prefix: str = "") -> list[str]:
        """Keys directly below ``prefix`` (relative to the root), sorted."""
        base = self.path(prefix) if prefix else self._root
        if not self.fs.exists(base):
            return []
        out = []
        for p in self.fs.ls(base, detail=False):
            rel = posixpath.relpath(str(p).rstrip("/"), self._root)
            out.append(rel)
        return sorted(out)

    def open(self, key: str, mode: str = "rb") -> Any:
        return self.fs.open(self.path(key), mode)

    def __repr__(self) -> str:
        return f"Storage({self.root_url!r})"


def open_url(url: str, mode: str = "rb") -> Any:
    """Open any fsspec URL (used for files named on the command line)."""
    return fsspec.open(url, mode).open()
