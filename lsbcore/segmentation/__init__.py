"""Segmentation outputs: the exact MAP mask and the images and arrays a user downloads."""

from lsbcore.segmentation.map_estimate import exact_map
from lsbcore.segmentation.outputs import (
    binary_entropy,
    entropy_png,
    mask_png,
    npy_bytes,
    overlay_png,
    probability_png,
    upsample,
)

__all__ = [
    "binary_entropy",
    "entropy_png",
    "exact_map",
    "mask_png",
    "npy_bytes",
    "overlay_png",
    "probability_png",
    "upsample",
]
