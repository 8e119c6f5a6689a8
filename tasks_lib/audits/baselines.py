"""The baseline submissions a kit writes (:meth:`~tasks_lib.tracks.base.TrackKit.baselines`):
the null agents of a pool (no submission, empty, constant answers), the pool's public sample
submission where it has one, and the perfect submission, each with the audit floor it must stay
at or below. The exploit audit scores them with the kit's own scorer
(:mod:`tasks_lib.audits.null_agents`); the floors are data (``datasets/audit/floors.yaml``, one
table per track, each floor with its source)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from tasks_lib.audits.pool import floors, pool_files
from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.storage import Storage

NONE, EMPTY, CONSTANT, SAMPLE, PERFECT = ("no submission", "empty baseline", "constant baseline",
                                          "public sample submission", "perfect")
"""Names of the baselines every kit writes where its track has them."""


class Baseline(Frozen):
    """One baseline submission written for a pool, with the floor the audit holds it to."""

    name: str = Field(description="What it is: 'no submission', \"constant 'A'\", 'public sample "
                                  "submission', 'perfect', …")
    folder: Path = Field(description="The submission folder written.")
    floor: float | None = Field(description="Largest audit value it may reach (blocks above); "
                                            "None: the perfect submission (ordering only).")
    source: str = Field(description="Where the floor comes from (floors.yaml's source).")
    warn_above: float | None = Field(
        default=None, description="Above this (and at most ``floor``) the audit warns instead "
                                  "of blocking (QA answer-position bias); None: no band.")


def floor_table(track: str) -> dict[str, dict[str, object]]:
    """The floors of ``track`` (``datasets/audit/floors.yaml``).

    Raises:
        InputDataError: the track has no floors (an audit without floors cannot judge a pool).
    """
    table = floors().get(track)
    if table is None:
        raise InputDataError("datasets/audit/floors.yaml", f"no floors for track {track}")
    return table


def floored(track: str, kind: str, name: str, folder: Path) -> Baseline:
    """A null-agent baseline held to the floor of ``kind`` in ``track``'s table."""
    spec = floor_table(track)[kind]
    return Baseline(name=name, folder=folder, floor=float(str(spec["floor"])),
                    source=" ".join(str(spec["source"]).split()))


def perfect(folder: Path) -> Baseline:
    """The perfect submission (the references in the submission layout): no floor; every null
    agent must score strictly below it."""
    return Baseline(name=PERFECT, folder=folder, floor=None,
                    source="the references written as a submission")


def no_submission(track: str, out: Path) -> Baseline:
    """An empty submission folder held to the track's ``none`` floor."""
    folder = out / "none"
    folder.mkdir(parents=True, exist_ok=True)
    return floored(track, "none", NONE, folder)


def copy_public_sample(pool_url: str, folder: Path) -> bool:
    """Copy the pool's ``public/sample_submission/`` into ``folder``; False when it has none."""
    root = Storage(pool_url)
    found = False
    for key in pool_files(root, "public/sample_submission"):
        rel = posixpath.relpath(key, "public/sample_submission")
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(root.read_bytes(key))
        found = True
    return found


def public_sample(track: str, pool_url: str, out: Path) -> list[Baseline]:
    """The pool's public sample submission as a null agent held to the ``sample`` floor (none
    when the pool publishes no sample)."""
    folder = out / "sample"
    folder.mkdir(parents=True, exist_ok=True)
    if not copy_public_sample(pool_url, folder):
        return []
    return [floored(track, "sample", SAMPLE, folder)]


def written(out: Path, name: str, write: Callable[[Path], None]) -> Path:
    """``out/name`` created and filled by ``write``."""
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    write(folder)
    return folder
