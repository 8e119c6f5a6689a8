"""The evaluator cell: a research cell's product score — its kit's :meth:`score
<tasks_lib.tracks.base.TrackKit.score>` — inside an evaluator sandbox.

The evaluator sandbox (network off, pool and submission read-only, only ``/output`` writable) runs
``python -m tasks_lib.harness.evaluate RUN SUBMISSION OUT`` with the project's packages, the
reference data and the code of the kits kept outside the tree (``MEDFLOWS_KIT_MODULES``) bound
read-only; it imports the run's kit only (its shipped module, or those kits). Inside, the run's kit
scores the folder exactly as every other scoring path does (no Prefect server inside), on the run
record with its pool at ``/pool`` and a task-card folder holding the run's card only; the full
:class:`~tasks_lib.records.ScoreCard` is written to ``/output`` and the host reads it back.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.sandbox.base import Language, Mount, SandboxSpec, evaluator_spec
from tasks_lib.settings import PROJECT_ROOT, get_settings
from tasks_lib.taskspec import TaskSpec

PACKAGES = ("flows", "tasks_lib", "evaluators", "expectations")
RUN, SCORE, CARDS = "run.json", "score_card.json", "datasets"
POOL = "/pool"
"""Where the run's pool appears inside the evaluator sandbox."""


class EvaluatorCellError(RuntimeError):
    """The evaluator sandbox failed (our bug or our environment's: kits never raise on a bad
    submission, they score it by policy)."""


def score_in_process(run: RunRecord, submission: Path) -> ScoreCard:
    """The run's kit's product score of ``submission`` (runs inside the sandbox). Only that
    kit is imported (a shipped track's module, else the configured extra kits): the whole
    catalog costs the sandbox seconds of imports per evaluation."""
    from tasks_lib.tracks.lazy import kit_of

    return kit_of(run.track).score(run, submission)


def write_inputs(output: Path, run: RunRecord, card: TaskSpec) -> None:
    """The run record (its pool at :data:`POOL`) and a card folder holding only the run's card
    (``datasets/<track>/<task_id>/task.yaml``; Dask off: the evaluator sandbox is one
    memory-capped process tree without a scheduler, and the values are the same either way)."""
    (output / RUN).write_text(run.model_copy(update={"pool_url": POOL}).model_dump_json(),
                              encoding="utf-8")
    folder = output / CARDS / card.track.value / card.task_id
    folder.mkdir(parents=True)
    serial = card.model_copy(update={"policy": card.policy.model_copy(update={"dask": False})})
    (folder / "task.yaml").write_text(serial.model_dump_json(), encoding="utf-8")


def evaluator_sandbox_spec(pool_dir: Path, submission: Path, output: Path,
                           forbidden: list[str]) -> SandboxSpec:
    """Evaluator profile plus the pool, the project's packages, the reference data and the
    code of the kits kept outside the tree (``MEDFLOWS_KIT_MODULES``, with the setting and the
    ``PYTHONPATH`` that import them; :func:`tasks_lib.tracks.extra.sandbox_view`), all
    read-only."""
    from tasks_lib.tracks.extra import sandbox_view

    base = evaluator_spec(pool_dir / "private", submission, output, forbidden)
    data = get_settings().data_root.resolve()
    kits = sandbox_view()
    mounts = [*base.mounts, Mount(host=pool_dir.resolve(), target=POOL)]
    mounts += [Mount(host=PROJECT_ROOT / p, target=str(PROJECT_ROOT / p)) for p in PACKAGES
               if (PROJECT_ROOT / p).is_dir()]
    mounts += [Mount(host=data, target=str(data))] if data.is_dir() else []
    mounts += [Mount(host=path, target=str(path)) for path in kits.binds]
    env = {"MEDFLOWS_RESULTS_DIR": "/output/.results", "MEDFLOWS_STORAGE_URL": "/output/.storage",
           "MEDFLOWS_DATASETS_DIR": f"/output/{CARDS}", "MEDFLOWS_DATA_ROOT": str(data),
           "PREFECT_HOME": "/output/.prefect", "GX_ANALYTICS_ENABLED": "false",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", **kits.env}
    return base.model_copy(update={"mounts": mounts, "env": env})


def run_evaluator(sandbox_factory: type, run: RunRecord, card: TaskSpec, pool_dir: Path,
                  submission: Path, forbidden: list[str], timeout_s: float = 900) -> ScoreCard:
    """Score ``run``'s submission in a fresh evaluator sandbox built by ``sandbox_factory`` (a
    backend class).

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
        write_inputs(output, run, card)
        spec = evaluator_sandbox_spec(pool_dir, folder, output, forbidden)
        sandbox = sandbox_factory(spec)
        try:
            result = sandbox.execute(Language.BASH, f"cd /output && {sys.executable} -m "
                                     f"tasks_lib.harness.evaluate /output/{RUN} /submission "
                                     f"/output/{SCORE}", timeout_s)
        finally:
            sandbox.close()
        if result.exit_code != 0 or not (output / SCORE).is_file():
            raise EvaluatorCellError(f"evaluator cell failed on {submission} (exit "
                                     f"{result.exit_code}):\n{result.stderr[-3000:]}")
        return ScoreCard.model_validate_json((output / SCORE).read_text(encoding="utf-8"))


def main(argv: list[str]) -> None:
    """``python -m tasks_lib.harness.evaluate RUN SUBMISSION OUT``."""
    run_path, submission, out = argv
    run = RunRecord.model_validate_json(Path(run_path).read_text(encoding="utf-8"))
    score = score_in_process(run, Path(submission))
    Path(out).write_text(score.finite().model_dump_json(), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
