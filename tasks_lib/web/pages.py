"""HTML of every page, rendered server-side with Jinja2 (templates in ``templates/``, escaped by
default), the same for ``medflows serve`` and the static site.

Pages link to each other by relative paths (:func:`page_path` from the site root, prefixed with
the way up from the page), so a served page and a page opened from disk (``file://``) follow the
same links: ``index.html``, ``pools/<pool_id>/v<N>.html``, ``tasks/<task_id>.html``,
``runs/<run_id>.html``, ``medbench/submissions.html`` (served only) and ``style.css``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2

from tasks_lib.report.board import STAGES, LeaderboardRow
from tasks_lib.report.render import EMPTY, num_text, stat_text

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=~-]{0,199}")
"""Ids that are page file names as they are (every id medflows makes)."""
STYLE = "style.css"
MAX_CASES = 1000
"""Per-case rows shown on a run page."""


def page_path(kind: str, *parts: str | int) -> str:
    """A page's path from the site root: ``index``, ``pool`` (id, version), ``task`` (id),
    ``run`` (id) or ``submissions``."""
    if kind == "index":
        return "index.html"
    if kind == "pool":
        return f"pools/{quote(str(parts[0]), safe='')}/v{int(parts[1])}.html"
    if kind == "submissions":
        return "medbench/submissions.html"
    folder = {"task": "tasks", "run": "runs"}[kind]
    return f"{folder}/{quote(str(parts[0]), safe='')}.html"


def is_safe_id(value: str) -> bool:
    """``value`` is a page file name as it is (no quoting, no path separator)."""
    return SAFE_ID.fullmatch(value) is not None


def _pct(value: float | None) -> str:
    return EMPTY if value is None else f"{100 * value:.0f}%"


def _interval(row: LeaderboardRow) -> str | None:
    """The row's confidence interval of the task score, when the board carries one."""
    low, high = getattr(row, "ci_low", None), getattr(row, "ci_high", None)
    if low is None or high is None:
        return None
    return f"[{low:.4g}, {high:.4g}]"


def _no_interval(row: LeaderboardRow) -> str:
    """Why a row has no interval (empty when it has one or no reason is given)."""
    return str(getattr(row, "ci_reason", None) or "")


def _versus(row: LeaderboardRow) -> str | None:
    """The paired test against the next row: test, ``p`` raw and adjusted, when present."""
    p, adjusted = getattr(row, "p_value", None), getattr(row, "p_adjusted", None)
    if p is None and adjusted is None:
        return getattr(row, "test_reason", None)
    parts = [getattr(row, "test", None) or "",
             f"p={p:.3g}" if p is not None else "",
             f"adj. {adjusted:.3g}" if adjusted is not None else ""]
    return " · ".join(x for x in parts if x)


def _mark(row: LeaderboardRow) -> str:
    """▲ when the row is significantly better than the next, ▼ significantly worse."""
    if not getattr(row, "significant", None):
        return ""
    return "▼" if (getattr(row, "paired_difference", None) or 0.0) < 0 else "▲"


def board_columns(rows: list[LeaderboardRow]) -> dict[str, Any]:
    """Which optional columns a board shows: the ones its rows have."""
    return {
        "primary": rows[0].primary_metric or "task score",
        "interval": any(_interval(r) for r in rows),
        "versus": any(_versus(r) is not None or getattr(r, "significant", None) is not None
                      for r in rows),
        "overall": any(r.overall for r in rows),
        "stages": [s for s in STAGES if any(s in r.stages for r in rows)],
        "metrics": sorted({n for r in rows for n in r.metrics}
                          - {r.primary_metric for r in rows}),
    }


def _time(value: datetime | None) -> str:
    if value is None:
        return EMPTY
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


@cache
def environment() -> jinja2.Environment:
    """The template environment (templates shipped in the package)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("tasks_lib.web", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=num_text, stat=stat_text, pct=_pct, when=_time)
    env.globals.update(page_path=page_path, interval=_interval, versus=_versus, mark=_mark,
                       no_interval=_no_interval,
                       board_columns=board_columns, getattr=getattr, EMPTY=EMPTY)
    return env


def style() -> str:
    """The site's stylesheet."""
    return resources.files("tasks_lib.web").joinpath(f"templates/{STYLE}").read_text("utf-8")


def render(template: str, path: str, **context: Any) -> str:
    """Render ``template`` as the page at ``path`` (its links go up to the root from there)."""
    root = "../" * path.count("/")
    return environment().get_template(template).render(root=root, path=path, **context)
