"""sRGB to CIELAB, the colour space in which photos are segmented.

Lab is close to perceptually uniform: a Euclidean distance of about 1 (Delta E 1976)
is a just-noticeable difference whatever the hue, so two classes that look different
are separated in Lab by roughly as much as they look apart. The conversion is the
standard one: IEC 61966-2-1 sRGB linearisation, the sRGB -> XYZ matrix (D65), and
CIE 1976 L*a*b* with its linear segment near black.
"""

from __future__ import annotations

import numpy as np

from lsbcore.segmentation.arguments import real_array

__all__ = ["srgb_to_lab"]

# Linear sRGB -> CIE XYZ, D65 (IEC 61966-2-1; Lindbloom's seven-digit form).
_RGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
# The reference white is the image of sRGB white, so that white maps to exactly
# (100, 0, 0); it is D65 = (0.95047, 1, 1.08883) to within 1e-6.
_WHITE = _RGB_TO_XYZ.sum(axis=1)

# CIE f(t): the cube root above (6/29)^3, a line of the same value and slope below it,
# so that f stays finite-sloped at black.
_DELTA = 6.0 / 29.0


def srgb_to_lab(rgb) -> np.ndarray:
    """Convert sRGB values in [0, 1] (shape ``[..., 3]``) to CIELAB (D65), same shape.

    L lies in [0, 100]; a and b lie within about [-87, 99] and [-108, 95] for sRGB
    inputs. Returns float64.

    Raises:
        ValueError: ``rgb`` is not a real array of shape ``[..., 3]`` with finite values
            in [0, 1].
    """
    arr = real_array(rgb, "rgb")
    if arr.ndim < 1 or arr.shape[-1] != 3:
        raise ValueError(f"rgb must have shape [..., 3], got {arr.shape}.")
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(
            f"rgb values must lie in [0, 1], got the range [{arr.min():g}, {arr.max():g}]."
        )

    # sRGB transfer function inverted (IEC 61966-2-1): linear toe, then a 2.4 power.
    linear = np.where(arr <= 0.04045, arr / 12.92, ((arr + 0.055) / 1.055) ** 2.4)
    xyz = linear @ _RGB_TO_XYZ.T / _WHITE  # [..., 3], relative to white
    f = np.where(
        xyz > _DELTA**3,
        np.cbrt(xyz),
        xyz / (3.0 * _DELTA**2) + 4.0 / 29.0,
    )
    fx, fy, fz = f[..., 0], f[..., 1], f[..., 2]
    return np.stack([116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)], axis=-1)
