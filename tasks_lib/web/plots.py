"""Plots of the web pages as inline SVG (no JavaScript, text stays searchable and sharp):

* the cost–accuracy Pareto figure of MedAgentsBench (Fig. 5): one panel for the task score and
  one per stratum (QA: dataset), x = cost (log), y = score, marker area ∝ time per item, the
  frontier drawn, labels placed without overlap (:mod:`tasks_lib.web.layout`);
* per-stage bars (S1–S5) of research cells.

Everything is computed from leaderboard rows; nothing is read from a pool.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import NamedTuple

from evaluators.pareto import pareto_frontier
from tasks_lib.report.board import STAGES, LeaderboardRow
from tasks_lib.web.layout import Box, Point, place_labels

WIDTH, HEIGHT = 520.0, 340.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 14.0, 28.0, 42.0
FONT = 10.0


class Figure(NamedTuple):
    """One panel: its SVG and the points whose label did not fit (listed below it)."""

    title: str
    svg: str
    unlabelled: list[str]
    """``label: cost, score`` of points drawn without their label."""


class Dot(NamedTuple):
    """One row on a panel."""

    label: str
    cost: float
    score: float
    time_s: float | None


def _label(row: LeaderboardRow) -> str:
    return f"{row.model or row.agent_id}/{row.method}" if row.method else row.agent_id


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering ``[lo, hi]``."""
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step + 1e-9) + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values between ``10**lo`` and ``10**hi``: decades, or 1-2-5 steps when the range
    spans less than three decades."""
    steps = (1,) if hi - lo >= 3 else (1, 2, 5)
    return [m * 10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1) for m in steps
            if lo <= math.log10(m * 10.0 ** k) <= hi]


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _axes(x_lo: float, x_hi: float, y_lo: float, y_hi: float, x_title: str, y_title: str
          ) -> tuple[list[str], Box]:
    """Frame, grid, ticks and axis titles; the plot area."""
    frame = Box(LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM)
    parts = [f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{frame.x1 - LEFT}" '
             f'height="{frame.y1 - TOP}"/>']
    for value in _log_ticks(x_lo, x_hi):
        x = LEFT + (math.log10(value) - x_lo) / (x_hi - x_lo) * (frame.x1 - LEFT)
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" '
                     f'y2="{frame.y1}"/><text class="tick" x="{x:.1f}" '
                     f'y="{frame.y1 + 13}" text-anchor="middle">{_fmt(value)}</text>')
    for v in _ticks(y_lo, y_hi):
        y = frame.y1 - (v - y_lo) / (y_hi - y_lo) * (frame.y1 - TOP)
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{frame.x1}" '
                     f'y2="{y:.1f}"/><text class="tick" x="{LEFT - 4}" y="{y + 3:.1f}" '
                     f'text-anchor="end">{_fmt(v)}</text>')
    parts.append(f'<text class="axis" x="{(LEFT + frame.x1) / 2}" y="{HEIGHT - 8}" '
                 f'text-anchor="middle">{escape(x_title)}</text>')
    parts.append(f'<text class="axis" transform="translate(13 {(TOP + frame.y1) / 2}) '
                 f'rotate(-90)" text-anchor="middle">{escape(y_title)}</text>')
    return parts, frame


def _span(values: list[float], pad: float) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5 * (abs(lo) or 1), hi + 0.5 * (abs(hi) or 1)
    margin = (hi - lo) * pad
    return lo - margin, hi + margin


def scatter(title: str, dots: Sequence[Dot], x_title: str, y_title: str) -> Figure:
    """One cost–score panel: log cost, score, marker area ∝ time, the Pareto frontier."""
    front = pareto_frontier([d.cost for d in dots], [d.score for d in dots])
    x_lo, x_hi = _span([math.log10(d.cost) for d in dots], 0.08)
    y_lo, y_hi = _span([d.score for d in dots], 0.1)
    parts, frame = _axes(x_lo, x_hi, y_lo, y_hi, x_title, y_title)
    known = [d.time_s for d in dots if d.time_s is not None and d.time_s > 0]
    t_max = max(known, default=0.0)

    def xy(d: Dot) -> tuple[float, float]:
        x = LEFT + (math.log10(d.cost) - x_lo) / (x_hi - x_lo) * (frame.x1 - LEFT)
        y = frame.y1 - (d.score - y_lo) / (y_hi - y_lo) * (frame.y1 - TOP)
        return x, y

    def radius(d: Dot) -> float:
        if d.time_s is None or t_max <= 0:
            return 3.5
        return 3.0 + 9.0 * math.sqrt(max(d.time_s, 0.0) / t_max)

    on_front = sorted((xy(d) for d, f in zip(dots, front, strict=True) if f))
    if len(on_front) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in on_front)
        parts.append(f'<polyline class="front" points="{path}"/>')
    order = sorted(range(len(dots)), key=lambda i: (not front[i], -dots[i].score, dots[i].label))
    points = [Point(*xy(dots[i]), radius(dots[i]), dots[i].label) for i in order]
    for i, p in zip(order, points, strict=True):
        d = dots[i]
        tip = f"{d.label}: cost {_fmt(d.cost)} USD, score {_fmt(d.score)}" + (
            "" if d.time_s is None else f", {_fmt(d.time_s)} s/item")
        parts.append(f'<circle class="{"dot front-dot" if front[i] else "dot"}" '
                     f'cx="{p.x:.1f}" cy="{p.y:.1f}" r="{p.r:.1f}"><title>{escape(tip)}'
                     f'</title></circle>')
    unlabelled = []
    for placed in place_labels(points, frame, FONT):
        p, d = points[placed.point], dots[order[placed.point]]
        if placed.box is None:
            unlabelled.append(f"{d.label}: cost {_fmt(d.cost)} USD, score {_fmt(d.score)}")
            continue
        b = placed.box
        if placed.leader:
            parts.append(f'<line class="leader" x1="{p.x:.1f}" y1="{p.y:.1f}" '
                         f'x2="{min(max(p.x, b.x0), b.x1):.1f}" '
                         f'y2="{min(max(p.y, b.y0), b.y1):.1f}"/>')
        parts.append(f'<text class="label" x="{b.x0:.1f}" y="{b.y0 + FONT:.1f}">'
                     f'{escape(p.text)}</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {WIDTH:.0f} '
           f'{HEIGHT:.0f}" width="{WIDTH:.0f}" height="{HEIGHT:.0f}" role="img">'
           f'<title>{escape(title)}</title><text class="ptitle" x="{LEFT}" y="17">'
           f'{escape(title)}</text>{"".join(parts)}</svg>')
    return Figure(title, svg, unlabelled)


def pareto_figures(rows: list[LeaderboardRow]) -> tuple[list[Figure], list[str]]:
    """The cost–accuracy panels of one board (ranked rows with a known positive cost): the
    task score, then one per stratum; and the labels of rows left out (no known cost)."""
    ranked = [r for r in rows if r.ranked and r.task_score is not None]
    per_item = all(r.cost_per_item_usd for r in ranked if r.cost_per_run_usd)

    def cost(r: LeaderboardRow) -> float | None:
        value = r.cost_per_item_usd if per_item else r.cost_per_run_usd
        return value if value is not None and value > 0 else None

    shown = [r for r in ranked if cost(r) is not None]
    left_out = sorted(_label(r) for r in ranked if cost(r) is None)
    if not shown:
        return [], left_out
    x_title = f"cost per {'item' if per_item else 'run'} (USD, log scale)"
    time = {r.agent_id: r.mean_time_s if r.mean_time_s is not None else r.wall_time_s
            for r in shown}
    primary = shown[0].primary_metric or "task score"
    figures = [scatter(f"{primary} (all items)",
                       [Dot(_label(r), cost(r) or 0.0, r.task_score or 0.0, time[r.agent_id])
                        for r in shown], x_title, primary)]
    groups = sorted({g for r in shown for g in r.per_group})
    if len(groups) > 1:
        for g in groups:
            dots = [Dot(_label(r), cost(r) or 0.0, r.per_group[g], time[r.agent_id])
                    for r in shown if g in r.per_group]
            figures.append(scatter(f"{primary} — {g}", dots, x_title, primary))
    return figures, left_out


def stage_bars(rows: list[LeaderboardRow]) -> str | None:
    """Grouped bars of S1–S5 (0–1) per credited row that has stages; None when none has."""
    staged = [r for r in rows if r.stages]
    if not staged:
        return None
    band = 18.0 * len(STAGES) + 14
    height = TOP + band * len(staged) + 30
    width = WIDTH
    label_w = 190.0
    scale = width - label_w - RIGHT - 30
    parts = []
    for k, stage in enumerate(STAGES):
        parts.append(f'<rect class="bar s{k + 1}" x="{label_w + k * 52}" y="8" width="10" '
                     f'height="10"/><text class="tick" x="{label_w + 14 + k * 52}" y="17">'
                     f'{stage.upper()}</text>')
    for i, r in enumerate(staged):
        top = TOP + i * band
        parts.append(f'<text class="label" x="4" y="{top + band / 2:.1f}">'
                     f'{escape(_label(r)[:30])}</text>')
        for k, stage in enumerate(STAGES):
            stat = r.stages.get(stage)
            if stat is None:
                continue
            y = top + k * 18
            w = max(0.0, min(1.0, stat.mean)) * scale
            parts.append(f'<rect class="bar s{k + 1}" x="{label_w}" y="{y:.1f}" '
                         f'width="{w:.1f}" height="14"><title>{escape(_label(r))} '
                         f'{stage.upper()} = {_fmt(stat.mean)}</title></rect>'
                         f'<text class="tick" x="{label_w + w + 4:.1f}" y="{y + 11:.1f}">'
                         f'{_fmt(stat.mean)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {width:.0f} '
            f'{height:.0f}" width="{width:.0f}" height="{height:.0f}" role="img">'
            f'<title>Stage scores S1–S5</title>{"".join(parts)}</svg>')
