"""Public releases in their own layouts → the files of an imaging pool.

``medflows pool build imaging --from DIR --layout L`` (docs/imaging.md, "Bringing the public
releases") reads a downloaded release with the reader of its layout instead of the folder
convention; everything after ingest (validate → de-identify → publish → audit) is the
bring-your-own path's. The layouts (:data:`READERS`), each in its own module:

* segmentation — ``msd`` and ``nnunetv2`` (:mod:`~tasks_lib.imaging.release_msd`, a
  ``dataset.json``), ``pants`` (:mod:`~tasks_lib.imaging.release_pants`, one mask per
  structure) and ``feta`` (:mod:`~tasks_lib.imaging.release_feta`, BIDS): one public image per
  case (a 4-D NIfTI with the channels last when there are several, as MSD stores them) and one
  private label map, read here;
* detection — ``vindr-cxr`` (:mod:`~tasks_lib.imaging.release_vindr`, DICOM + box CSV);
* vqa — ``slake`` (:mod:`~tasks_lib.imaging.release_slake`, JSON + JPEG) and ``vqa-rad``
  (:mod:`~tasks_lib.imaging.release_vqarad`, OSF's JSON + JPEG);
* report_generation — ``mimic-cxr`` (:mod:`~tasks_lib.imaging.release_mimic`, JPEG + reports).

Every mistake is an :class:`InputDataError` naming the file (relative to ``DIR``): structure
here and in the layout modules, grids, affines, label values and boxes in the validate step
(:mod:`tasks_lib.imaging.checks`).
"""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path, PurePosixPath

import numpy as np

from evaluators.core import InputDataError, Track
from tasks_lib.imaging.checks import AFFINE_TOL_MM
from tasks_lib.imaging.ingest import integer_label_map, nifti_file, nifti_volume_bytes
from tasks_lib.imaging.readers import Volume, spacing_of
from tasks_lib.imaging.release_feta import feta_release
from tasks_lib.imaging.release_mimic import mimic_release, read_mimic
from tasks_lib.imaging.release_msd import msd_release, nnunet_release
from tasks_lib.imaging.release_pants import pants_release
from tasks_lib.imaging.release_slake import read_slake, slake_release
from tasks_lib.imaging.release_types import LayoutReader, Release, ReleaseCase
from tasks_lib.imaging.release_vindr import read_vindr, vindr_release
from tasks_lib.imaging.release_vqarad import read_vqarad, vqarad_release
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry, Visibility
from tasks_lib.sources import PublicReleaseSource, ReleaseLayout

__all__ = [
    "READERS",
    "Release",
    "ReleaseCase",
    "check_release_track",
    "msd_release",
    "nnunet_release",
    "read_release",
    "release_index",
    "release_inputs",
    "release_track",
]

SEG = Track.SEGMENTATION
_labels, _classes = attrgetter("labels"), attrgetter("classes")
READERS: dict[ReleaseLayout, LayoutReader] = {
    "msd": LayoutReader(SEG, msd_release, _labels),
    "nnunetv2": LayoutReader(SEG, nnunet_release, _labels),
    "pants": LayoutReader(SEG, pants_release, _labels),
    "feta": LayoutReader(SEG, feta_release, _labels),
    "vindr-cxr": LayoutReader(Track.DETECTION, vindr_release, _classes, read_vindr),
    "slake": LayoutReader(Track.VQA, slake_release, read=read_slake),
    "vqa-rad": LayoutReader(Track.VQA, vqarad_release, read=read_vqarad),
    "mimic-cxr": LayoutReader(Track.REPORT_GENERATION, mimic_release, read=read_mimic),
}
LAYOUTS: tuple[ReleaseLayout, ...] = tuple(READERS)
RELEASE_TRACK = SEG
"""The track a release is read into when no card, ``--track`` or layout names one."""


def release_track(layout: str | None) -> Track:
    """The track a layout's data is read into (segmentation without a layout)."""
    found = as_layout(layout)
    return READERS[found].track if found is not None else RELEASE_TRACK


def check_release_track(layout: str | None, track: Track) -> None:
    """Refuse reading a release layout into another track than the one its data is for."""
    if layout is not None and release_track(layout) is not track:
        raise InputDataError("--layout", f"a {layout} release holds "
                                         f"{release_track(layout).value} data, not "
                                         f"{track.value}")


def as_layout(value: object) -> ReleaseLayout | None:
    """A ``--layout`` value as a release layout (None: the folder convention)."""
    if value is None:
        return None
    for layout in LAYOUTS:
        if value == layout:
            return layout
    raise InputDataError("--layout", f"{value!r}: layouts are {', '.join(LAYOUTS)}")


def release_index(root: Path, layout: str) -> Release:
    """The release in ``root`` read as ``layout`` (its index files and file names only)."""
    found = as_layout(layout)
    assert found is not None
    return READERS[found].scan(root)


def release_inputs(channels: list[str]) -> str:
    """The card's input contract for a release with these channels."""
    if len(channels) == 1:
        return (f"public/inputs/<case_id>.nii.gz — the {channels[0]} volume; its affine gives "
                "the voxel spacing in mm")
    return (f"public/inputs/<case_id>.nii.gz — a 4-D NIfTI, {len(channels)} co-registered "
            f"channels on the last axis in this order: {', '.join(channels)}; its affine gives "
            "the voxel spacing in mm")


def declared(release: Release) -> dict[int, str]:
    """The release's scored names, as its layout's reader says where they come from."""
    return READERS[release.layout].scored(release.config)


def expect(release: Release, card: PublicReleaseSource) -> None:
    """The release is the one the card was written for: same labels (or classes) and
    channels."""
    labels, where = declared(release), release.declared_in
    if labels != card.labels:
        raise InputDataError(where, f"labels {labels} are not the {card.release} labels "
                                    f"the card expects ({card.labels})")
    got = [c.lower() for c in release.channels]
    if got != [c.lower() for c in card.channels]:
        raise InputDataError(where, f"channels {release.channels} are not the "
                                           f"{card.release} channels the card expects "
                                           f"({card.channels})")


def _image(root: Path, case: ReleaseCase, release: Release) -> tuple[Volume, bytes]:
    """The case's image as one volume (channels last) and the bytes to publish."""
    channels = release.channels
    if len(case.images) == 1:
        vol, data = nifti_file(root / case.images[0], case.images[0])
        want = 3 if len(channels) == 1 else 4
        if vol.array.ndim != want or (want == 4 and vol.array.shape[3] != len(channels)):
            what = ("a 3-D volume" if want == 3 else
                    f"a 4-D volume with {len(channels)} channels on the last axis")
            raise InputDataError(case.images[0], f"{what} is expected ({release.declared_in} "
                                                 f"names {', '.join(channels)}), got shape "
                                                 f"{list(vol.array.shape)}")
        return vol, data
    vols = [nifti_file(root / rel, rel)[0] for rel in case.images]
    for rel, vol in zip(case.images, vols, strict=True):
        if vol.array.ndim != 3 or vol.array.shape != vols[0].array.shape or not np.allclose(
                vol.affine, vols[0].affine, atol=AFFINE_TOL_MM, rtol=0):
            raise InputDataError(rel, f"channel grid {list(vol.array.shape)} or affine differs "
                                      f"from {case.images[0]} {list(vols[0].array.shape)} "
                                      "(channels must be co-registered 3-D volumes)")
    stacked = Volume(np.stack([v.array for v in vols], axis=-1), vols[0].affine)
    return stacked, nifti_volume_bytes(stacked)


def _label_map(root: Path, release: Release, case: ReleaseCase) -> tuple[Volume, bytes]:
    if release.label_map is not None:
        return release.label_map(root, case)
    vol, data = nifti_file(root / case.label, case.label)
    return vol, integer_label_map(vol, data, case.label)


def _selected(root: Path, release: Release, card: PublicReleaseSource | None
              ) -> list[tuple[ReleaseCase, bytes]]:
    """The cases a card takes (every labelled case without a card or a selection) with their
    label-map bytes: in the release's order (by label file name unless the layout gives
    AutoMedBench's), those holding ``require_label``, the first ``n_cases`` (AutoMedBench's
    staging rule); label maps of skipped cases are read, images not."""
    if card is None or (card.n_cases is None and card.require_label is None):
        return [(c, _label_map(root, release, c)[1]) for c in release.cases]
    out: list[tuple[ReleaseCase, bytes]] = []
    order = (release.order(root, release) if release.order is not None else
             sorted(release.cases, key=lambda c: (PurePosixPath(c.label).name, c.case_id)))
    for case in order:
        vol, data = _label_map(root, release, case)
        if card.require_label is None or bool(np.any(vol.array == card.require_label)):
            out.append((case, data))
        if len(out) == card.n_cases:
            return out
    if card.n_cases is not None or not out:
        holding = f" holding label {card.require_label}" if card.require_label else ""
        raise InputDataError(release.declared_in, f"{len(out)} training cases{holding}; the "
                             f"card takes {card.n_cases or 1} (a partial download?)")
    return out


def read_release(root: Path, layout: str, card: PublicReleaseSource | None = None) -> Rendered:
    """Read a release into pool files (segmentation: one image and one label map per labelled
    case; 2-D layouts: their module's reader); with ``card``, the release must declare the
    labels and channels that card expects, and the card's selection (``n_cases``,
    ``require_label``) picks the cases."""
    release = release_index(root, layout)
    if card is not None:
        expect(release, card)
    reader = READERS[release.layout].read
    if reader is not None:
        return reader(root, release, card)
    cases, arts, sources = [], [], dict[str, str]()
    for case, ldata in _selected(root, release, card):
        vol, data = _image(root, case, release)
        img_key, ref_key = f"inputs/{case.case_id}.nii.gz", f"references/{case.case_id}.nii.gz"
        arts += [Artifact(key=img_key, visibility=Visibility.PUBLIC, data=data),
                 Artifact(key=ref_key, visibility=Visibility.PRIVATE, data=ldata)]
        sources |= {img_key: case.images[0], ref_key: case.label}
        cases.append(CaseEntry(case_id=case.case_id, output=f"{case.case_id}.nii.gz",
                               reference=ref_key, shape=list(vol.array.shape[:3]),
                               spacing=spacing_of(vol.affine), origin=", ".join(case.images),
                               image=img_key))
    labels = release.config.labels
    return Rendered(cases, arts, sorted(labels), dict(labels), sources, None,
                    declared_in=release.declared_in)
