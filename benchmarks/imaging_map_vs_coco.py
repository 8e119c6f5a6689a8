"""Our mAP@0.5 (VOC all-point) vs pycocotools COCOeval AP@0.5 on the same boxes.

Boxes: the blob-detector baseline vs the references of brain-lesion-det. The two differ by design
(all-point vs 101-point interpolation); prints both, their difference and the time ratio.
Run: ``.venv/bin/python benchmarks/imaging_map_vs_coco.py``.
"""

from __future__ import annotations

import time

from imaging_common import pool_and_submission

from evaluators.detection import map_50, map_50_coco
from tasks_lib.imaging.scoring import detection_sets
from tasks_lib.storage import Storage


def main() -> None:
    url, m, sub = pool_and_submission("brain-lesion-det")
    preds, refs = detection_sets(sub, Storage(url), m, [c.case_id for c in m.cases])
    t0 = time.perf_counter()
    ours = map_50(preds, refs)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    coco = map_50_coco(preds, refs)
    t_coco = time.perf_counter() - t0
    print(f"images={len(refs)} map_50(VOC)={ours:.4f} COCOeval AP50={coco:.4f} "
          f"diff={ours - coco:+.4f}; ours={t_ours * 1e3:.1f}ms COCOeval={t_coco * 1e3:.1f}ms "
          f"ratio ours/COCO={t_ours / t_coco:.2f}")
    print(f"RESULT ours_over_coco={t_ours / t_coco:.2f} map50_diff={ours - coco:+.4f} "
          f"images={len(refs)}")


if __name__ == "__main__":
    main()
