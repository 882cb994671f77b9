"""Small uint8 rasters for ``st.image``: spins, probabilities and fields, upscaled crisply.

The live views send images rather than charts because a PNG of a few kilobytes costs far less
to build, send and paint than a chart of the same pixels. Upscaling is nearest-neighbour (each
site becomes a square block), so lattices stay sharp in the browser. ``data_uri`` inlines the
PNG in the page update: with several redraws a second, served media files can be replaced (and
deleted) before a slow browser has fetched them, which shows as broken or flickering images.
"""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image
from plotly.colors import sample_colorscale, sequential

# target on-screen size (pixels) of one lattice in the live views
DISPLAY_SIDE = 160
SEPARATOR = 200  # gray level of the gap between panels


def scale_for(shape: tuple[int, int], side: int = DISPLAY_SIDE) -> int:
    """Integer upscaling factor that brings the longer side close to ``side`` pixels."""
    return max(1, side // max(1, max(shape)))


def upscale(image: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscaling of ``[H, W]`` or ``[H, W, 3]`` by an integer factor."""
    if factor <= 1:
        return image
    return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)


def shrink(image: np.ndarray, side: int) -> np.ndarray:
    """A uint8 raster reduced by area averaging so that its longer side is ``side``."""
    height, width = image.shape[:2]
    scale = side / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(np.ascontiguousarray(image)).resize(size, Image.BOX))


def fit(image: np.ndarray, side: int) -> np.ndarray:
    """A uint8 raster sized for the page: small lattices blown up crisply, large ones (a
    512-pixel photo) reduced by area averaging, so a redraw sends tens of kilobytes."""
    if max(image.shape[:2]) > side:
        return shrink(image, side)
    return upscale(image, scale_for(image.shape[:2], side))


def colour_image(image: np.ndarray) -> np.ndarray:
    """A photo in [0, 1], gray ``[H, W]`` or RGB ``[H, W, 3]``, as uint8 levels."""
    return gray(image)


def spins(x: np.ndarray) -> np.ndarray:
    """States of +-1 as gray levels: +1 (object) white, -1 (background) black."""
    return np.where(np.asarray(x) > 0, 255, 0).astype(np.uint8)


def gray(values: np.ndarray, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Values in [low, high] as gray levels (low black, high white); NaN shown mid-gray."""
    v = np.asarray(values, dtype=np.float64)
    span = high - low if high > low else 1.0
    out = np.clip((v - low) / span, 0.0, 1.0)
    out = np.where(np.isfinite(out), out, 0.5)
    return np.round(out * 255).astype(np.uint8)


def _lut(scale) -> np.ndarray:
    colours = sample_colorscale(scale, list(np.linspace(0.0, 1.0, 256)), colortype="tuple")
    return np.round(np.asarray(colours) * 255).astype(np.uint8)


_VIRIDIS = _lut(sequential.Viridis)
_DIVERGING = _lut([[0.0, "#2166ac"], [0.5, "#f7f7f7"], [1.0, "#b2182b"]])
_ENTROPY = _lut(sequential.Inferno)


def colour(values: np.ndarray, low: float, high: float, palette: str = "viridis") -> np.ndarray:
    """Values mapped through a colour table to ``[H, W, 3]`` uint8 (NaN to the lowest colour)."""
    lut = {"viridis": _VIRIDIS, "diverging": _DIVERGING, "inferno": _ENTROPY}[palette]
    return lut[gray(values, low, high)]


def diverging(values: np.ndarray) -> np.ndarray:
    """A signed field (alpha) in blue (negative) / white / red (positive), symmetric about 0."""
    v = np.asarray(values, dtype=np.float64)
    bound = float(np.max(np.abs(v))) if v.size else 1.0
    bound = bound if bound > 0 else 1.0
    return colour(v, -bound, bound, "diverging")


def to_rgb(image: np.ndarray) -> np.ndarray:
    return image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=2)


def hstack(images: list[np.ndarray], gap: int = 1) -> np.ndarray:
    """Images of one height side by side with ``gap``-pixel light-gray separators."""
    if not images:
        return np.zeros((1, 1), dtype=np.uint8)
    rgb = any(im.ndim == 3 for im in images)
    parts = []
    for k, im in enumerate(images):
        im = to_rgb(im) if rgb else im
        if k:
            shape = (im.shape[0], gap, 3) if rgb else (im.shape[0], gap)
            parts.append(np.full(shape, SEPARATOR, dtype=np.uint8))
        parts.append(im)
    return np.concatenate(parts, axis=1)


def overlay(image: np.ndarray, mask: np.ndarray, tint=(230, 60, 40), alpha: float = 0.45):
    """A gray image with ``mask`` tinted over it: ``[H, W, 3]`` uint8."""
    base = to_rgb(gray(image)).astype(np.float64)
    tint_arr = np.asarray(tint, dtype=np.float64)
    m = np.asarray(mask, dtype=bool)[..., None]
    out = np.where(m, (1 - alpha) * base + alpha * tint_arr, base)
    return np.round(out).astype(np.uint8)


def data_uri(image: np.ndarray) -> str:
    """A uint8 image (``[H, W]`` or ``[H, W, 3]``) as a ``data:image/png;base64,...`` URL."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
