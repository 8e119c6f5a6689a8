"""Seeded, documented generators of segmentation and enhancement cases from real reference images.

* :func:`mni_tissue_cases` — the nilearn MNI152 T1 template and its grey/white-matter probability
  maps, resampled to ``voxel_mm`` (linear for the image and the maps), labels thresholded at 0.5
  (1 = GM, 2 = WM). Each case applies, identically to image and labels: a rotation about each axis
  (uniform ±``max_rotation_deg``) and a translation (uniform ±``max_shift_vox``), image with linear
  and labels with nearest-neighbour interpolation; then to the image only: an intensity scale
  (0.8–1.2) and shift (±0.05), a multiplicative smooth bias field ``1 + b·(a·x + c·y + d·z)``
  (coefficients uniform ±1, coordinates scaled to ±1, ``b = bias_strength``) and Gaussian noise.
* :func:`lowdose_ct_cases` — attenuation maps (Shepp–Logan phantom, MNI axial slices, alternating),
  each rotated by a seeded angle and intensity-jittered, forward-projected (Radon transform),
  turned into photon counts ``N = photons·exp(-μ·line integral)`` with Poisson noise, log-converted
  and reconstructed with filtered back-projection (ramp filter). The reference is the noiseless
  (full-dose) FBP reconstruction of the same sinogram geometry.
* :func:`kspace_cases` — MNI axial slices (2 mm, middle 40 %, seeded rotation ±10° and intensity
  ×0.9–1.1) are Fourier-transformed; only the central ``keep_fraction`` of k-space along each axis
  is kept (a low-resolution acquisition: blur and Gibbs ringing), complex Gaussian noise is added to
  the kept samples, and the magnitude of the inverse transform is the input. The reference is the
  original slice on the same grid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from tasks_lib.sources import KSpaceSuperResSource, LowDoseCTSource, MNITissueSource

F32 = NDArray[np.float32]


class VolumeCase(NamedTuple):
    """One generated volume: image, label map and voxel spacing (mm)."""

    image: NDArray[np.float32]
    labels: NDArray[np.uint8]
    spacing: tuple[float, float, float]


class ImagePair(NamedTuple):
    """One generated restoration case: degraded input and clean reference."""

    degraded: NDArray[np.float32]
    reference: NDArray[np.float32]
    origin: str


def load_mni(voxel_mm: float) -> tuple[F32, F32, F32]:
    """MNI152 T1 (scaled to 0..1), GM and WM probability maps, resampled to ``voxel_mm``."""
    from nilearn import datasets

    t1 = datasets.load_mni152_template(resolution=2)
    gm = datasets.load_mni152_gm_template(resolution=2)
    wm = datasets.load_mni152_wm_template(resolution=2)
    zoom = float(t1.header.get_zooms()[0]) / voxel_mm

    def res(img: object) -> F32:
        data = np.asarray(img.get_fdata(), dtype=np.float32)  # type: ignore[attr-defined]
        return np.asarray(ndimage.zoom(data, zoom, order=1), dtype=np.float32)

    image = res(t1)
    image = image / max(float(image.max()), 1e-6)
    return image, res(gm), res(wm)


def _rotation(rng: np.random.Generator, max_deg: float) -> NDArray[np.float64]:
    ax, ay, az = np.deg2rad(rng.uniform(-max_deg, max_deg, 3))
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return np.asarray(rx @ ry @ rz)


def _rigid(vol: NDArray[np.generic], matrix: NDArray[np.float64], shift: NDArray[np.float64],
           order: int) -> NDArray[np.generic]:
    centre = (np.asarray(vol.shape) - 1) / 2.0
    offset = centre - matrix @ centre - shift
    return np.asarray(ndimage.affine_transform(vol, matrix, offset=offset, order=order,
                                               mode="constant", cval=0))


def _bias(shape: tuple[int, ...], rng: np.random.Generator, strength: float) -> F32:
    grids = np.meshgrid(*[np.linspace(-1, 1, n) for n in shape], indexing="ij")
    coef = rng.uniform(-1, 1, len(shape))
    field = 1.0 + strength * sum(c * g for c, g in zip(coef, grids, strict=True))
    return np.asarray(field, dtype=np.float32)


def mni_tissue_cases(src: MNITissueSource) -> list[VolumeCase]:
    """The augmented segmentation cases of a card (see the module docstring)."""
    image, gm, wm = load_mni(src.voxel_mm)
    labels = np.zeros(image.shape, dtype=np.uint8)
    labels[gm > 0.5] = 1
    labels[wm > 0.5] = 2
    rng = np.random.default_rng(src.seed)
    cases = []
    for _ in range(src.n_cases):
        rot = _rotation(rng, src.max_rotation_deg)
        shift = rng.uniform(-src.max_shift_vox, src.max_shift_vox, 3)
        img = np.asarray(_rigid(image, rot, shift, order=1), dtype=np.float32)
        lab = np.asarray(_rigid(labels, rot, shift, order=0), dtype=np.uint8)
        img = img * rng.uniform(0.8, 1.2) + rng.uniform(-0.05, 0.05) * (img > 0)
        img = img * _bias(img.shape, rng, src.bias_strength)
        img = np.asarray(img + rng.normal(0.0, src.noise_sd, img.shape), dtype=np.float32)
        spacing = (src.voxel_mm,) * 3
        cases.append(VolumeCase(np.asarray(img, dtype=np.float32), lab, spacing))
    return cases


def _attenuation_maps(size: int, n: int, rng: np.random.Generator) -> list[tuple[str, F32]]:
    from skimage.data import shepp_logan_phantom as _phantom
    from skimage.transform import resize as _resize
    from skimage.transform import rotate as _rotate

    shepp_logan_phantom: Callable[..., Any] = _phantom
    resize: Callable[..., Any] = _resize
    rotate: Callable[..., Any] = _rotate

    phantom = np.asarray(resize(shepp_logan_phantom(), (size, size), anti_aliasing=True))
    t1, _, _ = load_mni(2.0)
    zs = np.linspace(0.35, 0.65, max(1, n // 2)) * t1.shape[2]
    out: list[tuple[str, F32]] = []
    yy, xx = np.mgrid[:size, :size]
    disk = ((yy - (size - 1) / 2) ** 2 + (xx - (size - 1) / 2) ** 2) <= ((size - 2) / 2) ** 2
    for i in range(n):
        if i % 2 == 0:
            base, origin = phantom, "shepp_logan_phantom"
        else:
            z = int(zs[(i // 2) % len(zs)])
            sl = np.rot90(t1[:, :, z])
            side = max(sl.shape) + 8
            pad = np.zeros((side, side), dtype=np.float32)
            oy, ox = (side - sl.shape[0]) // 2, (side - sl.shape[1]) // 2
            pad[oy:oy + sl.shape[0], ox:ox + sl.shape[1]] = sl
            base, origin = resize(pad, (size, size), anti_aliasing=True), f"mni152_axial_z{z}"
        img = rotate(base, rng.uniform(-20, 20), order=1) * rng.uniform(0.9, 1.1)
        out.append((origin, np.asarray(np.clip(img, 0, None) * disk, dtype=np.float32)))
    return out


def lowdose_ct_cases(src: LowDoseCTSource) -> list[ImagePair]:
    """The low-dose / full-dose CT pairs of a card (see the module docstring)."""
    from skimage.transform import iradon as _iradon
    from skimage.transform import radon as _radon

    iradon: Callable[..., Any] = _iradon
    radon: Callable[..., Any] = _radon

    rng = np.random.default_rng(src.seed)
    theta = np.linspace(0.0, 180.0, src.n_angles, endpoint=False)
    cases = []
    for origin, mu in _attenuation_maps(src.size, src.n_cases, rng):
        sino = radon(mu * src.mu_max, theta=theta, circle=True)
        counts = rng.poisson(src.photons * np.exp(-sino)).astype(np.float64)
        noisy = -np.log(np.maximum(counts, 1.0) / src.photons)
        full = iradon(sino, theta=theta, circle=True, filter_name="ramp") / src.mu_max
        low = iradon(noisy, theta=theta, circle=True, filter_name="ramp") / src.mu_max
        cases.append(ImagePair(np.asarray(low, dtype=np.float32),
                               np.asarray(full, dtype=np.float32), origin))
    return cases


def kspace_cases(src: KSpaceSuperResSource) -> list[ImagePair]:
    """The k-space-truncated / original MNI slice pairs of a card (see the module docstring)."""
    from skimage.transform import rotate as _rotate

    rotate: Callable[..., Any] = _rotate
    t1, _, _ = load_mni(2.0)
    rng = np.random.default_rng(src.seed)
    nz = t1.shape[2]
    cases = []
    for _ in range(src.n_cases):
        z = int(rng.integers(int(0.4 * nz), int(0.6 * nz)))
        ref = rotate(np.rot90(t1[:, :, z]), rng.uniform(-10, 10), order=1) * rng.uniform(0.9, 1.1)
        k = np.fft.fftshift(np.fft.fft2(ref))
        keep = np.zeros(k.shape, dtype=bool)
        (h, w), f = k.shape, src.keep_fraction
        kh, kw = max(1, round(h * f / 2)), max(1, round(w * f / 2))
        keep[h // 2 - kh:h // 2 + kh, w // 2 - kw:w // 2 + kw] = True
        scale = np.sqrt(h * w) * src.noise_sd
        noise = rng.normal(0, scale, k.shape) + 1j * rng.normal(0, scale, k.shape)
        low = np.abs(np.fft.ifft2(np.fft.ifftshift(np.where(keep, k + noise, 0))))
        cases.append(ImagePair(np.asarray(low, dtype=np.float32), np.asarray(ref, dtype=np.float32),
                               f"mni152_axial_z{z}"))
    return cases
