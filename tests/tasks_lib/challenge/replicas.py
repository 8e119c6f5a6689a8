"""Small replicas of the official challenge releases: the official folder and file names,
formats and label maps (each family's docstring cites where they come from), a few tiny
cases with seeded content. Test data only: they check layouts and grading, not models."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SHAPE = (14, 12, 10)


def nifti(path: Path, array: np.ndarray, spacing: tuple[float, ...] = (0.5, 0.5, 0.8)) -> Path:
    """Write ``array`` as NIfTI with ``spacing`` (the releases' own format)."""
    import nibabel as nib

    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(array, np.diag([*spacing, 1.0]))
    image.header.set_zooms(spacing)
    nib.save(image, path)
    return path


def vessels(rng: np.random.Generator, labels: list[int], shape: tuple[int, ...] = SHAPE
            ) -> np.ndarray:
    """A label map with one short tube per label (a straight run of voxels along x at a seeded
    offset), the tubes two voxels apart in y and z so no two labels touch."""
    out = np.zeros(shape, dtype=np.uint8)
    for i, label in enumerate(labels):
        y, z = 1 + 2 * (i % 5), 1 + 2 * (i // 5)
        x0 = int(rng.integers(1, shape[0] - 6))
        out[x0:x0 + 5, y, z] = label
    return out


TOPCOW_LABELS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15]


def topcow(root: Path, ids: tuple[str, ...] = ("001", "002", "003", "004", "005"),
           modalities: tuple[str, ...] = ("ct", "mr")) -> Path:
    """``TopCoW2024_Data_Release``: ``imagesTr/topcow_<m>_<id>_0000.nii.gz``,
    ``cow_seg_labelsTr/topcow_<m>_<id>.nii.gz`` (MUL_CLASS_LABEL_MAP of TopCoW_Eval_Metrics
    constants.py), ``roi_loc_labelsTr/topcow_<m>_<id>.txt`` (the organisers' ROI text, as their
    test_assets/box_metrics/test_ROI-1_Metadata.txt) and ``antpos_edges_labelsTr/
    topcow_<m>_<id>.yml`` (as test_assets/edg_metrics/topcow_ct_003.yml)."""
    rng = np.random.default_rng(0)
    for m in modalities:
        for n, i in enumerate(ids):
            nifti(root / "imagesTr" / f"topcow_{m}_{i}_0000.nii.gz",
                  rng.normal(size=SHAPE).astype(np.float32))
            labels = TOPCOW_LABELS[n % 3:]
            nifti(root / "cow_seg_labelsTr" / f"topcow_{m}_{i}.nii.gz", vessels(rng, labels))
            size = [int(v) for v in rng.integers(3, 8, size=3)]
            where = [int(v) for v in rng.integers(0, 4, size=3)]
            (root / "roi_loc_labelsTr").mkdir(parents=True, exist_ok=True)
            (root / "roi_loc_labelsTr" / f"topcow_{m}_{i}.txt").write_text(
                "--- ROI Meta Data ---\n"
                f"Size (Voxels): {' '.join(map(str, size))}\n"
                f"Location (Voxels): {' '.join(map(str, where))}\n")
            bits = [int(b) for b in rng.integers(0, 2, size=8)]
            (root / "antpos_edges_labelsTr").mkdir(parents=True, exist_ok=True)
            (root / "antpos_edges_labelsTr" / f"topcow_{m}_{i}.yml").write_text(
                f"anterior:\n    3rd-A2:  {bits[2]}\n\n    Acom:    {bits[1]}\n\n"
                f"    R-A1:    {bits[3]}\n\n    L-A1:    {bits[0]}\n"
                f"posterior:\n    L-Pcom:  {bits[4]}\n    L-P1:    {bits[5]}\n"
                f"    R-P1:    {bits[6]}\n    R-Pcom:  {bits[7]}\n")
    return root


def topbrain(root: Path, ids: tuple[str, ...] = ("001", "002", "003", "004")) -> Path:
    """``TopBrain_Data_Release_Batches1n2_081425``: ``imagesTr_topbrain_{ct|mr}/
    topcow_<m>_<id>_0000.nii.gz`` and ``labelsTr_topbrain_{ct|mr}/topcow_<m>_<id>.nii.gz``
    (TopBrain_Eval_Metrics constants.py label maps: CT 1-40, MR 1-42; side roads 8-10, 25...)."""
    rng = np.random.default_rng(1)
    for m, top in (("ct", 40), ("mr", 42)):
        for n, i in enumerate(ids):
            nifti(root / f"imagesTr_topbrain_{m}" / f"topcow_{m}_{i}_0000.nii.gz",
                  rng.normal(size=SHAPE).astype(np.float32))
            labels = [1, 2, 3, 8, 10, 25, 31, top - n]
            nifti(root / f"labelsTr_topbrain_{m}" / f"topcow_{m}_{i}.nii.gz",
                  vessels(rng, labels))
    return root


def isles22(root: Path, n_cases: int = 5, zenodo: bool = True) -> Path:
    """``ISLES-2022`` in BIDS: ``rawdata/sub-strokecase<n>/ses-0001/{dwi,anat}/`` with
    ``_dwi``, ``_adc`` and ``_FLAIR`` NIfTI plus their ``.json`` sidecars (the Zenodo release;
    ``zenodo=False``: flat, ``_flair``, as the isles22 README) and
    ``derivatives/sub-strokecase<n>/ses-0001/sub-strokecase<n>_ses-0001_msk.nii.gz`` (0/1,
    DWI's grid, 2 mm voxels)."""
    rng = np.random.default_rng(2)
    for n in range(1, n_cases + 1):
        case = f"sub-strokecase{n:04d}"
        ses = root / "rawdata" / case / "ses-0001"
        for channel, sub in (("dwi", "dwi"), ("adc", "dwi"), ("FLAIR", "anat")):
            name = channel if zenodo else channel.lower()
            folder = ses / sub if zenodo else ses
            shape = SHAPE if channel != "FLAIR" else (20, 18, 12)
            nifti(folder / f"{case}_ses-0001_{name}.nii.gz",
                  rng.normal(size=shape).astype(np.float32), (2.0, 2.0, 2.0))
            (folder / f"{case}_ses-0001_{name}.json").write_text("{}")
        mask = np.zeros(SHAPE, dtype=np.float32)
        for _ in range(n % 3):
            x, y, z = (int(v) for v in rng.integers(1, 8, size=3))
            mask[x:x + 3, y:y + 2, z:z + 2] = 1
        nifti(root / "derivatives" / case / "ses-0001" / f"{case}_ses-0001_msk.nii.gz", mask,
              (2.0, 2.0, 2.0))
    return root


def itk(path: Path, array_xyz: np.ndarray, spacing: tuple[float, ...]) -> Path:
    """Write an (x, y, z) array in an ITK format (``.mha``, ``.nrrd``) with SimpleITK, the
    writer the releases were made with (compressed, as their files are)."""
    import SimpleITK as sitk

    path.parent.mkdir(parents=True, exist_ok=True)
    image = sitk.GetImageFromArray(np.ascontiguousarray(array_xyz.transpose()))
    image.SetSpacing(spacing)
    sitk.WriteImage(image, str(path), True)
    return path


def _blob(rng: np.random.Generator, labels: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(SHAPE, dtype=np.uint8)
    for label in labels:
        x, y, z = (int(v) for v in rng.integers(2, 7, size=3))
        out[x:x + 4, y:y + 3, z:z + 3] = label
    return out


def panther(root: Path, task: int, n_cases: int = 5) -> Path:
    """PANTHER task 1 (``ImagesTr/<p>_0001_0000.mha``, ``LabelsTr/<p>_0001.mha``) or task 2
    (``ImagesTr/<p>_0000.mha``, ``LabelsTr/<p>.mha``); labels 1 tumour, 2 pancreas;
    anisotropic voxels (0.9, 0.8, 3.0) mm."""
    rng = np.random.default_rng(3)
    for n in range(n_cases):
        case = f"{10000 + n}_0001" if task == 1 else f"{10300 + n}"
        itk(root / "ImagesTr" / f"{case}_0000.mha", rng.normal(size=SHAPE).astype(np.float32),
            (0.9, 0.8, 3.0))
        itk(root / "LabelsTr" / f"{case}.mha", _blob(rng, (2, 1)), (0.9, 0.8, 3.0))
    if task == 1:
        itk(root / "ImagesTr_unlabeled" / "10099_0002_0000.mha",
            rng.normal(size=SHAPE).astype(np.float32), (0.9, 0.8, 3.0))
    return root


def seg_a(root: Path) -> Path:
    """The AVT collection: ``<institution>/<case>/<case>.nrrd`` and ``<case>.seg.nrrd``
    (0/1 aorta), three institutions (D, K, R cases)."""
    rng = np.random.default_rng(4)
    for site, prefix, count in (("Dongyang", "D", 2), ("KiTS", "K", 2), ("Rider", "R", 1)):
        for n in range(1, count + 1):
            folder = root / site / site / f"{prefix}{n}"
            itk(folder / f"{prefix}{n}.nrrd", rng.normal(size=SHAPE).astype(np.int16),
                (0.8, 0.8, 1.5))
            itk(folder / f"{prefix}{n}.seg.nrrd", _blob(rng, (1,)), (0.8, 0.8, 1.5))
    return root


PUMA_TISSUE = ["tissue_stroma", "tissue_blood_vessel", "tissue_tumor", "tissue_epidermis",
               "tissue_necrosis"]
PUMA_NUCLEI = ["nuclei_endothelium", "nuclei_plasma_cell", "nuclei_stroma", "nuclei_tumor",
               "nuclei_histiocyte", "nuclei_apoptosis", "nuclei_epithelium",
               "nuclei_melanophage", "nuclei_neutrophil", "nuclei_lymphocyte"]


def _feature(name: str, rings: list[list[list[float]]]) -> dict[str, object]:
    return {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": rings},
            "properties": {"objectType": "annotation", "classification": {"name": name}}}


def _square(x: float, y: float, size: float) -> list[list[float]]:
    return [[x, y], [x + size, y], [x + size, y + size], [x, y + size], [x, y]]


def puma(root: Path, n_cases: int = 5, side: int = 96) -> Path:
    """The PUMA training release: ``01_training_dataset_tif_ROIs/training_set_<kind>_roi_<n>.tif``
    (RGB, with its ``_context.tif``), ``01_training_dataset_geojson_tissue/<case>_tissue.geojson``
    (every tissue class, a white-background polygon, one polygon with a hole) and
    ``01_training_dataset_geojson_nuclei/<case>_nuclei.geojson`` (the ten nuclei classes)."""
    import json

    import tifffile

    rng = np.random.default_rng(5)
    for n in range(1, n_cases + 1):
        case = f"training_set_{'metastatic' if n % 2 else 'primary'}_roi_{n:03d}"
        for suffix in ("", "_context"):
            path = root / "01_training_dataset_tif_ROIs" / f"{case}{suffix}.tif"
            path.parent.mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(path, rng.integers(0, 255, size=(side, side, 3), dtype=np.uint8))
        tissue = [_feature("tissue_white_background", [_square(0, 0, 10)])]
        tissue += [_feature(name, [_square(10 + 16 * k, 20 + n, 14)])
                   for k, name in enumerate(PUMA_TISSUE)]
        tissue.append(_feature("tissue_stroma", [_square(10, 60, 30), _square(18, 68, 8)]))
        nuclei = [_feature(name, [_square(5 + 9 * k, 80 - n, 6)])
                  for k, name in enumerate(PUMA_NUCLEI)]
        for kind, features in (("tissue", tissue), ("nuclei", nuclei)):
            path = root / f"01_training_dataset_geojson_{kind}" / f"{case}_{kind}.geojson"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return root


def cellseg(root: Path, n_cases: int = 5) -> Path:
    """``Training-labeled/images/cell_<n>.{png,tif,bmp}`` and
    ``Training-labeled/labels/cell_<n>_label.tiff`` (uint16 instance ids), cells away from the
    border (the evaluation drops cells within 2 px of it)."""
    import imageio.v3 as iio
    import tifffile

    rng = np.random.default_rng(6)
    for n in range(1, n_cases + 1):
        case = f"cell_{n:05d}"
        ext = (".png", ".tif", ".bmp")[n % 3]
        image = rng.integers(0, 255, size=(40, 48, 3), dtype=np.uint8)
        path = root / "Training-labeled" / "images" / f"{case}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if ext == ".tif":
            tifffile.imwrite(path, image)
        else:
            iio.imwrite(path, image)
        label = np.zeros((40, 48), dtype=np.uint16)
        for k in range(1, 4):
            y, x = 6 + 9 * k, 5 + n + 11 * k
            label[y - 3:y + 3, x - 3:x + 3] = k
        path = root / "Training-labeled" / "labels" / f"{case}_label.tiff"
        path.parent.mkdir(parents=True, exist_ok=True)
        tifffile.imwrite(path, label)
    return root


def ldct(root: Path, n_train: int = 5, n_test: int = 3) -> Path:
    """``LDCTIQAG2023_train/image/<n>.tif`` + ``train.json`` and ``LDCTIQAC_test/images/
    <n>.tiff`` + ``test.json`` ({file name: radiologists' score 0-4})."""
    import json

    import tifffile

    rng = np.random.default_rng(7)
    for folder, sub, ext, count, name in (("LDCTIQAG2023_train", "image", ".tif", n_train,
                                           "train.json"),
                                          ("LDCTIQAC_test", "images", ".tiff", n_test,
                                           "test.json")):
        scores = {}
        for n in range(count):
            file = f"{n + (0 if ext == '.tif' else 1000):04d}{ext}"
            (root / folder / sub).mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(root / folder / sub / file,
                             rng.normal(size=(32, 32)).astype(np.float32))
            scores[file] = round(float(rng.uniform(0, 4)), 2)
        (root / folder / name).write_text(json.dumps(scores))
    return root


def usenhance(root: Path, organs: tuple[str, ...] = ("thyroid", "breast", "kidney")) -> Path:
    """``train_datasets/<organ>/{low_quality,high_quality}/<n>.png`` pairs (grey levels)."""
    import imageio.v3 as iio

    rng = np.random.default_rng(8)
    for organ in organs:
        for n in range(1, 3):
            high = rng.integers(0, 255, size=(24, 32), dtype=np.uint8)
            low = np.clip(high + rng.normal(0, 20, size=high.shape), 0, 255).astype(np.uint8)
            for kind, image in (("high_quality", high), ("low_quality", low)):
                path = root / "train_datasets" / organ / kind / f"{n}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                iio.imwrite(path, image)
    return root


DENTEX_CATEGORIES = {
    "categories_1": [{"id": i, "name": str(i + 1), "supercategory": "Quadrant"} for i in range(4)],
    "categories_2": [{"id": i, "name": str(i + 1), "supercategory": "Enumeration"}
                     for i in range(8)],
    "categories_3": [{"id": 0, "name": "Impacted", "supercategory": "Diagnosis"},
                     {"id": 1, "name": "Caries", "supercategory": "Diagnosis"},
                     {"id": 2, "name": "Periapical Lesion", "supercategory": "Diagnosis"},
                     {"id": 3, "name": "Deep Caries", "supercategory": "Diagnosis"}]}
"""The release's category lists (0-based ids)."""


def dentex(root: Path, n_images: int = 5) -> Path:
    """``quadrant-enumeration-disease/xrays/train_<n>.png`` and
    ``train_quadrant_enumeration_disease.json`` (COCO: images, annotations with
    category_id_1/2/3, categories_1/2/3)."""
    import json

    import imageio.v3 as iio

    rng = np.random.default_rng(9)
    folder = root / "quadrant-enumeration-disease"
    images, annotations = [], []
    for n in range(n_images):
        name = f"train_{n}.png"
        (folder / "xrays").mkdir(parents=True, exist_ok=True)
        iio.imwrite(folder / "xrays" / name, rng.integers(0, 255, size=(64, 128),
                                                          dtype=np.uint8))
        images.append({"id": n + 1, "file_name": name, "width": 128, "height": 64})
        for k in range(3):
            annotations.append({"id": 10 * n + k, "image_id": n + 1, "iscrowd": 0,
                                "bbox": [float(5 + 35 * k), 10.0, 20.0, 30.0], "area": 600.0,
                                "category_id_1": k, "category_id_2": (n + k) % 8,
                                "category_id_3": (n + 2 * k) % 4})
    (folder / "train_quadrant_enumeration_disease.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, **DENTEX_CATEGORIES}))
    return root
