"""The console script in a fresh interpreter, with the modules it imported: what the start-up,
read-only and warm-process tests measure (imports are process-wide, so in-process runs cannot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MEDFLOWS = str(Path(sys.executable).parent / "medflows")
"""The installed ``medflows`` console script of this interpreter."""
RUN_MAINS = """
import contextlib, io, json, sys
out, commands = sys.argv[1], json.loads(sys.argv[2])
from flows.cli import main
ran = []
for args in commands:
    sys.argv = ["medflows", *args]
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main()
        except SystemExit as exc:
            code = exc.code or 0
    ran.append({"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()})
with open(out, "w") as f:
    json.dump({"ran": ran, "modules": sorted(sys.modules)}, f)
"""
"""``python -c`` program: the console script's ``main`` once per command line of the JSON list
``COMMANDS`` (given as ``OUT COMMANDS``), in turn, in one interpreter; each one's exit code and
what it wrote to ``sys.stdout`` and ``sys.stderr``, then every module the interpreter imported,
written to ``OUT`` as JSON."""


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
    """:func:`run_mains` with the one command ``args``: the finished process (what ``main``
    wrote is in ``stdout``/``stderr``), ``main``'s exit code and the modules the interpreter
    imported."""
    done, (ran,), modules = _run(out, [args], env, timeout)
    done.stdout, done.stderr = ran["stdout"] + done.stdout, ran["stderr"] + done.stderr
    return done, ran["code"], modules


def run_mains(out: Path, commands: list[list[str]], env: dict[str, str], timeout: float = 300
              ) -> tuple[list[dict[str, Any]], list[str]]:
    """:data:`RUN_MAINS` with ``commands`` writing to ``out`` (one interpreter for several
    commands whose imports are checked together: one start-up instead of one each): per
    command its ``code``, ``stdout`` and ``stderr``, and the modules the interpreter imported
    over all of them."""
    _, ran, modules = _run(out, commands, env, timeout)
    return ran, modules


def _run(out: Path, commands: list[list[str]], env: dict[str, str], timeout: float
         ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], list[str]]:
    done = subprocess.run([sys.executable, "-c", RUN_MAINS, str(out), json.dumps(commands)],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert out.exists(), done.stderr[-3000:]
    got = json.loads(out.read_text())
    return done, got["ran"], got["modules"]
