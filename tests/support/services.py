"""Helpers for tests that run an HTTP service in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

import httpx


def wait_healthy(url: str, alive: Callable[[], str | None], seconds: float = 120) -> None:
    """Poll ``{url}/v1/health`` until it answers 200 (bounded); ``alive`` returns why the
    server is gone, or None."""
    deadline = time.monotonic() + seconds
    while True:
        gone = alive()
        assert gone is None, gone
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"service did not start in {seconds:.0f} s"
        time.sleep(0.2)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process we started (by its PID), then SIGKILL if it lingers."""
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
