"""What the host lends research cells (tasks_lib/sandbox/devices.py): the operator's model cache,
read-only at /cache, and the host's GPU devices, fixed when the cell is planned, added to the
kit's sandbox and kept on the run record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cells import needs_bwrap

from tasks_lib.domain import RunStatus, Tier
from tasks_lib.errors import InputDataError
from tasks_lib.sandbox.base import Language, agent_spec
from tasks_lib.sandbox.devices import cell_cache, cell_gpus, gpu_devices, lend
from tasks_lib.settings import reset_settings

PASSED = "/dev/loop-control"
"""A host device bubblewrap's minimal /dev does not have: passed through, it appears inside."""


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Change settings for one test (reset after)."""
    reset_settings()
    yield monkeypatch
    monkeypatch.delenv("MEDFLOWS_MODEL_CACHE_DIR", raising=False)
    monkeypatch.delenv("MEDFLOWS_SANDBOX_GPUS", raising=False)
    reset_settings()


def _set(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    reset_settings()


def test_gpu_devices_are_the_nvidia_files_and_a_host_without_one_is_refused(
        tmp_path: Path, settings: pytest.MonkeyPatch) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    assert gpu_devices(dev) == []
    assert cell_gpus(dev) == []  # off by default
    _set(settings, "MEDFLOWS_SANDBOX_GPUS", "true")
    with pytest.raises(InputDataError, match="no NVIDIA device"):
        cell_gpus(dev)
    for name in ("nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm", "null"):
        (dev / name).touch()
    expected = [str(dev / n) for n in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm")]
    assert gpu_devices(dev) == cell_gpus(dev) == expected


def test_the_cache_setting_must_name_a_folder(tmp_path: Path,
                                              settings: pytest.MonkeyPatch) -> None:
    assert cell_cache() is None
    _set(settings, "MEDFLOWS_MODEL_CACHE_DIR", str(tmp_path / "missing"))
    with pytest.raises(InputDataError, match="is not a folder"):
        cell_cache()
    (tmp_path / "cache").mkdir()
    _set(settings, "MEDFLOWS_MODEL_CACHE_DIR", str(tmp_path / "cache"))
    assert cell_cache() == (tmp_path / "cache").resolve()


@needs_bwrap
@pytest.mark.skipif(not Path(PASSED).exists(), reason=f"{PASSED} absent on this host")
def test_a_bwrap_cell_reads_the_cache_cannot_write_it_and_sees_the_devices(
        tmp_path: Path) -> None:
    from tasks_lib.sandbox.local import BwrapSandbox

    for name in ("public", "workspace", "cache/torch"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "cache" / "torch" / "weights.txt").write_text("w1")
    spec = lend(agent_spec(tmp_path / "public", tmp_path / "workspace", []),
                tmp_path / "cache", [PASSED])
    sandbox = BwrapSandbox(spec)
    try:
        got = sandbox.execute(Language.BASH, "cat $TORCH_HOME/weights.txt; echo; "
                              "echo $MEDFLOWS_CACHE $HF_HOME; test -e " + PASSED + " && echo dev;"
                              " echo x > /cache/new", 30)
        plain = BwrapSandbox(agent_spec(tmp_path / "public", tmp_path / "workspace", []))
        without = plain.execute(Language.BASH, f"test -e {PASSED} || echo absent; "
                                "ls /cache 2>&1 | head -1", 30)
        plain.close()
    finally:
        sandbox.close()
    assert got.stdout == "w1\n/cache /cache/huggingface\ndev\n"
    assert got.exit_code != 0 and "Read-only file system" in got.stderr
    assert not (tmp_path / "cache" / "new").exists()
    assert without.stdout.startswith("absent\n") and "No such file" in without.stdout


def test_a_planned_cell_carries_the_cache_and_gpus_onto_its_run_record(
        tmp_path: Path, settings: pytest.MonkeyPatch) -> None:
    from support.cells import file_env

    from tasks_lib.harness.cell import Execution, plan_cell
    from tasks_lib.harness.environment import PoolRef
    from tasks_lib.harness.record import run_record
    from tasks_lib.sandbox.base import SandboxBackend

    (tmp_path / "cache").mkdir()
    _set(settings, "MEDFLOWS_MODEL_CACHE_DIR", str(tmp_path / "cache"))
    env = file_env("ldct-iqa", tmp_path, 120)
    plan = plan_cell("scripted-baseline", env, Tier.LITE, SandboxBackend.LOCAL, 0, "rules")
    assert (plan.cache_dir, plan.gpus) == ((tmp_path / "cache").resolve(), [])
    done = Execution(status=RunStatus.COMPLETED, end=None, model="scripted-baseline", turns=0,
                     wall_time_s=1.0, input_tokens=0, output_tokens=0, violations=[])
    pool = PoolRef(url="file:///p", pool_id="p", version=1, content_hash="h", n_items=1)
    assert run_record(plan.model_copy(update={"gpus": ["/dev/nvidia0"]}), done,
                      pool).gpus == ["/dev/nvidia0"]
    _set(settings, "MEDFLOWS_SANDBOX_GPUS", "true")
    if not gpu_devices():
        with pytest.raises(InputDataError, match="no NVIDIA device"):
            plan_cell("scripted-baseline", env, Tier.LITE, SandboxBackend.LOCAL, 0, "rules")
