"""Public segmentation releases in their own layouts → the files of an imaging pool.

``medflows pool build imaging --from DIR --layout msd|nnunetv2`` (docs/imaging.md, "Bringing the
public releases") reads a downloaded release with this module instead of the folder convention;
everything after ingest (validate → de-identify → publish → audit) is the bring-your-own path's.

* ``msd`` — the Medical Segmentation Decathlon (Antonelli et al., Nat. Commun. 2022;
  medicaldecathlon.com): ``dataset.json`` with ``modality`` (channel index → name), ``labels``
  (value → name, ``"0"`` background), ``training`` (``[{"image": "./imagesTr/x.nii.gz",
  "label": "./labelsTr/x.nii.gz"}]``) and ``test`` (``imagesTs/``, unlabelled, not read); a
  multi-modal image is one 4-D NIfTI with the channels on its last axis (Task01_BrainTumour).
* ``nnunetv2`` — nnU-Net v2's raw dataset (MIC-DKFZ/nnUNet ``documentation/dataset_format.md``):
  ``dataset.json`` with ``channel_names``, ``labels`` (name → value), ``file_ending`` and
  ``numTraining``; ``imagesTr/<case>_<XXXX><file_ending>`` one 3-D file per channel,
  ``labelsTr/<case><file_ending>``.

Either way a case becomes one public image (a 4-D NIfTI with the channels last when there are
several, as MSD stores them) and one private label map. Every mistake is an
:class:`InputDataError` naming the file (relative to ``DIR``): structure here, grids, affines
and label values in the validate step (:mod:`tasks_lib.imaging.checks`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import NamedTuple, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluators.core import InputDataError, InvalidSubmissionError, Track
from tasks_lib.imaging.checks import AFFINE_TOL_MM
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.ingest import CASE_ID, integer_label_map, nifti_file, nifti_volume_bytes
from tasks_lib.imaging.readers import NIFTI_SUFFIXES, Volume, read_bytes, spacing_of, stem
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry, Visibility
from tasks_lib.sources import PublicReleaseSource, ReleaseLayout
from tasks_lib.submission_limits import DEFAULT_LIMITS, loads_json

DATASET_JSON = "dataset.json"
LAYOUTS: tuple[ReleaseLayout, ...] = ("msd", "nnunetv2")
CHANNEL_FILE = re.compile(r"^(?P<case>.+)_(?P<channel>\d{4})$")
"""nnU-Net's image file name without its ending: ``{CASE_IDENTIFIER}_{XXXX}``."""


class _ReleaseFile(BaseModel):
    """A release's own ``dataset.json``: its format is the release's, so keys medflows does not
    read (``name``, ``reference``, ``tensorImageSize``, ``numTest``, …) are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class MSDPair(_ReleaseFile):
    """One MSD training case."""

    image: str = Field(description="Image path, relative to the release (./imagesTr/…).")
    label: str = Field(description="Label map path, relative to the release (./labelsTr/…).")


class MSDDatasetJson(_ReleaseFile):
    """The MSD ``dataset.json`` keys medflows reads."""

    name: str = Field(default="", description="Dataset name.")
    description: str = Field(default="", description="What the data is.")
    licence: str = Field(default="", description="Licence (MSD's spelling).")
    modality: dict[str, str] = Field(description="Channel index → name.")
    labels: dict[str, str] = Field(description="Label value → name, '0' the background.")
    training: list[MSDPair] = Field(min_length=1, description="Labelled cases.")


class NNUNetDatasetJson(_ReleaseFile):
    """The nnU-Net v2 ``dataset.json`` keys medflows reads (its four required ones and more)."""

    name: str = Field(default="", description="Dataset name.")
    description: str = Field(default="", description="What the data is.")
    licence: str = Field(default="", description="Licence.")
    channel_names: dict[str, str] = Field(description="Channel index → name.")
    labels: dict[str, int | list[int]] = Field(description="Label name → value (or region).")
    file_ending: str = Field(description="File ending of images and label maps.")
    numTraining: int = Field(ge=1, description="Number of training cases.")
    dataset: dict[str, object] | None = Field(default=None, description="Explicit file lists "
                                              "(refused: medflows reads imagesTr/labelsTr).")


class ReleaseCase(NamedTuple):
    """One labelled case of a release: its id, image files (one, or one per channel) and label
    map, relative to the release folder."""

    case_id: str
    images: list[str]
    label: str


class Release(NamedTuple):
    """What a release's ``dataset.json`` and folders say, before any volume is read."""

    layout: ReleaseLayout
    config: DatasetConfig
    channels: list[str]
    cases: list[ReleaseCase]


M = TypeVar("M", bound=_ReleaseFile)


def _dataset_json(root: Path, model: type[M], layout: str) -> M:
    path = root / DATASET_JSON
    if not path.is_file():
        raise InputDataError(DATASET_JSON, f"missing: a {layout} release has its dataset.json at "
                                           "the top of the folder (docs/imaging.md)")
    try:
        raw = loads_json(read_bytes(path, DATASET_JSON), DATASET_JSON, DEFAULT_LIMITS)
        return model.model_validate(raw)
    except InvalidSubmissionError as exc:
        raise InputDataError(DATASET_JSON, str(exc).removeprefix(f"{DATASET_JSON}: ")) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise InputDataError(DATASET_JSON, f"{where}: {first['msg']}") from None


def _channels(names: dict[str, str], key: str) -> list[str]:
    """Channel names in index order; the keys must be 0, 1, … (as both layouts number them)."""
    if sorted(names, key=lambda k: (len(k), k)) != [str(i) for i in range(len(names))]:
        raise InputDataError(DATASET_JSON, f"{key}: keys must be \"0\", \"1\", … (got "
                                           f"{', '.join(sorted(names)) or 'none'})")
    return [names[str(i)] for i in range(len(names))]


def _msd_labels(labels: dict[str, str]) -> dict[int, str]:
    if not all(re.fullmatch(r"\d+", k) for k in labels) or "0" not in labels:
        raise InputDataError(DATASET_JSON, "labels: keys must be label values \"0\" (background)"
                                           f", \"1\", … (got {', '.join(labels)})")
    out = {int(k): v for k, v in labels.items() if int(k) != 0}
    if not out:
        raise InputDataError(DATASET_JSON, "labels: no label besides the background")
    return dict(sorted(out.items()))


def _nnunet_labels(labels: dict[str, int | list[int]]) -> dict[int, str]:
    regions = [name for name, v in labels.items() if isinstance(v, list)]
    if regions:
        raise InputDataError(DATASET_JSON, f"labels: {regions[0]!r} is a region (a list of "
                                           "values, region-based training); medflows scores "
                                           "label values, each with its own name")
    if "ignore" in labels:
        raise InputDataError(DATASET_JSON, "labels: an 'ignore' label marks unannotated voxels "
                                           "(partial labels); such a release cannot be scored")
    values = sorted(v for v in labels.values() if isinstance(v, int))
    if labels.get("background") != 0 or values != list(range(len(values))):
        raise InputDataError(DATASET_JSON, "labels: nnU-Net needs background 0 and consecutive "
                                           f"values 0, 1, 2, … (got {values})")
    return {v: name for name, v in sorted(labels.items(), key=lambda kv: kv[1])
            if isinstance(v, int) and v != 0}


def _listed(root: Path, ref: str, folder: str, where: str) -> str:
    """A path ``dataset.json`` lists (``./imagesTr/x.nii.gz``), checked to be a NIfTI file
    directly under ``folder``; returns it relative to the release."""
    parts = PurePosixPath(ref.removeprefix("./")).parts
    if len(parts) != 2 or parts[0] != folder or not parts[1].lower().endswith(NIFTI_SUFFIXES):
        raise InputDataError(DATASET_JSON, f"{where}: {ref!r} is not a NIfTI file in {folder}/")
    rel = "/".join(parts)
    path = root / rel
    if path.is_symlink():
        raise InputDataError(rel, "a symlink; give the file itself (as for every folder)")
    if not path.is_file():
        raise InputDataError(rel, f"missing: dataset.json lists it ({where}) but the release "
                                  "has no such file")
    return rel


def _case_id(name: str, rel: str) -> str:
    cid = stem(name)
    if not CASE_ID.match(cid):
        raise InputDataError(rel, f"case id {cid!r} must be letters, digits, '.', '_' or '-' "
                                  "(it becomes a file name)")
    return cid


def _config(meta: MSDDatasetJson | NNUNetDatasetJson, labels: dict[int, str],
            root: Path) -> DatasetConfig:
    return DatasetConfig(title=meta.name or root.name, description=meta.description or None,
                         license=meta.licence or "unspecified (see the release)", labels=labels)


def msd_release(root: Path) -> Release:
    """An MSD release's ``dataset.json`` and the files its ``training`` list names."""
    meta = _dataset_json(root, MSDDatasetJson, "msd")
    channels, labels = _channels(meta.modality, "modality"), _msd_labels(meta.labels)
    cases: list[ReleaseCase] = []
    seen: set[str] = set()
    for n, pair in enumerate(meta.training):
        image = _listed(root, pair.image, "imagesTr", f"training[{n}].image")
        label = _listed(root, pair.label, "labelsTr", f"training[{n}].label")
        cid = _case_id(PurePosixPath(image).name, image)
        if cid in seen or stem(PurePosixPath(label).name) != cid:
            raise InputDataError(DATASET_JSON, f"training[{n}]: case {cid!r} is listed twice or "
                                               f"its label is another case's ({label})")
        seen.add(cid)
        cases.append(ReleaseCase(cid, [image], label))
    return Release("msd", _config(meta, labels, root), channels, cases)


def _nnunet_images(root: Path, ending: str, n_channels: int) -> dict[str, dict[int, str]]:
    """Case identifier → channel index → image file, from ``imagesTr/`` names."""
    for folder in ("imagesTr", "labelsTr"):
        if not (root / folder).is_dir():
            raise InputDataError(f"{folder}/", "missing: an nnU-Net v2 raw dataset has imagesTr/ "
                                               "and labelsTr/")
    found: dict[str, dict[int, str]] = {}
    for p in sorted((root / "imagesTr").iterdir()):
        rel = f"imagesTr/{p.name}"
        if p.name.startswith(".") or not p.name.endswith(ending):
            continue
        if p.is_symlink() or not p.is_file():
            raise InputDataError(rel, "a symlink or folder; give the file itself")
        m = CHANNEL_FILE.match(p.name[:-len(ending)])
        if m is None or int(m["channel"]) >= n_channels:
            raise InputDataError(rel, "not {case}_{XXXX}" f"{ending} with XXXX a channel of "
                                      f"dataset.json channel_names (0000–{n_channels - 1:04d})")
        found.setdefault(_case_id(m["case"], rel), {})[int(m["channel"])] = rel
    return found


def nnunet_release(root: Path) -> Release:
    """An nnU-Net v2 raw dataset: ``dataset.json`` and ``imagesTr``/``labelsTr`` as nnU-Net's
    ``verify_dataset_integrity`` finds them (cases = identifiers of the image files)."""
    meta = _dataset_json(root, NNUNetDatasetJson, "nnunetv2")
    if meta.dataset is not None:
        raise InputDataError(DATASET_JSON, "dataset: explicit file lists are not read; put the "
                                           "files in imagesTr/ and labelsTr/")
    ending = meta.file_ending
    if ending.lower() not in NIFTI_SUFFIXES:
        raise InputDataError(DATASET_JSON, f"file_ending: {ending!r}; medflows reads NIfTI "
                                           "releases (.nii.gz, .nii)")
    channels, labels = _channels(meta.channel_names, "channel_names"), _nnunet_labels(meta.labels)
    found = _nnunet_images(root, ending, len(channels))
    cases = []
    for cid, by_channel in found.items():
        for k, name in enumerate(channels):
            if k not in by_channel:
                raise InputDataError(f"imagesTr/{cid}_{k:04d}{ending}",
                                     f"missing: channel {k} ({name}) of case {cid!r}")
        label = f"labelsTr/{cid}{ending}"
        if (root / label).is_symlink():
            raise InputDataError(label, "a symlink or folder; give the file itself")
        if not (root / label).is_file():
            raise InputDataError(label, f"missing: the label map of case {cid!r} "
                                        f"({by_channel[0]})")
        cases.append(ReleaseCase(cid, [by_channel[k] for k in range(len(channels))], label))
    strays = sorted(p.name for p in (root / "labelsTr").iterdir() if p.name.endswith(ending)
                    and p.name[:-len(ending)] not in found and not p.name.startswith("."))
    if strays:
        raise InputDataError(f"labelsTr/{strays[0]}", "a label map without images in imagesTr/")
    if len(cases) != meta.numTraining:
        raise InputDataError(DATASET_JSON, f"numTraining: {meta.numTraining}, but imagesTr/ holds "
                                           f"{len(cases)} cases")
    return Release("nnunetv2", _config(meta, labels, root), channels, cases)


READERS: dict[str, Callable[[Path], Release]] = {"msd": msd_release, "nnunetv2": nnunet_release}
RELEASE_TRACK = Track.SEGMENTATION
"""The track a release is read into when no card or ``--track`` names one."""


def as_layout(value: object) -> ReleaseLayout | None:
    """A ``--layout`` value as a release layout (None: the folder convention)."""
    if value is None:
        return None
    for layout in LAYOUTS:
        if value == layout:
            return layout
    raise InputDataError("--layout", f"{value!r}: layouts are {', '.join(LAYOUTS)}")


def release_index(root: Path, layout: str) -> Release:
    """The release in ``root`` read as ``layout`` (``dataset.json`` and file names only)."""
    as_layout(layout)
    return READERS[layout](root)


def release_inputs(channels: list[str]) -> str:
    """The card's input contract for a release with these channels."""
    if len(channels) == 1:
        return (f"public/inputs/<case_id>.nii.gz — the {channels[0]} volume; its affine gives "
                "the voxel spacing in mm")
    return (f"public/inputs/<case_id>.nii.gz — a 4-D NIfTI, {len(channels)} co-registered "
            f"channels on the last axis in this order: {', '.join(channels)}; its affine gives "
            "the voxel spacing in mm")


def _expect(release: Release, card: PublicReleaseSource) -> None:
    """The release is the one the card was written for: same labels and channels."""
    labels = release.config.labels
    if labels != card.labels:
        raise InputDataError(DATASET_JSON, f"labels {labels} are not the {card.release} labels "
                                           f"the card expects ({card.labels})")
    got = [c.lower() for c in release.channels]
    if got != [c.lower() for c in card.channels]:
        raise InputDataError(DATASET_JSON, f"channels {release.channels} are not the "
                                           f"{card.release} channels the card expects "
                                           f"({card.channels})")


def _image(root: Path, case: ReleaseCase, channels: list[str]) -> tuple[Volume, bytes]:
    """The case's image as one volume (channels last) and the bytes to publish."""
    if len(case.images) == 1:
        vol, data = nifti_file(root / case.images[0], case.images[0])
        want = 3 if len(channels) == 1 else 4
        if vol.array.ndim != want or (want == 4 and vol.array.shape[3] != len(channels)):
            what = ("a 3-D volume" if want == 3 else
                    f"a 4-D volume with {len(channels)} channels on the last axis")
            raise InputDataError(case.images[0], f"{what} is expected (dataset.json names "
                                                 f"{', '.join(channels)}), got shape "
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


def _label_map(root: Path, case: ReleaseCase) -> tuple[Volume, bytes]:
    vol, data = nifti_file(root / case.label, case.label)
    return vol, integer_label_map(vol, data, case.label)


def _selected(root: Path, release: Release, card: PublicReleaseSource | None
              ) -> list[tuple[ReleaseCase, bytes]]:
    """The cases a card takes (every labelled case without a card or a selection) with their
    label-map bytes: by label file name, those holding ``require_label``, the first
    ``n_cases`` (AutoMedBench's staging rule); label maps of skipped cases are read, images not."""
    if card is None or (card.n_cases is None and card.require_label is None):
        return [(c, _label_map(root, c)[1]) for c in release.cases]
    out: list[tuple[ReleaseCase, bytes]] = []
    for case in sorted(release.cases, key=lambda c: PurePosixPath(c.label).name):
        vol, data = _label_map(root, case)
        if card.require_label is None or bool(np.any(vol.array == card.require_label)):
            out.append((case, data))
        if len(out) == card.n_cases:
            return out
    if card.n_cases is not None or not out:
        holding = f" holding label {card.require_label}" if card.require_label else ""
        raise InputDataError(DATASET_JSON, f"{len(out)} training cases{holding}; the card "
                                           f"takes {card.n_cases or 1} (a partial download?)")
    return out


def read_release(root: Path, layout: str, card: PublicReleaseSource | None = None) -> Rendered:
    """Read a release into pool files (one image and one label map per labelled case); with
    ``card``, the release must declare the labels and channels that card expects, and the
    card's selection (``n_cases``, ``require_label``) picks the cases."""
    release = release_index(root, layout)
    if card is not None:
        _expect(release, card)
    cases, arts, sources = [], [], dict[str, str]()
    for case, ldata in _selected(root, release, card):
        vol, data = _image(root, case, release.channels)
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
                    declared_in=DATASET_JSON)
