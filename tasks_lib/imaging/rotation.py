"""The case-pool part of rotation (the imaging kits and the challenge kit, whose pools share the
imaging :class:`~tasks_lib.imaging.types.PoolManifest`): a unit is a case of the manifest, one
stratum (cases of one task carry no natural stratum field); a subset is the parent pool without
the cases not drawn.

Which files belong to a case: a file named after a case (its name before the first dot is the
case id, e.g. ``inputs/c-003.nii.gz``, ``references/q-7.txt``) belongs to that case, unless a
drawn case names it as its reference or image. Files of dropped cases are left out; in the
files kept, CSV rows and Markdown lines naming a dropped case are left out too (a challenge's
``test_labels.csv`` and sample submission, a VQA ``questions.csv``, the brief's list of
expected cases); every other file is copied as it is.
"""

from __future__ import annotations

import csv
import io
import posixpath
from datetime import UTC, datetime

from tasks_lib.errors import InputDataError
from tasks_lib.imaging.pool import artifact_files, read_manifest
from tasks_lib.imaging.types import Artifact, PoolManifest, Visibility
from tasks_lib.pool_format import MANIFEST, content_hash
from tasks_lib.pool_lock import pool_keys
from tasks_lib.rotation.kit import PoolRotation
from tasks_lib.rotation.types import BuiltSubset, SubsetRequest, Unit
from tasks_lib.storage import Storage


def _stem(value: str) -> str:
    return posixpath.basename(value).split(".", 1)[0]


def _filter_csv(data: bytes, dropped: set[str]) -> bytes:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    kept = [r for i, r in enumerate(rows) if i == 0 or not any(_stem(c) in dropped for c in r)]
    if len(kept) == len(rows):
        return data
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(kept)
    return out.getvalue().encode()


def _filter_md(data: bytes, dropped: set[str]) -> bytes:
    lines = data.decode("utf-8").splitlines(keepends=True)
    kept = [ln for ln in lines if not any(f"`{c}`" in ln for c in dropped)]
    return data if len(kept) == len(lines) else "".join(kept).encode()


def subset_artifacts(root: Storage, manifest: PoolManifest, keep: set[str]) -> list[Artifact]:
    """The files of the pool at ``root`` that a subset holding the cases ``keep`` keeps."""
    dropped = {c.case_id for c in manifest.cases} - keep
    named = {f"{manifest.private_prefix}/{c.reference}" for c in manifest.cases
             if c.case_id in keep} | {f"{manifest.public_prefix}/{c.image}"
                                      for c in manifest.cases if c.case_id in keep and c.image}
    prefixes = {manifest.public_prefix: Visibility.PUBLIC,
                manifest.private_prefix: Visibility.PRIVATE}
    out: list[Artifact] = []
    for key in pool_keys(root):
        top, _, rel = key.partition("/")
        if top not in prefixes or (_stem(key) in dropped and key not in named):
            continue
        data = root.read_bytes(key)
        if key.endswith(".csv"):
            data = _filter_csv(data, dropped)
        elif key.endswith(".md"):
            data = _filter_md(data, dropped)
        out.append(Artifact(key=rel, visibility=prefixes[top], data=data))
    return out


class CaseRotation(PoolRotation):
    """Cases of one pool, one stratum."""

    def units(self, pool_url: str) -> list[Unit]:
        """Every case of the manifest."""
        return [Unit(c.case_id, {}) for c in read_manifest(pool_url).cases]

    def build(self, request: SubsetRequest, keys: frozenset[str]) -> BuiltSubset:
        """The one parent without the cases not drawn (manifest: the drawn cases, in order)."""
        if len(request.parents) != 1:
            raise InputDataError("--pools", "a subset of cases is drawn from one pool (got "
                                            f"{len(request.parents)})")
        root = Storage(request.parents[0].url)
        parent = read_manifest(root.root_url)
        artifacts = subset_artifacts(root, parent, set(keys))
        cases = [c for c in parent.cases if c.case_id in keys]
        files = artifact_files(artifacts)
        digest = content_hash(files)

        def write(out: Storage, version: int) -> None:
            for key, data in files.items():
                out.write_bytes(key, data)
            out.write_json(MANIFEST, parent.model_copy(update={
                "pool_id": request.subset_id, "version": version, "content_hash": digest,
                "cases": cases, "created_at": datetime.now(UTC),
                "parents": [f"{p.pool_id}@v{p.version}" for p in request.parents]}))

        return BuiltSubset(digest, len(cases), write)

