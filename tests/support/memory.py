"""Peak memory of a child process, measurable in the middle of a long test session (in-process
measurements use :func:`tasks_lib.compute.reset_peak_rss` / :func:`~tasks_lib.compute.peak_rss`).

``getrusage(...).ru_maxrss`` is a high-water mark over the process's whole life and survives
``fork`` + ``exec`` (Linux keeps it across execve), so in a full suite it reports what earlier
tests used. ``VmHWM`` in ``/proc/self/status`` can be reset (``clear_refs`` ← 5) and in an exec'd
child starts from that child's own memory.
"""

from __future__ import annotations

PEAK_SNIPPET = ("int(next(line for line in open('/proc/self/status') "
                "if line.startswith('VmHWM')).split()[1]) * 1024")
"""A Python expression giving this process's peak RSS in bytes (for child-process scripts)."""
