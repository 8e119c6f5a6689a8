"""The RWE audit finds the private answers in any public file under any name (issue 21.6): a
renamed copy of ``private/answers.jsonl``, its rows re-serialized into another JSON file, and an
unrounded answer value printed in a note; the honest pool stays clean (``medflows audit pool``
on the pool and its study database)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import flows.cli.audit  # noqa: F401  (registers audit pool)
from flows.cli import app
from tests.tasks_lib.rwe.ehr_db import loaded_db


def _answer_key(pool: Path) -> tuple[int, list[str]]:
    res = CliRunner().invoke(app, ["audit", "pool", str(pool), "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    found = next(f for f in json.loads(res.stdout)["findings"] if f["check"] == "answer_key")
    return res.exit_code, found["evidence"]


@pytest.mark.slow
def test_rwe_answers_in_public_files_are_named(tmp_path: Path) -> None:
    from tasks_lib.rwe import build
    from tasks_lib.rwe.studies import load_studies
    from tasks_lib.rwe.types import SchemaNames

    shared = loaded_db()  # the EHR the other RWE tests of this process load (cached)
    builds = [build.build_study(s, shared.db) for s in load_studies()
              if s.study_id in ("albumin-ap", "glucose-ich")]
    pool = tmp_path / "pool"
    build.write_pool("rwe-leaks", str(pool), 0, 8000, shared.loaded, SchemaNames(), builds)
    assert _answer_key(pool) == (0, [])

    answers = pool / "private/answers.jsonl"
    shutil.copy(answers, pool / "public/faq.txt")
    rows = [json.loads(x) for x in answers.read_text().splitlines()]
    (pool / "public/worked_examples.json").write_text(json.dumps({"examples": rows}, indent=2))
    field = next(f for f in rows[1]["fields"].values() if f["exact"] > 1)  # a ratio
    (pool / "public/notes.md").write_text(f"Pilot estimate: {field['exact']:.6f}.\n")
    code, evidence = _answer_key(pool)
    assert code == 1
    assert ("public/faq.txt: byte-identical to the reference private/answers.jsonl (rule: no "
            "private file in the public view)") in evidence
    assert any(e.startswith("public/worked_examples.json: 2 JSON row(s) (its rows 1, 2) of "
                            "the reference private/answers.jsonl") for e in evidence)
    note = next(e for e in evidence if e.startswith("public/notes.md: 1 unrounded value(s): "))
    assert (f"{field['exact']:.6f} (line 1) = private/answers.jsonl "
            f"{rows[1]['study_id']}.{field['id']}") in note
    assert len(evidence) == 3  # the rows' values are not named again
