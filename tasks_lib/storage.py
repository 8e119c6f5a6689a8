"""Storage addressed by fsspec URLs: a local folder, ``memory://`` in tests, ``s3://`` via s3fs.

Keys are ``/``-separated relative paths under a root URL. Keys that try to leave the root
(``..``, absolute paths) are rejected, so a caller-supplied name can never address another prefix.

Volumes are zarr v3 arrays under a key (``<name>.zarr``), chunked so Dask workers can read shards
straight from the same URL. S3 (or any S3-compatible server) is a setting, not a code change::

    MEDFLOWS_STORAGE_URL=s3://bucket/medflows
    MEDFLOWS_STORAGE_OPTIONS='{"endpoint_url": "http://127.0.0.1:9000", "key": "…", "secret": "…"}'
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from numpy.typing import NDArray
from pydantic import BaseModel

from tasks_lib.settings import get_settings

if TYPE_CHECKING:
    import zarr


class StorageKeyError(ValueError):
    """A storage key is empty, absolute, or escapes its root."""


def _clean_key(key: str) -> str:
    if not key or key.startswith("/") or "\\" in key:
        raise StorageKeyError(f"invalid storage key {key!r}")
    norm = posixpath.normpath(key)
    if norm == ".." or norm.startswith("../") or norm == ".":
        raise StorageKeyError(f"storage key {key!r} escapes its root")
    return norm


def _configured_options(url: str) -> dict[str, Any]:
    """The configured storage options when ``url`` lies under the configured root, else none."""
    settings = get_settings()
    root = settings.storage_url.rstrip("/")
    if settings.storage_options and (url == root or url.startswith(root + "/")):
        return dict(settings.storage_options)
    return {}


class Storage:
    """A root URL plus the fsspec filesystem that serves it.

    A URL at or below the configured storage root, given without options, gets the configured
    ``storage_options`` (endpoint, credentials), so code that is handed a pool or run URL reads
    it the way it was written.
    """

    def __init__(self, root_url: str, **storage_options: Any) -> None:
        self.root_url = root_url.rstrip("/")
        if not storage_options:
            storage_options = _configured_options(self.root_url)
        self.fs, root_path = url_to_fs(self.root_url, **storage_options)
        self._root: str = str(root_path).rstrip("/")
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

    @property
    def root_path(self) -> str:
        """Filesystem path (for this storage's fs) of the root itself."""
        return self._root

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

    def _zarr_target(self, key: str) -> tuple[str, dict[str, Any] | None]:
        """What zarr opens: a plain path for local folders, else the URL and fsspec options."""
        if isinstance(self.fs, LocalFileSystem):
            return self.path(key), None
        return self.url(key), dict(self._options)

    def write_volume(self, key: str, data: NDArray[Any],
                     chunks: tuple[int, ...] | None = None) -> str:
        """Write ``data`` as a zarr array at ``key`` (replacing one there); returns the URL.

        Args:
            key: Where the array lives, conventionally ``<name>.zarr``.
            data: The volume.
            chunks: Chunk shape (default: zarr's choice). Dask reads one chunk per task.
        """
        import zarr  # 0.7 s of imports that only volume pools need

        url, options = self._zarr_target(key)
        arr = zarr.create_array(store=url, storage_options=options, shape=data.shape,
                                dtype=data.dtype, chunks=chunks or "auto", overwrite=True)
        arr[...] = data
        return url

    def open_volume(self, key: str) -> zarr.Array[Any]:
        """The zarr array at ``key`` (read-only; slices read only the chunks they touch)."""
        import zarr

        url, options = self._zarr_target(key)
        return zarr.open_array(store=url, storage_options=options, mode="r")

    def read_volume(self, key: str) -> NDArray[Any]:
        """The whole zarr array at ``key`` as a numpy array."""
        return np.asarray(self.open_volume(key)[...])

    def __repr__(self) -> str:
        return f"Storage({self.root_url!r})"
