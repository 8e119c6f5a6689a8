"""``medflows rerun`` re-runs a flow run that no deployment made (started from Python or the CLI):
the flow comes from the registry of medflows flows, the parameters from the server, and the run
keeps its id. A flow that is not a medflows flow is a user error and leaves the run untouched."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import pytest
from prefect import flow
from support.ops_support import publish_test_pool
from typer.testing import CliRunner

from tasks_lib.errors import InputDataError
from tasks_lib.ops import RerunWhere, rerun_flow_run
from tasks_lib.rotation import active_subset

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _read(flow_run_id: UUID) -> Any:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id)


def _cli(*args: str) -> Any:
    from flows.cli import ops  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    return CliRunner().invoke(app, list(args))


def test_failed_run_without_deployment_reruns_in_place_with_its_parameters() -> None:
    from flows.rotate import rotate_pool

    pool_id, subset_id = f"late-{uuid.uuid4().hex[:6]}", f"late-sub-{uuid.uuid4().hex[:6]}"
    state = rotate_pool(pools=[pool_id], size=3, seed=5, subset_id=subset_id, return_state=True)
    assert state.is_failed() and "no such pool version" in str(state.message)
    run_id = state.state_details.flow_run_id
    assert run_id is not None
    first = _read(run_id)
    assert first.deployment_id is None and first.run_count == 1

    publish_test_pool(pool_id, {"medqa": 4, "pubmedqa": 2})  # the operator fixes the input
    outcome = rerun_flow_run(str(run_id))

    assert (outcome.flow_run_id, outcome.flow_name) == (str(run_id), "rotate-pool")
    assert (outcome.where, outcome.state) == (RerunWhere.LOCAL, "COMPLETED")
    again = _read(run_id)
    assert again.run_count == 2 and again.state.is_completed()
    assert again.parameters == first.parameters
    subset = active_subset(subset_id)
    assert (subset.version, subset.n_items) == (1, 3)

    result = _cli("rerun", str(run_id))  # a completed run re-runs too: same seed, same subset
    assert result.exit_code == 0, result.output
    assert '"state": "COMPLETED"' in result.stdout and '"where": "local"' in result.stdout
    assert _read(run_id).run_count == 3
    assert active_subset(subset_id) == subset


@flow(name="not-a-medflows-flow")
def _stray(x: int) -> int:
    return x


def test_unknown_flow_is_a_user_error_listing_the_known_flows() -> None:
    state = _stray(1, return_state=True)
    run_id = state.state_details.flow_run_id
    with pytest.raises(InputDataError, match=r"known flows: .*rotate-pool"):
        rerun_flow_run(str(run_id))
    result = _cli("rerun", str(run_id))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: not-a-medflows-flow: not a medflows flow; known "
                                    "flows: construct-qa, construct, construct-imaging, ")
    for name in ("rotate-pool", "challenge-grade-rank", "construct-rwe", "execute-medbench"):
        assert name in result.stderr
    after = _read(run_id)
    assert after.run_count == 1 and after.state.is_completed()  # untouched


@pytest.mark.parametrize(("flow_run_id", "message"), [
    ("not-a-uuid", "error: not-a-uuid: not a flow run id"),
    ("00000000-0000-4000-8000-000000000000", "no such flow run on the Prefect server"),
])
def test_bad_flow_run_ids(flow_run_id: str, message: str) -> None:
    result = _cli("rerun", flow_run_id)
    assert result.exit_code == 2 and message in result.stderr
    assert "Traceback" not in result.output
