"""``medflows deploy`` refuses to guess a server; the deployments file is well-formed and names
every flow of the ``flows`` package; ``deploy --apply`` / ``--list --json`` against the Prefect
test harness list a deployment for every flow."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
from pathlib import Path

import pytest
from prefect import Flow
from support.ops_support import BIN
from typer.testing import CliRunner

import flows.construct
from tasks_lib.errors import InputDataError
from tasks_lib.ops import DeploymentSpec, flow_registry, load_flow, project_file

DEPLOYMENTS = ["construct", "construct-pool", "construct-imaging", "construct-challenge",
               "construct-medbench", "construct-rwe", "rotate-quarterly",
               "rotate-medbench-quarterly", "execute-pool", "execute-matrix",
               "research-cell", "research-matrix", "execute-medbench", "score", "score-run",
               "score-submission", "report", "report-medbench", "qa-benchmark", "challenge-grade",
               "challenge-benchmark-rank"]


def every_flow() -> dict[str, Flow[..., object]]:
    """Every Prefect flow defined in a module of the ``flows`` package, by flow name."""
    # the package folder from a module's file: under pytest, ``tests/flows`` (no __init__.py)
    # can make ``flows.__path__`` a namespace path
    package = Path(flows.construct.__file__).parent
    found: dict[str, Flow[..., object]] = {}
    for info in pkgutil.walk_packages([str(package)], "flows."):
        for obj in vars(importlib.import_module(info.name)).values():
            if isinstance(obj, Flow) and obj.fn.__module__.startswith("flows."):
                assert found.setdefault(obj.name, obj) is obj, f"two flows named {obj.name!r}"
    return found


def test_deploy_without_api_url_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    out = subprocess.run([str(BIN / "medflows"), "deploy", "--apply"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "PREFECT_API_URL is not set" in out.stderr


def test_deployments_file_names_each_deployment_once_with_the_quarterly_rotation() -> None:
    specs = project_file().deployments
    assert [s.name for s in specs] == DEPLOYMENTS
    assert {s.work_pool.name for s in specs} == {"medflows-process"}
    assert all("medflows" in s.tags for s in specs)
    scheduled = {s.entrypoint: (s.schedules[0].cron, s.schedules[0].timezone)
                 for s in specs if s.schedules}
    assert scheduled == {"flows.rotate:rotate_pool": ("0 0 1 */3 *", "UTC"),
                         "flows.medbench:rotate_medbench": ("0 0 1 */3 *", "UTC")}


def test_every_entrypoint_is_a_flow_and_every_flow_is_deployed() -> None:
    found = every_flow()
    for spec in project_file().deployments:
        flow = load_flow(spec)
        assert isinstance(flow, Flow), spec.entrypoint
        assert found[flow.name] is flow, f"{spec.entrypoint} is not the flow of its module"
    registry = flow_registry()
    assert sorted(registry.names()) == sorted(found)
    assert {"construct", "construct-qa", "construct-imaging", "rotate-pool", "execute",
            "execute-qa", "run-cell",
            "run-matrix", "score-runs", "score-run", "score-submission", "report",
            "qa-benchmark", "challenge-grade-rank", "challenge-benchmark-rank"} <= set(found)


@pytest.mark.parametrize(("entry", "message"), [
    ({"entrypoint": "os:system"}, "String should match pattern"),
    ({"entrypoint": "flows.score:score_qa"}, "is not a flow"),
    ({"entrypoint": "flows.nowhere:thing"}, "flows.nowhere:thing"),
    ({"parameters": {"pool": "x"}}, "flow 'rotate-pool' takes no parameter(s) ['pool']"),
])
def test_bad_entries_are_input_errors(tmp_path: Path, entry: dict[str, object],
                                      message: str) -> None:
    raw = {"name": "x", "entrypoint": "flows.rotate:rotate_pool", "description": "d",
           "tags": ["medflows"], "work_pool": {"name": "p"}, **entry}
    path = tmp_path / "prefect.yaml"
    path.write_text(json.dumps({"name": "m", "prefect-version": "3", "deployments": [raw]}))
    with pytest.raises(InputDataError) as caught:
        load_flow(project_file(path).deployments[0])
    assert message in str(caught.value)


def test_entrypoint_outside_the_flows_package_is_refused() -> None:
    with pytest.raises(ValueError, match="should match pattern"):
        DeploymentSpec(name="x", entrypoint="subprocess:run", description="d", tags=[],
                       work_pool={"name": "p"})  # type: ignore[arg-type]


@pytest.mark.usefixtures("prefect_harness")
def test_deploy_apply_then_list_json_names_every_flow() -> None:
    from flows.cli import ops  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    applied = CliRunner().invoke(app, ["deploy", "--apply"])
    assert applied.exit_code == 0, applied.output
    listed = CliRunner().invoke(app, ["deploy", "--list", "--json"])
    assert listed.exit_code == 0, listed.output
    infos = {d["name"]: d for d in json.loads(listed.stdout)}
    expected = {f"{load_flow(s).name}/{s.name}" for s in project_file().deployments}
    assert set(infos) == expected
    assert {name.split("/")[0] for name in infos} == set(every_flow())
    assert infos["construct-imaging/construct-imaging"]["parameters"] == {
        "task_id": "brain-tissue-seg"}
    assert infos["challenge-grade-rank/challenge-grade"]["entrypoint"] == (
        "flows.challenge.challenge_grade_rank")  # a module path: the worker imports it
    [schedule] = infos["rotate-pool/rotate-quarterly"]["schedules"]
    assert (schedule["cron"], schedule["active"]) == ("0 0 1 */3 *", True)
