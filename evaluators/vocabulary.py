"""The words of the bottom layer that need no library: track names, tiers, stages, run states
and the two failure classes (ARCHITECTURE §3, §6).

:mod:`evaluators.core` re-exports every name here (import them from there); they live apart so
that code which only needs the words, such as the command line's ``--help``, does not import
pydantic.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

__all__ = ["TRACK_NAME", "InputDataError", "InvalidSubmissionError", "RunStatus", "Stage", "Tier",
           "Track"]


class Track(str):
    """A track name: a family of tasks sharing one kit (``tasks_lib/tracks/``), open to any
    registered kit's name (a lowercase identifier); whether a kit serves it is asked where a kit
    is looked up (``kit_for``), which fails with the registered names.

    The built-in tracks are constants (``Track.QA``, …); equal names are one object, so ``is``
    and ``==`` agree. Like a ``StrEnum`` member, a track is its name (``str``, JSON) and has
    ``.value``.
    """

    __slots__ = ()
    _interned: ClassVar[dict[str, Track]] = {}

    QA: ClassVar[Track]
    SEGMENTATION: ClassVar[Track]
    ENHANCEMENT: ClassVar[Track]
    VQA: ClassVar[Track]
    REPORT_GENERATION: ClassVar[Track]
    DETECTION: ClassVar[Track]
    CHALLENGE: ClassVar[Track]
    MEDBENCH: ClassVar[Track]
    RWE: ClassVar[Track]

    def __new__(cls, name: str) -> Track:
        """The track named ``name`` (ValueError unless a lowercase identifier)."""
        found = cls._interned.get(name)
        if found is not None:
            return found
        if not isinstance(name, str) or not TRACK_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a track name (a lowercase identifier, e.g. "
                             "'segmentation')")
        return cls._interned.setdefault(name, super().__new__(cls, name))

    @property
    def value(self) -> str:
        """The track's name (as a ``StrEnum`` member's ``.value``)."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Track({self.value!r})"

    def __reduce__(self) -> tuple[type[Track], tuple[str]]:
        return (Track, (self.value,))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler
                                     ) -> CoreSchema:
        """Validated from a name, serialised as the name."""
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(
                str.__str__, when_used="json"))


TRACK_NAME = re.compile(r"[a-z][a-z0-9_]*")
"""What a track name looks like."""
for _name in ("qa", "segmentation", "enhancement", "vqa", "report_generation", "detection",
              "challenge", "medbench", "rwe"):
    setattr(Track, _name.upper(), Track(_name))


class Tier(StrEnum):
    """How much scaffolding the brief gives (same data, metric and time)."""

    LITE = "lite"
    STANDARD = "standard"
    PRO = "pro"


class Stage(StrEnum):
    """AutoMedBench workflow stages."""

    S1 = "s1"
    S2 = "s2"
    S3 = "s3"
    S4 = "s4"
    S5 = "s5"


class RunStatus(StrEnum):
    """Terminal state of a run."""

    COMPLETED = "completed"
    TIMEOUT = "timeout"
    PARTIAL = "partial"
    """Stopped early by its cost budget (what it answered is kept; re-run to resume)."""
    INVALID = "invalid"
    ERROR = "error"


class InvalidSubmissionError(ValueError):
    """A submission breaks the task's IO contract (the agent's fault): evaluators raise it where
    they detect it (a prediction of the wrong shape, a detection without a score, …)."""


class InputDataError(ValueError):
    """Input data is malformed; the message names the file (and line) and what is wrong."""

    def __init__(self, source: str, reason: str, line: int | None = None) -> None:
        self.source, self.reason, self.line = source, reason, line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")
