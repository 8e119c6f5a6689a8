"""AutoMedBench's VQA and report-generation releases in their own layouts (SLAKE, VQA-RAD,
MIMIC-CXR): each replica builds a pool whose perfect submission scores 1, each wrong layout is
refused naming the file, a layout is read only into its track, and the shipped cards need the
user's download.

Replicas are written here in the official layouts: SLAKE's ``test.json`` records (``img_name``,
``question``, ``answer``, ``q_lang``, ``qid``, …) and ``imgs/xmlabN/source.jpg``; VQA-RAD's OSF
``VQA_RAD Dataset Public.json`` (``qid``, ``image_name``, ``phrase_type``, …) and ``VQA_RAD Image
Folder/``; MIMIC-CXR-JPG's ``files/pXX/pXXXXXXXX/sXXXXXXXX/<dicom_id>.jpg`` with MIMIC-CXR's
``sXXXXXXXX.txt`` reports (FINAL REPORT, EXAMINATION, INDICATION, FINDINGS, IMPRESSION sections).
Images are RGB or greyscale JPEGs of slices of nibabel's ``anatomical.nii`` blocks.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.cli import invoke

from tasks_lib.imaging.baseline_kind import BaselineKind
from tasks_lib.imaging.baselines import baseline_files
from tasks_lib.imaging.codecs import png_load
from tasks_lib.imaging.intake import ingest_card
from tasks_lib.imaging.pool import load_task, read_manifest
from tasks_lib.imaging.release_mimic import PILOT_STUDIES, findings
from tests.tasks_lib.imaging.test_release_layouts import _card, _pool_score, assert_refused
from tests.tasks_lib.imaging.test_releases import _block


def _jpeg(path: Path, k: int, rgb: bool = True) -> None:
    """Slice 4 of block ``k`` as a 32×32 JPEG (RGB: three documented transforms of it)."""
    from PIL import Image

    sl = _block(k)[:, :, 4]
    arr = np.stack([sl, sl * 0.8, sl.max() - sl], axis=-1) if rgb else sl
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((arr / arr.max() * 255).astype(np.uint8)).resize((32, 32)).save(path)


# ---------------------------------------------------------------- SLAKE

def write_slake(root: Path) -> Path:
    """test.json with English and Chinese questions over three images (RGB JPEGs)."""
    for k in range(3):
        _jpeg(root / "imgs" / f"xmlab{k}" / "source.jpg", k)
    records = [
        {"img_id": 0, "img_name": "xmlab0/source.jpg", "question": "Which organ is abnormal?",
         "answer": "Liver", "q_lang": "en", "location": "Abdomen", "modality": "CT",
         "answer_type": "OPEN", "base_type": "vqa", "content_type": "Organ", "qid": 11},
        {"img_id": 0, "img_name": "xmlab0/source.jpg", "question": "哪个器官异常？",
         "answer": "肝脏", "q_lang": "zh", "answer_type": "OPEN", "qid": 12},
        {"img_id": 1, "img_name": "xmlab1/source.jpg", "question": "Is this an MRI?",
         "answer": "No", "q_lang": "en", "answer_type": "CLOSED", "qid": 13},
        {"img_id": 2, "img_name": "xmlab2/source.jpg", "question": "How many kidneys are there?",
         "answer": "2", "q_lang": "en", "answer_type": "OPEN", "qid": 14},
        {"img_id": 2, "img_name": "xmlab2/source.jpg", "question": "Is the lung healthy?",
         "answer": "Yes", "q_lang": "en", "answer_type": "CLOSED", "qid": 15},
    ]
    (root / "test.json").write_text(json.dumps(records, ensure_ascii=False))
    (root / "train.json").write_text("[]")
    return root


def test_slake_english_test_questions_build_a_pool_scoring_one(tmp_path: Path) -> None:
    root = write_slake(tmp_path / "Slake1.0")
    card = load_task("slake-vqa")
    rendered = ingest_card(card, root)
    assert [c.case_id for c in rendered.cases] == [f"slake_{k:05d}" for k in range(4)]
    public = next(a for a in rendered.artifacts if a.key == "questions.csv").data.decode()
    assert public.splitlines() == ["question_id,case_id,question",
                                   "slake_00000,xmlab0,Which organ is abnormal?",
                                   "slake_00001,xmlab1,Is this an MRI?",
                                   "slake_00002,xmlab2,How many kidneys are there?",
                                   "slake_00003,xmlab2,Is the lung healthy?"]
    image = next(a for a in rendered.artifacts if a.key == "images/xmlab1.png")
    assert png_load(image.data).shape == (32, 32)
    scored, pool = _pool_score(card, rendered, tmp_path)
    assert scored.task_score == 1.0 and scored.s4 == 1.0 and scored.s5 == 1.0
    # The classical baseline answers a release's questions too (ids without "-qN": constant).
    m = read_manifest(str(pool))
    [(_, table)] = baseline_files(BaselineKind.CLASSICAL, str(pool), m)
    assert table.decode().splitlines() == ["question_id,answer"] + [
        f"slake_{k:05d},yes" for k in range(4)]
    two = ingest_card(_card("slake-vqa", n_cases=2), root)
    assert [c.case_id for c in two.cases] == ["slake_00000", "slake_00001"]


def _edit_records(root: Path, edit) -> None:
    records = json.loads((root / "test.json").read_text())
    edit(records)
    (root / "test.json").write_text(json.dumps(records))


SLAKE_REFUSALS = [
    (lambda r: (r / "test.json").unlink(),
     "test.json: missing: a SLAKE release has test.json and imgs/ at the top (BoKelvin/SLAKE; "
     "unzip imgs.zip)"),
    (lambda r: shutil.rmtree(r / "imgs" / "xmlab2"),
     "imgs/xmlab2/source.jpg: missing: test.json[3] asks about it"),
    (lambda r: _edit_records(r, lambda recs: recs[2].pop("answer")),
     "test.json: [2]: no answer (SLAKE records have img_name, question, answer, q_lang)"),
    (lambda r: _edit_records(r, lambda recs: recs[0].update(img_name="../xmlab0.jpg")),
     "test.json: [0]: img_name '../xmlab0.jpg' is not <folder>/source.jpg"),
    (lambda r: (r / "imgs/xmlab1/source.jpg").write_bytes(b"\xff\xd8 truncated"),
     re.compile(r"imgs/xmlab1/source\.jpg: unreadable image: .*")),
]


# ---------------------------------------------------------------- VQA-RAD

VQARAD_JSON = "VQA_RAD Dataset Public.json"


def write_vqarad(root: Path) -> Path:
    """OSF's JSON (training, free-form and paraphrased test records; integer qids and an
    integer answer, as the release has some) and its image folder (greyscale JPEGs)."""
    folder = root / "VQA_RAD Image Folder"
    for k, name in enumerate(["synpic54610.jpg", "synpic29265.jpg", "synpic100176.jpg"]):
        _jpeg(folder / name, k, rgb=False)
    base = {"image_case_url": "https://medpix.nlm.nih.gov/case?id=x", "evaluation": "given",
            "question_rephrase": "NULL", "question_relation": "NULL", "question_frame": "NULL"}
    records = [
        {"qid": 0, "phrase_type": "freeform", "image_name": "synpic54610.jpg",
         "question": "Are regions of the brain infarcted?", "answer": "Yes"},
        {"qid": 1, "phrase_type": "test_freeform", "image_name": "synpic54610.jpg",
         "question": "Is there evidence of an aortic aneurysm?", "answer": "yes",
         "answer_type": "CLOSED", "question_type": "PRES", "image_organ": "CHEST"},
        {"qid": 2, "phrase_type": "test_para", "image_name": "synpic29265.jpg",
         "question": "How many lesions are in the spleen?", "answer": 2,
         "answer_type": "OPEN", "question_type": "COUNT", "image_organ": "ABD"},
        {"qid": 3, "phrase_type": "para", "image_name": "synpic100176.jpg",
         "question": "What is the modality?", "answer": "MRI"},
        {"qid": 4, "phrase_type": "test_freeform", "image_name": "synpic100176.jpg",
         "question": "Which lobe is abnormal?", "answer": "Right upper lobe"},
    ]
    (root / VQARAD_JSON).write_text(json.dumps([{**base, **r} for r in records]))
    return root


def test_vqarad_test_set_builds_a_pool_scoring_one(tmp_path: Path) -> None:
    root = write_vqarad(tmp_path / "VQA_RAD")
    card = load_task("vqa-rad")
    rendered = ingest_card(card, root)
    assert [c.case_id for c in rendered.cases] == ["vqarad-1", "vqarad-2", "vqarad-4"]
    public = next(a for a in rendered.artifacts if a.key == "questions.csv").data.decode()
    assert public.splitlines()[2] == "vqarad-2,synpic29265,How many lesions are in the spleen?"
    ref = next(a for a in rendered.artifacts if a.key == "references/vqarad-2.txt")
    assert ref.data == b"2"
    assert sorted(a.key for a in rendered.artifacts if a.key.startswith("images/")) == [
        "images/synpic100176.png", "images/synpic29265.png", "images/synpic54610.png"]
    scored, _ = _pool_score(card, rendered, tmp_path)
    assert scored.task_score == 1.0 and scored.s4 == 1.0 and scored.s5 == 1.0


def _edit_vqarad(root: Path, n: int, **fields: object) -> None:
    records = json.loads((root / VQARAD_JSON).read_text())
    records[n].update(fields)
    (root / VQARAD_JSON).write_text(json.dumps(records))


VQARAD_REFUSALS = [
    (lambda r: (r / VQARAD_JSON).unlink(),
     "VQA_RAD Dataset Public.json: missing: a VQA-RAD release (OSF) has 'VQA_RAD Dataset "
     "Public.json' and 'VQA_RAD Image Folder'/ at the top"),
    (lambda r: (r / "VQA_RAD Image Folder" / "synpic29265.jpg").unlink(),
     "VQA_RAD Image Folder/synpic29265.jpg: missing: VQA_RAD Dataset Public.json[2] asks "
     "about it"),
    (lambda r: _edit_vqarad(r, 4, qid=1),
     "VQA_RAD Dataset Public.json: [4]: qid 1 is repeated or not a usable id"),
    (lambda r: _edit_vqarad(r, 1, image_name="../synpic54610.jpg"),
     "VQA_RAD Dataset Public.json: [1]: image_name '../synpic54610.jpg' is not an image file "
     "of VQA_RAD Image Folder/"),
    (lambda r: _edit_vqarad(r, 4, answer="  "),
     "VQA_RAD Dataset Public.json: VQA_RAD Dataset Public.json[4]: an empty question or answer"),
]


# ---------------------------------------------------------------- MIMIC-CXR

def _report(k: int) -> str:
    """A MIMIC-CXR style report (sections as the release writes them); its findings mention
    the study number so each reference differs."""
    return ("                                 FINAL REPORT\n"
            " EXAMINATION:  CHEST (PA AND LAT)\n \n"
            " INDICATION:  ___F with cough, eval for pneumonia (NOT: a header)\n \n"
            " COMPARISON:  None.\n \n"
            " FINDINGS: \n \n"
            f" PA and lateral views of the chest provided. Study {k}: there is a small left\n"
            " pleural effusion. The heart size is normal.\n \n"
            " IMPRESSION: \n \n No acute intrapulmonary process.\n")


def write_mimic(root: Path, studies: tuple[str, ...] = PILOT_STUDIES) -> Path:
    """files/pXX/pXXXXXXXX/sXXXXXXXX/ with two views (dicom-id names) and the report beside."""
    for k, study in enumerate(studies):
        group, subject, sid = study.split("_")
        folder = root / "files" / group / subject / sid
        for v, dicom_id in enumerate(["2a2277a9-b0ded155", "1b1166f8-c0ded155"]):
            _jpeg(folder / f"{dicom_id}-{k:02d}.jpg", (k + v) % 3, rgb=False)
        (folder.parent / f"{sid}.txt").write_text(_report(k))
    (root / "mimic-cxr-2.0.0-metadata.csv.gz").write_bytes(b"not read")
    return root


def test_findings_section_is_the_reference() -> None:
    assert findings(_report(3)) == ("PA and lateral views of the chest provided. Study 3: there "
                                    "is a small left\n pleural effusion. The heart size is "
                                    "normal.")
    assert findings("IMPRESSION: no change.\nFINDINGS:\n\nIMPRESSION: x") is None
    assert findings("Finding: lower case headers are not sections") is None


def test_mimic_pilot_studies_build_a_pool_scoring_one(tmp_path: Path) -> None:
    root = write_mimic(tmp_path / "mimic-cxr-jpg")
    card = load_task("chest-xray-report")
    rendered = ingest_card(card, root)
    assert [c.case_id for c in rendered.cases] == [f"CXR{n:04d}" for n in range(1, 11)]
    assert rendered.cases[0].origin == ("files/p10/p10046166/s50051329/"
                                        "1b1166f8-c0ded155-00.jpg")  # the first view by name
    ref = next(a for a in rendered.artifacts if a.key == "references/CXR0004.txt")
    assert ref.data.decode() == findings(_report(3))
    image = next(a for a in rendered.artifacts if a.key == "images/CXR0001.png")
    assert png_load(image.data).shape == (32, 32)
    scored, pool = _pool_score(card, rendered, tmp_path)
    m = scored.metrics  # nltk's METEOR of a text with itself is 1 − its fragmentation penalty
    assert m["bleu"] == 1.0 and m["rouge_l"] == 1.0 and m["finding_f1"] == 1.0
    assert 0.9999 < m["meteor"] < 1.0 and scored.task_score == pytest.approx(1.0, abs=1e-4)
    assert scored.s4 == 1.0 and scored.s5 == 1.0
    public = "".join(p.read_text(errors="replace") for p in (pool / "public").rglob("*")
                     if p.is_file())
    assert not any(s.split("_")[2] in public for s in PILOT_STUDIES)  # no MIMIC id is public


MIMIC_REFUSALS = [
    (lambda r: shutil.rmtree(r / "files"),
     "files/: missing: a MIMIC-CXR-JPG download has files/pXX/pXXXXXXXX/sXXXXXXXX/*.jpg (unzip "
     "mimic-cxr-reports.zip into the same folder for the .txt reports)"),
    (lambda r: shutil.rmtree(r / "files/p10/p10268877/s52199665"),
     "files/p10/p10268877/s52199665/: missing: study p10_p10268877_s52199665 of AutoMedBench's "
     "pilot split"),
    (lambda r: (r / "files/p10/p10046166/s53492798.txt").unlink(),
     "files/p10/p10046166/s53492798.txt: missing: the report of study p10_p10046166_s53492798 "
     "(mimic-cxr-reports.zip)"),
    (lambda r: (r / "files/p10/p10046166/s50051329.txt").write_text(
        "FINAL REPORT\n IMPRESSION: no acute process.\n"),
     "files/p10/p10046166/s50051329.txt: no non-empty FINDINGS section (AutoMedBench's "
     "reference is the findings text)"),
]


REFUSALS = ([("slake", write_slake, *r) for r in SLAKE_REFUSALS]
            + [("vqa-rad", write_vqarad, *r) for r in VQARAD_REFUSALS]
            + [("mimic-cxr", write_mimic, *r) for r in MIMIC_REFUSALS])
REFUSAL_IDS = ["slake-no-json", "slake-image-absent", "slake-no-answer", "slake-img-name",
               "slake-bad-jpeg", "vqarad-no-json", "vqarad-image-absent", "vqarad-qid-twice",
               "vqarad-image-name", "vqarad-empty", "mimic-no-files", "mimic-study-absent",
               "mimic-report-absent", "mimic-no-findings"]


@pytest.mark.parametrize(("layout", "write", "damage", "message"), REFUSALS, ids=REFUSAL_IDS)
def test_wrong_layout_is_refused_naming_the_file(tmp_path: Path, layout, write, damage,
                                                  message) -> None:
    assert_refused(tmp_path, layout, write, damage, message)


# ---------------------------------------------------------------- cards and the command line

def test_layouts_are_read_only_into_their_track_and_cards_need_the_download(
        tmp_path: Path) -> None:
    root = write_slake(tmp_path / "Slake1.0")
    wrong = invoke("pool", "build", "imaging", "--from", str(root), "--layout", "slake",
                   "--track", "segmentation")
    assert wrong.exit_code == 2
    assert wrong.stderr.strip() == ("error: --layout: a slake release holds vqa data, not "
                                    "segmentation")
    (root / "test.json").unlink()  # without --track the layout's track (vqa) reads the folder
    missing = invoke("pool", "build", "imaging", "--from", str(root), "--layout", "slake")
    assert missing.exit_code == 2 and missing.stderr.startswith("error: test.json: missing: ")
    for task in ("pancreas-tumor-seg", "fetal-brain-seg", "cxr-abnormality-det", "slake-vqa",
                 "vqa-rad", "chest-xray-report"):
        refused = invoke("pool", "build", "imaging", "--task", task)
        assert refused.exit_code == 2 and refused.stderr.startswith(
            f"error: --from: {task} is built from your own download of "), task
    other = invoke("pool", "build", "imaging", "--task", "slake-vqa", "--from", str(root),
                   "--layout", "vindr-cxr")
    assert other.exit_code == 2 and "in the slake layout, not vindr-cxr" in other.stderr
