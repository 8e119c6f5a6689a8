"""The track seam: one kit per track, registered once in :data:`KITS` (ARCHITECTURE §5).

A kit is the only place that knows what a track does. Everything else — construct, execute, the
one score flow, reports, the CLI, the harness — asks the run's or card's kit and never branches
on the track name. Adding a track = one kit module in ``tasks_lib/tracks/`` (imported in
:mod:`tasks_lib.tracks.catalog`), one expectations suite, task cards, golden baselines and tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from evaluators.core import InputDataError, Registry, Track
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.taskspec import TaskSpec
from tasks_lib.tracks.limits import DEFAULT_LIMITS, SubmissionLimits

if TYPE_CHECKING:
    from tasks_lib.audits.report import AuditReport
    from tasks_lib.domain import Tier
    from tasks_lib.harness.cell import CellPlan
    from tasks_lib.sandbox.base import SandboxBackend


class TrackKit(ABC):
    """What a track plugs into the pipeline.

    Attributes:
        track: The track this kit serves.
        evaluator_version: Tag on every score card the kit produces; bump it when a metric,
            policy or rule changes (re-scoring then appends a new score row).
        supported_metrics: Registered metrics this kit can compute for a card. A card may list
            any of them; every listed one lands on the score card.
        suite: Great Expectations suite validating the kit's measurement frame (None: the kit
            validates structurally, e.g. QA answers).
        baseline_kinds: Baseline submissions the kit can write (``perfect``, ``empty``,
            ``constant``, …) for golden tests.
        limits: What inspecting one submission may cost (file and decompressed sizes, JSON
            depth and numbers, entries); every reader of a submitted file checks them before
            it allocates (:mod:`tasks_lib.tracks.limits`).
    """

    track: Track
    evaluator_version: str
    supported_metrics: tuple[str, ...]
    suite: str | None = None
    baseline_kinds: tuple[str, ...] = ()
    limits: SubmissionLimits = DEFAULT_LIMITS
    scores_own_cells: bool = False
    """Research cells of this track are scored by :meth:`score` alone (no S1–S3 judges, no
    evaluator sandbox; RWE)."""
    rotation_flow: str | None = None
    """``module:function`` of the flow ``medflows pool rotate`` runs for this track's pools,
    called as ``(pool, size, seed, subset_id, activate)`` and returning the subset root URL
    (one parent pool); None = the generic rotate flow (QA pools)."""

    def check_card(self, card: TaskSpec) -> None:
        """Fail with the card and the known metrics if the card asks for one this kit lacks."""
        unknown = [m.name for m in card.metrics if m.evaluator is not None
                   and m.evaluator not in self.supported_metrics]
        if unknown:
            raise InputDataError(card.task_id, f"the {self.track.value} kit cannot compute "
                                               f"{', '.join(unknown)}; it computes "
                                               f"{', '.join(self.supported_metrics)}")

    @abstractmethod
    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """The product score card of a run's submission (a local folder), no judges.

        Invalid or missing cases are scored by the card's policy and recorded, never raised;
        only our own bugs and broken pools raise.
        """

    def audit(self, pool_url: str, judge_model: str, sandbox: bool) -> AuditReport | None:
        """This track's own exploit audit of the pool at ``pool_url`` (``medflows audit pool``
        asks the kit first); None = the generic checks of :func:`tasks_lib.audit.audit_pool`."""
        return None

    def recipe(self) -> tuple[str, str]:
        """``(method name, Python source)`` of the scripted baseline agent's method (research
        cells); kits without research cells raise."""
        raise InputDataError(self.track.value, f"the {self.track.value} track has no scripted "
                                               "research recipe")

    def research_card(self, task_id: str) -> TaskSpec | None:
        """The card of ``task_id`` when it is a research task of this track that the harness
        cannot find among the imaging cards (e.g. a challenge card), else None."""
        return None

    def cell_score(self, card: TaskSpec, pool_dir: Path, submission: Path, run_id: str | None,
                   pool_hash: str) -> ScoreCard | None:
        """The product score of a research cell's submission inside the evaluator sandbox
        (pool mounted at ``pool_dir``); None = the imaging kits' ``score_folder`` path."""
        return None

    def finish_cell_score(self, product: ScoreCard) -> ScoreCard:
        """Host-side additions to the product score the evaluator sandbox returned (data the
        sandbox does not mount, e.g. a challenge's leaderboard); default: unchanged."""
        return product

    def plan_research_cell(self, agent_id: str, task_id: str, tier: Tier,
                           backend: SandboxBackend, replicate: int, judge_model: str
                           ) -> CellPlan | None:
        """The plan of a research cell this kit runs itself (its own pool lookup and limits,
        e.g. RWE: the newest published pool holding the study); None = the generic plan on the
        task's own newest pool (:func:`tasks_lib.harness.cell.plan_cell`)."""
        return None

    def execute_research_cell(self, plan: CellPlan) -> RunRecord | None:
        """Execute a plan from :meth:`plan_research_cell` and record its run (store + ledger);
        None = the generic harness (:func:`tasks_lib.harness.cell.execute_cell`)."""
        return None


KITS: Registry[TrackKit] = Registry("track kit")
"""Every track's kit, keyed by track name (filled by :mod:`tasks_lib.tracks.catalog`)."""


def research_card(task_id: str) -> TaskSpec | None:
    """The card of a research task that a kit serves beyond the imaging cards (None: none)."""
    from tasks_lib.tracks import catalog  # noqa: F401  (registers every kit once)

    for name in KITS.names():
        card = KITS.get(name).research_card(task_id)
        if card is not None:
            return card
    return None


def kit_for(track: Track | str) -> TrackKit:
    """The kit of ``track`` (an unknown track fails with the known ones)."""
    from tasks_lib.tracks import catalog  # noqa: F401  (registers every kit once)

    return KITS.get(Track(track).value if isinstance(track, Track) else track)
