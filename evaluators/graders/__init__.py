"""Protocol graders: scoring exactly as one named benchmark or challenge defines it.

Generic metrics (Dice, surface distances, box IoU, PSNR, exact match…) live in
:mod:`evaluators`; a grader here follows one protocol's official conventions and reuses them:
RWE-bench answers and metrics (:mod:`.rwe_answers`, :mod:`.rwe`), MedBench v4 answer-type metrics
(:mod:`.medbench`), DENTEX (:mod:`.dentex`), PANTHER (:mod:`.panther`), TopCoW / TopBrain
(:mod:`.topcow_boxes`, :mod:`.vessels`), SEG.A. (:mod:`.aorta`), PUMA nuclei (:mod:`.nuclei`) and
ISLES'22 / PUMA tissue / TopCoW graph classification (:mod:`.challenge_metrics`). Each registers
its metrics by decorator; :mod:`evaluators.catalog` imports them all, so registry names do not
depend on where a grader lives.
"""
