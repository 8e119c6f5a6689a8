"""ISLES'22 (one card): ``ISLES-2022.zip`` as on Zenodo record 7960856, in BIDS.

Layout (ezequieldlrosa/isles22 ``README.md`` and ReX-MLE's ``isles22/prepare.py``):
``rawdata/sub-strokecase<n>/ses-0001/[dwi/|anat/]sub-strokecase<n>_ses-0001_{dwi,adc,flair}
.nii.gz`` (the Zenodo release puts DWI/ADC under ``dwi/`` and ``_FLAIR`` under ``anat/``; the
README shows them flat with ``_flair``: both are read) and the lesion mask
``derivatives/sub-strokecase<n>/ses-0001/sub-strokecase<n>_ses-0001_msk.nii.gz`` (0 background,
1 infarct; DWI's grid). The case id is ReX-MLE's (``sub-strokecase<n>``); the pool's inputs are
``<case>_dwi.nii.gz``, ``<case>_adc.nii.gz``, ``<case>_flair.nii.gz``; the BIDS ``.json``
sidecars are not copied.
"""

from __future__ import annotations

from tasks_lib.challenge.prepare.layout import ReleaseLayout
from tasks_lib.challenge.prepare.readers import READERS, FamilyReader

TERMS = ("ISLES-2022.zip from Zenodo record 7960856 (https://zenodo.org/records/7960856, linked "
         "from https://isles22.grand-challenge.org/); CC BY 4.0: cite the ISLES'22 data paper "
         "(Hernandez Petzsche et al., Scientific Data 2022)")
_SES = "ses-0001/**/{id}_ses-0001"
LAYOUT = ReleaseLayout(
    inputs={"dwi": f"rawdata/{{id}}/{_SES}_dwi.nii.gz",
            "adc": f"rawdata/{{id}}/{_SES}_adc.nii.gz",
            "flair": f"rawdata/{{id}}/{_SES}_[fF][lL][aA][iI][rR].nii.gz"},
    label="derivatives/{id}/ses-0001/{id}_ses-0001_msk.nii.gz",
    label_values={0: "background", 1: "infarct"}, sidecars=[".json"], terms=TERMS)

READERS.add("isles22", FamilyReader("isles22", {"isles22": LAYOUT}))
