"""The local metric a challenge pool ships to the agent: ``public/local_metric.py``.

It grades a submission folder against the pool's *public* validation split
(``public/validation/reference/``: a second synthetic case, another seed, whose answers are
public by design) with the card's metrics — the scorer's own grading code
(:func:`tasks_lib.challenge.grade.grade_submission`), copied with its import closure into
``public/local_metric/lib/`` so it runs inside the agent sandbox, where the project is not
mounted. It takes no path to the test answers: it reads only the folder it is given and files
beside itself under ``public/``.

Usage inside the sandbox: ``python /public/local_metric.py SUBMISSION_DIR`` → one JSON line
``{"split": "validation", "n_cases": …, "metrics": {…}}`` (an invalid submission prints
``{"invalid": "…"}`` and exits 1).
"""

from __future__ import annotations

from tasks_lib.settings import PROJECT_ROOT
from tasks_lib.taskspec import TaskSpec

SCRIPT = "local_metric.py"
"""Key of the script under ``public/``."""
BUNDLE = "local_metric"
"""Folder (under ``public/``) of the card JSON and the copied grading code."""
VALIDATION = "validation"
"""Folder (under ``public/``) of the validation split: images, sample submission, reference."""
LIB_FILES = ("tasks_lib/__init__.py", "tasks_lib/challenge/__init__.py",
             "tasks_lib/challenge/card.py", "tasks_lib/challenge/files.py",
             "tasks_lib/challenge/grade.py", "tasks_lib/challenge/leaderboard.py",
             "tasks_lib/challenge/rank.py", "tasks_lib/domain.py", "tasks_lib/errors.py",
             "tasks_lib/selection.py", "tasks_lib/settings.py", "tasks_lib/sources.py",
             "tasks_lib/taskspec.py", "tasks_lib/submission_limits.py")
"""The import closure of ``grade_submission`` inside ``tasks_lib`` (with every top-level module
of ``evaluators`` and ``evaluators.graders``, see :func:`lib_files`)."""

SCRIPT_TEXT = '''"""Local metric: grade a submission folder on the PUBLIC validation split.

    python /public/local_metric.py SUBMISSION_DIR

SUBMISSION_DIR holds submission.csv (and the files it names) for the validation case ids
(see validation/sample_submission/). The test answers are not in the public view; this script
cannot grade the test split.
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "local_metric" / "lib"))
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]

from evaluators.core import InvalidSubmissionError  # noqa: E402
from tasks_lib.challenge.grade import grade_submission  # noqa: E402
from tasks_lib.taskspec import TaskSpec  # noqa: E402


def main(argv):
    if len(argv) != 1:
        print(__doc__)
        return 2
    card = TaskSpec.model_validate_json((HERE / "local_metric" / "card.json").read_text())
    reference = HERE / "validation" / "reference"
    try:
        metrics, n_cases = grade_submission(card, Path(argv[0]), reference)
    except InvalidSubmissionError as exc:
        print(json.dumps({"split": "validation", "invalid": str(exc)}))
        return 1
    print(json.dumps({"split": "validation", "n_cases": n_cases, "metrics": metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def lib_files() -> list[str]:
    """Project files the local metric needs (paths relative to the project root, sorted)."""
    evaluators = sorted(p.relative_to(PROJECT_ROOT).as_posix()
                        for pattern in ("*.py", "graders/*.py")
                        for p in (PROJECT_ROOT / "evaluators").glob(pattern))
    return sorted({*LIB_FILES, *evaluators})


def bundle(card: TaskSpec) -> dict[str, bytes]:
    """The local metric's files, keyed relative to ``public/``: the script, the card and the
    grading code."""
    files = {SCRIPT: SCRIPT_TEXT.encode(),
             f"{BUNDLE}/card.json": card.model_dump_json(indent=1).encode()}
    files |= {f"{BUNDLE}/lib/{rel}": (PROJECT_ROOT / rel).read_bytes() for rel in lib_files()}
    return files
