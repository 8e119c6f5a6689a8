"""The storage layer behaves the same on a local folder, memory:// and S3 (moto on 127.0.0.1),
including zarr volumes and a QA pool written and read back."""

from __future__ import annotations

import os
import uuid

import nibabel as nib
import numpy as np
import pytest
from nibabel.testing import data_path

from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.types import QAReference
from tasks_lib.settings import get_settings, reset_settings
from tasks_lib.storage import Storage, StorageKeyError


def test_text_json_jsonl_list_and_child(root: Storage) -> None:
    ref = QAReference(dataset="medqa", realidx="7", answer_idx="C", answer="Aspirin")
    url = root.write_json("pools/p/v1/manifest.json", {"b": 1, "a": [1, 2]})
    assert url == f"{root.root_url}/pools/p/v1/manifest.json"
    assert root.read_text("pools/p/v1/manifest.json") == (
        '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}')
    root.write_jsonl("pools/p/v1/private/references.jsonl", [ref, {"x": "é"}])
    assert list(root.read_jsonl("pools/p/v1/private/references.jsonl")) == [
        ref.model_dump(mode="json"), {"x": "é"}]
    assert root.list("pools/p/v1") == ["pools/p/v1/manifest.json", "pools/p/v1/private"]
    child = root.child("pools/p/v1")
    assert child.exists("manifest.json") and not child.exists("nope.json")
    assert child.read_json("manifest.json") == {"a": [1, 2], "b": 1}
    assert root.list("absent") == []


@pytest.mark.parametrize("key", ["", "/etc/passwd", "../x", "a/../../x", "a\\b", "."])
def test_keys_cannot_escape_the_root(root: Storage, key: str) -> None:
    with pytest.raises(StorageKeyError):
        root.write_text(key, "x")


def test_zarr_volume_of_a_real_mr_scan(root: Storage) -> None:
    volume = np.asarray(nib.load(os.path.join(data_path, "example4d.nii.gz")).dataobj)[..., 0]
    assert volume.shape == (128, 96, 24) and volume.dtype == np.int16
    url = root.write_volume("cases/c1/t1.zarr", volume, chunks=(64, 48, 12))
    assert url == root.url("cases/c1/t1.zarr")
    arr = root.open_volume("cases/c1/t1.zarr")
    assert arr.shape == volume.shape and arr.chunks == (64, 48, 12) and arr.dtype == np.int16
    assert np.array_equal(arr[10:70, 5:50, 3], volume[10:70, 5:50, 3])
    assert np.array_equal(root.read_volume("cases/c1/t1.zarr"), volume)
    chunk_keys = root.fs.find(root.path("cases/c1/t1.zarr/c"))
    assert len(chunk_keys) == 2 * 2 * 2


@pytest.mark.slow
def test_settings_alone_move_a_pool_to_s3(s3_endpoint: str, s3_bucket: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from support.ops_support import publish_test_pool

    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", f"s3://{s3_bucket}/medflows")
    monkeypatch.setenv("MEDFLOWS_STORAGE_OPTIONS",
                       f'{{"endpoint_url": "{s3_endpoint}", "key": "k", "secret": "s"}}')
    reset_settings()
    try:
        assert get_settings().storage_options["endpoint_url"] == s3_endpoint
        published = publish_test_pool(f"s3-{uuid.uuid4().hex[:6]}", {"medqa": 5})
        assert published.url.startswith(f"s3://{s3_bucket}/medflows/pools/")
        pool = load_pool(Storage(published.url))  # a URL under the root gets its options
        assert len(pool.items) == 5 and len(pool.references) == 5
        assert pool.manifest.content_hash == published.manifest.content_hash
    finally:
        monkeypatch.undo()
        reset_settings()
