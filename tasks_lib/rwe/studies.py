"""Load RWE study cards: ``datasets/rwe/<study_id>/{task.yaml, protocol.md, study.yaml}``.

``task.yaml`` is the one ``TaskSpec`` schema with source ``kind: rwe_synthetic_ehr``;
``protocol.md`` holds the prose (``## Background and objective``, ``## Methods``);
``study.yaml`` holds the design, data dictionary, cohort contract and question tree
(:class:`tasks_lib.rwe.types.StudyCard`, no values). ``aux/`` holds code lists for the agent.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from evaluators.core import InputDataError, Track
from tasks_lib.rwe.analyses import ANALYSES
from tasks_lib.rwe.types import Protocol, Study, StudyCard
from tasks_lib.sources import RWEStudySource
from tasks_lib.taskspec import TaskSpec, cards_dir, list_cards, load_card

SECTIONS = {"background": "Background and objective", "methods": "Methods"}
"""protocol.md section → heading (level 2)."""


def list_studies() -> list[str]:
    """Study ids of the shipped RWE cards, sorted."""
    return list_cards(Track.RWE)


def _sections(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    parts = re.split(r"(?m)^## +(.+?)\s*$", text)
    found = {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    out: dict[str, str] = {}
    for key, heading in SECTIONS.items():
        if not found.get(heading):
            raise InputDataError(str(path), f"missing section '## {heading}'")
        out[key] = found[heading]
    return out


def _study_card(path: Path) -> StudyCard:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return StudyCard.model_validate(raw)
    except FileNotFoundError:
        raise InputDataError(str(path), "study.yaml not found") from None
    except yaml.YAMLError as exc:
        raise InputDataError(str(path), f"invalid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputDataError(str(path), f"{where}: {first['msg']}") from None


def study_from_card(card: TaskSpec, folder: Path) -> Study:
    """Assemble a :class:`Study` from a card and its folder."""
    if not isinstance(card.source, RWEStudySource):
        raise InputDataError(str(folder / "task.yaml"), "source.kind must be rwe_synthetic_ehr")
    sc = _study_card(folder / card.source.study)
    if sc.analysis not in ANALYSES:
        raise InputDataError(str(folder / card.source.study),
                             f"analysis {sc.analysis!r} is not registered; known: "
                             f"{', '.join(ANALYSES.names())}")
    prose = _sections(folder / card.source.protocol)
    protocol = Protocol(background=prose["background"], methods=prose["methods"],
                        data_dictionary=sc.data_dictionary, cohort=sc.cohort)
    try:
        return Study(study_id=card.task_id, title=card.title, design=sc.design, model=sc.model,
                     analysis=sc.analysis, negative_control=sc.negative_control,
                     protocol=protocol, sentences=sc.sentences)
    except ValidationError as exc:
        raise InputDataError(str(folder / card.source.study),
                             exc.errors()[0]["msg"]) from None


def load_study(study_id: str) -> Study:
    """Load and check the study card ``study_id`` (unknown ids fail with the known ids)."""
    card = load_card(Track.RWE, study_id)
    return study_from_card(card, cards_dir(Track.RWE) / study_id)


def load_studies(study_ids: list[str] | None = None) -> list[Study]:
    """The given studies (default: every shipped card), in order."""
    return [load_study(s) for s in (study_ids or list_studies())]
