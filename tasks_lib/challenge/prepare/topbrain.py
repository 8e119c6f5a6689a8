"""TopBrain 2025 (two cards): ``TopBrain_Data_Release_Batches1n2_081425`` as on Zenodo record
16878417.

Layout (the release's README and ReX-MLE's ``topbrain-track*/prepare.py``):
``imagesTr_topbrain_{ct|mr}/topcow_<m>_<id>_0000.nii.gz`` and
``labelsTr_topbrain_{ct|mr}/topcow_<m>_<id>.nii.gz`` (the file names keep TopCoW's schema); the
label maps are CoWBenchmark/TopBrain_Eval_Metrics ``topbrain25_eval/constants.py``
``MUL_CLASS_LABEL_MAP_CT`` (1-40) and ``MUL_CLASS_LABEL_MAP_MR`` (1-42). Track 1 = CTA, track 2 =
MRA; the case id is ReX-MLE's ``image_id`` (``<id>``, e.g. ``001``).
"""

from __future__ import annotations

from tasks_lib.challenge.prepare.layout import ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader

TERMS = ("TopBrain_Data_Release_Batches1n2_081425.zip from Zenodo record 16878417 (linked from "
         "https://topbrain2025.grand-challenge.org/data/); the release's License.txt and the "
         "opendata.swiss terms of use: open use, the source must be cited, commercial use "
         "needs the data owners' permission")
_COMMON = ["BA", "R-P1P2", "L-P1P2", "R-ICA", "R-M1", "L-ICA", "L-M1", "R-Pcom", "L-Pcom",
           "Acom", "R-A1A2", "L-A1A2", "R-A3", "L-A3", "3rd-A2", "3rd-A3", "R-M2", "R-M3",
           "L-M2", "L-M3", "R-P3P4", "L-P3P4", "R-VA", "L-VA", "R-SCA", "L-SCA", "R-AICA",
           "L-AICA", "R-PICA", "L-PICA", "R-AChA", "L-AChA", "R-OA", "L-OA"]
LABELS = {
    "ct": dict(enumerate(["Background", *_COMMON, "VoG", "StS", "ICVs", "R-BVR", "L-BVR",
                          "SSS"])),
    "mr": dict(enumerate(["Background", *_COMMON, "R-ECA", "L-ECA", "R-STA", "L-STA",
                          "R-MaxA", "L-MaxA", "R-MMA", "L-MMA"])),
}
"""``MUL_CLASS_LABEL_MAP_CT`` / ``_MR`` of topbrain25_eval/constants.py."""


def _layout(m: str) -> ReleaseLayout:
    return ReleaseLayout(inputs={"image": f"imagesTr_topbrain_{m}/topcow_{m}_{{id}}_0000.nii.gz"},
                         label=f"labelsTr_topbrain_{m}/topcow_{m}_{{id}}.nii.gz",
                         label_values=LABELS[m], terms=TERMS)


READERS.add("topbrain", FamilyReader("topbrain", {"topbrain-track1": _layout("ct"),
                                                  "topbrain-track2": _layout("mr")}))
