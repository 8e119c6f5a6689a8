"""How fast does the ``medflows`` command answer? Reference: the bare interpreter
(``python -c pass``), the floor no command can beat, and the target of issue 26 (``medflows
--help`` within 1.0 s).

Each measurement is the median wall time of ``REPEATS`` fresh processes (the command as a user
types it, console script included), in a throwaway state folder (empty ledger, storage, results
and Prefect home; no ``PREFECT_API_URL``), so nothing cached by an earlier command helps:

* ``python_s``: ``python -c pass`` (the reference);
* ``help_s``: ``medflows --help``;
* ``help_imports_s``: the imports of ``medflows --help`` alone (``python -X importtime``: the sum
  of the top-level modules' cumulative times, one run);
* ``runs_list_s``: ``medflows runs list --json`` on the empty ledger (no Prefect, no kit).

One function per measurement in :data:`MEASUREMENTS` (name → seconds); the last line is
``RESULT python_s=… help_s=… help_imports_s=… runs_list_s=…``.
Run: ``.venv/bin/python benchmarks/cli_startup.py``.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPEATS = 5
MEDFLOWS = str(Path(sys.executable).parent / "medflows")


def state_env(folder: Path) -> dict[str, str]:
    """This environment with every medflows and Prefect state folder in ``folder``."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"MEDFLOWS_LEDGER_URL": f"sqlite:///{folder / 'ledger.db'}",
                "MEDFLOWS_STORAGE_URL": str(folder / "storage"),
                "MEDFLOWS_RESULTS_DIR": str(folder / "results"),
                "PREFECT_HOME": str(folder / "prefect-home")})
    return env


def wall_s(argv: list[str], env: dict[str, str]) -> float:
    """Median wall time of ``REPEATS`` runs of ``argv`` (each must succeed)."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def python_s(env: dict[str, str]) -> float:
    """The bare interpreter: the reference."""
    return wall_s([sys.executable, "-c", "pass"], env)


def help_s(env: dict[str, str]) -> float:
    """``medflows --help``."""
    return wall_s([MEDFLOWS, "--help"], env)


def help_imports_s(env: dict[str, str]) -> float:
    """What ``medflows --help`` spends importing (``-X importtime``, top-level modules)."""
    program = "import sys\nsys.argv = ['medflows', '--help']\nfrom flows.cli import main\nmain()"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", program], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| \S", done.stderr, re.MULTILINE)
    return sum(int(us) for us in top) / 1e6


def runs_list_s(env: dict[str, str]) -> float:
    """``medflows runs list --json`` on an empty ledger."""
    return wall_s([MEDFLOWS, "runs", "list", "--json"], env)


MEASUREMENTS: dict[str, Callable[[dict[str, str]], float]] = {
    "python_s": python_s,
    "help_s": help_s,
    "help_imports_s": help_imports_s,
    "runs_list_s": runs_list_s,
}
"""Name → measurement (seconds), in the order of the RESULT line."""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="medflows-cli-bench-") as tmp:
        env = state_env(Path(tmp))
        results = {}
        for name, measure in MEASUREMENTS.items():
            results[name] = measure(env)
            print(f"{name}: {results[name]:.3f} s", flush=True)
    print(f"help_s / target 1.0 s: {results['help_s']:.2f}; help_s - python_s: "
          f"{results['help_s'] - results['python_s']:.3f} s")
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in results.items()))


if __name__ == "__main__":
    main()
