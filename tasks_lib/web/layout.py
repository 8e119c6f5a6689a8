"""Label placement for scatter plots: every label is either placed where it overlaps no other
label, no marker and stays inside the plot, or it is left off the plot and listed in a legend
below it (by number). So labels never overlap, however dense the points (what the papers'
cost–accuracy figures get wrong when they annotate every point in place).

Pure geometry on estimated text boxes: labels are drawn in a monospace font, whose advance
width is a fixed fraction of the font size (:data:`CHAR_WIDTH`), so the estimate bounds the drawn
text.
"""

from __future__ import annotations

import math
from typing import NamedTuple

CHAR_WIDTH = 0.62
"""Advance width of one monospace character, in font sizes (DejaVu Sans Mono: 0.602)."""
LINE_HEIGHT = 1.25
"""Height of one label line, in font sizes."""


class Box(NamedTuple):
    """An axis-aligned rectangle in SVG coordinates (y grows downwards)."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Box) -> bool:
        """The two boxes share interior area (touching edges do not count)."""
        return (self.x0 < other.x1 and other.x0 < self.x1
                and self.y0 < other.y1 and other.y0 < self.y1)

    def inside(self, frame: Box) -> bool:
        """This box lies within ``frame``."""
        return (self.x0 >= frame.x0 and self.y0 >= frame.y0
                and self.x1 <= frame.x1 and self.y1 <= frame.y1)


class Point(NamedTuple):
    """A marker to label: centre and radius (SVG units) and its label text."""

    x: float
    y: float
    r: float
    text: str


class Placed(NamedTuple):
    """Where a label went: its text box and anchor (``None``: listed in the legend)."""

    point: int
    """Position of the point in the input."""
    box: Box | None
    leader: bool
    """A line joins label and marker (the label sits away from its marker)."""


def text_box(x: float, y_baseline: float, text: str, size: float) -> Box:
    """The box of ``text`` drawn left-aligned at ``x`` with its baseline at ``y_baseline``."""
    width = len(text) * size * CHAR_WIDTH
    return Box(x, y_baseline - size, x + width, y_baseline + (LINE_HEIGHT - 1) * size)


def _candidates(p: Point, width: float, size: float, rings: int) -> list[tuple[Box, bool]]:
    """Boxes around the marker, nearest first: 8 positions next to it, then rings further
    out at 16 angles each (those need a leader line)."""
    out: list[tuple[Box, bool]] = []
    height = LINE_HEIGHT * size
    for ring in range(rings + 1):
        gap = p.r + 2 + ring * height * 1.2
        steps = 8 if ring == 0 else 16
        for k in range(steps):
            angle = 2 * math.pi * k / steps
            dx, dy = math.cos(angle), -math.sin(angle)
            # anchor the box so its nearest corner/edge sits ``gap`` from the centre
            left = p.x + dx * gap - (0 if dx > 0.3 else width if dx < -0.3 else width / 2)
            top = p.y + dy * gap - (0 if dy > 0.3 else height if dy < -0.3 else height / 2)
            out.append((Box(left, top, left + width, top + height), ring > 0))
    return out


def place_labels(points: list[Point], frame: Box, size: float = 10.0,
                 rings: int = 4) -> list[Placed]:
    """Place each point's label without overlaps.

    Points are labelled in order (callers put the most important first: the frontier). A label
    is tried next to its marker, then on rings further out with a leader line; the first
    position inside ``frame`` that overlaps no marker and no placed label wins. A label with no
    such position is not drawn (``box`` None): the caller lists it in a legend.

    Args:
        points: Markers with their labels, in priority order.
        frame: The plot area labels must stay in.
        size: Font size (SVG units).
        rings: How many rings beyond the first positions to try.
    """
    markers = [Box(p.x - p.r, p.y - p.r, p.x + p.r, p.y + p.r) for p in points]
    taken: list[Box] = []
    placed: list[Placed] = []
    for i, p in enumerate(points):
        width = len(p.text) * size * CHAR_WIDTH
        spot = next(((box, leader) for box, leader in _candidates(p, width, size, rings)
                     if box.inside(frame)
                     and not any(box.overlaps(m) for m in markers)
                     and not any(box.overlaps(t) for t in taken)), None)
        if spot is None:
            placed.append(Placed(i, None, False))
            continue
        taken.append(spot[0])
        placed.append(Placed(i, spot[0], spot[1]))
    return placed
