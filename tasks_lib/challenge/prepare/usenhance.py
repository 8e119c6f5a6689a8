"""USenhance 2023 (one card): the training release (``train_datasets``, 1,500 pairs).

Layout (ReX-MLE's ``usenhance/prepare.py``): ``train_datasets/<organ>/low_quality/<name>.png``
with its target ``train_datasets/<organ>/high_quality/<name>.png`` (organs: breast, carotid,
kidney, liver, thyroid). The case id is ReX-MLE's ``<organ>_<name>``. ReX-MLE splits the ids in
the order ``Path.iterdir()`` lists the organ folders (which differs between file systems);
here the organ folders are sorted, so the split is reproducible.
"""

from __future__ import annotations

from pathlib import Path

from tasks_lib.challenge.prepare.layout import ReleaseCase, ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader
from tasks_lib.errors import InputDataError
from tasks_lib.taskspec import TaskSpec

TERMS = ("the USenhance 2023 training set (train_datasets, from the organisers' download link on "
         "https://ultrasoundenhance2023.grand-challenge.org/); the terms stated there (research "
         "use; cite the challenge)")
LAYOUT = ReleaseLayout(inputs={"image": "train_datasets/<organ>/low_quality/<name>.png"},
                       label="train_datasets/<organ>/high_quality/<name>.png", terms=TERMS)


class USenhance(FamilyReader):
    """USenhance: low-quality inputs, high-quality targets, per organ folder."""

    def cases(self, card: TaskSpec, root: Path) -> list[ReleaseCase]:
        """Every low-/high-quality pair (a low-quality image without its target is refused)."""
        base = root / "train_datasets"
        if not base.is_dir():
            raise InputDataError(str(base), "folder not found; the official release layout "
                                            f"has {LAYOUT.inputs['image']}")
        cases = []
        for organ in sorted(p for p in base.iterdir() if p.is_dir()):
            low = organ / "low_quality"
            if not low.is_dir():
                raise InputDataError(str(low), "folder not found (every organ folder has "
                                               "low_quality/ and high_quality/)")
            for image in sorted(low.glob("*.png")):
                target = organ / "high_quality" / image.name
                if not target.is_file():
                    raise InputDataError(str(target), f"missing: the target of {image.name}")
                cases.append(ReleaseCase(case_id=f"{organ.name}_{image.stem}",
                                         inputs={"image": image}, label=target))
        if not cases:
            raise InputDataError(str(base), "no low_quality/*.png image")
        return cases


READERS.add("usenhance", USenhance("usenhance", {"usenhance": LAYOUT}))
