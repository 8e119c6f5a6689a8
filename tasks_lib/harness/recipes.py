"""Per-track classical methods used by the ``scripted-baseline`` agent, as the code it runs.

Each recipe is the source of ``/workspace/method.py``: ``python method.py --pilot`` processes the
first case and prints checks, ``python method.py`` processes every case into
``/workspace/submission``. Only packages installed in the sandbox's interpreter are used. Each
track's kit names its recipe (``TrackKit.recipe``).
"""

from __future__ import annotations

SEGMENTATION = '''\
"""Multi-Otsu tissue classification of T1 volumes: GM = 1, WM = 2."""
import glob, os, sys
import nibabel as nib
import numpy as np
from skimage.filters import threshold_multiotsu

SUB = "/workspace/submission"


def segment(path):
    img = nib.load(path)
    x = np.asarray(img.dataobj, dtype=np.float32)
    if x.ndim == 4:  # a multi-channel release (channels last): the first channel's grid
        x = x[..., 0]
    brain = x > np.percentile(x, 50) * 0.5 + 0.05 * float(x.max())
    t_low, t_high = threshold_multiotsu(x[brain], classes=3)
    labels = np.zeros(x.shape, np.uint8)
    labels[brain & (x > t_low) & (x <= t_high)] = 1
    labels[brain & (x > t_high)] = 2
    return img, labels


paths = sorted(glob.glob("/public/inputs/*.nii.gz"))
os.makedirs(SUB, exist_ok=True)
for path in paths[:1] if sys.argv[1:] == ["--pilot"] else paths:
    img, labels = segment(path)
    nib.save(nib.Nifti1Image(labels, img.affine), os.path.join(SUB, os.path.basename(path)))
    print(os.path.basename(path), "shape", labels.shape, "input shape", img.shape,
          "values", sorted(np.unique(labels).tolist()))
'''

ENHANCEMENT = '''\
"""Total-variation denoising of low-dose images, float32, same shape."""
import glob, os, sys
import numpy as np
from skimage.restoration import denoise_tv_chambolle

SUB = "/workspace/submission"
paths = sorted(glob.glob("/public/inputs/*.npy"))
os.makedirs(SUB, exist_ok=True)
for path in paths[:1] if sys.argv[1:] == ["--pilot"] else paths:
    x = np.load(path).astype(np.float32)
    span = float(x.max() - x.min()) or 1.0
    y = denoise_tv_chambolle(x, weight=0.05 * span).astype(np.float32)
    np.save(os.path.join(SUB, os.path.basename(path)), y)
    print(os.path.basename(path), "shape", y.shape, "finite", bool(np.isfinite(y).all()),
          "std before/after", round(float(np.std(np.diff(x, axis=0))), 4),
          round(float(np.std(np.diff(y, axis=0))), 4))
'''

DETECTION = '''\
"""Blob detection on PNG slices; bright blobs = hyperintensity (1), dark cores = mass (2)."""
import glob, json, os, sys
import numpy as np
from skimage.feature import blob_log
from skimage.io import imread

SUB = "/workspace/submission"
paths = sorted(glob.glob("/public/images/*.png"))
os.makedirs(SUB, exist_ok=True)
for path in paths[:1] if sys.argv[1:] == ["--pilot"] else paths:
    img = imread(path).astype(np.float32) / 255.0
    h, w = img.shape
    boxes, scores, labels = [], [], []
    for polarity, label in ((img, 1), (1.0 - img, 2)):
        for y, x, s in blob_log(polarity, min_sigma=2, max_sigma=7, threshold=0.25):
            y, x, r = float(y), float(x), float(s) * 2 ** 0.5
            box = [max(0.0, x - r), max(0.0, y - r), min(float(w), x + r + 1),
                   min(float(h), y + r + 1)]
            boxes.append([round(v, 1) for v in box])
            scores.append(round(float(polarity[int(y), int(x)]), 3))
            labels.append(label)
    name = os.path.basename(path)[:-4] + ".json"
    with open(os.path.join(SUB, name), "w") as fh:
        json.dump({"boxes": boxes, "scores": scores, "labels": labels}, fh)
    ordered = all(b[0] < b[2] and b[1] < b[3] for b in boxes)
    print(name, "boxes", len(boxes), "ordered and inside", ordered, "shape", img.shape)
'''

VQA = '''\
"""Majority-answer VQA: the most frequent answer of each question type in the brief's
question set (closed: lesion yes, mass no; count 1; side left)."""
import csv, os, sys

SUB = "/workspace/submission"
PRIOR = {"any focal lesion": "yes", "a mass": "no", "how many": "1", "which side": "left"}
rows = list(csv.DictReader(open("/public/questions.csv", encoding="utf-8")))
os.makedirs(SUB, exist_ok=True)
answers = []
for row in rows[:3] if sys.argv[1:] == ["--pilot"] else rows:
    q = row["question"].lower()
    answers.append((row["question_id"], next((a for k, a in PRIOR.items() if k in q), "no")))
with open(os.path.join(SUB, "answers.csv"), "w", newline="", encoding="utf-8") as fh:
    writer = csv.writer(fh)
    writer.writerow(["question_id", "answer"])
    writer.writerows(answers)
print("answers", len(answers), "of", len(rows), "format ok", all(a for _, a in answers))
'''

REPORT_GENERATION = '''\
"""Template reports: one finding sentence per bright or dark blob and an impression line."""
import csv, glob, os, sys
import numpy as np
from skimage.feature import blob_log
from skimage.io import imread

SUB = "/workspace/submission"
paths = sorted(glob.glob("/public/images/*.png"))
os.makedirs(SUB, exist_ok=True)
rows = []
for path in paths[:1] if sys.argv[1:] == ["--pilot"] else paths:
    img = imread(path).astype(np.float32) / 255.0
    h, w = img.shape
    sentences = []
    for polarity, kind in ((img, "hyperintense focus"), (1.0 - img, "mass")):
        for y, x, s in blob_log(polarity, min_sigma=2, max_sigma=7, threshold=0.3)[:3]:
            side = "left" if x > w / 2 else "right"
            sentences.append(f"There is a {kind} in the {side} hemisphere.")
    impression = "Focal abnormality." if sentences else "No focal lesion."
    text = " ".join(sentences) or "No focal lesion is seen."
    rows.append([os.path.basename(path)[:-4], f"{text} Impression: {impression}"])
with open(os.path.join(SUB, "reports.csv"), "w", newline="", encoding="utf-8") as fh:
    writer = csv.writer(fh)
    writer.writerow(["case_id", "report"])
    writer.writerows(rows)
print("reports", len(rows), "pilot report:", rows[0][1] if rows else "none")
'''
