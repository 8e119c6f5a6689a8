"""The RWE kit's part of rotation: a unit is a study, stratified by its STROBE design; a subset
is an RWE pool on the parent's EHR (same database, same ``ehr_hash``) holding the drawn
studies: their public definitions, private answers and reference cohorts, and their rows of the
construct-time trap and variant panels. Its ``content_hash`` follows
:func:`tasks_lib.rwe.build.pool_hash` (EHR hash, then each study's public view and answers, in
pool order)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from tasks_lib.errors import InputDataError
from tasks_lib.rotation.kit import PoolRotation
from tasks_lib.rotation.types import BuiltSubset, SubsetRequest, Unit
from tasks_lib.rwe.types import POOL_FILES, RWEPoolManifest, cohort_key
from tasks_lib.storage import Storage


def _rows(root: Storage, role: str, keep: frozenset[str]) -> list[dict[str, object]]:
    return [r for r in root.read_jsonl(POOL_FILES[role]) if r["study_id"] in keep]


class StudyRotation(PoolRotation):
    """Studies by design."""

    fields = ("design",)
    default_fields = ("design",)

    def units(self, pool_url: str) -> list[Unit]:
        """Every study of the pool, in pool order."""
        return [Unit(str(r["study_id"]), {"design": str(r["design"])})
                for r in Storage(pool_url).read_jsonl(POOL_FILES["studies"])]

    def build(self, request: SubsetRequest, keys: frozenset[str]) -> BuiltSubset:
        """The parent's drawn studies (one parent: a pool is one EHR database)."""
        if len(request.parents) != 1:
            raise InputDataError("--pools", "an RWE subset is drawn from one pool (one EHR "
                                            f"database; got {len(request.parents)})")
        root = Storage(request.parents[0].url)
        parent = RWEPoolManifest.model_validate(root.read_json("manifest.json"))
        rows = {role: _rows(root, role, keys) for role in POOL_FILES}
        answers = {r["study_id"]: r for r in rows["answers"]}
        h = hashlib.sha256(parent.ehr_hash.encode())
        for study in rows["studies"]:
            for part in (study, answers[study["study_id"]]):
                h.update(json.dumps(part, sort_keys=True).encode())
        digest = h.hexdigest()
        studies = [str(r["study_id"]) for r in rows["studies"]]

        def write(out: Storage, version: int) -> None:
            for role, key in POOL_FILES.items():
                out.write_jsonl(key, rows[role])
            for sid in studies:
                out.write_bytes(cohort_key(sid), root.read_bytes(cohort_key(sid)))
            manifest = parent.model_copy(update={
                "pool_id": request.subset_id, "version": version, "content_hash": digest,
                "studies": studies, "created_at": datetime.now(UTC).isoformat()})
            out.write_json("manifest.json", manifest.model_dump(mode="json"))

        return BuiltSubset(digest, len(studies), write)
