"""``medflows deploy`` refuses to guess a server, and the deployments file is well-formed."""

from __future__ import annotations

import os
import subprocess

from ops_support import BIN

from flows.cli.ops import project_file


def test_deploy_without_api_url_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    out = subprocess.run([str(BIN / "medflows"), "deploy", "--apply"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "PREFECT_API_URL is not set" in out.stderr


def test_deployments_file_names_each_flow_once_with_the_quarterly_rotation() -> None:
    specs = project_file().deployments
    assert [s.name for s in specs] == ["construct", "rotate-quarterly", "execute-matrix",
                                       "score", "report", "qa-benchmark"]
    assert {s.work_pool.name for s in specs} == {"medflows-process"}
    assert all("medflows" in s.tags for s in specs)
    [rotate] = [s for s in specs if s.schedules]
    assert (rotate.entrypoint, rotate.schedules[0].cron, rotate.schedules[0].timezone) == (
        "flows.rotate:rotate_pool", "0 0 1 */3 *", "UTC")
