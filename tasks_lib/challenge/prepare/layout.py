"""An official challenge release's layout as data, and the checks that find its cases.

A :class:`ReleaseLayout` names the files of one case with templates relative to the release
folder: ``{id}`` is the case id (the same in every template of a case), ``*`` any part of one
path segment, ``[fF]`` one of the characters and ``**/`` any number of folders, e.g. TopCoW's
``imagesTr/topcow_ct_{id}_0000.nii.gz`` with its label ``cow_seg_labelsTr/topcow_ct_{id}.nii.gz``.
:func:`find_cases` lists the cases of the first input template and checks the rest: a missing
folder or file, a file of the wrong extension, an image without its label all fail with an
:class:`~tasks_lib.errors.InputDataError` naming the file, before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError

_EXTENSIONS = (".nii.gz", ".seg.nrrd", ".nrrd", ".mha", ".png", ".tiff", ".tif", ".json",
               ".geojson", ".txt", ".yml", ".yaml", ".csv", ".bmp", ".jpg", ".nii")


class ReleaseLayout(Frozen):
    """Where one case's files are in the official release (templates relative to its root)."""

    inputs: dict[str, str] = Field(description="Input channel → template; the first lists "
                                   "the cases. One channel: the pool names the input "
                                   "``<case><ext>``, several: ``<case>_<channel><ext>``.")
    label: str = Field(description="Template of the case's label file (the answer).")
    label_values: dict[int, str] = Field(default_factory=dict, description="Label map of a "
                                         "mask label (value → name); a value outside it is "
                                         "refused. Empty: not a mask, or not checked.")
    id_pattern: str = Field(default="[^/]+?", description="Regular expression a case id "
                            "matches (e.g. SEG.A.'s ``[A-Z][0-9]+`` keeps ``D1.seg`` out).")
    sidecars: list[str] = Field(default_factory=list, description="Extensions of files "
                                "beside the inputs that are not read (BIDS ``.json``), so not "
                                "refused as a wrong extension.")
    terms: str = Field(description="Where the release is downloaded and its data terms.")


class ReleaseCase(Frozen):
    """One case found in a release."""

    case_id: str = Field(description="The case id (the ``{id}`` of the templates).")
    inputs: dict[str, Path] = Field(description="Input channel → file in the release.")
    label: Path = Field(description="The label file in the release.")


def extension(name: str) -> str:
    """The file's extension, multi-part ones (``.nii.gz``, ``.seg.nrrd``) whole."""
    lower = name.lower()
    return next((e for e in _EXTENSIONS if lower.endswith(e)), Path(name).suffix.lower())


def _regex(template: str, id_pattern: str = "[^/]+?",
           any_extension: bool = False) -> re.Pattern[str]:
    """The template as a regular expression over relative POSIX paths (``{id}`` captured
    once, then back-referenced)."""
    out, seen = [], False
    body = template[: -len(extension(template))] if any_extension else template
    for part in re.split(r"(\{id\}|\*\*/|\*|\[[^\]/]+\])", body):
        if part.startswith("[") and part.endswith("]"):
            out.append(part)
        elif part == "{id}":
            out.append("(?P=id)" if seen else f"(?P<id>{id_pattern})")
            seen = True
        elif part == "**/":
            out.append("(?:[^/]+/)*")
        elif part == "*":
            out.append("[^/]*")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out) + (r"\.[^/]+" if any_extension else ""))


def _wild(pattern: str) -> bool:
    return "*" in pattern or "[" in pattern


def _fixed_dir(template: str) -> str:
    """The template's leading folders without any wildcard or id ('' = the release root)."""
    parts = template.split("/")[:-1]
    fixed = []
    for part in parts:
        if "{id}" in part or _wild(part):
            break
        fixed.append(part)
    return "/".join(fixed)


def _check_folder(root: Path, template: str) -> None:
    folder = root / _fixed_dir(template)
    if not folder.is_dir():
        raise InputDataError(str(folder), f"folder not found; the official release layout has "
                                          f"{template}")


def _wrong_extensions(root: Path, template: str, layout: ReleaseLayout) -> None:
    """Refuse a file that fits the template except for its extension, when it is no other file
    of the layout and no file of the right extension is beside it (a sidecar such as BIDS's
    ``.json`` is not refused)."""
    exact = [_regex(t, layout.id_pattern) for t in [*layout.inputs.values(), layout.label]]
    loose = _regex(template, layout.id_pattern, any_extension=True)
    want = extension(template)
    folder = root / _fixed_dir(template)
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(root).as_posix()
        sibling = path.with_name(path.name[: len(path.name) - len(extension(path.name))] + want)
        if path.is_file() and loose.fullmatch(rel) and not any(e.fullmatch(rel) for e in exact) \
                and not sibling.is_file() and extension(path.name) not in layout.sidecars:
            raise InputDataError(str(path), f"wrong extension {extension(path.name)!r}: the "
                                            f"official release names it {template} "
                                            f"({extension(template)})")


def _one(root: Path, template: str, case_id: str, what: str) -> Path:
    """The single file of ``template`` for ``case_id`` (an error names the expected path)."""
    pattern = template.replace("{id}", case_id)
    if not _wild(pattern):
        path = root / pattern
        if not path.is_file():
            raise InputDataError(str(path), f"missing: the {what} of case {case_id} (official "
                                            f"layout: {template})")
        return path
    found = sorted(p for p in root.glob(pattern) if p.is_file())
    if len(found) != 1:
        raise InputDataError(str(root / pattern), f"{len(found)} files for the {what} of case "
                                                  f"{case_id}; the layout has exactly one")
    return found[0]


def find_cases(root: Path, layout: ReleaseLayout) -> list[ReleaseCase]:
    """Every case of the release under ``root``, sorted by case id (the order ReX-MLE splits)."""
    if not root.is_dir():
        raise InputDataError(str(root), "release folder not found")
    templates = [*layout.inputs.values(), layout.label]
    for template in templates:
        _check_folder(root, template)
        _wrong_extensions(root, template, layout)
    (first_channel, first), *_ = layout.inputs.items()
    pattern = _regex(first, layout.id_pattern)
    ids = sorted({m.group("id") for p in root.glob(re.sub(r"\{id\}", "*", first))
                  if p.is_file() and (m := pattern.fullmatch(p.relative_to(root).as_posix()))})
    if not ids:
        raise InputDataError(str(root / _fixed_dir(first)),
                             f"no {first_channel} file named as the official release ({first})")
    return [ReleaseCase(case_id=i,
                        inputs={ch: _one(root, t, i, f"{ch} input")
                                for ch, t in layout.inputs.items()},
                        label=_one(root, layout.label, i, "label"))
            for i in ids]


def check_label_values(path: Path, array: np.ndarray, layout: ReleaseLayout) -> None:
    """Refuse a mask value outside the layout's label map (naming the file and the values)."""
    if not layout.label_values:
        return
    values = [int(v) if float(v).is_integer() else float(v) for v in np.unique(array)]
    bad = [v for v in values if v not in layout.label_values]
    if bad:
        known = ", ".join(f"{k} {v}" for k, v in sorted(layout.label_values.items()))
        raise InputDataError(str(path), f"label value(s) {bad[:10]} outside the label map "
                                        f"({known})")


def rexmle_split(case_ids: list[str], source: Path) -> tuple[list[str], list[str]]:
    """ReX-MLE's split of the sorted cases: scikit-learn ``train_test_split(test_size=0.2,
    random_state=42, shuffle=True)`` → (train ids, test ids), the same ids ReX-MLE's
    ``prepare.py`` holds out."""
    from sklearn.model_selection import train_test_split

    if len(case_ids) < 2:
        raise InputDataError(str(source), f"{len(case_ids)} case(s): a train/test split needs "
                                          "at least 2")
    train, test = train_test_split(sorted(case_ids), test_size=0.2, random_state=42,
                                   shuffle=True)
    return list(train), list(test)
