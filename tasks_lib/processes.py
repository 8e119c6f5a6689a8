"""Processes by PID, as /proc shows them (Linux): a PID is trusted only together with the
process's start time, so a PID the kernel handed to another process is never signalled."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def proc_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks after boot (None: no such live process)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in {"Z", "X"} else int(fields[19])


def pid_alive(pid: int, start: int | None = None) -> bool:
    """``pid`` is a live, non-zombie process (and, with ``start``, the same one)."""
    now = proc_start(pid)
    return now is not None and (start is None or now == start)


def terminate(pid: int, start: int | None, sig: str = "SIGTERM", wait_s: float = 10.0,
              kill: bool = True) -> bool:
    """Send ``sig`` to ``pid``, wait up to ``wait_s`` for it to end, then SIGKILL (``kill``);
    True if it ended. Never signals a PID that no longer names the recorded process."""
    if not pid_alive(pid, start):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.Signals[sig])
    deadline = time.monotonic() + wait_s
    while pid_alive(pid, start):
        if time.monotonic() >= deadline:
            if not kill:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            kill, deadline = False, time.monotonic() + 5
        time.sleep(0.05)
    return True
