"""``medflows challenge prepare``: an official challenge release → the two splits of a
challenge pool, split as ReX-MLE's ``prepare.py`` splits it.

The card's family reader (:func:`~.catalog.reader_for`) finds and checks the release's cases
(every refusal names the file, before anything is written); the sorted case ids are split 80/20
as ReX-MLE does (:func:`~.layout.rexmle_split`); each split is written in the folders a
synthetic case has (:class:`PreparedSplit`: inputs, answers in the card's submission layout,
the answers as a submission, a format example), so the pool writer takes it unchanged
(:func:`tasks_lib.challenge.pool.publish_prepared_pool`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from pydantic import Field

from tasks_lib.challenge.card import layout as card_layout
from tasks_lib.challenge.format_example import write_format_example
from tasks_lib.challenge.prepare.catalog import reader_for
from tasks_lib.challenge.prepare.layout import ReleaseCase
from tasks_lib.challenge.prepare.readers import FamilyReader
from tasks_lib.domain import Frozen
from tasks_lib.taskspec import TaskSpec

ORIGIN = "official release: "
"""Prefix of a prepared case's ``origin`` in the pool manifest (what marks a pool as real)."""


class PreparedSplit(Frozen):
    """One split of a prepared release, in the folders of a synthetic case."""

    challenge: str = Field(description="Challenge id (the card's task_id).")
    case_ids: list[str] = Field(description="Ids of the split's cases, in order.")
    public_dir: Path = Field(description="images/: the inputs under their pool names.")
    private_dir: Path = Field(description="test_labels.csv and the label files it names.")
    sample_submission_dir: Path = Field(description="A format example of the answers.")
    perfect_submission_dir: Path = Field(description="The answers as a submission folder.")
    origins: dict[str, str] = Field(description="Case id → the release file of its answer.")


def _perfect(card: TaskSpec, private: Path, out: Path) -> Path:
    """The answers as a submission: ``submission.csv`` naming copies of the label files under
    ``predictions/`` (as a synthetic case's, so no public file repeats a private one)."""
    column = card_layout(card).file_column
    table = pd.read_csv(private / "test_labels.csv", dtype=str, keep_default_na=False)
    out.mkdir(parents=True)
    if column is not None:
        for i, rel in enumerate(table[column]):
            new = "predictions/" + rel.removeprefix("labels/")
            (out / new).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(private / rel, out / new)
            table.at[i, column] = new
    table.to_csv(out / "submission.csv", index=False)
    return out


def write_split(card: TaskSpec, reader: FamilyReader, cases: list[ReleaseCase], root: Path,
                out: Path) -> PreparedSplit:
    """Write ``cases`` as one split under ``out`` (replaced)."""
    if out.exists():
        shutil.rmtree(out)
    public, private = out / "public", out / "private"
    private.mkdir(parents=True)
    id_column = card_layout(card).id_column
    rows = []
    for case in cases:
        reader.write_inputs(card, case, public / "images")
        rows.append({id_column: case.case_id, **reader.answer(card, case, private, "labels")})
    pd.DataFrame(rows).to_csv(private / "test_labels.csv", index=False)
    perfect = _perfect(card, private, out / "perfect_submission")
    sample = write_format_example(card, perfect, out / "sample_submission")
    return PreparedSplit(challenge=card.task_id, case_ids=[c.case_id for c in cases],
                         public_dir=public, private_dir=private, sample_submission_dir=sample,
                         perfect_submission_dir=perfect,
                         origins={c.case_id: ORIGIN + c.label.relative_to(root).as_posix()
                                  for c in cases})


def prepare_release(card: TaskSpec, root: Path, work: Path) -> tuple[PreparedSplit,
                                                                     PreparedSplit]:
    """The release under ``root`` as (test, train) splits written under ``work``."""
    reader = reader_for(card.task_id)
    train, test = (sorted(split, key=lambda c: c.case_id)
                   for split in reader.split(card, reader.cases(card, root), root))
    return (write_split(card, reader, test, root, work / "test"),
            write_split(card, reader, train, root, work / "train"))
