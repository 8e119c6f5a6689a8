"""MIMIC-CXR (Johnson et al., Sci. Data 6:317, 2019; PhysioNet ``mimic-cxr-jpg`` 2.x images and
``mimic-cxr`` 2.x free-text reports) in its own layout, for AutoMedBench's
``mimic-cxr-report-task`` (``eval_report_gen``)::

    files/p10/p10046166/s50051329/<dicom_id>.jpg    MIMIC-CXR-JPG: the study's views
    files/p10/p10046166/s50051329.txt               mimic-cxr-reports.zip unzipped into the
                                                    same folder: the study's report
    mimic-cxr-2.0.0-*.csv.gz                        (split, metadata, labels: not read)

The cases are AutoMedBench's 10-study pilot split (``eval_report_gen/splits/
pilot_10_studies.txt``) in its order, with AutoMedBench's neutral ids ``CXR0001`` … ``CXR0010``
(no MIMIC identifier reaches the public view). The reference is the report's FINDINGS section,
as AutoMedBench's staging extracts it (an upper-case ``HEADER:`` starts a section; a report
without a non-empty FINDINGS section is refused). One image per case: the study's first view
by file name (AutoMedBench hands the agent every view).
"""

from __future__ import annotations

import re
from pathlib import Path

from evaluators.core import InputDataError
from tasks_lib.imaging import codecs
from tasks_lib.imaging.dataset import DatasetConfig
from tasks_lib.imaging.readers import read_bytes
from tasks_lib.imaging.release_slake import greyscale
from tasks_lib.imaging.release_types import Release, ReleaseCase, chosen, release_file
from tasks_lib.imaging.render import Rendered
from tasks_lib.imaging.types import Artifact, CaseEntry, Visibility
from tasks_lib.sources import PublicReleaseSource

PILOT_STUDIES = (
    "p10_p10046166_s50051329", "p10_p10046166_s53492798", "p10_p10046166_s57379357",
    "p10_p10046166_s57977208", "p10_p10268877_s50042142", "p10_p10268877_s50239281",
    "p10_p10268877_s51513702", "p10_p10268877_s51715880", "p10_p10268877_s52199665",
    "p10_p10268877_s53452091")
"""AutoMedBench's pilot split (``eval_report_gen/splits/pilot_10_studies.txt``, MIT licence):
``<group>_<subject>_<study>`` of MIMIC-CXR's ``files/<group>/<subject>/<study>``."""
LICENSE = ("PhysioNet Credentialed Health Data License 1.5.0 (MIMIC-CXR, MIMIC-CXR-JPG; "
           "credentialed access, data use agreement, CITI training)")
INPUTS = "public/images/<case_id>.png — the study's first chest X-ray view, 8-bit greyscale"
HEADER = re.compile(r"^[ \t]*([A-Z][A-Z /(),-]{1,40}?)[ \t]*:", re.MULTILINE)
"""A report section header: an upper-case name and a colon at the start of a line."""
FINDINGS_NAMES = {"finding", "findings", "reference findings", "chest, two views"}
"""Header names that open the FINDINGS section (AutoMedBench's aliases of it)."""


def findings(report: str) -> str | None:
    """The text of the report's first non-empty FINDINGS section (None: there is none); a
    section runs from its header to the next header."""
    heads = list(HEADER.finditer(report))
    for n, head in enumerate(heads):
        end = heads[n + 1].start() if n + 1 < len(heads) else len(report)
        text = report[head.end():end].strip()
        if head.group(1).strip().lower() in FINDINGS_NAMES and text:
            return text
    return None


def _study(study: str) -> str:
    group, subject, sid = study.split("_")
    return f"files/{group}/{subject}/{sid}"


def mimic_release(root: Path) -> Release:
    """The pilot studies, each with its views and its report checked to be there."""
    if not (root / "files").is_dir():
        raise InputDataError("files/", "missing: a MIMIC-CXR-JPG download has files/pXX/"
                                       "pXXXXXXXX/sXXXXXXXX/*.jpg (unzip mimic-cxr-reports.zip "
                                       "into the same folder for the .txt reports)")
    cases = []
    for n, study in enumerate(PILOT_STUDIES, start=1):
        folder = _study(study)
        if not (root / folder).is_dir():
            raise InputDataError(f"{folder}/", f"missing: study {study} of AutoMedBench's "
                                               "pilot split")
        views = sorted(p.name for p in (root / folder).iterdir()
                       if p.name.lower().endswith(".jpg") and not p.name.startswith("."))
        if not views:
            raise InputDataError(f"{folder}/", "no .jpg view of the study")
        image = release_file(root, f"{folder}/{views[0]}", "the study's first view")
        report = release_file(root, f"{folder}.txt", f"the report of study {study} "
                                                     "(mimic-cxr-reports.zip)")
        cases.append(ReleaseCase(f"CXR{n:04d}", [image], report))
    config = DatasetConfig(title="MIMIC-CXR (AutoMedBench pilot studies)", description=
                           "MIMIC-CXR chest X-ray studies with their findings", license=LICENSE)
    return Release("mimic-cxr", config, [], cases, inputs=INPUTS, declared_in="files/")


def read_mimic(root: Path, release: Release, card: PublicReleaseSource | None) -> Rendered:
    """One image and the FINDINGS text per pilot study (the first ``n_cases`` with a card
    that sets it)."""
    cases, arts, sources = [], [], dict[str, str]()
    for case in chosen(release, card):
        try:
            text = read_bytes(root / case.label, case.label).decode("utf-8")
        except UnicodeDecodeError:
            raise InputDataError(case.label, "not UTF-8 text") from None
        found = findings(text)
        if found is None:
            raise InputDataError(case.label, "no non-empty FINDINGS section (AutoMedBench's "
                                             "reference is the findings text)")
        rel = case.images[0]
        key, ref_key = f"images/{case.case_id}.png", f"references/{case.case_id}.txt"
        png = codecs.png_bytes(greyscale(read_bytes(root / rel, rel), rel))
        arts += [Artifact(key=key, visibility=Visibility.PUBLIC, data=png),
                 Artifact(key=ref_key, visibility=Visibility.PRIVATE, data=found.encode())]
        sources |= {key: rel, ref_key: case.label}
        cases.append(CaseEntry(case_id=case.case_id, output="reports.csv", reference=ref_key,
                               origin=rel, image=key))
    return Rendered(cases, arts, [], {}, sources, declared_in="files/")
