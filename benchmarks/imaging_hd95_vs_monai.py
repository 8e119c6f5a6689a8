"""The surface-metric comparison of ``imaging_surface.py`` on the 4 mm brain-tissue-seg pool.

Masks: the k-means baseline vs the references of brain-tissue-seg, per label (GM, WM), 4 mm
spacing (small volumes: a quick check that values agree; ``imaging_surface.py`` measures speed
on the 1 mm cases). Run: ``.venv/bin/python benchmarks/imaging_hd95_vs_monai.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from imaging_common import pool_and_submission
from imaging_surface import Pair, compare

from tasks_lib.imaging import codecs


def pool_pairs() -> Iterator[Pair]:
    """(prediction, reference, spacing, label) per case and label of the 4 mm baseline."""
    url, m, sub = pool_and_submission("brain-tissue-seg")
    for c in m.cases:
        ref = codecs.nifti_array(codecs.nifti_load((Path(url) / "private" / c.reference)
                                                   .read_bytes()))
        pred = codecs.nifti_array(codecs.nifti_load((sub / c.output).read_bytes()))
        for lab in m.labels:
            yield pred == lab, ref == lab, tuple(c.spacing), f"{c.case_id}-{lab}"


if __name__ == "__main__":
    figures = compare(pool_pairs())
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))
