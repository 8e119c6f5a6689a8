"""The console script in a fresh interpreter, with the modules it imported: what the start-up,
read-only and warm-process tests measure (imports are process-wide, so in-process runs cannot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MEDFLOWS = str(Path(sys.executable).parent / "medflows")
"""The installed ``medflows`` console script of this interpreter."""
RUN_MAIN = """
import json, sys
out, sys.argv = sys.argv[1], ["medflows", *sys.argv[2:]]
from flows.cli import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""
"""``python -c`` program: the console script's ``main`` with ``ARGS`` (given as ``OUT ARGS``),
then its exit code and every module it imported written to ``OUT`` as JSON."""


def fresh_env(root: Path, **extra: str) -> dict[str, str]:
    """A fresh state: empty ledger, storage, results and Prefect home in ``root``, no Prefect
    API (a flow would have to start the temporary server) unless ``extra`` sets one."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MEDFLOWS_DEBUG")}
    env.update({"MEDFLOWS_LEDGER_URL": f"sqlite:///{root / 'ledger.db'}",
                "MEDFLOWS_STORAGE_URL": str(root / "storage"),
                "MEDFLOWS_RESULTS_DIR": str(root / "results"),
                "PREFECT_HOME": str(root / "prefect-home"), **extra})
    return env


def run_main(out: Path, args: list[str], env: dict[str, str], timeout: float = 300
             ) -> tuple[subprocess.CompletedProcess[str], int, list[str]]:
    """:data:`RUN_MAIN` with ``args`` writing to ``out``: the finished process, ``main``'s exit
    code and the modules the interpreter imported."""
    done = subprocess.run([sys.executable, "-c", RUN_MAIN, str(out), *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert out.exists(), done.stderr[-3000:]
    got = json.loads(out.read_text())
    return done, got["code"], got["modules"]
