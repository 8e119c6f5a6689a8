"""Challenge cards: ``datasets/challenge/<id>/task.yaml`` — ordinary :class:`TaskSpec` cards
whose source is a :class:`~tasks_lib.sources.ChallengeSource` (leaderboard + submission layout).
"""

from __future__ import annotations

from evaluators.core import InputDataError, Track, UnknownNameError
from tasks_lib.sources import ChallengeSource, SubmissionLayout
from tasks_lib.taskspec import TaskSpec, list_cards, load_card


def list_challenges() -> list[str]:
    """Ids of the shipped challenge cards, sorted."""
    return list_cards(Track.CHALLENGE)


def load_challenge(challenge_id: str) -> TaskSpec:
    """Load and schema-check one challenge card; an unknown id fails with the known ids."""
    if challenge_id not in list_challenges():
        raise UnknownNameError("challenge", challenge_id, list_challenges())
    card = load_card(Track.CHALLENGE, challenge_id)
    challenge_source(card)
    return card


def challenge_source(card: TaskSpec) -> ChallengeSource:
    """The card's challenge source (leaderboard, submission layout)."""
    if not isinstance(card.source, ChallengeSource):
        raise InputDataError(card.task_id, "not a challenge card (source.kind must be "
                                           "rexmle_challenge)")
    return card.source


def layout(card: TaskSpec) -> SubmissionLayout:
    """The submission layout of a challenge card."""
    return challenge_source(card).submission
