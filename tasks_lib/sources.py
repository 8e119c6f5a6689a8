"""Where a task card's data comes from: one model per source kind, discriminated on ``kind``.

Part of the shared card schema (data only): generated imaging sources are seeded and fully
described by their fields, so a build is reproducible from the card; QA sources name JSONL files;
challenge sources name the human leaderboard and the submission layout.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from evaluators.core import Frozen


class QASource(Frozen):
    """Where a multiple-choice QA dataset's questions come from."""

    kind: Literal["qa_jsonl"] = Field(description="Source type discriminator.")
    questions: str = Field(
        description="JSONL in the shared schema: relative to the source folder (default "
        "<data root>/medagentsbench), absolute, or a URL."
    )
    train: str | None = Field(
        default=None, description="Optional train JSONL (few-shot exemplars), same conventions."
    )
    stratify_field: str = Field(
        default="meta_info", description="Item field used for stratified selection."
    )


class MNITissueSource(Frozen):
    """MNI152 T1 template + grey/white-matter maps (nilearn), augmented into cases."""

    kind: Literal["nilearn_mni152_tissue"] = Field(description="Source type discriminator.")
    n_cases: int = Field(default=8, ge=1, description="Number of augmented cases.")
    seed: int = Field(default=0, description="Seed of every random draw of the build.")
    voxel_mm: float = Field(default=4.0, gt=0, description="Isotropic voxel size after resampling.")
    max_rotation_deg: float = Field(default=8.0, ge=0, description="Max rotation about each axis.")
    max_shift_vox: float = Field(default=1.5, ge=0, description="Max shift per axis (voxels).")
    bias_strength: float = Field(default=0.15, ge=0, description="Amplitude of the bias field.")
    noise_sd: float = Field(default=0.03, ge=0, description="Gaussian noise SD, fraction of range.")
    labels: list[int] = Field(default=[1, 2], description="Label values scored (1 = GM, 2 = WM).")
    template_mm: Literal[1, 2] = Field(
        default=2, description="Resolution (mm) of the nilearn template loaded before resampling.")
    deform_mm: float = Field(
        default=0.0, ge=0, description="Largest component (mm) of the smooth random deformation "
        "per case; 0 = rigid jitter only.")
    deform_spacing_mm: float = Field(
        default=16.0, gt=0, description="Control-grid spacing (mm) of that deformation; its "
        "Gaussian smoothing is one spacing, so larger is smoother.")


class LowDoseCTSource(Frozen):
    """Low-dose CT simulated physically from the Shepp–Logan phantom and MNI axial slices."""

    kind: Literal["skimage_lowdose_ct"] = Field(description="Source type discriminator.")
    n_cases: int = Field(default=8, ge=1, description="Number of cases (alternating sources).")
    seed: int = Field(default=0, description="Seed of rotations, intensity jitter and noise.")
    size: int = Field(default=96, ge=32, description="Image side in pixels.")
    n_angles: int = Field(default=120, ge=8, description="Projection angles over 180°.")
    photons: float = Field(default=2.0e4, gt=0, description="Incident photons per ray (low dose).")
    mu_max: float = Field(default=0.02, gt=0, description="Attenuation (1/pixel) of intensity 1.")


class KSpaceSuperResSource(Frozen):
    """MNI152 axial slices degraded by k-space truncation (MRI super-resolution)."""

    kind: Literal["mni152_kspace_truncation"] = Field(description="Source type discriminator.")
    n_cases: int = Field(default=8, ge=1, description="Number of slices.")
    seed: int = Field(default=0, description="Seed of slice choice, rotation, jitter and noise.")
    keep_fraction: float = Field(default=0.35, gt=0, le=1,
                                 description="Central fraction of k-space kept along each axis.")
    noise_sd: float = Field(default=0.01, ge=0, description="Complex k-space noise SD.")


class LesionSliceSource(Frozen):
    """MNI152 axial slices with seeded synthetic lesions of two classes (known boxes)."""

    kind: Literal["mni152_lesion_slices"] = Field(description="Source type discriminator.")
    n_cases: int = Field(default=12, ge=1, description="Number of images.")
    seed: int = Field(default=0, description="Seed of slice choice and lesion placement.")
    max_lesions: int = Field(default=3, ge=1, description="Max lesions per image (0 also drawn).")
    noise_sd: float = Field(default=0.02, ge=0, description="Gaussian noise SD (range 0..1).")


class ScoringPolicy(Frozen):
    """Per-task scoring rules (defaults follow the published AutoMedBench rules)."""

    zero_dice_if_missing: bool = Field(
        default=True, description="Segmentation: any missing case zeroes the task's Dice credit.")
    dask: bool = Field(default=False, description="Compute per-case metrics on the Dask cluster.")


class ChallengeType(StrEnum):
    """What a challenge asks for (``competition_type`` of ``challenges.json``)."""

    SEGMENTATION = "segmentation"
    DETECTION = "detection"
    CLASSIFICATION = "classification"
    IMAGE_QUALITY_ASSESSMENT = "image_quality_assessment"
    IMAGE_ENHANCEMENT = "image_enhancement"


class FileFormat(StrEnum):
    """Formats of prediction/reference files named in ``submission.csv``."""

    NPY = "npy"
    PNG = "png"
    TIFF = "tiff"
    NIFTI = "nifti"
    JSON = "json"


class SubmissionLayout(Frozen):
    """What a challenge submission folder holds: ``submission.csv`` plus the files it names."""

    id_column: str = Field(default="case_id", description="Column identifying the case.")
    value_columns: list[str] = Field(
        default_factory=list, description="Columns holding predicted values (CSV-only parts)."
    )
    file_column: str | None = Field(
        default=None, description="Column naming a prediction file, relative to the folder."
    )
    file_format: FileFormat | None = Field(default=None, description="Format of those files.")
    allowed_values: list[float] | None = Field(
        default=None, description="If set, every value column must hold one of these values."
    )
    description: str = Field(description="The layout in prose, shown in briefs.")

    @model_validator(mode="after")
    def _file_column_needs_format(self) -> SubmissionLayout:
        if (self.file_column is None) != (self.file_format is None):
            raise ValueError("file_column and file_format go together")
        if self.file_column is None and not self.value_columns:
            raise ValueError("a submission needs value_columns or a file_column")
        return self


class ChallengeSource(Frozen):
    """A ReX-MLE challenge: its human leaderboard and submission layout (data not shipped)."""

    kind: Literal["rexmle_challenge"] = Field(description="Source type discriminator.")
    url: str = Field(description="Challenge web page.")
    year: int = Field(description="Edition year.")
    modality: str = Field(description="Imaging modality.")
    task_type: ChallengeType = Field(description="Kind of competition.")
    leaderboard: str = Field(description="Leaderboard CSV, relative to the data root.")
    submission: SubmissionLayout = Field(description="Submission folder layout.")


ReleaseLayout = Literal["msd", "nnunetv2", "pants", "feta", "vindr-cxr", "slake", "vqa-rad",
                        "mimic-cxr"]
"""Folder layouts of public releases medflows reads (docs/imaging.md, "Bringing the public
releases"): segmentation (the Medical Segmentation Decathlon's, nnU-Net v2's raw dataset, PanTS,
FeTA's BIDS folders), detection (VinDr-CXR), VQA (SLAKE, VQA-RAD) and report generation
(MIMIC-CXR); readers in ``tasks_lib/imaging/releases.py``."""


class ImageFolderSource(Frozen):
    """A user's folder of images with labels (``medflows pool build imaging --from DIR``; the
    folder convention is in docs/imaging.md)."""

    kind: Literal["image_folder"] = Field(description="Source type discriminator.")
    folder: str = Field(description="Name of the ingested folder (not its path on any machine).")
    digest: str = Field(description="SHA-256 over the folder's files (relative path + bytes).")
    labels: dict[int, str] = Field(default_factory=dict,
                                   description="Segmentation label value → name (0 = background).")
    classes: dict[int, str] = Field(default_factory=dict,
                                    description="Detection/VQA/report class id → name.")
    spacing: list[float] | None = Field(
        default=None, description="Voxel size (mm) per array axis of PNG/TIFF images.")
    layout: ReleaseLayout | None = Field(
        default=None, description="The public release layout the folder was read in "
        "(``--layout``); None: the folder convention of docs/imaging.md.")
    channels: list[str] = Field(default_factory=list, description="Image channel names in "
                                "order (a release's modality/channel_names); one entry per "
                                "channel on the image's last axis.")


class PublicReleaseSource(Frozen):
    """A public release the user downloads and brings (``medflows pool build imaging --task T
    --from DIR``): medflows ships none of its data, only where to get it, its layout and the
    labels and channels the card expects of it."""

    kind: Literal["public_release"] = Field(description="Source type discriminator.")
    release: str = Field(description="The release by its published name (and task or version).")
    url: str = Field(description="Where it is downloaded from.")
    access: str = Field(description="What a user must do to get it (registration, licence).")
    layout: ReleaseLayout = Field(description="Layout of the downloaded folder (``--layout``).")
    modality: str = Field(description="Imaging modality.")
    channels: list[str] = Field(default_factory=list, description="Image channel names in the "
                                "release's order (its dataset.json's modality/channel_names); "
                                "empty for 2-D layouts.")
    labels: dict[int, str] = Field(default_factory=dict, description="Label value → name the "
                                   "release must declare (0 = background, not listed); box "
                                   "class id → name for detection; empty for VQA.")
    n_cases: int | None = Field(default=None, ge=1, description="Take the first N labelled "
                                "cases (by label file name) that pass ``require_label``; None: "
                                "every labelled case.")
    require_label: int | None = Field(default=None, ge=1, description="Take only cases whose "
                                      "label map holds this value (e.g. tumour-positive cases).")


class MedBenchSource(Frozen):
    """A MedBench-style task built from data we hold (``tasks_lib/medbench/bank.py``)."""

    kind: Literal["medbench_bank"] = Field(description="Source type discriminator.")
    builder: str = Field(description="Registered bank builder that makes the items (see "
                                      "docs/medbench.md).")
    dimension: str = Field(description="Capability dimension: MLU, MLG, MKQA, CMR, HSE, MM-A1, "
                                       "MM-A2, MM-A3, AG-G1 … AG-G6.")
    specialty: str = Field(description="Clinical specialty of the task's items (default).")
    answer_type: str = Field(description="single_choice, multi_label, extraction, open_ended, "
                                         "region or string.")
    inputs: list[str] = Field(default_factory=list,
                              description="Data references (relative to the data root).")
    n_items: int = Field(default=4, ge=1, description="Base items drawn (before shuffles).")
    shuffles: int = Field(default=3, ge=1, description="Single choice: seeded option shuffles "
                                                       "per question (each its own item).")
    seed: int = Field(default=0, description="Seed of every draw of the builder.")
    rubric: str | None = Field(default=None, description="Open-ended: judge rubric id.")
    judge_weights: dict[str, float] | None = Field(
        default=None, description="Open-ended: judge dimension weights over the rubric's.")
    dataset: str | None = Field(
        default=None, description="The MedBench v4 dataset the task stands in for (spec §2.2, "
                                  "e.g. MedOCR); None where the paper names none (LLM track).")
    tools: list[str] = Field(
        default_factory=list, description="Agent track: the tools medflows serves the agent "
                                          "on every item (tasks_lib/medbench/agent_tools.py).")


class RWEStudySource(Frozen):
    """An observational study on medflows' synthetic MIMIC-IV-shaped EHR (docs/rwe.md)."""

    kind: Literal["rwe_synthetic_ehr"] = Field(description="Source type discriminator.")
    study: str = Field(default="study.yaml", description="Design, data dictionary, cohort "
                       "contract and question tree (no answers), relative to the card folder.")
    protocol: str = Field(default="protocol.md", description="Background/objective and methods "
                          "prose, relative to the card folder.")
    n_patients: int = Field(default=20_000, ge=8000, description="Default EHR size of a build.")


class GeneratedSource(Frozen):
    """Data a track's kit generates itself from a seed (a new track needs no source model of
    its own: its kit's ``build`` reads these fields and documents ``params``)."""

    kind: Literal["generated"] = Field(description="Source type discriminator.")
    n_cases: int = Field(default=8, ge=1, description="Number of cases generated.")
    seed: int = Field(default=0, description="Seed of every draw of the generator.")
    params: dict[str, int | float | str | list[str]] = Field(
        default_factory=dict, description="Generator settings the kit documents (plain data).")


Source = Annotated[
    QASource | MNITissueSource | LowDoseCTSource | KSpaceSuperResSource | LesionSliceSource
    | ChallengeSource | ImageFolderSource | PublicReleaseSource | MedBenchSource | RWEStudySource
    | GeneratedSource,
    Field(discriminator="kind"),
]
"""Every kind of task source; ``kind`` selects the model."""
