"""The evaluator cell: score a run's submission inside an evaluator sandbox.

The evaluator sandbox (network off, pool and submission read-only, only ``/output`` writable)
runs ``python -m tasks_lib.harness.evaluate`` with the project's packages bound read-only; the
module composes the imaging score steps' plain functions (no Prefect server inside) and writes
the score card JSON to ``/output``. The host reads the card back.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.sandbox.base import Language, Mount, SandboxSpec, evaluator_spec
from tasks_lib.settings import PROJECT_ROOT
from tasks_lib.taskspec import TaskSpec

PACKAGES = ("flows", "tasks_lib", "evaluators", "expectations")
CARD, SCORE = "task_card.json", "score_card.json"


class ProductScore(Frozen):
    """What the evaluator cell returns to the harness."""

    task_score: float = Field(description="Primary metric after policy.")
    s4: float = Field(description="Inference completeness stage score.")
    s5: float = Field(description="Submission validity stage score.")
    metrics: dict[str, float] = Field(description="Task-level metric values.")
    validation_ok: bool = Field(description="The submission passed the track's suite.")
    card_json: str = Field(description="The full score card (JSON).")


def score_in_process(card: TaskSpec, pool_url: str, submission: str) -> str:
    """Score ``submission`` against the pool; the score card as JSON (runs inside the sandbox)."""
    from tasks_lib.imaging import steps
    from tasks_lib.imaging.pool import read_manifest

    manifest = read_manifest(pool_url)
    rows = steps.inspect.fn(submission, manifest)
    validation = steps.validate.fn(card.track.value, rows)
    per_case = steps.case_metrics.fn(card, submission, pool_url, manifest, rows, False)
    extra = steps.dataset_metrics.fn(submission, pool_url, manifest, rows)
    return steps.assemble.fn(card, manifest, rows, per_case, extra, validation).model_dump_json()


def evaluator_sandbox_spec(pool_dir: Path, submission: Path, output: Path,
                           forbidden: list[str]) -> SandboxSpec:
    """Evaluator profile plus the pool (read-only) and the project's packages (read-only)."""
    base = evaluator_spec(pool_dir / "private", submission, output, forbidden)
    mounts = [*base.mounts, Mount(host=pool_dir.resolve(), target="/pool")]
    mounts += [Mount(host=PROJECT_ROOT / p, target=str(PROJECT_ROOT / p)) for p in PACKAGES
               if (PROJECT_ROOT / p).is_dir()]
    env = {"MEDFLOWS_RESULTS_DIR": "/output/.results", "MEDFLOWS_STORAGE_URL": "/output/.storage",
           "PREFECT_HOME": "/output/.prefect", "GX_ANALYTICS_ENABLED": "false",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return base.model_copy(update={"mounts": mounts, "env": env})


def run_evaluator(sandbox_factory: type, card: TaskSpec, pool_dir: Path, submission: Path,
                  output: Path, forbidden: list[str], timeout_s: float = 900) -> ProductScore:
    """Score in a fresh evaluator sandbox built by ``sandbox_factory`` (a backend class)."""
    from tasks_lib.imaging.types import ScoreCard

    output.mkdir(parents=True, exist_ok=True)
    submission.mkdir(parents=True, exist_ok=True)
    (output / CARD).write_text(card.model_dump_json(), encoding="utf-8")
    sandbox = sandbox_factory(evaluator_sandbox_spec(pool_dir, submission, output, forbidden))
    try:
        result = sandbox.execute(Language.BASH, f"cd /output && {sys.executable} -m "
                                 f"tasks_lib.harness.evaluate /output/{CARD} /pool /submission "
                                 f"/output/{SCORE}", timeout_s)
    finally:
        sandbox.close()
    if result.exit_code != 0 or not (output / SCORE).is_file():
        raise InputDataError(str(submission), f"evaluator cell failed (exit {result.exit_code}):"
                                              f"\n{result.stderr[-3000:]}")
    text = (output / SCORE).read_text(encoding="utf-8")
    sc = ScoreCard.model_validate_json(text)
    return ProductScore(task_score=sc.task_score, s4=sc.s4, s5=sc.s5, metrics=sc.metrics,
                        validation_ok=sc.validation.ok, card_json=text)


def main(argv: list[str]) -> None:
    """``python -m tasks_lib.harness.evaluate CARD POOL SUBMISSION OUT``."""
    card_path, pool, submission, out = argv
    card = TaskSpec.model_validate_json(Path(card_path).read_text(encoding="utf-8"))
    Path(out).write_text(score_in_process(card, pool, submission), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
