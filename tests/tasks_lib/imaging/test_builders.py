"""Task builders: sizes, public/private separation, de-identification, determinism, known truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from support.imaging_pools import TASKS, build_pool

from tasks_lib.imaging import codecs
from tasks_lib.imaging.pool import load_task
from tasks_lib.imaging.types import PoolManifest

Pools = dict[str, tuple[str, PoolManifest]]


def test_every_card_builds_public_and_private_views(pools: Pools) -> None:
    for task_id in TASKS:
        url, m = pools[task_id]
        root = Path(url)
        assert len(m.cases) >= 8
        assert (root / "manifest.json").is_file() and (root / "public/brief.md").is_file()
        public = {p.relative_to(root / "public").as_posix()
                  for p in (root / "public").rglob("*") if p.is_file()}
        assert not any(k.startswith("references") for k in public)
        for c in m.cases:
            assert (root / "private" / c.reference).is_file()
            assert c.image in public
        assert any(k.startswith("sample_submission/") for k in public)
        assert load_task(task_id).track == m.track


def test_segmentation_headers_are_deidentified_and_labels_match(pools: Pools) -> None:
    url, m = pools["brain-tissue-seg"]
    assert m.deid.files == 16 and m.deid.fields_cleared == ["descrip"]
    case = m.cases[0]
    img = codecs.nifti_load((Path(url) / "public" / case.image).read_bytes())
    assert bytes(img.header["descrip"].tobytes()).strip(b"\x00") == b""
    assert list(img.shape) == case.shape and case.spacing == [4.0, 4.0, 4.0]
    ref = codecs.nifti_array(codecs.nifti_load((Path(url) / "private" / case.reference)
                                               .read_bytes()))
    assert set(np.unique(ref).tolist()) == {0, 1, 2}
    t1 = np.asarray(img.dataobj)
    assert t1[ref == 2].mean() > t1[ref == 1].mean()  # WM is brighter than GM on T1


def test_lowdose_input_is_noisier_than_reference(pools: Pools) -> None:
    url, m = pools["ldct-denoise"]
    from evaluators.enhancement import psnr

    for c in m.cases[:2]:
        low = codecs.npy_load((Path(url) / "public" / c.image).read_bytes())
        ref = codecs.npy_load((Path(url) / "private" / c.reference).read_bytes())
        assert low.shape == ref.shape == (96, 96)
        assert 20 < psnr(low, ref) < 45


def test_detection_boxes_inside_images_and_vqa_answers_follow(pools: Pools) -> None:
    url, m = pools["brain-lesion-det"]
    n_classes = set()
    for c in m.cases:
        ref = json.loads((Path(url) / "private" / c.reference).read_text())
        h, w = c.shape
        for (x1, y1, x2, y2), lab in zip(ref["boxes"], ref["labels"], strict=True):
            assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
            n_classes.add(lab)
    assert n_classes == {1, 2}
    vurl, vm = pools["brain-lesion-vqa"]
    answers = {c.case_id: (Path(vurl) / "private" / c.reference).read_text() for c in vm.cases}
    for c in vm.cases:
        if c.case_id.endswith("-q0") and answers[c.case_id] == "no":
            assert answers[c.case_id.replace("-q0", "-q2")] == "0"
    assert {"yes", "no"} <= set(answers.values())


def test_reports_vary_in_wording(pools: Pools) -> None:
    url, m = pools["brain-lesion-report"]
    texts = [(Path(url) / "private" / c.reference).read_text() for c in m.cases]
    openings = {t.split()[0] for t in texts}
    assert len(openings) >= 2


def test_build_is_reproducible(pools: Pools, tmp_path: Path) -> None:
    _, again = build_pool("brain-lesion-vqa", tmp_path)
    assert again.content_hash == pools["brain-lesion-vqa"][1].content_hash
