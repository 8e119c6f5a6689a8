"""The answer-key search looks for the answer, not the file (issue 21, point 6): references
re-encoded into ``public/`` (re-gzipped, stacked in an ``.npy``/``.npz``, base64 in JSON, an
answer file under another name), marks that single out the gold option (a hint in every QA
question, a `` *`` on the MedBench gold option), and symlinks or FIFOs in ``public/`` are
reported by ``medflows audit pool`` (exit 1) with the public file and the encoding; honest pools
stay clean."""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest
from support.imaging_pools import build_pool
from support.ops_support import publish_test_pool
from typer.testing import CliRunner

from tasks_lib.audits.answer_key import check_answer_key
from tasks_lib.audits.decode import DecodeLimits, Decoder
from tasks_lib.audits.encoded import array_digest
from tasks_lib.audits.marks import ChoiceItem, mark_findings
from tasks_lib.audits.pool import pool_info

ARGS = ["--json", "--no-sandbox", "--judge-model", "rules"]
MEDBENCH_TASKS = ["medqa-choice", "medqa-open", "dicom-string", "lesion-boxes", "safety-open"]


def _audit_cli(pool: Path | str, check: str = "answer_key") -> tuple[int, list[str]]:
    """Exit code of ``medflows audit pool`` and the evidence of one check."""
    from flows.cli import audit as _cli  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    res = CliRunner().invoke(app, ["audit", "pool", str(pool), *ARGS])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    out = json.loads(res.stdout)
    found = next(f for f in out["findings"] if f["check"] == check)
    return res.exit_code, found["evidence"]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def qa_pool() -> Path:
    return Path(publish_test_pool("audit-enc-qa", {"medqa": 24, "medbullets": 16}).url)


@pytest.fixture(scope="module")
def seg_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(build_pool("brain-tissue-seg", tmp_path_factory.mktemp("enc-seg"))[0])


@pytest.fixture(scope="module")
def medbench_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tasks_lib.medbench.pool import build_task, publish

    url, _ = publish("mb-enc", str(tmp_path_factory.mktemp("enc-mb") / "v1"),
                     {t: build_task(t) for t in MEDBENCH_TASKS}, seed=0)
    return Path(url)


def _copy(pool: Path, dest: Path) -> Path:
    shutil.copytree(pool, dest, symlinks=True)
    return dest


def _label_maps(pool: Path) -> list[np.ndarray[Any, Any]]:
    return [np.asarray(nib.load(str(p)).dataobj)
            for p in sorted((pool / "private/references").glob("*.nii.gz"))]


# --------------------------------------------------------------------------- honest pools


def test_honest_pools_are_clean(qa_pool: Path, seg_pool: Path, medbench_pool: Path) -> None:
    for pool in (qa_pool, seg_pool, medbench_pool):
        finding = check_answer_key(pool_info(str(pool)))
        assert finding.passed, finding.evidence
    code, evidence = _audit_cli(qa_pool)
    assert (code, evidence) == (0, [])


# --------------------------------------------------------------------------- label maps


def test_regzipped_label_map_is_named(seg_pool: Path, tmp_path: Path) -> None:
    pool = _copy(seg_pool, tmp_path / "regz")
    raw = gzip.decompress((pool / "private/references/case-002.nii.gz").read_bytes())
    (pool / "public/inputs/case-002-extra.nii.gz").write_bytes(gzip.compress(raw, 1, mtime=7))
    found = check_answer_key(pool_info(str(pool)))
    assert not found.passed
    assert found.evidence == [
        "public/inputs/case-002-extra.nii.gz (gzip): the bytes of the reference "
        "private/references/case-002.nii.gz (rule: no public file holds a reference in any "
        "encoding)"]


def test_label_maps_stacked_in_npy_and_npz_are_named(seg_pool: Path, tmp_path: Path) -> None:
    pool = _copy(seg_pool, tmp_path / "stack")
    maps = _label_maps(pool)
    np.save(pool / "public/atlas.npy", np.stack(maps).astype(np.int16))  # another dtype
    np.savez_compressed(pool / "public/bundle.npz", first=maps[0], last=maps[-1])
    text = "\n".join(check_answer_key(pool_info(str(pool))).evidence)
    assert (f"public/atlas.npy (npy → slices along axis 0): in {len(maps)} of its {len(maps)} "
            "slices, the array values of the reference private/references/case-000.nii.gz "
            "(slice 0)") in text
    assert ("public/bundle.npz (zip member first.npy → npy): the array values of the reference "
            "private/references/case-000.nii.gz") in text
    assert (f"public/bundle.npz (zip member last.npy → npy): the array values of the reference "
            f"private/references/case-{len(maps) - 1:03d}.nii.gz") in text


def test_label_map_slice_saved_as_image_is_named(seg_pool: Path, tmp_path: Path) -> None:
    import imageio.v3 as iio

    pool = _copy(seg_pool, tmp_path / "png")
    volume = _label_maps(pool)[4]
    iio.imwrite(pool / "public/preview.png", volume[:, :, 24].astype(np.uint8))
    assert check_answer_key(pool_info(str(pool))).evidence == [
        "public/preview.png (image pixels): the array values of the reference "
        "private/references/case-004.nii.gz (slice 24 along axis 2) (rule: no public file holds "
        "a reference in any encoding)"]


def test_base64_of_a_reference_in_json_is_named(seg_pool: Path, tmp_path: Path) -> None:
    pool = _copy(seg_pool, tmp_path / "b64")
    ref = (pool / "private/references/case-001.nii.gz").read_bytes()
    wrapped = base64.encodebytes(ref).decode()  # MIME lines, JSON-escaped newlines
    (pool / "public/meta.json").write_text(json.dumps({"note": "calibration", "blob": wrapped}))
    assert check_answer_key(pool_info(str(pool))).evidence == [
        "public/meta.json (base64 run on line 1): the bytes of the reference "
        "private/references/case-001.nii.gz (rule: no public file holds a reference in any "
        "encoding)"]


@pytest.mark.slow
def test_cli_names_every_reencoded_label_map(seg_pool: Path, tmp_path: Path) -> None:
    """The whole audit on a segmentation pool (null agents score 3D volumes: slow)."""
    pool = _copy(seg_pool, tmp_path / "cli-seg")
    raw = gzip.decompress((pool / "private/references/case-003.nii.gz").read_bytes())
    (pool / "public/extra.nii").write_bytes(raw)
    np.save(pool / "public/stack.npy", np.stack(_label_maps(pool)))
    code, evidence = _audit_cli(pool)
    assert code == 1
    text = "\n".join(evidence)
    assert ("public/extra.nii: the decoded contents of the reference "
            "private/references/case-003.nii.gz") in text
    assert "public/extra.nii (NIfTI voxels)" not in text  # the file itself is named once
    assert "public/stack.npy (npy → slices along axis 0)" in text


# --------------------------------------------------------------------------- QA


def test_qa_hint_in_every_question_is_named(qa_pool: Path, tmp_path: Path) -> None:
    pool = _copy(qa_pool, tmp_path / "hint")
    gold = {f"{r['dataset']}/{r['realidx']}": r["answer_idx"]
            for r in _jsonl(pool / "private/references.jsonl")}
    items = _jsonl(pool / "public/items.jsonl")
    for it in items:
        letter = gold[f"{it['dataset']}/{it['realidx']}"]
        it["question"] += f"\nHint: the right option is {letter}"
    _write_jsonl(pool / "public/items.jsonl", items)
    code, evidence = _audit_cli(pool)
    assert code == 1
    hint = next(e for e in evidence if "a hint naming a letter" in e)
    assert hint.startswith(f"public/items.jsonl: a hint naming a letter is the gold option in "
                           f"{len(items)}/{len(items)} items (rate 1.00, chance 0.23")
    assert "'Hint: the right option is X…'" in hint


def test_qa_references_in_base64_and_renamed_are_named(qa_pool: Path, tmp_path: Path) -> None:
    pool = _copy(qa_pool, tmp_path / "qa-b64")
    refs = (pool / "private/references.jsonl").read_bytes()
    (pool / "public/notes.json").write_text(json.dumps({"b": base64.b64encode(refs).decode()}))
    rows = _jsonl(pool / "private/references.jsonl")
    (pool / "public/study_guide.json").write_text(json.dumps({"guide": rows[:3]}, indent=1))
    code, evidence = _audit_cli(pool)
    assert code == 1
    assert ("public/notes.json (base64 run on line 1): the bytes of the reference "
            "private/references.jsonl") in "\n".join(evidence)
    assert ("public/study_guide.json: 3 JSON row(s) (its rows 1, 2, 3) of the reference "
            "private/references.jsonl") in "\n".join(evidence)


def test_symlink_is_a_finding_not_a_crash(qa_pool: Path, tmp_path: Path) -> None:
    pool = _copy(qa_pool, tmp_path / "links")
    os.symlink("../private", pool / "public/x")
    os.symlink("items.jsonl", pool / "public/items-again.jsonl")
    code, evidence = _audit_cli(pool)
    assert code == 1
    assert evidence == [
        "public/items-again.jsonl -> items.jsonl: symlink stays inside public/ (never followed) "
        "(rule: the public view holds regular files only)",
        "public/x -> ../private: symlink leaves the public view (never followed) (rule: the "
        "public view holds regular files only)"]  # nothing was read through either link
    _, tampering = _audit_cli(pool, "grader_tampering")
    assert tampering == ["public/x -> ../private: symlink leaves the public view (never "
                         "followed) (rule: the agent reads only public/)"]


def test_fifo_is_refused_without_hanging(qa_pool: Path, tmp_path: Path) -> None:
    """A FIFO would block every reader (the kit's too): one error line, exit 2, no check."""
    from flows.cli import audit as _cli  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    pool = _copy(qa_pool, tmp_path / "fifo")
    (pool / "public/items.jsonl").unlink()
    os.mkfifo(pool / "public/items.jsonl")
    os.mkfifo(pool / "public/pipe")
    res = CliRunner().invoke(app, ["audit", "pool", str(pool), *ARGS])
    assert res.exit_code == 2
    assert res.output.strip() == (f"error: {pool}/public/items.jsonl: a FIFO, not a regular "
                                  "file (and 1 more): the audit opens no FIFO, socket or "
                                  "device; remove it")


# --------------------------------------------------------------------------- MedBench


def test_medbench_star_on_the_gold_option_is_named(medbench_pool: Path, tmp_path: Path) -> None:
    pool = _copy(medbench_pool, tmp_path / "mb")
    letters = {r["item_id"]: r["letter"] for r in _jsonl(pool / "private/references.jsonl")}
    items = _jsonl(pool / "public/items.jsonl")
    marked = 0
    for it in items:
        if it.get("options"):
            it["options"][letters[it["item_id"]]] += " *"
            marked += 1
    _write_jsonl(pool / "public/items.jsonl", items)
    code, evidence = _audit_cli(pool)
    assert code == 1
    assert evidence[0].startswith(
        f"public/items.jsonl: the option marked with ' *' after its text is the gold option in "
        f"{marked}/{marked} items (rate 1.00, chance 0.25")


# --------------------------------------------------------------------------- units


def test_marks_ignore_features_at_chance() -> None:
    """A hint that names a random letter, decorations on random options and no length bias
    are not flagged; the same hint naming the gold letter is."""
    rng = np.random.default_rng(0)
    honest, leaky = [], []
    for n in range(60):
        gold, other = "ABCD"[n % 4], "ABCD"[int(rng.integers(4))]
        opts = {k: f"option {k} text" + (" *" if k == other else "") for k in "ABCD"}
        honest.append(ChoiceItem(str(n), f"Stem {n}. Hint: the right option is {other}", opts,
                                 gold))
        leaky.append(ChoiceItem(str(n), f"Stem {n}. Hint: the right option is {gold}", opts,
                                gold))
    assert mark_findings("x", honest) == []
    assert [e.split(" is the gold")[0] for e in mark_findings("x", leaky)] == [
        "x: a hint naming a letter", "x: the stem ending with a letter"]


def test_array_digest_ignores_dtype_and_layout_not_values() -> None:
    a = np.random.default_rng(1).integers(0, 3, (4, 5, 6)).astype(np.uint8)
    assert array_digest(a) == array_digest(np.asfortranarray(a.astype(np.float64)))
    assert array_digest(a) != array_digest(a.T.copy())
    assert array_digest(a) != array_digest(np.where(a == 2, 1, a))
    assert array_digest(np.zeros((8, 8))) is None  # an empty mask is no key


def test_decoding_is_bounded() -> None:
    """A gzip bomb stops at the stream cap, an archive at the member cap; both are noted."""
    import io
    import zipfile

    limits = DecodeLimits(max_stream_bytes=2**20, max_members=3)
    bomb = Decoder(limits)
    views = list(bomb.views(gzip.compress(b"\0" * (2**20 + 10))))
    assert [v.encoding for v in views] == [""]
    assert bomb.notes == ["gzip inflates past 1048576 bytes (limit max_stream_bytes)"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(5):
            zf.writestr(f"m{i}.txt", f"member {i}")
    many = Decoder(limits)
    names = [v.encoding for v in many.views(buf.getvalue())]
    assert names == ["", "zip member m0.txt", "zip member m1.txt", "zip member m2.txt"]
    assert "has 5 members; the first 3 were searched" in many.notes[0]
