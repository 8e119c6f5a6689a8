"""The one execute path for item agents (:mod:`tasks_lib.execution`): chunk ranges, round-robin
submission, cost budgets chained across a run's chunks, the stop reason on the run record and
the ledger row — on a tiny fake item environment — and the QA and MedBench kits running
through it."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prefect import flow
from support.medbench_pool import write_pool
from support.openai_server import FakeOpenAIServer

from evaluators.core import InputDataError, RunStatus, Track
from tasks_lib.agents import AgentSpec, Harness, replay_agent
from tasks_lib.execution import steps
from tasks_lib.execution.environment import (
    Budgets,
    ChunkResult,
    ItemEnvironment,
    Planned,
    run_id_for,
)
from tasks_lib.item_runner import RunLimits, StopReason
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.llm import CallOptions
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.settings import reset_settings
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import kit_for

CALLS: list[tuple[str, int, int, int]] = []
"""(agent, replicate, start, stop) of every chunk the fake environment ran."""
_LOCK = threading.Lock()


class CountingEnvironment(ItemEnvironment):
    """Items 0 … n − 1; answering one costs ``price`` USD; lines are ``{"item": i}``."""

    price: float = 1.0
    cache_modules: ClassVar[tuple[str, ...]] = ("tests.tasks_lib.test_execution",)

    def run_chunk(self, agent: AgentSpec, replicate: int, start: int, stop: int,
                  limits: RunLimits, options: CallOptions) -> ChunkResult:
        with _LOCK:
            CALLS.append((agent.agent_id, replicate, start, stop))
        spent, lines, stopped = limits.spent_usd, [], None
        for item in range(start, stop):
            if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
                stopped = StopReason.BUDGET
                break
            lines.append({"item": item})
            spent += self.price
        return ChunkResult(run_id=self.run_id(agent, replicate), start=start, stop=stop,
                           lines=lines, stopped=stopped, run_cost_usd=spent, calls=len(lines))

    def assemble(self, agent: AgentSpec, replicate: int, chunks: list[ChunkResult],
                 started_at: float, budgets: Budgets) -> RunRecord:
        lines = [line for c in sorted(chunks, key=lambda c: c.start) for line in c.lines]
        run_id = self.run_id(agent, replicate)
        run_store(run_id).write_jsonl(f"{SUBMISSION}/lines.jsonl", lines)
        stops = {c.stopped for c in chunks} - {None}
        partial = StopReason.BUDGET in stops
        return RunRecord(
            run_id=run_id, agent=agent, task_id=self.pool_id, track=Track.QA,
            replicate=replicate, status=RunStatus.PARTIAL if partial else RunStatus.COMPLETED,
            pool_url=self.pool_url, pool_id=self.pool_id, pool_version=self.pool_version,
            pool_hash=self.pool_hash, n_items=self.n_items, n_answered=len(lines),
            turns=sum(c.calls for c in chunks), wall_time_s=time.time() - started_at,
            error=f"cost budget of {budgets.max_cost_usd} spent" if partial else None)


def _agent(name: str) -> AgentSpec:
    return AgentSpec(agent_id=name, harness=Harness.QA_METHOD, model="openai/fake",
                     method="zero_shot")


def _env(tmp_path: Path, n_items: int = 10) -> CountingEnvironment:
    return CountingEnvironment(pool_url=str(tmp_path / "pool"), pool_id="count",
                               pool_version=1, pool_hash="h" * 16, n_items=n_items)


def test_chunk_ranges_cover_the_run_once() -> None:
    assert steps.chunk_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert steps.chunk_ranges(4, 4) == [(0, 4)]
    assert steps.chunk_ranges(0, 4) == [(0, 0)]
    with pytest.raises(InputDataError, match="chunk-size"):
        steps.chunk_ranges(3, 0)


class _Recorder:
    """Stands in for the chunk step: records what was submitted, in order."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, int, int, object]] = []

    def submit(self, env: ItemEnvironment, agent: AgentSpec, replicate: int, start: int,
               stop: int, deadline_at: float | None, max_cost_usd: float | None,
               options: CallOptions, previous: object) -> object:
        token = object()
        self.submitted.append((agent.agent_id, start, id(previous), token))
        return token


@pytest.mark.parametrize("budget", [None, 5.0])
def test_chunks_are_submitted_round_robin_and_chained_only_under_a_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: float | None) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(steps, "chunk_step", lambda env, agent: recorder)
    plan = [Planned(_agent("a"), 0, CallOptions()), Planned(_agent("b"), 0, CallOptions())]
    chunks = steps.submit_chunks(_env(tmp_path), plan, 4, None, budget)
    assert [(name, start) for name, start, _, _ in recorder.submitted] == [
        ("a", 0), ("b", 0), ("a", 4), ("b", 4), ("a", 8), ("b", 8)]
    assert [len(c) for c in chunks] == [3, 3]
    previous = {name: id(None) for name in "ab"}
    for name, _, prev, token in recorder.submitted:
        assert prev == (previous[name] if budget is not None else id(None))
        previous[name] = id(token)


@pytest.mark.usefixtures("prefect_harness")
def test_a_budget_stops_later_chunks_and_the_stop_reason_reaches_the_ledgered_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    reset_settings()
    CALLS.clear()
    env = _env(tmp_path)
    plan = [Planned(_agent("capped"), 0, CallOptions()), Planned(_agent("capped"), 1,
                                                                 CallOptions())]

    @flow
    def run() -> list[RunRecord]:
        return steps.execute_items(env, plan, chunk_size=3, time_budget_s=None,
                                   max_cost_usd=4.0)

    try:
        runs = run()
        ledgered = {r.run_id: r for r in store.runs() if r.pool_id == "count"}
    finally:
        reset_settings()
    assert [r.replicate for r in runs] == [0, 1]
    for run_ in runs:
        assert run_.status is RunStatus.PARTIAL and run_.n_answered == 4
        assert run_.error == "cost budget of 4.0 spent"
        assert run_.run_id == run_id_for(run_.agent, env.pool_hash, run_.replicate)
        assert ledgered[run_.run_id].status == RunStatus.PARTIAL  # the ledger row
    # chunks 0 and 1 ran (the second stopped at the cap); chunks 2 and 3 asked nothing
    assert sorted((r, s) for _, r, s, _ in CALLS) == [(0, 0), (0, 3), (1, 0), (1, 3)]


def test_research_kits_have_no_item_environment(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="research cells"):
        kit_for(Track.SEGMENTATION).item_environment(str(tmp_path))


@pytest.mark.usefixtures("prefect_harness")
def test_medbench_api_mode_runs_chunked_on_the_generic_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.item_runs import run_api

    from flows.medbench import execute_medbench
    from tasks_lib.medbench.api import MedBenchEnvironment, adhoc_agent
    from tasks_lib.medbench.items import SUBMISSION_FILE

    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    monkeypatch.setenv("MEDFLOWS_EXECUTE_CHUNK", "3")
    reset_settings()
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    env = kit_for(Track.MEDBENCH).item_environment(pool)
    assert isinstance(env, MedBenchEnvironment) and env.n_items == 7
    seen: list[tuple[int, int]] = []
    real = MedBenchEnvironment.run_chunk

    def spy(self: MedBenchEnvironment, *args: Any) -> ChunkResult:
        seen.append((args[2], args[3]))
        return real(self, *args)

    monkeypatch.setattr(MedBenchEnvironment, "run_chunk", spy)
    try:
        with FakeOpenAIServer(lambda body: "A") as srv:
            runs = execute_medbench(pool, model="openai/fake-mb", api_base=srv.base_url,
                                    replicates=1, cache=False)
            whole = run_api(adhoc_agent("openai/fake-mb", srv.base_url), pool, 0,
                            CallOptions(cache=False))
    finally:
        reset_settings()
    assert sorted(seen) == [(0, 3), (0, 7), (3, 6), (6, 7)]  # 3 chunks + the in-process run
    (run_,) = runs
    assert run_.run_id == whole.run_id and run_.status is whole.status
    assert (run_.n_items, run_.n_answered, run_.turns) == (7, 7, 7)
    chunked = list(run_store(run_.run_id).read_jsonl(f"{SUBMISSION}/{SUBMISSION_FILE}"))
    assert len(chunked) == 7  # the in-process run rewrote the same run's files: same order


def test_the_qa_kit_provides_its_item_environment(tmp_path: Path) -> None:
    from tasks_lib.qa.run_steps import QAEnvironment

    assert kit_for(Track.QA).item_environment.__qualname__.startswith("QAKit")
    assert issubclass(QAEnvironment, ItemEnvironment)
    replay = replay_agent("m", "zero_shot", str(tmp_path / "replay.csv"))
    env = QAEnvironment(pool_url="p", pool_id="p", pool_version=1, pool_hash="h", n_items=3)
    assert env.replayed(replay) and not env.replayed(_agent("live"))


@pytest.mark.usefixtures("prefect_harness")
def test_the_execute_flow_runs_item_agents_on_the_pools_kit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`execute_pool` asks the ledger for the pool's kit (here stubbed: the hand-written pool is
    not published) and runs a catalog agent on the kit's item environment."""
    import flows.execute as execute

    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", str(tmp_path / "storage"))
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")))
    monkeypatch.setattr(execute, "pool_kit_name", lambda url: "medbench")
    with FakeOpenAIServer(lambda body: "A") as srv:
        monkeypatch.setenv("MEDFLOWS_LLM_API_BASE", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        reset_settings()
        try:
            done = execute.execute_pool(pool, ["gpt-4o-mini@zero_shot"], cache=False)
        finally:
            reset_settings()
    assert done.matrix is None
    (run_,) = done.runs
    assert run_.track == Track.MEDBENCH and run_.n_items == run_.n_answered == 7


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap sandbox not installed")
def test_the_execute_flow_runs_research_cell_agents_on_the_pools_cards(
        tmp_path: Path) -> None:
    """A scripted agent on a published imaging pool runs as a research cell on the pool's card
    (scored by the one score flow); an older version of the pool is refused, since cells run
    on the newest one."""
    from support.imaging_pools import build_pool
    from support.isolated import own_storage_and_ledger

    import flows.execute as execute

    with own_storage_and_ledger(tmp_path / "own"):
        url, manifest = build_pool("brain-tissue-seg", tmp_path / "pools")
        done = execute.execute_pool(url, ["scripted-baseline"])
        assert done.runs == [] and done.matrix is not None
        (cell,) = done.matrix.report.cells
        assert (cell.agent_id, cell.task_id) == ("scripted-baseline", "brain-tissue-seg")
        (run_id,) = done.matrix.report.run_ids
        assert store.runs(run_id=run_id)[0].track == "segmentation"
        store.record_pool(PoolRow(  # a newer version published since
            pool_id=manifest.pool_id, version=manifest.version + 1, track="segmentation",
            content_hash="newer", manifest_url=f"{url}-newer/manifest.json", n_items=1))
        with pytest.raises(InputDataError, match="newest version"):
            execute.execute_pool(url, ["scripted-baseline"])
