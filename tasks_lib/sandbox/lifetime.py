"""Processes that die with the process that started them, and process groups ended for good.

:func:`die_with_parent` prefixes a command with a tiny interpreter call that sets
``PR_SET_PDEATHSIG`` (SIGKILL) on itself, checks its parent is still the caller (the parent may
have died between ``fork`` and ``prctl``), then ``exec``\\ s the command: the signal setting
survives ``exec`` (``strace`` is no set-uid program), and ``bwrap --die-with-parent`` hands it on
to every process of the sandbox. ``preexec_fn`` would do the same but is not safe with threads.
The signal fires when the *thread* that started the child ends: callers start and wait for the
child in the same call, so that thread outlives the child unless the whole process dies.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

PDEATHSIG = """
import ctypes, os, signal, sys
if ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
    sys.exit("medflows: prctl(PR_SET_PDEATHSIG) failed")
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
os.execv(sys.argv[2], sys.argv[2:])
"""
"""Set PR_SET_PDEATHSIG = SIGKILL (PR_SET_PDEATHSIG is 1), then exec argv[2:]."""


def die_with_parent(argv: list[str]) -> list[str]:
    """``argv`` run so that it is killed (SIGKILL) when this process dies (``argv[0]`` is
    looked up on ``PATH`` unless it is a path)."""
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0]) or argv[0]
    return [sys.executable, "-I", "-S", "-c", PDEATHSIG, str(os.getpid()), program, *argv[1:]]


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid`` (from /proc)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def kill_group(pgid: int, grace_s: float = 2.0) -> int:
    """SIGTERM the group, SIGKILL what is left after ``grace_s``; the number of processes the
    group had (0: nothing to do)."""
    members = group_members(pgid)
    if not members:
        return 0
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(100):
        if not group_members(pgid):
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.02)
    return len(members)


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` (gone ones are fine)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
