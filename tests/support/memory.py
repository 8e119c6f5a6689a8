"""Peak memory of this process, measurable in the middle of a long test session.

``getrusage(...).ru_maxrss`` is a high-water mark over the process's whole life and survives
``fork`` + ``exec`` (Linux keeps it across execve), so in a full suite it reports what earlier
tests used. ``VmHWM`` in ``/proc/self/status`` can be reset (``clear_refs`` ← 5) and in an exec'd
child starts from that child's own memory.
"""

from __future__ import annotations

from pathlib import Path

PEAK_SNIPPET = ("int(next(line for line in open('/proc/self/status') "
                "if line.startswith('VmHWM')).split()[1]) * 1024")
"""A Python expression giving this process's peak RSS in bytes (for child-process scripts)."""


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> int:
    """Reset this process's peak RSS to its current RSS; returns that RSS in bytes."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status("VmRSS")


def peak_bytes() -> int:
    """This process's peak RSS in bytes since the last :func:`reset_peak` (or its start)."""
    return _status("VmHWM")
