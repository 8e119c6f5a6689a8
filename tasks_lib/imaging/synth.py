"""Seeded, documented generators of segmentation and enhancement cases from real reference images.

* :func:`mni_tissue_cases` — the nilearn MNI152 T1 template and its grey/white-matter probability
  maps, resampled to ``voxel_mm`` (linear for the image and the maps), labels thresholded at 0.5
  (1 = GM, 2 = WM). Each case applies, identically to image and labels: a rotation about each axis
  (uniform ±``max_rotation_deg``) and a translation (uniform ±``max_shift_vox``), image with linear
  and labels with nearest-neighbour interpolation; then to the image only: an intensity scale
  (0.8–1.2) and shift (±0.05), a multiplicative smooth bias field ``1 + b·(a·x + c·y + d·z)``
  (coefficients uniform ±1, coordinates scaled to ±1, ``b = bias_strength``) and Gaussian noise.
  With ``deform_mm > 0`` (the 1 mm full-resolution card) the template is loaded at
  ``template_mm`` and each case is instead warped by one smooth random deformation composed with
  the rigid jitter (:func:`_deformable_case`): displacement components drawn i.i.d. normal on a
  control grid every ``deform_spacing_mm``, Gaussian-smoothed (σ = one control spacing), scaled so
  the largest component is ``deform_mm`` and interpolated trilinearly; output voxel ``x`` samples
  the reference at ``R·(x − c) + c − t + d(x)`` (``c`` the grid centre). The T1 and the GM/WM
  probability maps are resampled linearly at those positions and the labels are the warped maps
  thresholded at 0.5; then intensity scale/shift, bias field and noise as above. Cases are
  generated one at a time, in slabs of ``SLAB`` planes, so memory is bounded by one case.
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

from collections.abc import Callable, Iterator
from functools import lru_cache
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


@lru_cache(maxsize=2)
def load_mni(voxel_mm: float, template_mm: int = 2) -> tuple[F32, F32, F32]:
    """MNI152 T1 (scaled to 0..1), GM and WM probability maps of nilearn's ``template_mm``
    template, resampled to ``voxel_mm`` (not resampled when they are equal).

    Cached (read-only arrays): nilearn's loading and resampling cost seconds per call, and one
    process renders several cards from the same template (a 4 mm and the 2 mm slices)."""
    from nilearn import datasets

    t1 = datasets.load_mni152_template(resolution=template_mm)
    gm = datasets.load_mni152_gm_template(resolution=template_mm)
    wm = datasets.load_mni152_wm_template(resolution=template_mm)
    zoom = float(t1.header.get_zooms()[0]) / voxel_mm

    def res(img: object) -> F32:
        data = np.asarray(img.get_fdata(), dtype=np.float32)  # type: ignore[attr-defined]
        if zoom == 1.0:
            return data
        return np.asarray(ndimage.zoom(data, zoom, order=1), dtype=np.float32)

    image = res(t1)
    image = image / max(float(image.max()), 1e-6)
    maps = (image, res(gm), res(wm))
    for m in maps:
        m.setflags(write=False)
    return maps


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


def mni_tissue_cases(src: MNITissueSource) -> Iterator[VolumeCase]:
    """The augmented segmentation cases of a card, generated lazily one at a time (see the
    module docstring)."""
    if src.deform_mm > 0:
        yield from deformable_tissue_cases(src)
        return
    image, gm, wm = load_mni(src.voxel_mm, src.template_mm)
    labels = np.zeros(image.shape, dtype=np.uint8)
    labels[gm > 0.5] = 1
    labels[wm > 0.5] = 2
    rng = np.random.default_rng(src.seed)
    for _ in range(src.n_cases):
        rot = _rotation(rng, src.max_rotation_deg)
        shift = rng.uniform(-src.max_shift_vox, src.max_shift_vox, 3)
        img = np.asarray(_rigid(image, rot, shift, order=1), dtype=np.float32)
        lab = np.asarray(_rigid(labels, rot, shift, order=0), dtype=np.uint8)
        img = img * rng.uniform(0.8, 1.2) + rng.uniform(-0.05, 0.05) * (img > 0)
        img = img * _bias(img.shape, rng, src.bias_strength)
        img = np.asarray(img + rng.normal(0.0, src.noise_sd, img.shape), dtype=np.float32)
        spacing = (src.voxel_mm,) * 3
        yield VolumeCase(np.asarray(img, dtype=np.float32), lab, spacing)


SLAB = 16
"""Planes (along axis 0) resampled at a time by the deformable generator."""


def _control_field(shape: tuple[int, ...], rng: np.random.Generator, src: MNITissueSource
                   ) -> tuple[NDArray[np.float64], float]:
    """Smooth random displacement components (voxels) on the control grid, and its step
    (voxels): i.i.d. normal, Gaussian-smoothed by one control spacing, largest |component| =
    ``deform_mm``."""
    step = src.deform_spacing_mm / src.voxel_mm
    grid = tuple(int(np.ceil((n - 1) / step)) + 1 for n in shape)
    raw = rng.normal(0.0, 1.0, (3, *grid))
    smooth = np.stack([ndimage.gaussian_filter(c, 1.0, mode="nearest") for c in raw])
    peak = max(float(np.abs(smooth).max()), 1e-12)
    return smooth * (src.deform_mm / src.voxel_mm / peak), step


def _hat(n: int, step: float, m: int) -> NDArray[np.float64]:
    """``(n, m)`` weights of linear interpolation from ``m`` control points every ``step``."""
    return np.maximum(0.0, 1.0 - np.abs(np.arange(n)[:, None] / step - np.arange(m)[None, :]))


def _warp(maps: list[F32], matrix: NDArray[np.float64], shift: NDArray[np.float64],
          control: NDArray[np.float64], step: float) -> list[F32]:
    """Resample ``maps`` (linear) at ``R·(x − c) + c − t + d(x)``, ``SLAB`` planes at a time;
    ``d`` is the control field interpolated trilinearly (separably, as three small products)."""
    shape = maps[0].shape
    centre = (np.asarray(shape, dtype=np.float64) - 1) / 2.0
    offset = centre - matrix @ centre - shift
    jj, kk = np.meshgrid(np.arange(shape[1]), np.arange(shape[2]), indexing="ij")
    hat = [_hat(n, step, m) for n, m in zip(shape, control.shape[1:], strict=True)]
    outs = [np.empty(shape, dtype=np.float32) for _ in maps]
    for z0 in range(0, shape[0], SLAB):
        z1 = min(z0 + SLAB, shape[0])
        zz = np.broadcast_to(np.arange(z0, z1)[:, None, None], (z1 - z0, *jj.shape))
        grid = np.stack([zz, np.broadcast_to(jj, zz.shape), np.broadcast_to(kk, zz.shape)])
        grid = grid.reshape(3, -1).astype(np.float64)
        pos = matrix @ grid + offset[:, None]
        for axis in range(3):
            d = np.tensordot(hat[0][z0:z1], control[axis], axes=(1, 0))
            d = np.tensordot(d, hat[1], axes=(1, 1))
            pos[axis] += np.tensordot(d, hat[2], axes=(1, 1)).ravel()
        for vol, out in zip(maps, outs, strict=True):
            out[z0:z1] = ndimage.map_coordinates(vol, pos, order=1, mode="constant",
                                                 cval=0.0).reshape(z1 - z0, *shape[1:])
    return outs


def _open_bias(shape: tuple[int, ...], rng: np.random.Generator, strength: float) -> F32:
    """:func:`_bias` with broadcast coordinates (one volume of memory, not three)."""
    coef = rng.uniform(-1, 1, len(shape))
    field = np.ones(shape, dtype=np.float32)
    for axis, (c, n) in enumerate(zip(coef, shape, strict=True)):
        ramp = np.linspace(-1, 1, n).reshape([n if a == axis else 1 for a in range(len(shape))])
        field += np.asarray(strength * c * ramp, dtype=np.float32)
    return field


def _deformable_case(maps: list[F32], src: MNITissueSource,
                     rng: np.random.Generator) -> VolumeCase:
    """One case of the full-resolution card (see the module docstring)."""
    rot = _rotation(rng, src.max_rotation_deg)
    shift = rng.uniform(-src.max_shift_vox, src.max_shift_vox, 3)
    control, step = _control_field(maps[0].shape, rng, src)
    img, gm, wm = _warp(maps, rot, shift, control, step)
    lab = np.zeros(img.shape, dtype=np.uint8)
    lab[gm > 0.5] = 1
    lab[wm > 0.5] = 2
    del gm, wm
    img *= np.float32(rng.uniform(0.8, 1.2))
    img += np.float32(rng.uniform(-0.05, 0.05)) * (img > 0)
    img *= _open_bias(img.shape, rng, src.bias_strength)
    img += rng.normal(0.0, src.noise_sd, img.shape).astype(np.float32)
    return VolumeCase(img, lab, (src.voxel_mm,) * 3)


def deformable_tissue_cases(src: MNITissueSource) -> Iterator[VolumeCase]:
    """The cases of a card with ``deform_mm > 0``, one at a time (see the module docstring)."""
    maps = list(load_mni(src.voxel_mm, src.template_mm))
    rng = np.random.default_rng(src.seed)
    for _ in range(src.n_cases):
        yield _deformable_case(maps, src, rng)


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
        plane = np.rot90(t1[:, :, z]).copy()  # skimage needs a writable array (t1 is cached)
        ref = rotate(plane, rng.uniform(-10, 10), order=1) * rng.uniform(0.9, 1.1)
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
