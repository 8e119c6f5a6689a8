"""De-identify step: strip identifying header fields from NIfTI and DICOM files before publishing.

* NIfTI-1 has four free-text fields that scanners and converters fill with site, subject and
  protocol strings (:data:`~tasks_lib.imaging.codecs.NIFTI_TEXT_FIELDS`); they are blanked.
* DICOM: the identifying attributes in :data:`DICOM_BLANK` are emptied, dates in
  :data:`DICOM_DATES` keep only their year (``YYYY0101``, Safe-Harbor style), and private tags are
  removed.

Other formats we write (NPY, PNG without text chunks, JSON, CSV) carry no header metadata.
"""

from __future__ import annotations

import gzip
import io
from collections import Counter
from typing import NamedTuple

from tasks_lib.imaging import codecs
from tasks_lib.imaging.types import Artifact, DeidRecord


class Deidentified(NamedTuple):
    """Cleaned artifacts plus what was removed."""

    artifacts: list[Artifact]
    record: DeidRecord


def strip_nifti(data: bytes) -> tuple[bytes, list[str]]:
    """NIfTI bytes with the free-text header fields blanked, and the names of non-empty ones."""
    img = codecs.nifti_load(data)
    cleared = []
    for field in codecs.NIFTI_TEXT_FIELDS:
        if bytes(img.header[field].tobytes()).strip(b"\x00 "):
            cleared.append(field)
        img.header[field] = b""
    return gzip.compress(img.to_bytes(), mtime=0), cleared


DICOM_BLANK = ("PatientName", "PatientID", "OtherPatientIDs", "PatientAddress",
               "PatientTelephoneNumbers", "InstitutionName", "InstitutionAddress",
               "ReferringPhysicianName", "PerformingPhysicianName", "OperatorsName",
               "AccessionNumber", "StationName", "DeviceSerialNumber")
DICOM_DATES = ("PatientBirthDate", "StudyDate", "SeriesDate", "AcquisitionDate", "ContentDate")


def strip_dicom(data: bytes) -> tuple[bytes, list[str]]:
    """DICOM bytes with identifying attributes blanked, dates reduced to the year, private tags
    removed; and the names of the attributes that were changed."""
    import pydicom

    ds = pydicom.dcmread(io.BytesIO(data))
    cleared = []
    for kw in DICOM_BLANK:
        el = ds.data_element(kw) if kw in ds else None
        if el is not None and str(el.value).strip():
            el.value = ""
            cleared.append(kw)
    for kw in DICOM_DATES:
        el = ds.data_element(kw) if kw in ds else None
        value = str(el.value) if el is not None else ""
        if el is not None and len(value) >= 4 and value != f"{value[:4]}0101":
            el.value = f"{value[:4]}0101"
            cleared.append(kw)
    if any(el.tag.is_private for el in ds):
        ds.remove_private_tags()
        cleared.append("private tags")
    buf = io.BytesIO()
    ds.save_as(buf)
    return buf.getvalue(), cleared


_STRIPPERS = {".nii": strip_nifti, ".nii.gz": strip_nifti, ".dcm": strip_dicom}


def deidentify(artifacts: list[Artifact], prior: DeidRecord | None = None) -> Deidentified:
    """Strip identifying header fields from every NIfTI and DICOM artifact; ``prior`` is what
    ingest already removed (DICOM slices converted on the way in), added to the record."""
    out, files = [], prior.files if prior else 0
    removed: Counter[str] = Counter(prior.removed if prior else {})
    for art in artifacts:
        suffix = next((s for s in (".nii.gz", ".nii", ".dcm") if art.key.endswith(s)), None)
        if suffix is not None:
            files += 1
            data, cleared = _STRIPPERS[suffix](art.data)
            removed.update(cleared)
            art = Artifact(key=art.key, visibility=art.visibility, data=data)
        out.append(art)
    fields = set(removed) | set(prior.fields_cleared if prior else [])
    return Deidentified(out, DeidRecord(files=files, fields_cleared=sorted(fields),
                                        removed=dict(sorted(removed.items()))))


def ingest_dicom(data: bytes, removed: Counter[str]) -> bytes:
    """De-identify one DICOM file on the way in (before anything reads its pixels or stores
    it), counting each changed attribute in ``removed``."""
    clean, cleared = strip_dicom(data)
    removed.update(cleared)
    return clean
