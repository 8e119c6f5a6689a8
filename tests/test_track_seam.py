"""The track seam (ARCHITECTURE §5): outside the kits and the tracks' own packages nothing
branches on a track's name; the shared pipeline asks the run's or card's kit."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = ("tasks_lib/tracks/", "tasks_lib/medbench/", "tasks_lib/rwe/", "tasks_lib/qa/",
       "tasks_lib/challenge/", "tasks_lib/imaging/")
"""Where a track's name may decide: its kit and its own package."""
BRANCH = re.compile(r"(==|!=|\bis|\bin)\s*\(?\s*Track\.[A-Z_]+|Track\.[A-Z_]+(\.value)?\s*(==|!=)")


def test_shared_code_does_not_branch_on_a_track_name() -> None:
    found = []
    for package in ("tasks_lib", "flows", "evaluators"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(OWN):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if BRANCH.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "ask the kit (tasks_lib.tracks.base.TrackKit) instead:\n" + "\n".join(found)


def test_the_pattern_sees_a_branch() -> None:
    assert BRANCH.search("    if items[0].run.track == Track.MEDBENCH.value:")
    assert BRANCH.search("if Track.RWE.value != run.track:")
    assert not BRANCH.search("lambda: [Track.QA.value]")
