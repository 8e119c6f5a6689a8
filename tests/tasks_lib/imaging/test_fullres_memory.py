"""Dask workers started the usual way (``MALLOC_TRIM_THRESHOLD_`` set by the nanny) re-fault
every volume-sized temporary; :func:`keep_freed_memory` makes them reuse freed memory."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from tasks_lib.compute import keep_freed_memory
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    a = np.ones(250_000, dtype=np.float32)  # 1 MB: below a huge page, so 256 faults when mapped
    del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, check=True,
                         capture_output=True, text=True)
    return int(out.stdout.split()[-1])


def test_keep_freed_memory_stops_refaulting_temporaries() -> None:
    pages = 200 * 1_000_000 // 4096
    trimmed, kept = _faults("trim"), _faults("keep")
    assert trimmed > 0.9 * pages  # every array is mapped afresh and faults again
    assert kept < 0.2 * pages, (trimmed, kept)
