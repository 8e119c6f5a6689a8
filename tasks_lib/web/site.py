"""The pages as a static site (``medflows report --html DIR``): the same templates as the served
pages, written as files whose relative links open from disk (``file://``) or from any static
host.

The site holds the runs selected the way ``medflows report`` selects them (named runs, a pool
version, a task, or every run) and, for them, the index, one page per pool version and task
(boards of the selected runs only, so every link stays inside the site) and one page per run.
MedBench submissions are their submitters': they stay on the boards without a page. The
submitter page needs a key, so it is served only.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from tasks_lib.ledger.tables import PoolRow, RunRow
from tasks_lib.scoring import select_runs
from tasks_lib.web import data
from tasks_lib.web.pages import MAX_CASES, STYLE, is_safe_id, page_path, render, style


class SiteFiles(NamedTuple):
    """What :func:`write_site` wrote."""

    index_page: Path
    """The site's ``index.html`` (open it in a browser)."""
    pages: list[str]
    """Every page written, relative to the site folder, sorted."""
    skipped: list[str]
    """Ids without a page, each with the reason."""


def _write(out: Path, path: str, text: str, written: list[str]) -> None:
    target = out / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    written.append(path)


def _pools(runs: list[RunRow], everything: bool) -> list[PoolRow]:
    """Published pool versions of the selected runs (every one when nothing was named)."""
    if everything:
        return data.published_pools()
    keys = {(r.pool_id, r.pool_version) for r in runs}
    return [p for p in data.published_pools() if (p.pool_id, p.version) in keys]


def write_site(out_dir: str | Path, task_id: str | None = None, pool: str | None = None,
               run_ids: list[str] | None = None, evaluator_version: str | None = None
               ) -> SiteFiles:
    """Write the pages of the selected runs under ``out_dir`` (created; pages already there are
    overwritten, nothing else is removed).

    Args:
        out_dir: Folder of the site.
        task_id: Only this task's runs.
        pool: Only this pool version's runs (a pool root URL or ``active:<subset_id>``).
        run_ids: Only these runs.
        evaluator_version: Boards from this evaluator version's score rows (default: each
            run's newest); run pages show every score card.

    Raises:
        InputDataError: An unknown run id or pool (as ``medflows report``).
    """
    out = Path(out_dir)
    everything = not (task_id or pool or run_ids)
    runs = select_runs(run_ids, task_id, pool)
    pools = _pools(runs, everything)
    private = data.submission_runs()
    skipped = sorted([f"run {r.run_id}: a MedBench submission (its submitter's)"
                      for r in runs if r.run_id in private]
                     + [f"run {r.run_id}: id is not a file name"
                        for r in runs if r.run_id not in private and not is_safe_id(r.run_id)])
    linked = {r.run_id for r in runs if r.run_id not in private and is_safe_id(r.run_id)}
    written: list[str] = []
    _write(out, STYLE, style(), written)
    by_task: dict[str, list[RunRow]] = defaultdict(list)
    for r in runs:
        by_task[r.task_id].append(r)
    tasks = [t for t in sorted(by_task) if is_safe_id(t)]
    skipped += [f"task {t}: id is not a file name" for t in sorted(by_task) if t not in tasks]
    index = data.index_view(runs, pools)
    index = index._replace(tasks=[e for e in index.tasks if e.task_id in tasks])
    _write(out, page_path("index"), render("index.html", page_path("index"),
                                           title="Pools and tasks", served=False, view=index),
           written)
    shown_pools = set()
    for p in pools:
        if not is_safe_id(p.pool_id):
            skipped.append(f"pool {p.pool_id}: id is not a file name")
            continue
        shown_pools.add((p.pool_id, p.version))
        members = [r for r in runs if (r.pool_id, r.pool_version) == (p.pool_id, p.version)]
        board = data.board_view(f"{p.pool_id} v{p.version}", members, evaluator_version, linked)
        path = page_path("pool", p.pool_id, p.version)
        _write(out, path, render("board.html", path, title=board.title, view=board,
                                 served=False), written)
    for t in tasks:
        board = data.board_view(t, by_task[t], evaluator_version, linked)
        path = page_path("task", t)
        _write(out, path, render("board.html", path, title=board.title, view=board,
                                 served=False), written)
    for r in runs:
        view = data.run_view(r.run_id) if r.run_id in linked else None
        if view is None:
            continue
        path = page_path("run", r.run_id)
        _write(out, path, render("run.html", path, title=f"Run {r.run_id}", view=view,
                                 served=False, max_cases=MAX_CASES,
                                 pool_public=(r.pool_id, r.pool_version) in shown_pools),
               written)
    return SiteFiles(out / "index.html", sorted(written), skipped)
