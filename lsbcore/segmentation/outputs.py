"""What a segmentation hands back to the user, at the photo's own size.

The chains run on a working lattice (a few hundred pixels a side); the photo may be far larger.
``upsample`` carries a per-pixel map (a marginal probability, an entropy) back to the photo's
size, and the encoders turn maps and masks into the files a user downloads: 8-bit PNGs (the
probability, the mask, the entropy, the mask over the photo) and ``.npy`` arrays for
further analysis at full precision.
"""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image

MAX_PIXELS = 80_000_000  # twice the largest photo load_image accepts (40 megapixels)
TINT = (230, 60, 40)  # the app's mask colour (app/views/pixels.py)
TINT_OPACITY = 0.45


def _as_array(value, name: str) -> np.ndarray:
    """``value`` (numpy array, torch tensor, nested lists) as a numpy array of real numbers."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a numeric array, got {type(value).__name__}.") from err
    if array.dtype.kind == "c":
        raise ValueError(f"{name} must hold real numbers, not complex ones.")
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold numbers or booleans, got dtype {array.dtype}.")
    return array


def _plane(value, name: str, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """``value`` as a finite float64 ``[H, W]`` array of at most MAX_PIXELS, within [lo, hi]."""
    array = _as_array(value, name)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty [H, W] array, got shape {array.shape}.")
    if array.size > MAX_PIXELS:
        raise ValueError(
            f"{name} has {array.size:,} pixels; at most {MAX_PIXELS:,} (80 megapixels) are "
            "supported."
        )
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must contain only finite values (no NaN or inf).")
    if lo is not None and hi is not None and (array.min() < lo or array.max() > hi):
        raise ValueError(
            f"{name} must lie in [{lo:g}, {hi:g}], got values from {array.min():g} "
            f"to {array.max():g}."
        )
    return array


def _png(pixels: np.ndarray) -> bytes:
    """A uint8 ``[H, W]`` (grayscale) or ``[H, W, 3]`` (RGB) array as PNG bytes."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return buffer.getvalue()


def _gray(values: np.ndarray) -> np.ndarray:
    """Values in [0, 1] as 8-bit levels, 255 * v rounded."""
    return np.round(255.0 * values).astype(np.uint8)


def upsample(values, shape) -> np.ndarray:
    """A map ``[h, w]`` resized to ``shape = (H, W)`` by bilinear interpolation, float32.

    The result is clipped to the input's range, so a probability stays a probability and an
    entropy stays within [0, 1] bit. Any size from 1 x 1 to 80 megapixels (shrinking too).
    """
    values = _plane(values, "values")
    if np.abs(values).max() > np.finfo(np.float32).max:
        raise ValueError("values must fit in float32 (magnitudes below about 3.4e38).")
    if (
        not isinstance(shape, (tuple, list))
        or len(shape) != 2
        or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in shape)
    ):
        raise ValueError(f"shape must be a pair of integers (H, W), got {shape!r}.")
    height, width = int(shape[0]), int(shape[1])
    if height < 1 or width < 1:
        raise ValueError(f"shape must have both sides >= 1, got {(height, width)}.")
    if height * width > MAX_PIXELS:
        raise ValueError(
            f"shape {(height, width)} has {height * width:,} pixels; at most {MAX_PIXELS:,} "
            "(80 megapixels) are supported."
        )
    small = values.astype(np.float32)
    resized = Image.fromarray(small).resize((width, height), Image.Resampling.BILINEAR)
    return np.clip(np.asarray(resized, dtype=np.float32), small.min(), small.max())


def binary_entropy(p) -> np.ndarray:
    """Entropy in bits of a Bernoulli(p), elementwise: 0 at p in {0, 1}, 1 at p = 1/2.

    ``p`` is clipped to [0, 1] first (a marginal a rounding step past 1 is still certain).
    """
    p = _as_array(p, "p").astype(np.float64)
    if np.isnan(p).any():
        raise ValueError("p must not contain NaN.")
    p = np.clip(p, 0.0, 1.0)
    q = 1.0 - p
    # 0 log 0 = 0: take the log of 1 where the probability is 0
    h = -(p * np.log2(np.where(p > 0, p, 1.0)) + q * np.log2(np.where(q > 0, q, 1.0)))
    return np.clip(h, 0.0, 1.0)


def probability_png(p) -> bytes:
    """A probability map ``[H, W]`` in [0, 1] as an 8-bit grayscale PNG: level 255 * p, rounded."""
    return _png(_gray(_plane(p, "p", 0.0, 1.0)))


def entropy_png(p) -> bytes:
    """The entropy of a probability map ``[H, W]`` in [0, 1] as an 8-bit grayscale PNG: black
    where the posterior is certain, white at 1 bit (p = 1/2)."""
    return _png(_gray(binary_entropy(_plane(p, "p", 0.0, 1.0))))


def _mask(mask, name: str = "mask") -> np.ndarray:
    """``mask`` as a boolean ``[H, W]`` array: booleans, or numbers that are all 0 or 1."""
    array = _plane(mask, name)
    if not np.isin(array, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold booleans or 0 and 1 only (for +-1 spins pass x > 0).")
    return array.astype(bool)


def mask_png(mask) -> bytes:
    """A mask ``[H, W]`` as an 8-bit PNG: object 255, background 0."""
    return _png(np.where(_mask(mask), 255, 0).astype(np.uint8))


def _outline(mask: np.ndarray) -> np.ndarray:
    """The mask's pixels with a 4-neighbour outside it; the photo's edge does not count as
    outside, so an object cut by the frame is not outlined along it."""
    padded = np.pad(mask, 1, mode="edge")
    interior = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return mask & ~interior


def overlay_png(image, mask) -> bytes:
    """The mask over the photo as an RGB PNG: object pixels tinted in a translucent red, and
    its outline in the solid colour, so thin parts and the boundary stay visible.

    ``image`` is gray ``[H, W]`` or RGB ``[H, W, 3]`` in [0, 1]; ``mask`` is ``[H, W]``.
    """
    array = _as_array(image, "image")
    if array.ndim == 3 and array.shape[2] == 3:
        planes = [_plane(array[..., c], "image", 0.0, 1.0) for c in range(3)]
        rgb = np.stack(planes, axis=2)  # [H, W, 3]
    elif array.ndim == 2:
        rgb = np.repeat(_plane(array, "image", 0.0, 1.0)[..., None], 3, axis=2)
    else:
        raise ValueError(f"image must be [H, W] or [H, W, 3], got shape {array.shape}.")
    mask = _mask(mask)
    if mask.shape != rgb.shape[:2]:
        raise ValueError(f"mask must have the image's size {rgb.shape[:2]}, got {mask.shape}.")
    tint = np.asarray(TINT, dtype=np.float64) / 255.0
    blended = (1.0 - TINT_OPACITY) * rgb + TINT_OPACITY * tint
    out = np.where(mask[..., None], blended, rgb)
    out[_outline(mask)] = tint
    return _png(_gray(out))


def npy_bytes(array) -> bytes:
    """``array`` (numbers or booleans, any shape) as the bytes of a ``.npy`` file, without
    pickling, so ``np.load(io.BytesIO(b))`` reads it back exactly."""
    array = _as_array(array, "array")
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
