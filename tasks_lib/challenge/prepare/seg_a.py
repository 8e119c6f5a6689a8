"""SEG.A. 2023 (one card): the AVT aortic vessel tree collection (figshare article 14806362).

Layout (ReX-MLE's ``seg_a/prepare.py``): per institution folder (``Dongyang/``, ``KiTS/``,
``Rider/``, nested as extracted) one folder per case holding ``<case>.nrrd`` (the CTA) and
``<case>.seg.nrrd`` (the aorta mask, 0/1); case ids such as ``D1``, ``K13``, ``R17``. Both are
written as NIfTI with the NRRD grid and spacing (:mod:`.itk_files`).
"""

from __future__ import annotations

from tasks_lib.challenge.prepare.layout import ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader

TERMS = ("the AVT collection from figshare (https://doi.org/10.6084/m9.figshare.14806362, "
         "linked from https://multicenteraorta.grand-challenge.org/); CC BY 4.0: cite Radl et "
         "al., Data in Brief 2022 (AVT: multicenter aortic vessel tree CTA dataset)")

READERS.add("seg_a", FamilyReader("seg_a", {"seg_a": ReleaseLayout(
    inputs={"image": "**/{id}.nrrd"}, label="**/{id}.seg.nrrd", id_pattern="[A-Za-z]+[0-9]+",
    label_values={0: "background", 1: "aorta"}, terms=TERMS)}))
