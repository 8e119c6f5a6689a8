"""What the pages show, read from the ledger and the run folders (never from a pool's files).

* the index: published pool versions and the tasks that have runs;
* a board: the leaderboard rows of a pool version or a task (:func:`tasks_lib.report.
  report_rows`), each row with the run ids of its replicates, the Pareto panels and stage bars;
* a run: its ledger row and record, every score card, the submission's file names and the trace
  (:mod:`tasks_lib.web.trace_view`).

Runs that are MedBench submissions belong to their submitter: boards list them (as ``medflows
report`` does) without a link, and their run pages are not public (:func:`submission_runs`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import groupby
from typing import NamedTuple

from tasks_lib.ledger import medbench as mb_ledger
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow, RunRow, ScoreRow
from tasks_lib.records import (
    SUBMISSION,
    RunRecord,
    ScoreCard,
    card_key,
    read_card,
    read_run,
    run_store,
)
from tasks_lib.report.board import LeaderboardRow
from tasks_lib.report.build import report_rows
from tasks_lib.web.plots import Figure, pareto_figures, stage_bars
from tasks_lib.web.trace_view import TraceView, load_trace_view

PUBLISHED = ("pool", "subset")
"""Pool-row kinds shown (a ``pending`` version is not published yet)."""
MAX_FILES = 200
"""Submission files listed on a run page."""


class PoolEntry(NamedTuple):
    """A published pool version on the index."""

    pool: PoolRow
    n_runs: int


class TaskEntry(NamedTuple):
    """A task id that has runs."""

    task_id: str
    tracks: list[str]
    n_runs: int
    n_agents: int


class IndexView(NamedTuple):
    """The index page."""

    pools: list[PoolEntry]
    tasks: list[TaskEntry]


class Board(NamedTuple):
    """One (task, tier) table with its plots."""

    task_id: str
    tier: str
    rows: list[LeaderboardRow]
    runs: dict[str, list[str]]
    """Agent id → public run ids of its replicates (empty: no public run page)."""
    figures: list[Figure]
    not_plotted: list[str]
    stages_svg: str | None


class TierDelta(NamedTuple):
    """One agent's task score per tier of one task, and the change from the first tier."""

    agent_id: str
    task_id: str
    scores: dict[str, float | None]
    deltas: dict[str, float | None]


class BoardView(NamedTuple):
    """A leaderboard page (a pool version or a task)."""

    title: str
    boards: list[Board]
    tiers: list[str]
    tier_deltas: list[TierDelta]


class CardView(NamedTuple):
    """One score row of a run and its stored card (None when the card file is missing)."""

    row: ScoreRow
    card: ScoreCard | None
    error_codes: list[str]


class FileEntry(NamedTuple):
    """A file of a submission."""

    name: str
    size: int


class RunView(NamedTuple):
    """A run page."""

    run: RunRow
    record: RunRecord | None
    """The stored run record (None: not in storage)."""
    cards: list[CardView]
    files: list[FileEntry]
    n_files: int
    trace: TraceView


def published_pools() -> list[PoolRow]:
    """Published pool versions, by id then version."""
    rows = [p for p in store.pools() if p.kind in PUBLISHED]
    return sorted(rows, key=lambda p: (p.pool_id, p.version))


def submission_runs() -> set[str]:
    """Run ids of MedBench submissions (their pages are their submitter's)."""
    return {s.run_id for s in mb_ledger.submissions()}


def index_view(runs: list[RunRow] | None = None, pools: list[PoolRow] | None = None
               ) -> IndexView:
    """Pools and tasks with their run counts (default: every run and published pool)."""
    runs = store.runs() if runs is None else runs
    by_pool = Counter((r.pool_id, r.pool_version) for r in runs)
    by_task: dict[str, list[RunRow]] = defaultdict(list)
    for r in runs:
        by_task[r.task_id].append(r)
    entries = [PoolEntry(p, by_pool.get((p.pool_id, p.version), 0))
               for p in (published_pools() if pools is None else pools)]
    tasks = [TaskEntry(t, sorted({r.track or "" for r in rs} - {""}), len(rs),
                       len({r.agent_id for r in rs})) for t, rs in sorted(by_task.items())]
    return IndexView(entries, tasks)


def _tier_deltas(rows: list[LeaderboardRow], tiers: list[str]) -> list[TierDelta]:
    by_agent: dict[tuple[str, str], dict[str, float | None]] = defaultdict(dict)
    for r in rows:
        by_agent[(r.task_id, r.agent_id)][r.tier] = r.task_score
    out = []
    for (task_id, agent_id), scores in sorted(by_agent.items()):
        if len(scores) < 2:
            continue
        base = scores.get(tiers[0])
        deltas = {t: (None if base is None or scores.get(t) is None
                      else (scores[t] or 0.0) - base) for t in tiers[1:]}
        out.append(TierDelta(agent_id, task_id, {t: scores.get(t) for t in tiers}, deltas))
    return out


TIER_ORDER = {"lite": 0, "standard": 1, "pro": 2}


def board_view(title: str, runs: list[RunRow], evaluator_version: str | None = None,
               linked: set[str] | None = None) -> BoardView:
    """The boards of ``runs`` (ranked per (task, tier)), linked to the run pages of
    ``linked`` (default: every run that is not a MedBench submission)."""
    rows = report_rows(run_ids=[r.run_id for r in runs],
                       evaluator_version=evaluator_version) if runs else []
    if linked is None:
        private = submission_runs()
        linked = {r.run_id for r in runs if r.run_id not in private}
    links: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in sorted(runs, key=lambda r: (r.replicate, r.run_id)):
        if r.run_id in linked:
            links[(r.task_id, r.tier, r.agent_id)].append(r.run_id)
    boards = []
    for (task_id, tier), group in groupby(rows, key=lambda r: (r.task_id, r.tier)):
        board = list(group)
        figures, left_out = pareto_figures(board)
        boards.append(Board(task_id, tier, board,
                            {r.agent_id: links.get((task_id, tier, r.agent_id), [])
                             for r in board}, figures, left_out, stage_bars(board)))
    tiers = sorted({r.tier for r in rows}, key=lambda t: (TIER_ORDER.get(t, 9), t))
    return BoardView(title, boards, tiers, _tier_deltas(rows, tiers) if len(tiers) > 1 else [])


def pool_board(pool_id: str, version: int, evaluator_version: str | None = None
               ) -> BoardView | None:
    """The board of a published pool version (None: no such version)."""
    if not any(p.kind in PUBLISHED for p in store.pools(pool_id=pool_id, version=version)):
        return None
    return board_view(f"{pool_id} v{version}",
                      store.runs(pool_id=pool_id, pool_version=version), evaluator_version)


def task_board(task_id: str, evaluator_version: str | None = None) -> BoardView | None:
    """The board of a task's runs (None: no run of that task)."""
    runs = store.runs(task_id=task_id)
    return board_view(task_id, runs, evaluator_version) if runs else None


def _files(run_id: str) -> tuple[list[FileEntry], int]:
    folder = run_store(run_id).child(SUBMISSION)
    if not folder.fs.exists(folder.root_path):
        return [], 0
    found = folder.fs.find(folder.root_path, detail=True)
    entries = sorted(FileEntry(str(path)[len(folder.root_path) + 1:], int(info.get("size") or 0))
                     for path, info in found.items())
    return entries[:MAX_FILES], len(entries)


def _card(run_id: str, row: ScoreRow) -> CardView:
    card = (read_card(run_id, row.evaluator_version)
            if run_store(run_id).exists(card_key(row.evaluator_version)) else None)
    return CardView(row, card, [str(c) for c in json.loads(row.error_codes or "[]")])


def run_view(run_id: str) -> RunView | None:
    """A run's page data (None: not in the ledger)."""
    rows = store.runs(run_id=run_id)
    if not rows:
        return None
    record = read_run(run_id) if run_store(run_id).exists("run.json") else None
    files, n_files = _files(run_id)
    withheld = record is not None and bool(record.violations)
    return RunView(rows[0], record, [_card(run_id, s) for s in store.scores_for([run_id])],
                   files, n_files, load_trace_view(run_id, withheld=withheld))


def public_run(run_id: str) -> RunView | None:
    """A run's page data unless the run is a MedBench submission (its submitter's)."""
    if mb_ledger.submissions(run_id=run_id):
        return None
    return run_view(run_id)


def pool_is_published(run: RunRow) -> bool:
    """The run's pool version has a page (it is published)."""
    return run.pool_id is not None and any(
        p.kind in PUBLISHED for p in store.pools(pool_id=run.pool_id, version=run.pool_version))
