"""De-identification of NIfTI and DICOM headers (pydicom's shipped CT sample)."""

from __future__ import annotations

import io

import numpy as np

from tasks_lib.imaging import codecs
from tasks_lib.imaging.deid import deidentify
from tasks_lib.imaging.types import Artifact, Visibility


def test_dicom_and_nifti_headers_are_stripped() -> None:
    import pydicom
    from pydicom.data import get_testdata_file

    path = get_testdata_file("CT_small.dcm", download=False)
    assert path is not None
    raw = open(path, "rb").read()  # noqa: SIM115
    before = pydicom.dcmread(io.BytesIO(raw))
    assert str(before.PatientName) and str(before.InstitutionName)
    nii = codecs.nifti_bytes(np.zeros((2, 2, 2), np.uint8), (1, 1, 1), "Jane Roe, MRN 12345")
    arts = [Artifact(key="a.dcm", visibility=Visibility.PUBLIC, data=raw),
            Artifact(key="b.nii.gz", visibility=Visibility.PUBLIC, data=nii),
            Artifact(key="c.json", visibility=Visibility.PRIVATE, data=b"{}")]
    out = deidentify(arts)
    after = pydicom.dcmread(io.BytesIO(out.artifacts[0].data))
    assert str(after.PatientName) == "" and str(after.InstitutionName) == ""
    assert str(after.get("PatientID", "")) == ""
    if "StudyDate" in before:
        assert str(after.StudyDate) == f"{str(before.StudyDate)[:4]}0101"
    assert not any(el.tag.is_private for el in after)
    assert np.array_equal(after.pixel_array, before.pixel_array)
    hdr = codecs.nifti_load(out.artifacts[1].data).header
    assert bytes(hdr["descrip"].tobytes()).strip(b"\x00") == b""
    assert out.artifacts[2].data == b"{}"
    assert out.record.files == 2
    assert {"PatientName", "InstitutionName", "descrip"} <= set(out.record.fields_cleared)
    assert out.record.removed["PatientName"] == 1 and out.record.removed["descrip"] == 1


def test_prior_removals_are_added_to_the_record() -> None:
    """What ingest removed from DICOM slices is counted with what de-identify blanks later."""
    from tasks_lib.imaging.types import DeidRecord

    nii = codecs.nifti_bytes(np.zeros((2, 2, 2), np.uint8), (1, 1, 1), "site=X")
    prior = DeidRecord(files=3, fields_cleared=["PatientName"], removed={"PatientName": 3})
    out = deidentify([Artifact(key="v.nii.gz", visibility=Visibility.PUBLIC, data=nii)], prior)
    assert out.record == DeidRecord(files=4, fields_cleared=["PatientName", "descrip"],
                                    removed={"PatientName": 3, "descrip": 1})
