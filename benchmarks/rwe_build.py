"""How long does ``medflows pool build rwe`` take at the default size (20,000 patients), and how
does it scale? Reference: the same command at the minimum size (8,000 patients, the size the
test suite builds), in the same run on the same machine.

Each build runs as a user types it (console script), every study, seed 0, in a throwaway state
folder (its own ledger, storage, Prefect home and service records) with medflows' own RWE
cluster in a fresh folder on a free port: the first build starts the cluster, the second reuses
it, and ``medflows services stop rwe-cluster`` stops it at the end. The figures are the build's
own ``seconds`` (generate, load, build of the studies' reference answers and trap panel) and
the command's wall time.

Target (issue 26, formerly a slow test): generate + load of the 20,000-patient EHR within 120 s
on 2 cores (``target_met=1``). ``per_patient_ratio`` is the 20k build's generate + load seconds
per patient over the 8k build's: near 1 means the build scales linearly.

Ends with ``RESULT n_patients=20000 generate_s=… load_s=… wall_s=… min_generate_s=… min_load_s=…
min_wall_s=… per_patient_ratio=… target_met=…``.
Run: ``.venv/bin/python benchmarks/rwe_build.py`` (≈ 3 minutes).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEDFLOWS = str(Path(sys.executable).parent / "medflows")
DEFAULT_PATIENTS, MIN_PATIENTS = 20_000, 8_000
TARGET_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def state_env(folder: Path) -> dict[str, str]:
    """This environment with every medflows and Prefect state folder, and the RWE cluster, in
    ``folder``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", "MEDFLOWS_RWE_DB_URL")}
    env.update({"MEDFLOWS_LEDGER_URL": f"sqlite:///{folder / 'ledger.db'}",
                "MEDFLOWS_STORAGE_URL": str(folder / "storage"),
                "MEDFLOWS_RESULTS_DIR": str(folder / "results"),
                "MEDFLOWS_SERVICES_DIR": str(folder / "services"),
                "MEDFLOWS_RWE_CLUSTER_DIR": str(folder / "rwe-cluster"),
                "MEDFLOWS_RWE_CLUSTER_PORT": str(_free_port()),
                "MEDFLOWS_JUDGE_MODEL": "rules",
                "PREFECT_HOME": str(folder / "prefect-home"),
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"})
    return env


def build(env: dict[str, str], folder: Path, n_patients: int) -> dict[str, float]:
    """One ``pool build rwe`` of every study at ``n_patients``: its phase seconds and wall."""
    start = time.perf_counter()
    proc = subprocess.run([MEDFLOWS, "pool", "build", "rwe", "--n-patients", str(n_patients),
                           "--seed", "0", "--pool-id", f"rwe-bench-{n_patients}", "--out",
                           str(folder / f"pool-{n_patients}"), "--keep-services", "--json"],
                          env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"pool build rwe --n-patients {n_patients} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout)
    assert summary["n_patients"] == n_patients and len(summary["studies"]) >= 8, summary
    seconds = summary["seconds"]
    print(f"{n_patients} patients: {wall:.1f} s wall, {seconds}", flush=True)
    return {"generate_s": float(seconds["generate"]), "load_s": float(seconds["load"]),
            "wall_s": wall}


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="medflows-bench-rwe-"))
    os.chmod(folder, 0o755)  # the cluster's PostgreSQL user reads its folder
    env = state_env(folder)
    try:
        small = build(env, folder, MIN_PATIENTS)
        full = build(env, folder, DEFAULT_PATIENTS)
    finally:
        subprocess.run([MEDFLOWS, "services", "stop", "rwe-cluster"], env=env,
                       capture_output=True, timeout=120)
    per_patient = ((full["generate_s"] + full["load_s"]) / DEFAULT_PATIENTS) / (
        (small["generate_s"] + small["load_s"]) / MIN_PATIENTS)
    met = int(full["generate_s"] + full["load_s"] < TARGET_S)
    print(f"RESULT n_patients={DEFAULT_PATIENTS} generate_s={full['generate_s']:.2f} "
          f"load_s={full['load_s']:.2f} wall_s={full['wall_s']:.1f} "
          f"min_generate_s={small['generate_s']:.2f} min_load_s={small['load_s']:.2f} "
          f"min_wall_s={small['wall_s']:.1f} per_patient_ratio={per_patient:.2f} "
          f"target_met={met}")


if __name__ == "__main__":
    main()
