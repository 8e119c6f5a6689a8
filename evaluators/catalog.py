"""The one place that imports every metric module, so each registers itself exactly once."""

from evaluators import qa as qa  # noqa: F401
