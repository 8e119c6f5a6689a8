"""Where an imaging pool's files come from, when not rendered from a shipped card: a user's
folder (:mod:`tasks_lib.imaging.ingest`, its card from ``dataset.yaml``) or a public release
read in its own layout (:mod:`tasks_lib.imaging.releases`, its card from the release's
``dataset.json``, or the shipped public-release card the folder is a download of). The one place
that chooses between the two readers, above both (so neither imports the other's caller).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from evaluators.core import InputDataError, Tier, Track
from tasks_lib.imaging.dataset import (
    CONFIG,
    default_task_id,
    folder_digest,
    folder_layout,
    read_config,
    release_card,
)
from tasks_lib.imaging.releases import (
    check_release_track,
    read_release,
    release_index,
    release_inputs,
)
from tasks_lib.imaging.render import Rendered
from tasks_lib.sources import ImageFolderSource, PublicReleaseSource, ReleaseLayout
from tasks_lib.taskspec import IOContract, TaskSpec
from tasks_lib.tracks.base import KITS


def folder_card(root: Path, track: Track, task_id: str | None = None,
                release: ReleaseLayout | None = None) -> TaskSpec:
    """The card of a user's folder (``dataset.yaml`` + the track's defaults), or of a public
    release read in its ``release`` layout (its ``dataset.json``: labels, channels, licence).

    Raises:
        InputDataError: the folder is missing, ``dataset.yaml``/``dataset.json`` is invalid,
            the task id is malformed or belongs to a shipped card, or the track cannot be
            ingested (in that layout).
    """
    if not root.is_dir():
        raise InputDataError(str(root.name or root), "not a folder")
    layout = folder_layout(track)
    check_release_track(release, track)
    tid = task_id or default_task_id(root)
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", tid):
        raise InputDataError("--task-id", f"{tid!r}: lower-case letters, digits, '.', '_', '-'")
    shipped = [name for name in KITS.names() if tid in KITS.get(name).task_ids()]
    if shipped:
        raise InputDataError("--task-id", f"{tid!r} is a shipped {shipped[0]} task; "
                                          "choose another id")
    cfg, channels, inputs = read_config(root), [], layout.inputs
    if release is not None:
        index = release_index(root, release)
        cfg, channels = index.config, index.channels
        inputs = index.inputs or release_inputs(index.channels)
    source = ImageFolderSource(
        kind="image_folder", folder=root.name, digest=folder_digest(root),
        labels=cfg.labels if layout.label_maps else {},
        classes={} if layout.label_maps else cfg.classes, spacing=cfg.spacing, layout=release,
        channels=channels)
    try:
        return TaskSpec(
            task_id=tid, track=track, title=cfg.title or f"{root.name} ({track.value})",
            description=cfg.description or f"Images and labels of the folder {root.name!r}, "
            "ingested with medflows pool build imaging --from.",
            license=cfg.license, source=source,
            io=IOContract(inputs=inputs, outputs=layout.outputs),
            metrics=cfg.metrics or list(layout.metrics),
            tiers=[Tier.LITE, Tier.STANDARD, Tier.PRO])
    except ValidationError as exc:
        raise InputDataError(CONFIG, f"metrics: {exc.errors()[0]['msg']}") from None


def folder_task_card(root: Path, track: Track, task_id: str | None,
                     layout: ReleaseLayout | None = None) -> TaskSpec:
    """The card a folder is built with: the shipped public-release card ``task_id`` (the folder
    is the user's download of it), else the folder's own card (:func:`folder_card`)."""
    card = release_card(task_id, layout) if task_id else None
    if card is not None:
        if not root.is_dir():
            raise InputDataError(str(root.name or root), "not a folder")
        return card
    return folder_card(root, track, task_id, layout)


def ingest_folder(root: Path, track: Track, layout: str | None = None,
                  release: PublicReleaseSource | None = None) -> Rendered:
    """Read a user's folder into pool files with the reader of ``track``'s kit (see the module
    docstring), or a public release in its ``layout`` (:mod:`tasks_lib.imaging.releases`; with
    ``release``, the one a shipped card names); checks of grids, spacings and label sets are
    the validate step's (:mod:`tasks_lib.imaging.checks`)."""
    if layout is None:
        return folder_layout(track).read(root, read_config(root))
    check_release_track(layout, track)
    return read_release(root, layout, release)


def ingest_card(card: TaskSpec, root: Path) -> Rendered:
    """Ingest the folder a card is built from: a public release card's download, or a user's
    folder (in the layout its card records)."""
    src = card.source
    if isinstance(src, PublicReleaseSource):
        return ingest_folder(root, card.track, src.layout, src)
    return ingest_folder(root, card.track, src.layout if isinstance(src, ImageFolderSource)
                         else None)
