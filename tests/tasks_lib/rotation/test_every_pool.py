"""``medflows pool rotate`` on every kind of pool beyond QA and MedBench (tests/tasks_lib/ops/
test_rotate_flow.py, tests/tasks_lib/medbench/test_pool_rotate.py): the five imaging tracks, a
challenge and an RWE study pool. The same seed gives the same subset, version and hash, another
seed another subset; the subset is a usable pool of the kit (read back and scored by it)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from support.audited import record_override
from support.imaging_pools import build_pool, score
from typer.testing import CliRunner

from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.pool import read_manifest
from tasks_lib.ledger import store
from tasks_lib.pool_publish import record_version
from tasks_lib.rotation import SubsetManifest, resolve_pool
from tasks_lib.rwe.build import LoadedEHR, StudyBuild, pool_files, write_pool
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness")
IMAGING = {"segmentation": "brain-tissue-seg", "enhancement": "ldct-denoise",
           "detection": "brain-lesion-det", "vqa": "brain-lesion-vqa",
           "report_generation": "brain-lesion-report"}


def _rotate(pool: str, size: int, seed: int, subset_id: str, *extra: str) -> SubsetManifest:
    from flows.cli import ops  # noqa: F401  (registers the command)
    from flows.cli.groups import app

    got = CliRunner().invoke(app, ["pool", "rotate", "--pools", pool, "--size", str(size),
                                   "--seed", str(seed), "--subset-id", subset_id, "--json",
                                   *extra])
    assert got.exit_code == 0, got.output
    return SubsetManifest.model_validate(json.loads(got.stdout))


def _three_draws(pool: str, size: int) -> tuple[SubsetManifest, SubsetManifest]:
    """Seed 1 twice (identical) and seed 2 (another subset, version 2)."""
    subset_id = f"rot-{uuid.uuid4().hex[:8]}"
    first = _rotate(pool, size, 1, subset_id)
    assert _rotate(pool, size, 1, subset_id) == first
    other = _rotate(pool, size, 2, subset_id)
    assert (first.version, other.version) == (1, 2)
    assert other.content_hash != first.content_hash
    assert resolve_pool(first.url) == first.url  # audited parents, locked files
    [row] = store.pools(pool_id=subset_id, version=1)
    assert (row.kind, row.content_hash) == ("subset", first.content_hash)
    return first, other


@pytest.mark.parametrize("track", sorted(IMAGING))
def test_imaging_pool_rotates_and_the_subset_scores(track: str, tmp_path: Path) -> None:
    task_id = IMAGING[track]
    _, manifest = build_pool(task_id, tmp_path / "pools")
    size = len(manifest.cases) // 2
    first, _ = _three_draws(task_id, size)
    [row] = store.pools(pool_id=first.subset_id, version=1)
    assert row.track == track
    sub = read_manifest(first.url)
    kept = [c.case_id for c in sub.cases]
    assert len(kept) == size == first.n_items and first.strata == {"all": size}
    assert kept == [c.case_id for c in manifest.cases if c.case_id in kept]  # parent order
    dropped = {c.case_id for c in manifest.cases} - set(kept)
    files = [p.name for p in Path(first.url).rglob("*") if p.is_file()]
    assert not [f for f in files if f.split(".")[0] in dropped]
    out = write_submission(baseline_files(BaselineKind.PERFECT, first.url, sub), tmp_path / "s")
    card = score(task_id, first.url, out)
    assert card.coverage == 1.0 and {c.case_id for c in card.per_case} == set(kept)


def test_challenge_pool_rotates_and_the_subset_grades(tmp_path: Path) -> None:
    from tasks_lib.challenge.card import load_challenge
    from tasks_lib.challenge.cells import score_challenge
    from tasks_lib.challenge.pool import publish_challenge_pool

    url, manifest = publish_challenge_pool("ldct-iqa", str(tmp_path / "ldct-iqa" / "v1"))
    record_override(url)
    record_version.fn(url, manifest, len(manifest.cases))
    first, _ = _three_draws("ldct-iqa", 4)
    root = Path(first.url)
    kept = [c.case_id for c in read_manifest(first.url).cases]
    labels = (root / "private" / "test_labels.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in labels[1:]] == kept
    assert sorted(p.stem for p in (root / "public" / "images").glob("*.png")) == sorted(kept)
    assert (root / "public" / "validation" / "reference" / "test_labels.csv").read_bytes() == (
        Path(url) / "public" / "validation" / "reference" / "test_labels.csv").read_bytes()
    sample = (root / "public" / "sample_submission" / "submission.csv").read_text()
    assert len(sample.splitlines()) == len(kept) + 1
    submission = tmp_path / "perfect"
    submission.mkdir()
    shutil.copy(root / "private" / "test_labels.csv", submission / "submission.csv")
    card = score_challenge(load_challenge("ldct-iqa"), root, submission, None,
                           first.content_hash, "challenge-test")
    assert card.task_score == pytest.approx(3.0)  # |PLCC| + |SROCC| + |KROCC| of a copy


def _rwe_pool(root: Storage) -> tuple[str, list[StudyBuild]]:
    """An RWE-shaped pool of every shipped study definition (placeholder answers and cohorts:
    the rotation moves rows and files, it computes nothing on them)."""
    from tasks_lib.rwe.studies import load_studies
    from tasks_lib.rwe.types import SchemaNames, StudyAnswers

    ehr = LoadedEHR(content_hash="ehr-for-rotation", table_hashes={}, rows={},
                          generate_s=0.0, load_s=0.0, database="rwe_rotation_test")
    builds = [StudyBuild(s, StudyAnswers(study_id=s.study_id, mcq={}, fields={},
                                               cohort_size=i), f"row\n{i}\n".encode(), [], [])
              for i, s in enumerate(load_studies())]
    pool_id = f"rwe-rot-{uuid.uuid4().hex[:6]}"
    url, manifest = write_pool(pool_id, root.root_url, 0, 10, ehr, SchemaNames(), builds)
    record_override(url, "rwe")
    record_version.fn(url, manifest, len(builds))
    return pool_id, builds


def test_rwe_pool_rotates_by_design(tmp_path: Path) -> None:
    from tasks_lib.rwe.pool_files import load_study_pool

    pool_id, builds = _rwe_pool(Storage(str(tmp_path / "rwe" / "v1")))
    first, _ = _three_draws(pool_id, 3)
    designs = {b.study.design.value for b in builds}
    assert set(first.strata_available) == designs and first.stratify_by == ["design"]
    pool = load_study_pool(Storage(first.url))
    drawn = [b for b in builds if b.study.study_id in pool.manifest.studies]
    assert len(drawn) == 3 == first.n_items and set(pool.answers) == set(pool.manifest.studies)
    assert first.content_hash == pool.manifest.content_hash == pool_files(
        "ehr-for-rotation", drawn).digest
    assert pool.manifest.database == "rwe_rotation_test"
    for b in drawn:
        key = f"private/cohorts/{b.study.study_id}.csv"
        assert (Path(first.url) / key).read_bytes() == b.cohort_csv

    from flows.cli import ops  # noqa: F401
    from flows.cli.groups import app

    bad = CliRunner().invoke(app, ["pool", "rotate", "--pools", pool_id, "--size", "2",
                                   "--stratify-by", "dataset"])
    assert bad.exit_code == 2 and "known: design" in bad.output
