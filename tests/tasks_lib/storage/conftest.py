"""Storage roots on every backend: a local folder, ``memory://`` and S3 served by moto's server
mode on 127.0.0.1 (started and stopped by PID here)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tasks_lib.storage import Storage

BACKENDS = ["local", "memory", pytest.param("s3", marks=pytest.mark.slow)]


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``moto_server`` on a free 127.0.0.1 port; yields its endpoint URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                             "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(endpoint, timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "moto did not start"
                time.sleep(0.2)
        yield endpoint
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()


def s3_options(endpoint: str) -> dict[str, str]:
    """fsspec options of the moto endpoint (moto accepts any credentials)."""
    return {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket; returns its name."""
    import s3fs

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"medflows-{uuid.uuid4().hex[:10]}"
    s3fs.S3FileSystem(**s3_options(s3_endpoint)).mkdir(bucket)
    return bucket


@pytest.fixture(params=BACKENDS)
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """An empty storage root on each backend."""
    if request.param == "local":
        return Storage(str(tmp_path / "root"))
    if request.param == "memory":
        return Storage(f"memory://medflows-{uuid.uuid4().hex}")
    bucket = request.getfixturevalue("s3_bucket")
    return Storage(f"s3://{bucket}/root", **s3_options(request.getfixturevalue("s3_endpoint")))
