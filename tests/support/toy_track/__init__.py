"""A test-only sixth track, registered from this folder alone: importing the package registers
the ``toy_slides`` kit (slide-level classification of generated texture "slides";
:mod:`support.toy_track.kit`), whose card (``cards/toy-slides/task.yaml``) and Great
Expectations suite (``suite.json``) live beside it. The worked example of
docs/adding-a-track.md."""

from support.toy_track import kit as kit
