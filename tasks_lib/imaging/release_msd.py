"""The segmentation releases with a ``dataset.json``: the Medical Segmentation Decathlon's and
nnU-Net v2's raw dataset (registered as ``--layout msd|nnunetv2`` in
:mod:`tasks_lib.imaging.releases`, which reads their volumes and label maps).

* ``msd`` — the Medical Segmentation Decathlon (Antonelli et al., Nat. Commun. 2022;
  medicaldecathlon.com): ``dataset.json`` with ``modality`` (channel index → name), ``labels``
  (value → name, ``"0"`` background), ``training`` (``[{"image": "./imagesTr/x.nii.gz",
  "label": "./labelsTr/x.nii.gz"}]``) and ``test`` (``imagesTs/``, unlabelled, not read); a
  multi-modal image is one 4-D NIfTI with the channels on its last axis (Task01_BrainTumour).
* ``nnunetv2`` — nnU-Net v2's raw dataset (MIC-DKFZ/nnUNet ``documentation/dataset_format.md``):
  ``dataset.json`` with ``channel_names``, ``labels`` (name → value), ``file_ending`` and
  ``numTraining``; ``imagesTr/<case>_<XXXX><file_ending>`` one 3-D file per channel,
  ``labelsTr/<case><file_ending>``.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluators.core import InputDataError, InvalidSubmissionError
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.readers import NIFTI_SUFFIXES, read_bytes, stem
from tasks_lib.imaging.release_types import Release, ReleaseCase, case_id_of
from tasks_lib.submission_limits import DEFAULT_LIMITS, loads_json

DATASET_JSON = "dataset.json"
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
        cid = case_id_of(PurePosixPath(image).name, image)
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
        found.setdefault(case_id_of(m["case"], rel), {})[int(m["channel"])] = rel
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
