"""The one place that imports every metric module, so each registers itself exactly once."""

from evaluators import detection, enhancement, report_generation, segmentation, surface, vqa  # noqa: F401
from evaluators import qa as qa  # noqa: F401
from evaluators import challenge_metrics, correlation, instance, similarity, topology  # noqa: F401
