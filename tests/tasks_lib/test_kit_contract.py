"""The one kit contract (ARCHITECTURE §5, issue 22), parametrized over every registered kit: on a
small published pool of the kit, its baselines are ordered and the null agents and the public
sample stay at or below their audit floors; ``medflows pool rotate`` is seeded and
version-locked; an invalid run is shown unranked, off the Pareto frontier and uncredited; a
valid run's leaderboard row has cost, time and Pareto columns; re-scoring under another
evaluator version appends a score row. A kit registered without a contract pool builder
(tests/support/kit_pools.py) fails here."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from support.isolated import own_storage_and_ledger
from support.kit_pools import KitPools, with_test_kits
from typer.testing import CliRunner

from evaluators.core import RunStatus
from tasks_lib.audits.baselines import EMPTY, NONE, PERFECT, SAMPLE
from tasks_lib.audits.pool import pool_files
from tasks_lib.ledger import store
from tasks_lib.report import LeaderboardRow, leaderboard, scored_runs, to_frame
from tasks_lib.rotation import SubsetManifest, resolve_pool
from tasks_lib.scoring import select_runs
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for

with with_test_kits() as _names:
    KIT_NAMES = _names
"""Every kit registered when the tests are collected, the test-only kits of tests/support
included."""
EPS = 1e-9
BREACH = "isolation: read private/ (the references)"


@pytest.fixture(scope="module", autouse=True)
def _test_kits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The test-only kits stay registered while this module runs, on a storage root and ledger
    of the module's own: the contract pools are published with an audit override, and a test
    that published the same content cleanly in the shared ledger would leave them unflagged."""
    with own_storage_and_ledger(tmp_path_factory.mktemp("kit-contract-ledger")), \
            with_test_kits():
        yield


@pytest.fixture(scope="module", params=KIT_NAMES)
def track(request: pytest.FixtureRequest, _test_kits: None) -> Iterator[str]:
    """Each registered kit in turn. A module-scoped parameter runs the module kit by kit, and
    a kit's scorings (its baselines, its score flows) share one Dask cluster, closed before the
    next kit's tests: a kit that scores on Dask would otherwise start a LocalCluster per
    scored run (~10 s of CPU each), and one kept for the whole module costs as much idling."""
    from tasks_lib.compute import shared_dask

    with shared_dask():
        yield str(request.param)


@pytest.fixture(scope="module")
def pools(_test_kits: None, tmp_path_factory: pytest.TempPathFactory) -> KitPools:
    return KitPools(tmp_path_factory.mktemp("kit-contract"))


@pytest.fixture(scope="module")
def board_runs() -> dict[str, list[str]]:
    """Track → the run ids of :func:`_scored_runs` (scored once per module)."""
    return {}


@pytest.fixture(scope="module")
def cli(prefect_harness: None) -> CliRunner:
    """The CLI under the Prefect test harness, Prefect's console log handler configured before
    any `CliRunner` call (tests/flows/test_verb_cli.py says why)."""
    from prefect.logging.configuration import setup_logging

    from flows.cli import ops, score  # noqa: F401  (register `pool rotate`, `score --run`)

    setup_logging()
    return CliRunner()


def _invoke(runner: CliRunner, *args: str) -> object:
    from flows.cli.groups import app

    got = runner.invoke(app, list(args))
    assert got.exit_code == 0, got.output
    return json.loads(got.stdout)


def test_baselines_are_ordered_and_null_agents_stay_at_or_below_their_floors(
        track: str, pools: KitPools) -> None:
    scored = pools.scored(track)
    names = [s.baseline.name for s in scored]
    [perfect] = [s.value for s in scored if s.baseline.name == PERFECT]
    nulls = [s for s in scored if s.baseline.floor is not None]
    assert nulls, names
    # nothing scores below submitting nothing (an all-zero image can beat a constant one:
    # enhancement's golden empty 0.406 > constant 0.139, datasets/audit/floors.yaml)
    bottom = min(s.value for s in nulls if s.baseline.name in (NONE, EMPTY))
    for s in nulls:
        assert bottom - EPS <= s.value < perfect - EPS, (s.baseline.name, s.value, perfect)
        assert s.value <= (s.baseline.floor or 0.0) + EPS, (s.baseline.name, s.value)
    if any(pool_files(Storage(pools.url(track)), "public/sample_submission")):
        assert SAMPLE in names  # the pool publishes a sample: a copy is a null agent


def test_rotation_is_seeded_version_locked_and_ledgered(
        track: str, pools: KitPools, cli: CliRunner) -> None:
    info = pools.info(track)
    size = max(1, len(kit_for(track).rotation.units(info.url)) // 2)
    subset_id = f"kc-{uuid.uuid4().hex[:8]}"

    def rotate(seed: int) -> SubsetManifest:
        return SubsetManifest.model_validate(_invoke(
            cli, "pool", "rotate", "--pools", f"{info.pool_id}@v{info.version}", "--size",
            str(size), "--seed", str(seed), "--subset-id", subset_id, "--json"))

    first = rotate(1)
    assert rotate(1) == first and first.version == 1 and first.n_items >= size
    other = next(m for m in map(rotate, range(2, 12)) if m.content_hash != first.content_hash)
    assert other.version == 2
    assert resolve_pool(first.url) == first.url  # audited parents, locked files
    for subset in (first, other):
        [row] = store.pools(pool_id=subset_id, version=subset.version)
        assert (row.kind, row.content_hash, row.track) == ("subset", subset.content_hash, track)


def _board(run_ids: list[str]) -> dict[str, LeaderboardRow]:
    rows = leaderboard(scored_runs(select_runs(run_ids=run_ids)))
    return {r.agent_id.removeprefix("upload:"): r for r in rows}


def _scored_runs(track: str, pools: KitPools, cli: CliRunner,
                 cache: dict[str, list[str]]) -> list[str]:
    """Three runs on the kit's pool through the score flow (``medflows score --run``): the
    perfect submission (cheapest), a null agent (dearer) and the perfect submission of a run
    recorded invalid (free: it would dominate if it were credited)."""
    from support.kit_pools import store_run

    if track not in cache:
        info = pools.info(track)
        ids = [store_run(info, pools.perfect(track), "perfect", cost_usd=0.01, wall_time_s=5.0),
               store_run(info, pools.null(track), "null", cost_usd=0.02, wall_time_s=5.0),
               store_run(info, pools.perfect(track), "breach", cost_usd=0.0, wall_time_s=5.0,
                         status=RunStatus.INVALID, violations=[BREACH])]
        cards = _invoke(cli, "score", "--run", ",".join(ids), "--json")
        assert isinstance(cards, list) and len(cards) == 3
        cache[track] = ids
    return cache[track]


def test_an_invalid_run_is_shown_unranked_off_the_frontier_and_uncredited(
        track: str, pools: KitPools, cli: CliRunner, board_runs: dict[str, list[str]]) -> None:
    board = _board(_scored_runs(track, pools, cli, board_runs))
    breach = board["breach"]
    assert breach.rank is None and not breach.ranked and not breach.pareto
    assert BREACH in str(breach.unranked_reason)
    assert breach.task_score is None and breach.metrics == {} and breach.overall is None
    assert breach.stages == {} and breach.per_group == {} and breach.coverage is None
    assert board["perfect"].task_score is not None  # the same files, credited when valid


def test_a_valid_run_has_cost_time_and_pareto_columns(
        track: str, pools: KitPools, cli: CliRunner, board_runs: dict[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract pools pass the publish gate with a recorded override, which leaves every
    run on them unranked (tests/tasks_lib/test_report_board.py checks that rule); here they
    are placed as on a clean pool."""
    ids = _scored_runs(track, pools, cli, board_runs)
    flagged = _board(ids)["perfect"]
    assert not flagged.ranked and "pool audit flagged" in str(flagged.unranked_reason)
    monkeypatch.setattr("tasks_lib.report.board.pool_flags", lambda runs: {})
    board = _board(ids)
    perfect, null = board["perfect"], board["null"]
    assert (perfect.rank, perfect.pareto) == (1, True)
    assert null.task_score is not None and null.task_score < (perfect.task_score or 0.0)
    assert (null.rank, null.pareto) == (2, False)  # dearer and worse: dominated
    assert (perfect.cost_per_run_usd, perfect.total_cost_usd, perfect.wall_time_s) == (
        0.01, 0.01, 5.0)
    assert perfect.primary_metric and perfect.evaluator_version == kit_for(
        track).evaluator_version
    columns = set(to_frame(list(board.values())).columns)
    assert {"cost_per_run_usd", "total_cost_usd", "cost_per_item_usd", "mean_time_s",
            "wall_time_s", "pareto", "rank", "unranked_reason"} <= columns


def test_rescoring_under_another_evaluator_version_appends_a_row(
        track: str, pools: KitPools, cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.kit_pools import store_run

    run_id = store_run(pools.info(track), pools.perfect(track), "rescored")
    kit = kit_for(track)
    _invoke(cli, "score", "--run", run_id, "--json")
    [first] = [r.model_dump() for r in store.scores_for([run_id])]
    monkeypatch.setattr(kit, "evaluator_version", f"{kit.evaluator_version}+contract")
    card = _invoke(cli, "score", "--run", run_id, "--json")
    _invoke(cli, "score", "--run", run_id, "--json")  # the same version again: no new row
    rows = store.scores_for([run_id])
    assert [r.evaluator_version for r in rows] == [first["evaluator_version"],
                                                   kit.evaluator_version]
    assert rows[0].model_dump() == first
    assert isinstance(card, dict) and card["evaluator_version"] == kit.evaluator_version
    assert rows[1].task_score == pytest.approx(first["task_score"])
