"""The evaluator cell: the product score of a run's submission, inside an evaluator sandbox.

The evaluator sandbox (network off, pool and submission read-only, only ``/output`` writable)
runs ``python -m tasks_lib.harness.evaluate CARD POOL SUBMISSION OUT RUN_ID`` with the project's
packages bound read-only. Inside, the track's kit scores the folder — the same
``score_folder`` every other scoring path uses (no Prefect server inside) — and the full
:class:`~tasks_lib.records.ScoreCard` is written to ``/output``; the host reads it back.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

from tasks_lib.records import ScoreCard
from tasks_lib.sandbox.base import Language, Mount, SandboxSpec, evaluator_spec
from tasks_lib.settings import PROJECT_ROOT
from tasks_lib.taskspec import TaskSpec

PACKAGES = ("flows", "tasks_lib", "evaluators", "expectations")
CARD, SCORE = "task_card.json", "score_card.json"


class EvaluatorCellError(RuntimeError):
    """The evaluator sandbox failed (our bug or our environment's: kits never raise on a bad
    submission, they score it by policy)."""


def score_in_process(card: TaskSpec, pool_url: str, submission: Path,
                     run_id: str | None) -> ScoreCard:
    """The kit's product score of ``submission`` (runs inside the sandbox).

    Dask is off: the evaluator sandbox is one memory-capped process tree without a scheduler
    (the values are the same either way).
    """
    from tasks_lib.imaging.kit import imaging_kit
    from tasks_lib.imaging.pool import read_manifest
    from tasks_lib.tracks.base import kit_for

    own = kit_for(card.track).cell_score(card, Path(pool_url), submission, run_id,
                                         read_manifest(pool_url).content_hash)
    if own is not None:
        return own
    return imaging_kit(card.track).score_folder(card, pool_url, submission, run_id,
                                                use_dask=False)


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
                  forbidden: list[str], run_id: str | None,
                  timeout_s: float = 900) -> ScoreCard:
    """Score in a fresh evaluator sandbox built by ``sandbox_factory`` (a backend class).

    ``/output`` is a fresh temporary folder; nothing is written next to the submission. A
    missing submission folder is scored as an empty one.

    Raises:
        EvaluatorCellError: The sandboxed scorer exited non-zero or wrote no card.
    """
    with tempfile.TemporaryDirectory(prefix="medflows-eval-") as tmp:
        output, empty = Path(tmp) / "output", Path(tmp) / "empty"
        output.mkdir()
        empty.mkdir()
        folder = submission if submission.is_dir() else empty
        (output / CARD).write_text(card.model_dump_json(), encoding="utf-8")
        spec = evaluator_sandbox_spec(pool_dir, folder, output, forbidden)
        sandbox = sandbox_factory(spec)
        try:
            result = sandbox.execute(Language.BASH, f"cd /output && {sys.executable} -m "
                                     f"tasks_lib.harness.evaluate /output/{CARD} /pool "
                                     f"/submission /output/{SCORE} {shlex.quote(run_id or '')}",
                                     timeout_s)
        finally:
            sandbox.close()
        if result.exit_code != 0 or not (output / SCORE).is_file():
            raise EvaluatorCellError(f"evaluator cell failed on {submission} (exit "
                                     f"{result.exit_code}):\n{result.stderr[-3000:]}")
        return ScoreCard.model_validate_json((output / SCORE).read_text(encoding="utf-8"))


def main(argv: list[str]) -> None:
    """``python -m tasks_lib.harness.evaluate CARD POOL SUBMISSION OUT [RUN_ID]``."""
    card_path, pool, submission, out, *rest = argv
    card = TaskSpec.model_validate_json(Path(card_path).read_text(encoding="utf-8"))
    score = score_in_process(card, pool, Path(submission), rest[0] if rest and rest[0] else None)
    Path(out).write_text(score.finite().model_dump_json(), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
