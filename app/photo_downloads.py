"""The segmentation's downloads sized from the photo, with a stated cap and a small footprint.

The mask, P(x = +1), the uncertainty and the overlay are offered at the photo's size, but at
most ``MAX_SIDE`` pixels on the long side: larger photos get them scaled to the cap, and the
page says so (``cap_note``). They are drawn a band of rows at a time: the lattice's marginal
upsampled bilinearly exactly as ``lsbcore.segmentation.outputs.upsample`` does (PIL's
horizontal pass on the small lattice, then PIL's vertical weights, bit for bit), so a full-size
float copy never exists, and the files equal ``outputs``' own encoders pixel for pixel.

The cap comes from a memory budget of about 256 MB a build (``python -m tools.bench_downloads``
measures it): the gray files cost about 2 bytes a pixel (the 8-bit picture, its PNG, bands of
``BAND_PIXELS``), the overlay 16 to 28 (the photo decoded again, 4 bytes a pixel at the
nearest scale libjpeg offers at or above the download's size, so up to 4 times its pixels,
plus the picture at 4 bytes a pixel): at 3072 px the worst JPEG's overlay (6143 px, decoded at
full scale) peaks at about 270 MB, an 8000 px photo's at 155 MB. ``app.large_builds`` lets one
build run at a time.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
from PIL import Image

from lsbcore.image import rgb_rows
from lsbcore.segmentation import outputs

MAX_SIDE = 3072  # the long side of every photo-sized download (see above)
BAND_PIXELS = 1 << 16  # pixels per band: a few megabytes of float64 at a time


def download_shape(original_shape: tuple[int, int]) -> tuple[int, int]:
    """``(height, width)`` of the downloads: the photo's, scaled down to ``MAX_SIDE`` at most
    on the long side (aspect kept, rounded, each side at least 1)."""
    height, width = (int(v) for v in original_shape)
    longer = max(height, width)
    if longer <= MAX_SIDE:
        return height, width
    return (
        max(1, (2 * height * MAX_SIDE + longer) // (2 * longer)),
        max(1, (2 * width * MAX_SIDE + longer) // (2 * longer)),
    )


def cap_note(original_shape: tuple[int, int]) -> str | None:
    """The sentence saying that (and why) the downloads are smaller than the photo, or None."""
    height, width = original_shape
    if max(height, width) <= MAX_SIDE:
        return None
    small_h, small_w = download_shape(original_shape)
    return (
        f"Downloads are at most {MAX_SIDE:,} px on the long side, so that building one stays "
        f"within the server's memory; this photo is {width:,} × {height:,} px, so they are "
        f"scaled to {small_w:,} × {small_h:,}."
    )


def _band_rows(width: int) -> int:
    return max(1, BAND_PIXELS // max(1, width))


def _vertical_rows(wide: np.ndarray, height: int, top: int, bottom: int) -> np.ndarray:
    """Rows ``top:bottom`` of ``wide`` ``[h, W]`` resized to ``height`` rows, float32, with
    PIL's bilinear weights and arithmetic (``precompute_coeffs``: tap centres at
    ``(y + 0.5) * h / height``, weights normalised, summed in double)."""
    h = wide.shape[0]
    center = (np.arange(top, bottom) + 0.5) * (h / height)
    lo = np.maximum((center - 0.5).astype(np.int64), 0)  # int(center - support + 0.5)
    hi = np.minimum((center + 1.5).astype(np.int64), h)
    taps = int((hi - lo).max())
    weights = np.zeros((bottom - top, taps))
    for t in range(taps):
        distance = np.abs(t + lo - center + 0.5)
        weights[:, t] = np.where((t < hi - lo) & (distance < 1.0), 1.0 - distance, 0.0)
    weights /= weights.sum(axis=1, keepdims=True)
    total = np.zeros((bottom - top, wide.shape[1]))
    for t in range(taps):
        total += wide[np.minimum(lo + t, h - 1)].astype(np.float64) * weights[:, t : t + 1]
    return total.astype(np.float32)


class Upsampler:
    """``outputs.upsample(marginal, shape)`` a band of rows at a time."""

    def __init__(self, marginal: np.ndarray, shape: tuple[int, int]):
        small = np.asarray(marginal, dtype=np.float32)
        self.height, self.width = shape
        self.low, self.high = small.min(), small.max()
        # the horizontal pass on the lattice's rows: [h, W], small
        self.wide = np.asarray(
            Image.fromarray(small).resize((self.width, small.shape[0]), Image.Resampling.BILINEAR)
        )

    def rows(self, top: int, bottom: int) -> np.ndarray:
        """``outputs.upsample(marginal, shape)[top:bottom]``, float32."""
        top, bottom = max(0, top), min(self.height, bottom)
        return np.clip(_vertical_rows(self.wide, self.height, top, bottom), self.low, self.high)

    def bands(self) -> Iterator[tuple[int, np.ndarray]]:
        step = _band_rows(self.width)
        for top in range(0, self.height, step):
            yield top, self.rows(top, top + step)


def _png(canvas: Image.Image) -> bytes:
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return buffer.getvalue()


def _gray(values: np.ndarray) -> np.ndarray:
    return np.round(255.0 * values.astype(np.float64)).astype(np.uint8)  # as outputs._gray


def _gray_png(marginal: np.ndarray, shape: tuple[int, int], levels) -> bytes:
    upsampler = Upsampler(marginal, shape)
    canvas = Image.new("L", (upsampler.width, upsampler.height))
    for top, band in upsampler.bands():
        canvas.paste(Image.fromarray(levels(band)), (0, top))
    return _png(canvas)


def mask_png(marginal: np.ndarray, shape: tuple[int, int], threshold: float) -> bytes:
    """``outputs.mask_png(outputs.upsample(marginal, shape) >= threshold)``."""
    return _gray_png(
        marginal, shape, lambda band: np.where(band >= threshold, 255, 0).astype(np.uint8)
    )


def probability_png(marginal: np.ndarray, shape: tuple[int, int]) -> bytes:
    """``outputs.probability_png(outputs.upsample(marginal, shape))``."""
    return _gray_png(marginal, shape, _gray)


def entropy_png(marginal: np.ndarray, shape: tuple[int, int]) -> bytes:
    """``outputs.entropy_png(outputs.upsample(marginal, shape))``."""
    return _gray_png(marginal, shape, lambda band: _gray(outputs.binary_entropy(band)))


def _outline(mask: np.ndarray) -> np.ndarray:
    """``outputs._outline``: mask pixels with a 4-neighbour outside it (edges repeat)."""
    padded = np.pad(mask, 1, mode="edge")
    interior = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return mask & ~interior


def overlay_png(source, marginal: np.ndarray, shape: tuple[int, int], threshold: float) -> bytes:
    """``outputs.overlay_png`` of the photo (``source``, decoded again at ``shape``) and the
    upsampled mask, band by band; the outline looks one row past each band."""
    upsampler = Upsampler(marginal, shape)
    height, width = shape
    tint = np.asarray(outputs.TINT, dtype=np.float64) / 255.0
    canvas, top = None, 0
    for rgb in rgb_rows(source, max_side=max(shape), rows=_band_rows(width)):
        if canvas is None:  # once the photo is decoded, whose full-scale copy is gone by then
            canvas = Image.new("RGB", (width, height))
        bottom = top + rgb.shape[0]
        if rgb.shape[1] != width or bottom > height:
            raise ValueError("the photo decoded to another size than its downloads")
        around = upsampler.rows(top - 1, bottom + 1) >= threshold  # one row more each side
        first = 1 if top > 0 else 0
        mask = around[first : first + rgb.shape[0]]
        outline = _outline(around)[first : first + rgb.shape[0]]
        blended = (1.0 - outputs.TINT_OPACITY) * rgb + outputs.TINT_OPACITY * tint
        band = np.where(mask[..., None], blended, rgb)
        band[outline] = tint
        canvas.paste(Image.fromarray(_gray(band)), (0, top))
        top = bottom
    if canvas is None or top != height:
        raise ValueError("the photo decoded to another size than its downloads")
    return _png(canvas)
