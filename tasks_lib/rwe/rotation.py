"""The RWE kit's part of rotation: a unit is a study, stratified by its STROBE design; a subset
is an RWE pool on the parent's EHR (same database, same ``ehr_hash``) holding the drawn
studies: their public definitions, private answers and reference cohorts, and their rows of the
construct-time trap and variant panels. Its ``content_hash`` is the shared one over its public
and private files and the EHR hash (:func:`tasks_lib.rwe.build.pool_files`)."""

from __future__ import annotations

from datetime import UTC, datetime

from tasks_lib.errors import InputDataError
from tasks_lib.pool_format import MANIFEST, PoolFiles, jsonl_bytes
from tasks_lib.rotation.kit import PoolRotation
from tasks_lib.rotation.types import BuiltSubset, SubsetRequest, Unit
from tasks_lib.rwe.pool_files import POOL_FILES, RWEPoolManifest, cohort_key
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
        rows = {role: jsonl_bytes(_rows(root, role, keys)) for role in POOL_FILES}
        studies = [str(r["study_id"]) for r in _rows(root, "studies", keys)]
        hashed = {"studies", "answers"}
        files = PoolFiles(
            content={**{POOL_FILES[r]: rows[r] for r in hashed},
                     **{cohort_key(s): root.read_bytes(cohort_key(s)) for s in studies}},
            provenance={POOL_FILES[r]: rows[r] for r in POOL_FILES if r not in hashed},
            identity={"ehr": parent.ehr_hash.encode()})
        digest = files.digest

        def write(out: Storage, version: int) -> None:
            for key, data in {**files.content, **files.provenance}.items():
                out.write_bytes(key, data)
            out.write_json(MANIFEST, parent.model_copy(update={
                "pool_id": request.subset_id, "version": version, "content_hash": digest,
                "studies": studies, "cards": studies, "created_at": datetime.now(UTC),
                "parents": [f"{p.pool_id}@v{p.version}" for p in request.parents]}))

        return BuiltSubset(digest, len(studies), write)
