"""What the five imaging track kits share: score a submission folder against a built pool.

inspect (a measurement frame per case) → validate (the track's Great Expectations suite) →
per-case values of the card's metrics (Dask for volumes when the card's policy asks) →
dataset-level values → policy → S4/S5 → :class:`~tasks_lib.records.ScoreCard`. Each track's
kit (``tasks_lib/tracks/<track>.py``) fills in its renderer, case scorer, dataset metrics,
baseline writer, policy and scripted recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evaluators.core import InputDataError, Track
from expectations import SuiteSpec
from tasks_lib.audits.baselines import Baseline
from tasks_lib.harness.environment import Environment
from tasks_lib.imaging.baselines import BaselineFiles
from tasks_lib.imaging.checks import CaseCheck, check_text_case
from tasks_lib.imaging.dataset import FolderLayout, user_card
from tasks_lib.imaging.pool import load_task, read_manifest
from tasks_lib.imaging.render import Rendered, Renderer
from tasks_lib.imaging.rotation import CaseRotation
from tasks_lib.imaging.scoring import Assembly, finite_values, per_case_rows, score_card
from tasks_lib.imaging.submission import Inspector, measure_submission
from tasks_lib.imaging.types import FrameRow, PoolManifest
from tasks_lib.imaging.validation import Judged, judge_frame
from tasks_lib.records import CaseScore, RunRecord, ScoreCard
from tasks_lib.storage import Storage
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.base import BuildRequest, BuiltPool, TrackKit

CaseScorer = Callable[[Path, Storage, PoolManifest, list[str], list[str]],
                      dict[str, dict[str, float]]]
"""``(submission, pool, manifest, valid case ids, metric names) → {case: {metric: value}}``."""
TaskScorer = Callable[[Path, Storage, PoolManifest, list[str], list[str]], dict[str, float]]
"""Dataset-level values (not means of per-case values), same arguments."""

EVALUATOR_VERSION = "imaging-3"
"""Tag on every imaging score card; bump when a metric, rule or policy changes."""


def _no_task_metrics(*_args: object) -> dict[str, float]:
    return {}


class ImagingKit(TrackKit):
    """An imaging track: generated pools of cases, file submissions, GX-validated frames."""

    evaluator_version = EVALUATOR_VERSION
    rotation = CaseRotation()

    def __init__(self, track: Track, *, render: Renderer, measure: Inspector,
                 case_scorer: CaseScorer,
                 case_metrics: tuple[str, ...], baseline: BaselineFiles, method: str,
                 recipe: str, task_scorer: TaskScorer = _no_task_metrics,
                 task_metrics: tuple[str, ...] = (), folder: FolderLayout | None = None,
                 case_check: CaseCheck = check_text_case) -> None:
        self.track = track
        self.suite = track.value
        self.stage_rubric = track.value
        self.case_check: CaseCheck = case_check
        """The construct-time rule one rendered or ingested case obeys
        (:func:`tasks_lib.imaging.checks.check_rendered`)."""
        self.render: Renderer = render
        self.measure: Inspector = measure
        self.case_scorer = case_scorer
        self.task_scorer = task_scorer
        self.case_metrics, self.task_metrics = case_metrics, task_metrics
        self.supported_metrics = tuple(dict.fromkeys(case_metrics + task_metrics))
        self.baseline: BaselineFiles = baseline
        self._method, self._recipe = method, recipe
        self.folder = folder
        """How a user's folder becomes this track's pool (None: generated tasks only)."""

    def environment(self, card: TaskSpec, pool_dir: Path | None = None) -> Environment:
        """A file task's: the pool's public view, a workspace whose ``submission/`` is the
        submission, no services (:class:`tasks_lib.harness.environment.Environment`)."""
        return Environment(card, pool_dir)

    def recipe(self) -> tuple[str, str]:
        """The scripted baseline agent's method name and ``method.py`` source."""
        return self._method, self._recipe

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """No submission, empty, constant, the public sample and perfect
        (:mod:`tasks_lib.imaging.audit_baselines`)."""
        from tasks_lib.imaging.audit_baselines import imaging_baselines

        return imaging_baselines(self.track.value, pool_url, out)

    def card(self, task_id: str) -> TaskSpec | None:
        """A shipped card of this track, else the stored card of a folder ingested into it."""
        shipped = super().card(task_id)
        if shipped is not None:
            return shipped
        stored = user_card(task_id)
        return stored if stored is not None and stored.track is self.track else None

    def after_publish(self, pool_url: str, manifest: PoolManifest) -> None:
        """Extra pool files after publishing (e.g. zarr copies of volumes); none by default."""

    def policy(self, card: TaskSpec, per_case: list[CaseScore]) -> tuple[float | None, list[str]]:
        """``(task score override, notes)`` of the card's policy; none by default."""
        return None, []

    def case_values(self, card: TaskSpec, submission: Path, pool_url: str, m: PoolManifest,
                    valid: list[str], names: list[str], use_dask: bool
                    ) -> dict[str, dict[str, float]]:
        """Per-case values in this process (kits with a Dask path override this)."""
        return self.case_scorer(submission, Storage(pool_url), m, valid, names)

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Score a run's submission folder against the run's pool version."""
        card = load_task(run.task_id)
        if card.track is not self.track:
            raise ValueError(f"{run.task_id}: a {card.track.value} task, not {self.track.value}")
        return self.score_folder(card, run.pool_url, submission, run.run_id)

    def score_folder(self, card: TaskSpec, pool_url: str, submission: Path,
                     run_id: str | None = None, use_dask: bool | None = None) -> ScoreCard:
        """Score a submission folder (never raises on a bad submission)."""
        self.check_card(card)
        m = read_manifest(pool_url)
        rows, validation = self.validate(measure_submission(submission, m), m)
        valid = [r.case_id for r in rows if r.valid]
        wanted = [ref.evaluator for ref in card.metrics if ref.evaluator]
        case_names = [n for n in wanted if n in self.case_metrics]
        task_names = [n for n in wanted if n in self.task_metrics]
        dask = card.policy.dask if use_dask is None else use_dask
        values = self.case_values(card, submission, pool_url, m, valid, case_names, dask)
        task = self.task_scorer(submission, Storage(pool_url), m, valid, task_names)
        rows, values, task, notes = finite_values(m, rows, values, task)
        per_case = per_case_rows(m, rows, values, case_names)
        override, policy_notes = self.policy(card, per_case)
        assembly = Assembly(rows, per_case, task, validation, (override, policy_notes + notes))
        return score_card(card, m, self.evaluator_version, assembly, run_id)

    def validate(self, rows: list[FrameRow], m: PoolManifest) -> Judged:
        """Run the track's suite (:attr:`suite_file` where the kit keeps its own) on the
        measurement frame; its verdict folded into the rows."""
        own = (SuiteSpec.model_validate_json(self.suite_file.read_text(encoding="utf-8"))
               if self.suite_file is not None else None)
        return judge_frame(self.suite or self.track.value, rows, m, own)

    def build(self, request: BuildRequest) -> BuiltPool:
        """Construct's front part for one task (``request.tasks``: its id): ingest (render the
        shipped card's cases, or read the user's folder ``options["from_dir"]`` as a task of
        this track, or a public release in ``options["layout"]``, or the user's download of a
        public-release card) → validate → de-identify → write vN → the public sample
        submission. The pool is named by the task id; the card's source holds the seed."""
        from tasks_lib.imaging import steps
        from tasks_lib.imaging.dataset import require_generated
        from tasks_lib.imaging.intake import folder_task_card
        from tasks_lib.imaging.releases import as_layout

        if len(request.tasks) != 1:
            raise InputDataError("--task", f"the {self.track.value} kit builds one pool per "
                                           "task id; give one")
        task_id = request.tasks[0]
        if request.pool_id not in (None, task_id) or request.seed is not None:
            raise InputDataError("--pool-id/--seed", "an imaging pool is named by its task id "
                                                     "and seeded by its card")
        unknown = sorted(set(request.options) - {"from_dir", "layout"})
        if unknown:
            raise InputDataError(", ".join(unknown), f"not a {self.track.value} build option "
                                                     "(it takes from_dir, layout)")
        from_dir, layout = request.option("from_dir"), request.option("layout")
        if from_dir is None:
            card = load_task(task_id)
            require_generated(card)
            rendered = steps.render(card)
        else:
            card = folder_task_card(Path(str(from_dir)), self.track, task_id,
                                    as_layout(layout))
            rendered = steps.ingest(card, str(from_dir))
        if card.track is not self.track:
            raise InputDataError(task_id, f"a {card.track.value} task, not {self.track.value}")
        steps.validate(card, rendered)
        clean = steps.deidentify_step(card, rendered)
        published = steps.publish(card, request.out, rendered, clean)
        steps.sample_submission(published.url, published.manifest)
        return BuiltPool(published.url, published.manifest, len(published.manifest.cases))

    def build_files(self, card: TaskSpec) -> Rendered:
        """Render the card's cases (construct's ingest for generated tasks)."""
        self.check_card(card)
        return self.render(card)

