"""De-identify step: blank free-text NIfTI header fields (and refuse DICOM-style leftovers).

NIfTI-1 has four free-text fields that scanners and converters fill with site, subject and
protocol strings (:data:`~tasks_lib.imaging.codecs.NIFTI_TEXT_FIELDS`). Every ``.nii.gz`` artifact
of a pool is rewritten with those fields empty before anything is published; other formats we
write (NPY, PNG without text chunks, JSON, CSV) carry no header metadata.
"""

from __future__ import annotations

import gzip
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


def deidentify(artifacts: list[Artifact]) -> Deidentified:
    """Strip identifying header text from every NIfTI artifact."""
    out, fields, files = [], set(), 0
    for art in artifacts:
        if art.key.endswith((".nii", ".nii.gz")):
            files += 1
            data, cleared = strip_nifti(art.data)
            fields.update(cleared)
            art = Artifact(key=art.key, visibility=art.visibility, data=data)
        out.append(art)
    return Deidentified(out, DeidRecord(files=files, fields_cleared=sorted(fields)))
