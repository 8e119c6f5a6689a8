"""The one place that imports every track kit, so each registers itself exactly once."""

from tasks_lib.tracks import (  # noqa: F401
    challenge,
    detection,
    enhancement,
    medbench,
    qa,
    report_generation,
    rwe,
    segmentation,
    vqa,
)
