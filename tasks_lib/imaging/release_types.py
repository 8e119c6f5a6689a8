"""What every public-release reader returns (:mod:`tasks_lib.imaging.releases` registers them):
the release's index (:class:`Release`, its cases before any image is read) and the reader of a
layout (:class:`LayoutReader`: the track it holds, how to scan it, how to read it into pool
files). Shared by the segmentation layouts (``msd``, ``nnunetv2``, ``pants``, ``feta``) and the
2-D ones (``vindr-cxr``, ``slake``), each in its own ``release_*`` module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from evaluators.core import InputDataError, Track
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.ingest import CASE_ID
from tasks_lib.imaging.readers import Volume, stem
from tasks_lib.sources import PublicReleaseSource, ReleaseLayout

if TYPE_CHECKING:
    from tasks_lib.imaging.render import Rendered


class ReleaseCase(NamedTuple):
    """One labelled case of a release: its id, image files (one, or one per channel) and label
    (a label map, or the file that holds the case's boxes or answers), relative to the release
    folder."""

    case_id: str
    images: list[str]
    label: str


LabelMapReader = Callable[[Path, ReleaseCase], tuple[Volume, bytes]]
"""``(release folder, case) → (label map, NIfTI bytes to publish)`` for a layout whose label
map is not one file (PanTS: one binary mask per structure)."""


class Release(NamedTuple):
    """What a release's index files and folders say, before any volume is read."""

    layout: ReleaseLayout
    config: DatasetConfig
    channels: list[str]
    cases: list[ReleaseCase]
    inputs: str = ""
    """The card's input contract when it is not a NIfTI volume per case (2-D layouts)."""
    label_map: LabelMapReader | None = None
    """How a case's label map is made (None: read the one NIfTI file ``case.label``)."""
    order: Callable[[Path, Release], Iterable[ReleaseCase]] | None = None
    """The order a card's selection (``n_cases``, ``require_label``) tries the cases in, as
    AutoMedBench stages them (None: by label file name); consumed lazily, so it may refuse a
    candidate the download lacks only when the selection reaches it."""
    declared_in: str = "dataset.json"
    """The release file (or folder) that declares its labels (named when they are not the
    card's, or too few cases hold them)."""


def no_scored_names(config: DatasetConfig) -> dict[int, str]:
    """A text track's release scores no label values or box classes."""
    return {}


class LayoutReader(NamedTuple):
    """One release layout: the track its data is read into, its index, where its scored names
    come from (label values, box classes or none: what a card's ``labels`` must equal), and
    (2-D layouts) the reader of its pool files (None: volumes and label maps, read by
    ``releases.read_release``)."""

    track: Track
    scan: Callable[[Path], Release]
    scored: Callable[[DatasetConfig], dict[int, str]] = no_scored_names
    read: Callable[[Path, Release, PublicReleaseSource | None], Rendered] | None = None


def release_file(root: Path, rel: str, why: str) -> str:
    """``rel`` (relative to the release) checked to be a regular file, not a symlink; ``why``
    says what the release layout needs it for."""
    path = root / rel
    if path.is_symlink():
        raise InputDataError(rel, "a symlink; give the file itself (as for every folder)")
    if not path.is_file():
        raise InputDataError(rel, f"missing: {why}")
    return rel


def visible_dirs(folder: Path) -> list[Path]:
    """Sub-folders of ``folder`` in name order, hidden ones (``.DS_Store``, ``._x``) skipped."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()
                  and not p.name.startswith("."))


def case_id_of(name: str, rel: str) -> str:
    """The case id a file or folder name stands for (its name without NIfTI/image suffixes),
    checked to be usable as a file name."""
    cid = stem(name)
    if not CASE_ID.match(cid):
        raise InputDataError(rel, f"case id {cid!r} must be letters, digits, '.', '_' or '-' "
                                  "(it becomes a file name)")
    return cid


def chosen(release: Release, card: PublicReleaseSource | None) -> list[ReleaseCase]:
    """The release's cases in order, the first ``n_cases`` when a card sets it."""
    return release.cases[:card.n_cases] if card is not None and card.n_cases else release.cases
