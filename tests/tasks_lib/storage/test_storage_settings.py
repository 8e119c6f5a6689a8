"""Storage keys, fsspec backends and settings."""

from __future__ import annotations

import uuid

import pytest

from tasks_lib.settings import Settings
from tasks_lib.storage import Storage, StorageKeyError


@pytest.mark.parametrize("root", ["memory://medflows-test", "local"])
def test_round_trip(root: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"{root}-{uuid.uuid4().hex}" if root.startswith("memory") else str(tmp_path / "s")
    st = Storage(url)
    st.write_json("a/b.json", {"x": 1})
    st.write_jsonl("a/c.jsonl", [{"i": 1}, {"i": 2}])
    assert st.read_json("a/b.json") == {"x": 1}
    assert [r["i"] for r in st.read_jsonl("a/c.jsonl")] == [1, 2]
    assert st.list("a") == ["a/b.json", "a/c.jsonl"]
    assert st.child("a").read_json("b.json") == {"x": 1}
    assert st.url("a/b.json") == f"{url}/a/b.json"


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/etc/passwd", "", ".", "a\\b"])
def test_keys_cannot_escape_the_root(key: str) -> None:
    with pytest.raises(StorageKeyError):
        Storage("memory://escape").write_text(key, "no")


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", "s3://bucket/prefix")
    monkeypatch.setenv("MEDFLOWS_LEDGER_URL", "postgresql+psycopg2://u@h/db")
    monkeypatch.setenv("MEDFLOWS_DATA_ROOT", "/elsewhere/data")
    monkeypatch.setenv("MEDFLOWS_DASK_ADDRESS", "tcp://127.0.0.1:8786")
    s = Settings()
    assert s.storage_url == "s3://bucket/prefix" and s.ledger_url.startswith("postgresql")
    assert str(s.data_root) == "/elsewhere/data" and s.dask_address == "tcp://127.0.0.1:8786"


def test_defaults_live_inside_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEDFLOWS_STORAGE_URL", "MEDFLOWS_LEDGER_URL", "MEDFLOWS_DATA_ROOT"):
        monkeypatch.delenv(name, raising=False)
    from tasks_lib.settings import PROJECT_ROOT

    s = Settings()
    assert s.storage_url.startswith(str(PROJECT_ROOT / ".medflows"))
    assert s.ledger_url == f"sqlite:///{PROJECT_ROOT / '.medflows' / 'ledger.db'}"
    assert s.data_root == PROJECT_ROOT / ".." / "shared" / "data"
