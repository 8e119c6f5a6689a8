"""The track seam: one kit per track, registered once in :data:`KITS` (ARCHITECTURE §5).

A kit is the only place that knows what a track does. Everything else — construct, execute, the
one score flow, reports, the CLI, the harness — asks the run's or card's kit and never branches
on the track name. Adding a track = one kit module in ``tasks_lib/tracks/`` (imported in
:mod:`tasks_lib.tracks.catalog`), one expectations suite, task cards, golden baselines and tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pydantic import Field

from evaluators.core import Frozen, InputDataError, Registry, Track, UnknownNameError
from tasks_lib.audits.kit_data import AnswerKeyData
from tasks_lib.pool_format import PoolHeader
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.storage import Storage
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits
from tasks_lib.taskspec import TaskSpec, list_cards, load_card

if TYPE_CHECKING:
    from tasks_lib.audits.baselines import Baseline
    from tasks_lib.execution.environment import ItemEnvironment
    from tasks_lib.harness.environment import Environment
    from tasks_lib.report.board import Scored
    from tasks_lib.report.paired import Found
    from tasks_lib.rotation.kit import PoolRotation


JSONScalar = str | int | float | bool | None
OptionValue = JSONScalar | Sequence[JSONScalar]
"""A kit-specific build knob: a JSON scalar or a list of them."""


class BuildRequest(Frozen):
    """What to build: the task ids (cards) of one kit and where the version goes."""

    tasks: list[str] = Field(description="Task ids of the kit's cards the pool serves (empty: "
                             "the kit's default set where it has one).")
    pool_id: str | None = Field(default=None, description="Pool name (None: the kit's default, "
                                "e.g. the task id of a one-card pool).")
    out: str | None = Field(default=None, description="Write the version here instead of "
                            "``pools/<pool_id>/vN``.")
    seed: int | None = Field(default=None, description="Seed of generated data (None: the "
                             "kit's default).")
    options: dict[str, OptionValue] = Field(default_factory=dict, description="Kit-specific "
                                            "knobs (each kit documents and checks its own).")

    def option(self, name: str, default: OptionValue = None) -> OptionValue:
        """The value of knob ``name`` (``default`` when absent)."""
        return self.options.get(name, default)


class BuiltPool(NamedTuple):
    """A written (not yet audited or ledgered) pool version."""

    url: str
    """Root URL of the version (holds ``manifest.json``)."""
    manifest: PoolHeader
    """Its manifest (the kit's own subclass)."""
    n_items: int
    """Items the ledger row counts."""


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
        limits: What inspecting one submission may cost (file and decompressed sizes, JSON
            depth and numbers, entries); every reader of a submitted file checks them before
            it allocates (:mod:`tasks_lib.submission_limits`).
    """

    track: Track
    evaluator_version: str
    supported_metrics: tuple[str, ...]
    suite: str | None = None
    limits: SubmissionLimits = DEFAULT_LIMITS
    stage_rubric: str | None = None
    """Stage-rubric set (``evaluators/judges/rubrics/<name>.yaml``) the S1–S3 judges grade this
    kit's research cells with; None = no stage judges: a cell's score card is :meth:`score`'s
    alone, keyed by :attr:`evaluator_version`."""
    score_in_sandbox: bool = True
    """A research cell's :meth:`score` runs in a fresh evaluator sandbox (pool and submission
    read-only, no network); False = in the scoring process (RWE reads its study server's
    session record)."""
    cards_root: Path | None = None
    """Folder holding this kit's cards (``<root>/<task_id>/task.yaml``); None = the shipped
    ``datasets/<track>/``."""
    suite_file: Path | None = None
    """The Great Expectations suite file of :attr:`suite` when the kit keeps it outside
    ``expectations/suites/`` (e.g. beside its module); None =
    ``expectations/suites/<suite>.json``."""
    rotation: PoolRotation
    """How this track's pools rotate: their units and stratum fields, and how a pool-shaped
    subset is written (the one rotate flow does the rest: :mod:`tasks_lib.rotation`)."""

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

    @abstractmethod
    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """Write under ``out`` the baseline submissions of the pool at ``pool_url``: its null
        agents (no submission, empty, constant answers: whatever the track has), the pool's
        public sample submission where it publishes one, and ``perfect``; each with the audit
        floor it must stay at or below (:mod:`tasks_lib.audits.baselines`).

        A pool whose tasks are run one by one (:meth:`pool_task_ids` is not None) gets each
        baseline as one ``<task_id>/`` sub-folder per task, the submission of a run on that
        task; the audit scores them task by task (:mod:`tasks_lib.audits.scoring`)."""

    def pool_task_ids(self, pool_url: str) -> list[str] | None:
        """The tasks of the pool at ``pool_url`` when each is run and scored on its own (a run
        names one of them and the pool; an RWE pool's studies); None: one run covers the whole
        pool, as its manifest's ``task_id`` (or ``pool_id``).

        The exploit audit reads it to score a baseline: as one run on the pool (None), or as
        one run per task on the baseline's ``<task_id>/`` sub-folder (a missing one is an empty
        submission), aggregated into one card: per task one ``per_case`` entry; the task score
        (and the primary metric) the mean over every task, an invalid one counting 0; every
        other metric the mean over the tasks that report it; coverage the share of valid
        tasks (:func:`tasks_lib.audits.scoring.score_folder`)."""
        return None

    def audit_value(self, card: ScoreCard) -> float:
        """What the audit floors bound on a score card: the task score (None counts 0)."""
        return float(card.task_score or 0.0)

    def board_outcomes(self, items: Sequence[Scored]) -> Found:
        """One leaderboard row's per-item outcomes for the paired statistics (``items``: the
        row's scored replicates), or why none: by default the per-case primary values of the
        stored score cards, whose weighted mean is the task score
        (:func:`tasks_lib.report.paired.row_outcomes`). A kit whose task score is no such mean
        returns its own :class:`~tasks_lib.report.paired.BoardOutcomes`."""
        from tasks_lib.report.paired import row_outcomes

        return row_outcomes(items)

    def answer_key_data(self, pool_url: str) -> AnswerKeyData:
        """What the answer-key search needs beyond the pool's files: the case ids of the
        manifest's ``cases`` (kits add item texts, reference values and their own leak
        evidence)."""
        cases = Storage(pool_url).read_json("manifest.json").get("cases") or []
        return AnswerKeyData(case_ids=frozenset(str(c["case_id"]) for c in cases))

    def judge_answers(self, pool_url: str, answers: list[str], model: str
                      ) -> list[float | None] | None:
        """The values this track's answer judge gives ``answers`` to one judged item of the
        pool (the exploit audit's injection probe; None per failed judgement); None: the
        track judges no answer (its stage judges, if any, are :attr:`stage_rubric`'s)."""
        return None

    def recipe(self) -> tuple[str, str]:
        """``(method name, Python source)`` of the scripted baseline agent's method (research
        cells); kits without research cells raise."""
        raise InputDataError(self.track.value, f"the {self.track.value} track has no scripted "
                                               "research recipe")

    def environment(self, card: TaskSpec, pool_dir: Path | None = None) -> Environment:
        """What an agent gets on ``card`` in a research cell, on the pool at ``pool_dir`` (None:
        the newest usable pool serving the card): the public view, workspace, tools, services
        and limits (:mod:`tasks_lib.harness.environment`); kits without research cells raise."""
        raise InputDataError(card.task_id, f"the {self.track.value} track has no research "
                                           "cells (its agents run through `medflows execute`)")

    def item_environment(self, pool_url: str) -> ItemEnvironment:
        """The pool at ``pool_url`` as item agents see it (replays, reasoning methods, API
        endpoints answering items), for the one execute path (:mod:`tasks_lib.execution`);
        kits whose agents work in sandboxes on task cards raise (their agents run as research
        cells)."""
        raise InputDataError(pool_url, f"the {self.track.value} kit's agents run as research "
                                       "cells (on the pool's cards), not as item agents")

    def build(self, request: BuildRequest) -> BuiltPool:
        """Construct's front part for this kit: build the pool of ``request.tasks`` (ingest or
        generate, validate, de-identify where the kit does) and write it as version N
        (:func:`tasks_lib.pool_publish.write_version`); the exploit audit and the ledger row are
        the shared tail's (:func:`tasks_lib.pool_publish.publish_version`). Called inside a
        flow run (a kit may pause it, e.g. QA's expert review). Kits that build no pools
        raise."""
        raise InputDataError(self.track.value, f"the {self.track.value} kit builds no pools")

    def task_ids(self) -> list[str]:
        """Ids of the tasks this kit serves: its shipped cards
        (``<cards_root or datasets/<track>>/*/task.yaml``)."""
        return list_cards(self.track, self.cards_root)

    def card(self, task_id: str) -> TaskSpec | None:
        """The card of ``task_id`` when this kit serves it, else None."""
        return (load_card(self.track, task_id, self.cards_root) if task_id in self.task_ids()
                else None)


KITS: Registry[TrackKit] = Registry("track kit")
"""Every track's kit, keyed by track name (filled by :mod:`tasks_lib.tracks.catalog`, which the
composition roots import once: the ``flows`` package, the evaluator sandbox's entry and the
tests' conftest; nothing here imports it)."""


def find_card(task_id: str) -> TaskSpec:
    """The card of ``task_id``, from whichever kit serves it (every track's cards, and cards a
    kit keeps elsewhere such as the imaging kits' ingested folders); an unknown id fails with
    every known one."""
    kits = [KITS.get(name) for name in KITS.names()]
    for kit in kits:
        card = kit.card(task_id)
        if card is not None:
            return card
    raise UnknownNameError("task", task_id, sorted(t for kit in kits for t in kit.task_ids()))


def task_track(ids: list[str]) -> str:
    """The one registered kit whose cards hold every id of ``ids`` (the card names its track).

    Raises:
        InputDataError: an id no kit lists, an id two kits list, or ids of different kits —
            the message names the known ids.
    """
    holders = {name: set(KITS.get(name).task_ids()) for name in KITS.names()}
    tracks: set[str] = set()
    for task_id in ids:
        found = sorted(name for name, cards in holders.items() if task_id in cards)
        if len(found) != 1:
            known = sorted({c for cards in holders.values() for c in cards})
            why = "unknown task id" if not found else f"held by {' and '.join(found)}"
            raise InputDataError(f"--task {task_id}", f"{why}; known task ids: "
                                                      f"{', '.join(known)}")
        tracks.add(found[0])
    if len(tracks) != 1:
        raise InputDataError("--task", f"name tasks of one kit (got {', '.join(sorted(tracks))})")
    return tracks.pop()


def kit_for(track: Track | str) -> TrackKit:
    """The kit of ``track`` (an unknown or unregistered track fails with the registered ones)."""
    return KITS.get(Track(track).value if isinstance(track, Track) else track)
