"""VQA questions whose answers follow from how each lesion image was built.

Per image: two closed questions (any lesion? any mass?), one count question, and — when the image
has lesions — the side of the largest lesion (ties: the first drawn). Answers are ``yes``/``no``,
a digit string, or ``left``/``right``.
"""

from __future__ import annotations

from pydantic import Field

from tasks_lib.domain import Frozen
from tasks_lib.imaging.lesions import Lesion, LesionCase, LesionClass


class VQAItem(Frozen):
    """One question with its known answer."""

    question_id: str = Field(description="'<case_id>-q<n>'.")
    kind: str = Field(description="closed | count | side.")
    question: str = Field(description="Question shown to the agent.")
    answer: str = Field(description="Reference answer.")


def largest(lesions: list[Lesion]) -> Lesion:
    """The lesion with the largest footprint diameter (first on ties)."""
    return max(lesions, key=lambda les: les.diameter_mm)


def answers_for(lesions: list[Lesion]) -> list[tuple[str, str, str]]:
    """``(kind, question, answer)`` triples for a set of lesions (used by references and the
    classical baseline, which passes detected lesions)."""
    out = [
        ("closed", "Is there any focal lesion in this image?", "yes" if lesions else "no"),
        ("closed", "Is there a mass in this image?",
         "yes" if any(les.label == LesionClass.MASS for les in lesions) else "no"),
        ("count", "How many focal lesions are visible?", str(len(lesions))),
    ]
    if lesions:
        out.append(("side", "On which side is the largest lesion?", largest(lesions).side))
    return out


def vqa_items(case: LesionCase) -> list[VQAItem]:
    """The questions of one image."""
    return [VQAItem(question_id=f"{case.case_id}-q{n}", kind=kind, question=q, answer=a)
            for n, (kind, q, a) in enumerate(answers_for(case.lesions))]
