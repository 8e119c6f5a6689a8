"""External agents' packages (``packages:`` in ``agents/<name>/config.yaml``): installed once,
outside the sandbox, into a folder of their own that the sandbox sees read-only.

The folder is ``<agent_env_dir>/<name>-<digest>`` (the digest covers the requirement lines, the
``deps`` switch and the Python version, so a changed list installs afresh and an unchanged one is
reused). pip installs into a temporary sibling (``--target``) that is renamed into place when
complete, under a file lock, so concurrent runs install once and a failed install leaves
nothing behind. Inside the sandbox the folder is :data:`ENV_DIR`, first on ``PYTHONPATH`` (and
its ``bin`` first on ``PATH``): the agent imports its own packages, then medflows' environment.

By default pip runs with ``--no-deps``: a scaffold's pins (AIDE pins numpy, pandas and scipy and
asks for an unpinned torch, which would pull a CUDA build) never replace what medflows' own
environment provides; the config lists the few packages medflows lacks instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

from tasks_lib.agents import AgentPackages
from tasks_lib.errors import InputDataError
from tasks_lib.settings import get_settings

ENV_DIR = "/agent-env"
"""Where an agent's installed packages appear inside the sandbox (read-only)."""
DONE = ".medflows-installed.json"
"""Written last into a complete install: what was installed."""
INSTALL_TIMEOUT_S = 900
_LOG = logging.getLogger(__name__)


def _digest(packages: AgentPackages) -> str:
    key = json.dumps({"pip": packages.pip, "deps": packages.deps,
                      "python": list(sys.version_info[:2])}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def agent_env(name: str, packages: AgentPackages) -> Path:
    """The folder holding agent ``name``'s packages, installed first when missing.

    Raises:
        InputDataError: pip failed (its last lines are in the message) or timed out.
    """
    root = get_settings().agent_env_dir
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}-{_digest(packages)}"
    if (folder / DONE).exists():
        return folder
    with open(root / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / DONE).exists():
            return folder
        staging = root / f".{folder.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        _LOG.warning("installing agent %s's %d packages into %s (once)", name,
                     len(packages.pip), folder)
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--no-input", "--target", str(staging),
               *([] if packages.deps else ["--no-deps"]), *packages.pip]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            raise InputDataError(f"agents/{name}", f"installing its packages took over "
                                 f"{INSTALL_TIMEOUT_S} s") from None
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise InputDataError(f"agents/{name}", f"pip could not install its packages: {tail}")
        (staging / DONE).write_text(json.dumps({"pip": packages.pip, "deps": packages.deps}))
        staging.rename(folder)
    return folder
