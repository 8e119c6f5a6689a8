"""The one place that imports every metric module, so each registers itself exactly once."""

from evaluators import (  # noqa: F401
    correlation,
    detection,
    enhancement,
    instance,
    qa,
    report_generation,
    segmentation,
    similarity,
    surface,
    topology,
    vqa,
)
from evaluators.graders import (  # noqa: F401
    aorta,
    challenge_metrics,
    dentex,
    medbench,
    nuclei,
    panther,
    rwe,
    topcow_boxes,
    vessels,
)
