"""The one place that imports every metric module, so each registers itself exactly once."""

from evaluators import (  # noqa: F401
    challenge_metrics,
    correlation,
    detection,
    enhancement,
    instance,
    medbench,
    qa,
    report_generation,
    rwe,
    segmentation,
    similarity,
    surface,
    topology,
    vqa,
)
