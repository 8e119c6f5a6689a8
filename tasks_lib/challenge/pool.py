"""Challenge pools: a challenge card's synthetic case as a versioned pool
(``pools/<challenge>/vN/{public,private,manifest.json,audit.json}``), like every other track.

``public/`` (the agent's view)::

    brief.md                    the task, the layouts, the local metric, "illustrative" note
    images/<case>.{png,nii.gz}  the test inputs (seed ``seed``)
    sample_submission/          a format example of the test cases: the layout with
                                uninformative values (:mod:`.format_example`)
    validation/images/          the validation inputs (seed ``seed + 1``)
    validation/sample_submission/
    validation/reference/       the validation answers (public by design)
    local_metric.py             grades a folder on the validation split
    local_metric/               its card JSON and the grading code (:mod:`.local_metric`)

``private/`` holds ``test_labels.csv`` and the label files it names (the test answers). The
manifest is the imaging :class:`~tasks_lib.imaging.types.PoolManifest` (one case per test id),
so the harness's pool checks read it unchanged. Synthetic data: every placement is illustrative.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import pandas as pd

from tasks_lib.challenge import local_metric
from tasks_lib.challenge.card import layout, load_challenge
from tasks_lib.challenge.format_example import write_format_example
from tasks_lib.challenge.synthetic import SyntheticCase, write_synthetic_case
from tasks_lib.imaging.pool import artifact_files, card_digest
from tasks_lib.imaging.types import Artifact, CaseEntry, DeidRecord, PoolManifest, Visibility
from tasks_lib.pool_format import PoolFiles
from tasks_lib.pool_publish import write_version
from tasks_lib.taskspec import TaskSpec

ILLUSTRATIVE = ("illustrative: synthetic data (a seeded case of shapes, not the challenge's "
                "images), so the leaderboard placement is not comparable with the human entries")
"""The note every challenge cell's score card and report carry."""


def _files(folder: Path, prefix: str, visibility: Visibility) -> list[Artifact]:
    return [Artifact(key=f"{prefix}{p.relative_to(folder).as_posix()}", visibility=visibility,
                     data=p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()]


class CaseFolders(Protocol):
    """The folders of one split: a synthetic case (:class:`SyntheticCase`) or a prepared split
    of an official release (:class:`tasks_lib.challenge.prepare.PreparedSplit`)."""

    @property
    def case_ids(self) -> list[str]: ...
    @property
    def public_dir(self) -> Path: ...
    @property
    def private_dir(self) -> Path: ...
    @property
    def sample_submission_dir(self) -> Path: ...


SYNTHETIC_NOTE = f"**Illustrative:** {ILLUSTRATIVE}."
SYNTHETIC_VALIDATION = ("a validation split (other case ids' images, a sample submission and "
                        "its public answers under `reference/`)")


def brief(card: TaskSpec, test: CaseFolders, validation: CaseFolders,
          kind: str = "synthetic case", note: str = SYNTHETIC_NOTE,
          validation_text: str = SYNTHETIC_VALIDATION,
          inputs_text: str = "the test inputs, one per case id below") -> str:
    """The public brief: the task, the layout, where things are and how to self-check."""
    sub = layout(card)
    cols = ", ".join([sub.id_column, *sub.value_columns, *([sub.file_column]
                                                            if sub.file_column else [])])
    return (
        f"# {card.title} ({kind})\n\n{card.description.strip()}\n\n{note}\n\n"
        f"## Inputs\n\n- `/public/images/`: {inputs_text}.\n"
        f"- `/public/validation/`: {validation_text}.\n\n"
        f"## Submission layout\n\n{sub.description.strip()}\n\nWrite "
        f"`/workspace/submission/submission.csv` with columns {cols} (one row per test case; "
        "file paths relative to the submission folder), like `/public/sample_submission/`.\n\n"
        "## Local metric\n\n`python /public/local_metric.py FOLDER` grades a submission folder "
        "for the validation case ids with the challenge's metrics (the test answers are "
        "hidden).\n\n## Test cases\n\n" + "\n".join(f"- `{c}`" for c in test.case_ids)
        + "\n\n## Validation cases\n\n" + "\n".join(f"- `{c}`" for c in validation.case_ids)
        + "\n")


def _image_of(case_id: str, names: list[str]) -> str:
    """The public image of a case: ``<case>.<ext>``, else the first ``<case>_<channel>.<ext>``."""
    exact = [n for n in names if n.split(".")[0] == case_id]
    return next(iter(exact or [n for n in names if n.startswith(f"{case_id}_")]), "")


def _cases(case: CaseFolders, origins: dict[str, str]) -> list[CaseEntry]:
    folder = case.public_dir / "images"
    names = sorted(p.name for p in folder.glob("*")) if folder.is_dir() else []
    return [CaseEntry(case_id=c, output="submission.csv", reference="test_labels.csv",
                      origin=origins[c], image=f"images/{name}" if (
                          name := _image_of(c, names)) else "")
            for c in case.case_ids]


def _renamed(value: object, names: dict[str, str]) -> object:
    """A table cell with a case id, or a path whose file is named after one, renamed."""
    if not isinstance(value, str):
        return value
    head, _, base = value.rpartition("/")
    stem, dot, rest = base.partition(".")
    return f"{head}/" * bool(head) + names.get(stem, stem) + dot + rest


def prefix_cases(case: SyntheticCase, prefix: str) -> SyntheticCase:
    """Give every case of ``case`` the id ``prefix + id``: files named after a case and every
    CSV cell naming one (ids or relative paths), so two splits never share an id or a file."""
    names = {c: f"{prefix}{c}" for c in case.case_ids}
    for folder in (case.public_dir, case.private_dir, case.sample_submission_dir,
                   case.perfect_submission_dir):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix == ".csv":
                table = pd.read_csv(path, dtype=str, keep_default_na=False)
                table = table.apply(lambda col: col.map(lambda v: _renamed(v, names)))
                table.to_csv(path, index=False)
            if path.is_file() and path.name.split(".")[0] in names:
                path.rename(path.with_name(str(_renamed(path.name, names))))
    return case.model_copy(update={"case_ids": [names[c] for c in case.case_ids]})


def split_artifacts(card: TaskSpec, test: CaseFolders, val: CaseFolders, work: Path,
                    brief_md: str) -> list[Artifact]:
    """Every pool file (public and private) of a test and a validation split (one tail for
    synthetic and prepared pools)."""
    example = write_format_example(card, test.sample_submission_dir, work / "format_example")
    public, private = Visibility.PUBLIC, Visibility.PRIVATE
    arts = [*_files(test.public_dir / "images", "images/", public),
            *_files(example, "sample_submission/", public),
            *_files(val.public_dir / "images", "validation/images/", public),
            *_files(val.sample_submission_dir, "validation/sample_submission/", public),
            *_files(val.private_dir, "validation/reference/", public),
            *_files(test.private_dir, "", private),
            Artifact(key="brief.md", visibility=public, data=brief_md.encode())]
    return arts + [Artifact(key=k, visibility=public, data=v)
                   for k, v in local_metric.bundle(card).items()]


def artifacts(card: TaskSpec, work: Path, seed: int) -> tuple[list[Artifact], list[CaseEntry]]:
    """Every pool file (public and private) and the test cases, written under ``work`` (the
    validation ids carry the prefix ``val_``)."""
    test = write_synthetic_case(card, work / "test", seed)
    val = prefix_cases(write_synthetic_case(card, work / "validation", seed + 1), "val_")
    arts = split_artifacts(card, test, val, work, brief(card, test, val))
    return arts, _cases(test, {c: f"synthetic seed {test.seed}" for c in test.case_ids})


def _publish(card: TaskSpec, arts: list[Artifact], cases: list[CaseEntry],
             out: str | None) -> tuple[str, PoolManifest]:
    task_id = card.task_id

    def manifest(version: int, digest: str) -> PoolManifest:
        return PoolManifest(pool_id=task_id, task_id=task_id, track=card.track, version=version,
                            created_at=datetime.now(UTC), cards=[task_id],
                            card_digest=card_digest(card), content_hash=digest, cases=cases,
                            deid=DeidRecord(files=0, fields_cleared=[]))

    return write_version(task_id, PoolFiles(content=artifact_files(arts)), manifest, out)


def publish_challenge_pool(task_id: str, out: str | None = None,
                           seed: int = 0) -> tuple[str, PoolManifest]:
    """Write the challenge's pool version (``out`` or ``pools/<task_id>/vN``; the same content
    reuses its published version: :func:`tasks_lib.pool_publish.write_version`) and return its
    root URL and manifest (not ledgered yet)."""
    card = load_challenge(task_id)
    with tempfile.TemporaryDirectory(prefix="medflows-challenge-") as tmp:
        arts, cases = artifacts(card, Path(tmp), seed)
    return _publish(card, arts, cases, out)


def publish_prepared_pool(task_id: str, release: Path,
                          out: str | None = None) -> tuple[str, PoolManifest]:
    """Write the pool version of an official release (:mod:`tasks_lib.challenge.prepare`):
    ReX-MLE's held-out 20 % as the test split (answers private), its public 80 % as the
    validation split (inputs and answers public), through the same tail as
    :func:`publish_challenge_pool`."""
    from tasks_lib.challenge.prepare import prepare_release

    card = load_challenge(task_id)
    with tempfile.TemporaryDirectory(prefix="medflows-prepare-") as tmp:
        test, train = prepare_release(card, release, Path(tmp))
        text = brief(card, test, train, "official release", REAL_NOTE, REAL_VALIDATION,
                     REAL_INPUTS)
        arts = split_artifacts(card, test, train, Path(tmp), text)
        cases = _cases(test, test.origins)
    return _publish(card, arts, cases, out)


REAL_NOTE = ("**Official release:** the challenge's own images and labels, split as ReX-MLE "
             "splits them (80 % public for training, 20 % held out as the test cases), so the "
             "leaderboard placement uses the organisers' data (on a held-out part of their "
             "training release, not their hidden test set).")
REAL_INPUTS = ("the test inputs, named after the case ids below (`<case>.<ext>`, or "
               "`<case>_<channel>.<ext>` for a challenge with several inputs per case)")
REAL_VALIDATION = ("the training split (ReX-MLE's public 80 %): its inputs under `images/`, its "
                   "labels in the submission layout under `reference/` (`test_labels.csv` and "
                   "the files it names) and a format example under `sample_submission/`")


PUBLIC_BY_DESIGN = ("public/validation/reference/", "public/local_metric/lib/")
"""Public by design, so the answer-key check's label-like-name rule does not apply to them
(copies and digests of private files still do): the validation answers (another seed's case)
and the local metric's copy of the project's grading code (e.g. ``evaluators/rwe_answers.py``)."""
