"""`Track` is open: any lowercase identifier names a track, the built-in ones are constants, and
whether a kit serves a name is asked where a kit is looked up (issue 22)."""

from __future__ import annotations

import json
import pickle

import pytest
from pydantic import BaseModel, ValidationError

from evaluators.core import Track, UnknownNameError


class _Row(BaseModel):
    track: Track


def test_built_in_constants_behave_like_the_old_enum_members() -> None:
    assert Track.QA == "qa" and Track.QA.value == "qa" and f"{Track.RWE}" == "rwe"
    assert Track("segmentation") is Track.SEGMENTATION
    assert json.dumps({"t": Track.VQA}) == '{"t": "vqa"}'
    assert pickle.loads(pickle.dumps(Track.MEDBENCH)) is Track.MEDBENCH


def test_a_new_name_is_a_track_and_fields_validate_and_serialise_it() -> None:
    row = _Row.model_validate({"track": "toy_slides"})
    assert row.track is Track("toy_slides") and isinstance(row.track, Track)
    assert row.model_dump_json() == '{"track":"toy_slides"}'
    assert _Row.model_validate_json(row.model_dump_json()) == row


@pytest.mark.parametrize("name", ["", "Toy", "toy-slides", "1toy", "toy slides"])
def test_a_name_that_is_not_a_lowercase_identifier_fails(name: str) -> None:
    with pytest.raises(ValueError, match="is not a track name"):
        Track(name)
    with pytest.raises(ValidationError):
        _Row.model_validate({"track": name})


def test_an_unregistered_track_fails_at_the_kit_lookup_with_the_registered_names() -> None:
    from tasks_lib.tracks.base import kit_for

    with pytest.raises(UnknownNameError, match=r"known track kits: .*segmentation"):
        kit_for(Track("no_such_track"))
