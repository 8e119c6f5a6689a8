"""What the host lends a research cell's sandbox besides the kit's view: the operator's
read-only model cache and the host's GPUs (settings ``model_cache_dir``, ``sandbox_gpus``).

Both are fixed when the cell is planned (an unusable setting fails then, with the reason) and
added to whatever sandbox the kit's session builds (bubblewrap or Docker), so every track's
research cells get them alike.

- **Cache**: the folder is bound read-only at :data:`CACHE_DIR`; ``MEDFLOWS_CACHE`` names it and
  the usual library variables point into it (``HF_HOME``, ``TORCH_HOME``), with the Hugging Face
  libraries offline: an agent loads the weights the operator put there and downloads nothing.
- **GPUs**: the NVIDIA device files (``/dev/nvidia0`` …, ``nvidiactl``, ``nvidia-uvm``) are
  passed through at the same path (bubblewrap ``--dev-bind``; Docker ``devices``); the driver's
  libraries come with the host's ``/usr``, which both backends bind read-only. The run record
  lists the devices a run had (``gpus``), and while the agent runs :class:`GpuSampler` reads
  the host's ``nvidia-smi`` every few seconds: the run's per-stage telemetry has the mean
  utilisation and peak memory of each stage (:mod:`tasks_lib.harness.telemetry`).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

from tasks_lib.errors import InputDataError
from tasks_lib.sandbox.base import Mount, SandboxSpec
from tasks_lib.settings import get_settings

CACHE_DIR = "/cache"
"""Where the operator's model cache appears inside (read-only)."""
DEV = Path("/dev")
NVIDIA = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


def gpu_devices(dev: Path = DEV) -> list[str]:
    """The host's NVIDIA device files (empty: no GPU)."""
    cards = sorted(str(p) for p in dev.glob("nvidia[0-9]*"))
    if not cards:
        return []
    return cards + [str(dev / n) for n in NVIDIA if (dev / n).exists()]


def cell_cache() -> Path | None:
    """The operator's model cache (setting ``model_cache_dir``), checked; None: none set.

    Raises:
        InputDataError: the setting names no folder.
    """
    folder = get_settings().model_cache_dir
    if folder is None:
        return None
    if not folder.is_dir():
        raise InputDataError("MEDFLOWS_MODEL_CACHE_DIR", f"{folder} is not a folder")
    return folder.resolve()


def cell_gpus(dev: Path = DEV) -> list[str]:
    """The devices research cells get (setting ``sandbox_gpus``; empty when off).

    Raises:
        InputDataError: the setting is on and the host has no NVIDIA device.
    """
    if not get_settings().sandbox_gpus:
        return []
    found = gpu_devices(dev)
    if not found:
        raise InputDataError("MEDFLOWS_SANDBOX_GPUS", f"GPU passthrough is on but this host has "
                                                      f"no NVIDIA device ({dev}/nvidia*)")
    return found


def lend(spec: SandboxSpec, cache: Path | None, gpus: list[str]) -> SandboxSpec:
    """``spec`` with the cache mounted at :data:`CACHE_DIR` and the ``gpus`` passed through."""
    if cache is None and not gpus:
        return spec
    mounts, env = list(spec.mounts), dict(spec.env)
    if cache is not None:
        mounts.append(Mount(host=cache, target=CACHE_DIR))
        env |= {"MEDFLOWS_CACHE": CACHE_DIR, "HF_HOME": f"{CACHE_DIR}/huggingface",
                "TORCH_HOME": f"{CACHE_DIR}/torch", "TRANSFORMERS_OFFLINE": "1"}
    return spec.model_copy(update={"mounts": mounts, "env": env,
                                   "devices": [*spec.devices, *gpus]})


class GpuSample(NamedTuple):
    """One reading of the lent GPUs (summed over devices: utilisation averaged)."""

    at_s: float
    """Seconds from the sampler's start."""
    util_pct: float
    memory_mb: float


SMI_QUERY = ["--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


def read_gpus(smi: str) -> tuple[float, float] | None:
    """Mean utilisation (%) and memory used (MiB, summed) of the host's GPUs from
    ``nvidia-smi`` (None: it failed or printed nothing usable)."""
    try:
        out = subprocess.run([smi, *SMI_QUERY], capture_output=True, text=True, timeout=10,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            rows.append((float(parts[0]), float(parts[1])))
        except (IndexError, ValueError):
            continue
    if not rows:
        return None
    return sum(r[0] for r in rows) / len(rows), sum(r[1] for r in rows)


class GpuSampler:
    """Reads the lent GPUs' use every ``interval_s`` on a thread while a run's agent works
    (a no-op without GPUs or without ``nvidia-smi``). Use as a context manager; ``samples``
    holds the readings (at most ``cap``)."""

    def __init__(self, gpus: list[str], interval_s: float = 5.0, cap: int = 20_000) -> None:
        self.smi = shutil.which("nvidia-smi") if gpus else None
        self.interval_s, self.cap = interval_s, cap
        self.samples: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="medflows-gpu", daemon=True)
        self._started = time.monotonic()

    def _run(self) -> None:
        assert self.smi is not None
        while len(self.samples) < self.cap:
            found = read_gpus(self.smi)
            if found is not None:
                self.samples.append(GpuSample(round(time.monotonic() - self._started, 3),
                                              *found))
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> GpuSampler:
        self._started = time.monotonic()
        if self.smi is not None:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(15)
