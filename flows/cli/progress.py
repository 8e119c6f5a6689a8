"""The CLI's progress display for live execution: one bar per run on stderr.

Listens to :func:`tasks_lib.progress.publish` reports (chunks that run in this process) and shows
items done/total, calls/s, cost so far and cache hits per run. On a terminal it is a live rich
progress bar; otherwise (logs, CI) one plain line per run at every tenth of its items.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tasks_lib.progress import listening
from tasks_lib.qa.run_steps import ChunkProgress


@dataclass
class _Run:
    label: str
    total: int
    chunks: dict[int, Any] = field(default_factory=dict)
    shown_tenth: int = -1

    def totals(self) -> tuple[int, int, int, float | None, float | None, float]:
        """done, calls, cache hits, cost, new cost, longest chunk elapsed."""
        reports = list(self.chunks.values())
        cost = None if any(r.cost_usd is None for r in reports) else \
            sum(r.cost_usd for r in reports)
        new = None if any(r.new_cost_usd is None for r in reports) else \
            sum(r.new_cost_usd for r in reports)
        return (sum(r.done for r in reports), sum(r.calls for r in reports),
                sum(r.cache_hits for r in reports), cost, new,
                max((r.elapsed_s for r in reports), default=0.0))


def _money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.4f}"


class ExecutionProgress:
    """A listener that draws run progress on stderr (see the module docstring)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._runs: dict[str, _Run] = {}
        self._tasks: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=self.console,
        ) if self.live else None

    def __call__(self, report: Any) -> None:
        if not isinstance(report, ChunkProgress):
            return
        with self._lock:
            run = self._runs.setdefault(report.run_id, _Run(
                f"{report.progress.agent_id} r{report.replicate}", report.run_items))
            run.chunks[report.start] = report.progress
            done, calls, hits, cost, new, elapsed = run.totals()
            stats = (f"{calls / elapsed if elapsed else 0.0:.1f} calls/s  cost {_money(cost)} "
                     f"(new {_money(new)})  cache hits {hits}")
            if self._bar is not None:
                if report.run_id not in self._tasks:
                    self._tasks[report.run_id] = self._bar.add_task(run.label, total=run.total,
                                                                    stats=stats)
                self._bar.update(self._tasks[report.run_id], completed=done, stats=stats)
                return
            tenth = 10 * done // max(run.total, 1)
            if tenth > run.shown_tenth:
                run.shown_tenth = tenth
                self.console.print(f"{run.label}: {done}/{run.total} items  {stats}",
                                   highlight=False, soft_wrap=True)

    @contextmanager
    def showing(self) -> Iterator[None]:
        """Display reports published while the block runs."""
        if self._bar is not None:
            self._bar.start()
        try:
            with listening(self):
                yield
        finally:
            if self._bar is not None:
                self._bar.stop()


@contextmanager
def execution_progress(enabled: bool = True) -> Iterator[None]:
    """Show execution progress on stderr while the block runs (nothing when disabled)."""
    if not enabled:
        yield
        return
    with ExecutionProgress(Console(stderr=True, file=sys.stderr)).showing():
        yield
