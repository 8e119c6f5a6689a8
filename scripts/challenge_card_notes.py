"""The notes of each challenge card on how it is graded (``build_challenge_cards.py`` appends
them to the card's ``notes``): which official file or port rule each metric follows."""

from __future__ import annotations

_PUMA_TISSUE = ("puma-track1-task1", "puma-track2-task1")
_TOPCOW_GRAPH = ("topcow-track1-task3", "topcow-track2-task3")
_TOPCOW_SEG = ("topcow-track1-task1", "topcow-track2-task1")
_TOPCOW_BOX = ("topcow-track1-task2", "topcow-track2-task2")
_TOPBRAIN = ("topbrain-track1", "topbrain-track2")
_PANTHER = ("panther-task1", "panther-task2")

EXTRA_NOTES: dict[str, list[str]] = {
    "usenhance": ["ssim and psnr are graded with the shared imaging metrics (Gaussian-weighted "
                  "SSIM, data range of the reference, PSNR capped at 100 dB); the ReX-MLE grader "
                  "used the joint range of both images and an uncapped PSNR."],
    **{c: ["Official PUMA tissue Dice: pixels pooled over all images per class 1-5, a class "
           "absent everywhere scores 0, mean over the five classes (see "
           "evaluators/graders/challenge_metrics.py)."] for c in _PUMA_TISSUE},
    **{c: ["Official TopCoW variant-balanced accuracy: a case is correct only if all four "
           "edges of the region match; recall is averaged over the variants present in the "
           "reference (see evaluators/graders/challenge_metrics.py)."] for c in _TOPCOW_GRAPH},
    "isles22": ["Official ISLES'22 conventions: lesions are 26-connected components, a "
                "reference lesion touched by any predicted voxel is a true positive, volumes in "
                "ml from the NIfTI voxel spacing (see evaluators/graders/challenge_metrics.py)."],
    "neurips-cellseg": ["Official conventions (JunMa11/NeurIPS-CellSeg baseline/"
                        "compute_metric.py): cells within 2 px of the border are ignored, an "
                        "image without any true positive scores F1 = 0, images of 25 M pixels "
                        "or more are scored in 2000-px tiles, and each image's F1 is rounded to "
                        "4 decimals before the mean (see evaluators/instance.py)."],
    "dentex": ["Graded as the ReX-MLE port, with the official evaluation's category set (the "
               "reference's categories_1/2/3, ibrahimethemhamamci/DENTEX "
               "DentexChallenge-AlgorithmPhases-Evaluation-Docker/evaluation.py; the port "
               "declares 1-based categories and never scores id 0) (pycocotools COCOeval "
               "'bbox', one run per aspect over "
               "all images with the annotations relabelled by category_id_1/2/3; AP = stats[0], "
               "AP50 = stats[1], AP75 = stats[2], AR = stats[8]; *_mean = mean of the three "
               "aspects). Kept quirk: a predicted box [a, b, c, d] with c > a, d > b and "
               "(c > a + 50 or d > b + 50) is read as corners. Departures: detections belong to "
               "the image of their row; a submission with no detection scores 0 instead of "
               "failing (see evaluators/graders/dentex.py)."],
    **{c: ["Graded as the organisers' evaluation (DIAGNijmegen/PANTHER_baseline "
           "Evaluation/evaluate_local.py) with DeepMind surface-distance conventions (surfel-"
           "weighted): tumour = label 1; dsc, msd = surface Dice at 5 mm, hd95 = robust "
           "Hausdorff 95 %, masd = mean of the two directed average distances, rmse = sqrt of "
           "the mean squared tumour-volume error in mm^3; a uniform prediction scores 0 / "
           "volume diagonal. As that script does, the surface metrics use SimpleITK's (x, y, z) "
           "spacing on its (z, y, x) array (here: the zooms reversed), and a prediction must "
           "be binary ({0, 1}, or two values with 0 read as > 0). semantics: rexmle-port gives "
           "the ReX-MLE port (spacing in array order, a {0, 1, 2} map keeps label 1). The "
           "grand-challenge container is not public. Departures: files are NIfTI here (the "
           "challenge uses .mha) and the spacing is the reference's "
           "(see evaluators/graders/panther.py)."]
       for c in _PANTHER},
    "puma-track1-task2": ["Graded as the official PUMA evaluation (tueimage/PUMA-challenge-eval-"
                          "track1 eval_nuclei.py, evaluate.py): vertex-mean centroids matched "
                          "within < 15 px, same class, greedy by (-score, distance); classes "
                          "tumor, TILs (lymphocytes and plasma cells), other, under the plain or "
                          "the official nuclei_* names; an unknown name is a class of its own; "
                          "per class the per-case F1s summed over all cases (absent = 0), macro "
                          "over every class seen. The ReX-MLE port: class_set fixed, unknown "
                          "drop, no nuclei_* names (see evaluators/graders/nuclei.py)."],
    "puma-track2-task2": ["Graded as the official PUMA evaluation (tueimage/PUMA-challenge-eval-"
                          "track2): as track 1, over the ten classes under their plain or "
                          "nuclei_* names, matched within < 15 px. The ReX-MLE port matched "
                          "within <= 15 px (inclusive), averaged a class only over the cases "
                          "where it appears (absent: skip) over the fixed ten classes and "
                          "dropped unknown names (see evaluators/graders/nuclei.py)."],
    "seg_a": ["Per case binary Dice (both empty = 1) and the symmetric Hausdorff distance in mm "
              "(MONAI surface distances with the reference spacing; one empty mask = image "
              "diagonal), medians over cases. The challenge's evaluation code is not public: "
              "'symmetric, in mm' follows its metric name and its leaderboard's units (medians "
              "such as 2.6125 are not voxel distances). semantics: rexmle-port gives the ReX-MLE "
              "port's directed prediction-to-reference distance in voxels (its spacing bug). "
              "Files are NIfTI here (the challenge uses .seg.nrrd); the official Sobol-based "
              "ranking is not computed (see evaluators/graders/aorta.py)."],
    **{c: ["Graded as the official TopBrain_Eval_Metrics (topbrain25_eval/metrics): label set = "
           "labels of either map; per label Dice (SimpleITK, 0 if absent on a side), clDice, "
           "Betti-0 error (26-connectivity), symmetric HD95 max(d95(ref->pred), d95(pred->ref)) "
           "over fully connected contours (290 mm if absent on a side), 0 without labels; "
           "invalid 26-neighbours against the challenge's allowed-neighbour table (card params, "
           "from the challenge's valid_neighbors_*_all.json); side-road detection F1 at IoU "
           ">= 0.25 pooled over cases. semantics: rexmle-port with labels: union on hd95 gives "
           "the ReX-MLE port's directed prediction-to-reference HD95 (see "
           "evaluators/vessel_semantics.py, evaluators/graders/vessels.py)."] for c in _TOPBRAIN},
    **{c: ["Graded as the official TopCoW_Eval_Metrics (topcow24_eval/metrics/seg_metrics): "
           "Dice, Betti-0 and HD95 averaged over the labels of either map, 0 without labels; "
           "symmetric HD95 max(d95(ref->pred), d95(pred->ref)) over fully connected contours "
           "(90 mm if absent on a side); clDice on the merged binary mask, skeletonised in the "
           "(x, y, z) order the official code uses; group-2 (8, 9, 10, 15) detection F1 at IoU "
           ">= 0.25 pooled over cases. semantics: rexmle-port gives the ReX-MLE port (reference "
           "labels, Dice +1e-7 and 1 without labels, directed HD95, clDice on reversed axes). "
           "*_graph_acc and *_topology are the port's simplification (a region matches if all "
           "its labels have IoU >= 0.25 or are absent from both; the balanced accuracy with "
           "every true label 'correct' equals the match rate), not the official graph "
           "classification and topology matching (see evaluators/graders/vessels.py)."]
       for c in _TOPCOW_SEG},
    **{c: ["Graded with the official TopCoW definitions (TopCoW_Eval_Metrics "
           "boundary_iou_from_tuple): location = minimum corner, boundary band = voxels within "
           "ceil(0.2 * size) of a face inside the box, IoU = the same at ratio 0.5. The "
           "ReX-MLE port dilates the box outward instead; that departure is not followed "
           "(see evaluators/graders/topcow_boxes.py)."] for c in _TOPCOW_BOX},
}
