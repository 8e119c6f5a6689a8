"""Harness fixtures: the segmentation task's pool, and a private Docker engine started by the
tests and stopped by PID."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _ping(url: str) -> bool:
    import docker

    try:
        return bool(docker.DockerClient(base_url=url, timeout=5).ping())
    except docker.errors.DockerException:
        return False


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """``unix://`` URL of a dockerd started for this session (vfs, no iptables, no bridge)."""
    if shutil.which("dockerd") is None:
        pytest.skip("dockerd not installed (scripts/system-deps.sh installs docker.io)")
    root = Path(tempfile.mkdtemp(prefix="mfd-", dir="/tmp"))
    sock = root / "docker.sock"
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        ["dockerd", "--storage-driver=vfs", "--iptables=false", "--ip6tables=false",
         "--bridge=none", f"--data-root={root / 'data'}", f"--exec-root={root / 'exec'}",
         f"--pidfile={root / 'dockerd.pid'}", f"--host=unix://{sock}",
         f"--containerd-namespace=mf{os.getpid()}",
         f"--containerd-plugins-namespace=mfp{os.getpid()}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(120):
            if sock.exists() and _ping(f"unix://{sock}"):
                break
            if proc.poll() is not None:
                pytest.fail(f"dockerd exited: {(root / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.5)
        else:
            pytest.fail("dockerd did not come up within 60 s")
        yield f"unix://{sock}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def docker_env(docker_host: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the docker SDK at the session's engine."""
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    return docker_host


SEG_TASK = "brain-tissue-seg"


@pytest.fixture(scope="session")
def seg_pool() -> Path:
    """Local folder of the segmentation task's pool, built once (execute never builds one)."""
    from support.audited import record_override

    from tasks_lib.imaging import steps
    from tasks_lib.imaging.pool import latest_pool_url, load_task
    from tasks_lib.ledger import store
    from tasks_lib.pool_publish import record_version

    if not store.pools(pool_id=SEG_TASK, kind="pool"):
        card = load_task(SEG_TASK)
        rendered = steps.render.fn(card)
        published = steps.publish.fn(card, None, rendered,
                                     steps.deidentify_step.fn(card, rendered))
        record_override(published.url)
        record_version.fn(published.url, published.manifest, len(published.manifest.cases))
    return Path(latest_pool_url(SEG_TASK))


@pytest.fixture
def agents_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty folder of external agents (the ``agents_dir`` setting) for this test."""
    from tasks_lib.settings import reset_settings

    folder = tmp_path / "agents"
    folder.mkdir()
    monkeypatch.setenv("MEDFLOWS_AGENTS_DIR", str(folder))
    reset_settings()
    yield folder
    monkeypatch.delenv("MEDFLOWS_AGENTS_DIR")
    reset_settings()
