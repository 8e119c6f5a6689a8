"""The CLI's execution progress: per run, items done/total, calls/s, cost and cache hits, summed
over the run's chunks (a plain line per tenth of the run when stderr is not a terminal)."""

from __future__ import annotations

import io

from rich.console import Console

from flows.cli.progress import ExecutionProgress
from tasks_lib.progress import listening, publish
from tasks_lib.qa.run_steps import ChunkProgress
from tasks_lib.qa.runner import RunProgress


def _report(start: int, done: int, cost: float | None, hits: int) -> ChunkProgress:
    progress = RunProgress(
        agent_id="gpt-4o-mini@cot", done=done, total=10, calls=done, cache_hits=hits,
        cost_usd=cost, new_cost_usd=None if cost is None else cost / 2, elapsed_s=2.0)
    return ChunkProgress(run_id="run1", replicate=0, start=start, run_items=20,
                         progress=progress)


def test_progress_lines_sum_the_chunks_of_a_run() -> None:
    out = io.StringIO()
    shown = ExecutionProgress(Console(file=out, force_terminal=False, width=200))
    with listening(shown):
        publish(_report(0, 1, 0.01, 0))  # 1/20: below the first tenth, still shown (tenth 0)
        publish(_report(10, 1, 0.01, 1))  # 2/20: tenth 1
        publish(_report(0, 2, 0.02, 1))  # 3/20: same tenth, not shown again
        publish(_report(10, 10, 0.1, 4))  # 12/20
        publish("something else")  # other reports are ignored
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("gpt-4o-mini@cot r0: 1/20 items")
    assert lines[1].startswith("gpt-4o-mini@cot r0: 2/20 items") and "cache hits 1" in lines[1]
    assert len(lines) == 3 and lines[2].startswith("gpt-4o-mini@cot r0: 12/20 items")
    assert "6.0 calls/s" in lines[2] and "cost $0.1200 (new $0.0600)" in lines[2]
    assert "cache hits 5" in lines[2]
    publish(_report(0, 3, None, 0))  # no listener any more: nothing printed
    assert out.getvalue().splitlines() == lines


def test_unpriced_runs_say_so() -> None:
    out = io.StringIO()
    shown = ExecutionProgress(Console(file=out, force_terminal=False, width=200))
    shown(_report(0, 5, None, 0))
    assert "cost unpriced (new unpriced)" in out.getvalue()
