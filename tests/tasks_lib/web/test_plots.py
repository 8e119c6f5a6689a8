"""Plot geometry: labels never overlap each other or a marker and stay in the plot (a crowded
cluster sends the rest to the legend); the Pareto panel draws its frontier; log ticks."""

from __future__ import annotations

import re
from itertools import combinations

from tasks_lib.web.layout import Box, Point, place_labels, text_box
from tasks_lib.web.plots import Dot, _log_ticks, scatter

FRAME = Box(50, 20, 500, 300)


def test_crowded_labels_never_overlap_and_the_rest_go_to_the_legend() -> None:
    points = [Point(270 + (i % 4) * 0.5, 160 + (i // 4) * 0.5, 4, f"model-{i:02d}/method")
              for i in range(40)]
    placed = place_labels(points, FRAME, size=10)
    boxes = [p.box for p in placed if p.box is not None]
    assert 5 < len(boxes) < 40  # some fit, the cluster cannot hold 40
    assert all(b.inside(FRAME) for b in boxes)
    assert not any(a.overlaps(b) for a, b in combinations(boxes, 2))
    markers = [Box(p.x - p.r, p.y - p.r, p.x + p.r, p.y + p.r) for p in points]
    assert not any(b.overlaps(m) for b in boxes for m in markers)
    assert [p.point for p in placed] == list(range(40))


def test_a_lone_point_is_labelled_beside_its_marker() -> None:
    (only,) = place_labels([Point(100, 100, 5, "gpt-4o/zero_shot")], FRAME)
    assert only.box is not None and not only.leader
    assert only.box.x0 >= 105 and abs((only.box.y0 + only.box.y1) / 2 - 100) < 15
    assert text_box(0, 10, "abcd", 10).x1 == 4 * 10 * 0.62


def test_pareto_panel_draws_the_frontier_and_every_label() -> None:
    dots = [Dot("cheap/good", 0.001, 0.8, 1.0), Dot("dear/better", 0.01, 0.9, 4.0),
            Dot("dear/worse", 0.02, 0.5, 2.0)]
    figure = scatter("panel", dots, "cost", "acc")
    assert figure.unlabelled == []
    assert figure.svg.count('class="dot front-dot"') == 2 and figure.svg.count('"dot"') == 1
    assert all(f">{d.label}</text>" in figure.svg for d in dots)
    radii = [float(r) for r in re.findall(r'<circle[^>]* r="([\d.]+)"', figure.svg)]
    assert max(radii) == 12.0  # the slowest (4 s/item) gets the largest marker


def test_log_ticks() -> None:
    assert _log_ticks(-4.2, -3.1) == [0.0001, 0.0002, 0.0005]  # 10**-4.2 ≈ 6.3e-5
    assert _log_ticks(-4.0, 0.0) == [0.0001, 0.001, 0.01, 0.1, 1.0]
