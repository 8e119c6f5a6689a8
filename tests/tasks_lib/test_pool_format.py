"""The one pool format (tasks_lib/pool_format.py: header, content hash, reader) and its writer
and construct tail (tasks_lib/pool_publish.py)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evaluators.core import InputDataError
from tasks_lib import pool_publish
from tasks_lib.audits.report import AuditReport, Finding, GateRecord, Severity
from tasks_lib.ledger import store
from tasks_lib.pool_format import PoolFiles, PoolHeader, content_hash, read_manifest
from tasks_lib.pool_publish import publish_version, write_version
from tasks_lib.storage import Storage

FILES = {"public/items.jsonl": b'{"q": 1}\n', "private/references.jsonl": b'{"a": "B"}\n',
         "public/images/x.png": b"\x89PNG"}


class ToyManifest(PoolHeader):
    """A kit's manifest: the header and one body field."""

    pool_kind = "a toy pool"

    n_items: int


def _manifest(pool_id: str) -> Any:
    def make(version: int, digest: str) -> ToyManifest:
        return ToyManifest(pool_id=pool_id, version=version, content_hash=digest, track="toy",
                           cards=["toy-task"], n_items=1)
    return make


def test_content_hash_ignores_order_and_sees_every_byte_and_key() -> None:
    digest = content_hash(FILES)
    assert digest == content_hash(dict(reversed(list(FILES.items()))))
    assert len(digest) == 64
    changed = {**FILES, "public/items.jsonl": b'{"q": 2}\n'}
    renamed = {("public/items2.jsonl" if k == "public/items.jsonl" else k): v
               for k, v in FILES.items()}
    extra = {**FILES, "private/more.csv": b""}
    assert len({digest, content_hash(changed), content_hash(renamed), content_hash(extra)}) == 4


def test_identity_entries_are_hashed_and_provenance_is_not() -> None:
    base = PoolFiles(content=FILES)
    assert base.digest == content_hash(FILES)
    assert PoolFiles(content=FILES, provenance={"audit/x.jsonl": b"1"}).digest == base.digest
    assert PoolFiles(content=FILES, identity={"ehr": b"a"}).digest != base.digest
    assert PoolFiles(content=FILES, identity={"ehr": b"a"}).digest != PoolFiles(
        content=FILES, identity={"ehr": b"b"}).digest
    with pytest.raises(ValueError, match="outside public/ and private/"):
        _ = PoolFiles(content={"audit/x": b""}).digest


def test_reader_names_the_build_command_and_the_wrong_pool(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match=r"manifest\.json: no pool here; build one with: "
                                             r"medflows pool build --task TASK"):
        read_manifest(str(tmp_path), ToyManifest)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(InputDataError, match=r"invalid manifest\.json"):
        read_manifest(str(tmp_path), ToyManifest)
    (tmp_path / "manifest.json").write_text(json.dumps({"pool_id": "hard", "track": "qa",
                                                        "version": 1}))
    with pytest.raises(InputDataError, match="not a toy pool: its manifest names 'hard' of "
                                             "track 'qa'"):
        read_manifest(str(tmp_path), ToyManifest)


def test_an_imaging_manifest_without_the_header_fields_still_reads(tmp_path: Path) -> None:
    from tasks_lib.imaging.pool import read_manifest as imaging_manifest

    old = {"task_id": "brain-tissue-seg", "track": "segmentation", "version": 2,
           "card_digest": "c" * 64, "content_hash": "h" * 64, "cases": [],
           "deid": {"files": 0, "fields_cleared": []}}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    m = imaging_manifest(str(tmp_path))
    assert (m.pool_id, m.task_id, m.cards, m.created_at, m.parents, m.version) == (
        "brain-tissue-seg", "brain-tissue-seg", ["brain-tissue-seg"], None, [], 2)


def test_the_format_imports_without_prefect_the_ledger_or_the_audit() -> None:
    """Manifest types are read inside agent sandboxes (RWE scripted analysts)."""
    import subprocess
    import sys

    code = ("import sys, tasks_lib.rwe.types, tasks_lib.rwe.pool_files, tasks_lib.qa.types, "
            "tasks_lib.medbench.items; "
            "bad = [m for m in ('prefect', 'tasks_lib.audit', 'tasks_lib.ledger.store') "
            "if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr


def test_every_kit_manifest_is_a_header() -> None:
    from tasks_lib.imaging.types import PoolManifest as ImagingManifest
    from tasks_lib.medbench.items import MedBenchManifest
    from tasks_lib.qa.types import PoolManifest as QAManifest
    from tasks_lib.rwe.pool_files import RWEPoolManifest

    for model in (ImagingManifest, MedBenchManifest, QAManifest, RWEPoolManifest):
        assert issubclass(model, PoolHeader)
        assert set(PoolHeader.model_fields) <= set(model.model_fields)


def test_writer_writes_the_manifest_last_and_reuses_the_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool_id = f"fmt-{uuid.uuid4().hex[:8]}"
    written: list[str] = []
    write_bytes = Storage.write_bytes

    def spy(self: Storage, key: str, data: bytes) -> str:  # write_text/json end here too
        written.append(key)
        return write_bytes(self, key, data)

    monkeypatch.setattr(Storage, "write_bytes", spy)
    files = PoolFiles(content=FILES, provenance={"audit/notes.jsonl": b"{}\n"})
    url, first = write_version(pool_id, files, _manifest(pool_id))
    assert written[-1] == "manifest.json" and written.count("manifest.json") == 1
    assert set(written[:-1]) == {*FILES, "audit/notes.jsonl"}
    assert url.endswith(f"pools/{pool_id}/v1") and first.version == 1
    assert first.content_hash == content_hash(FILES)
    assert read_manifest(url, ToyManifest) == first

    written.clear()
    again_url, again = write_version(pool_id, files, _manifest(pool_id))
    assert (again_url, again) == (url, first) and written == []  # the version stays as it was
    other_url, other = write_version(pool_id, PoolFiles(content={**FILES, "public/y": b"1"}),
                                     _manifest(pool_id))
    assert other.version == 2 and other_url.endswith("/v2")


@pytest.mark.usefixtures("prefect_harness")
def test_tail_refuses_an_unclean_audit_and_records_with_an_override(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks_lib.audit import require_clean

    pool_id = f"tail-{uuid.uuid4().hex[:8]}"
    url, manifest = write_version(pool_id, PoolFiles(content=FILES), _manifest(pool_id),
                                  out=str(tmp_path / "v1"))

    def unclean_gate(pool_url: str, override: str | None = None) -> GateRecord:
        report = AuditReport(
            pool_url=pool_url, pool_id=pool_id, version=manifest.version,
            pool_hash=manifest.content_hash, track="toy", created_at=datetime.now(UTC),
            findings=[Finding(check="answer_key", passed=False, severity=Severity.ERROR,
                              rule="no reference in public/")])
        return require_clean(report, override)

    monkeypatch.setattr(pool_publish, "audit_gate", unclean_gate)
    with pytest.raises(InputDataError, match="the exploit audit is not clean: answer_key"):
        publish_version(url, manifest, None, n_items=1)
    assert [r.kind for r in store.pools(pool_id=pool_id)] == ["pending"]

    gate = publish_version(url, manifest, "known leak, accepted for the demo", n_items=1)
    assert gate.override == "known leak, accepted for the demo"
    [row] = store.pools(pool_id=pool_id)
    assert (row.kind, row.version, row.track, row.n_items, row.content_hash) == (
        "pool", 1, "toy", 1, manifest.content_hash)
    assert row.manifest_url == Storage(url).url("manifest.json")
    assert json.loads(row.parents_json) == []
