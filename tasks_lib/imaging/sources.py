"""Task-card sources of the imaging tracks (one model per generator, discriminated on ``kind``).

Every source is seeded and fully described by its fields, so a build is reproducible from the card.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tasks_lib.domain import Frozen


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
