"""The Ising field of a photo: the fitted log-likelihood ratio of object against background.

With ``x_i = +1`` for the object and ``-1`` for the background, a pixel's features ``y_i``
have likelihood ``N(y_i; m_obj, S_obj)`` or ``N(y_i; m_bg, S_bg)``, so

    log p(y_i | x_i) = const + x_i * 0.5 * [log N(y_i; m_obj, S_obj) - log N(y_i; m_bg, S_bg)]

and the posterior's field is that half-difference, weighted:

    alpha_i = mu * 0.5 * [log N(y_i; m_obj, sigma^2 S_obj) - log N(y_i; m_bg, sigma^2 S_bg)].

``mu`` weighs the data against the smoothness prior ``lambda``; ``sigma > 1`` widens both
fitted classes (the data are trusted less); ``mu = sigma = 1`` is the fitted likelihood as
it is. The mixture weights are left out on purpose: the Ising prior is the prior.

Features. A gray image is modelled in its luma (in [0, 1]). A colour image is modelled in
CIELAB divided by 100: L / 100 lies in [0, 1] like luma, and a / 100, b / 100 within about
[-1.1, 1]. The classes have full covariances, so the fit and every likelihood ratio are the
same under any invertible linear rescaling of the features; the scaling only decides what
the variance floor means. One common factor keeps Lab's perceptual metric (a distance of
about 1 Lab unit is just noticeable in any direction), so the floor, a standard deviation
of 0.01, is one just-noticeable colour difference, and in luma 2.5 grey levels of 255.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsbcore.image import Photo
from lsbcore.segmentation.arguments import real_array, real_number
from lsbcore.segmentation.colour import srgb_to_lab
from lsbcore.segmentation.mixture import TwoClassModel, fit_two_class_model
from lsbcore.segmentation.polarity import CLASS_NAMES, Polarity, border_polarity

__all__ = [
    "ALPHA_BOUND",
    "MAX_FIT_PIXELS",
    "POLARITIES",
    "DataTerm",
    "fit_data_term",
    "image_features",
]

#: |alpha| is clipped to this. At 50 the data already give odds of e^100 to one; a site
#: has at most 4 neighbours, so no coupling of a few units can overturn it, and flip
#: log-ratios (2 alpha + 8 lambda at most) stay far inside float64. A clean two-level
#: image, whose classes sit at the variance floor, gives ratios in the hundreds.
ALPHA_BOUND = 50.0

#: Larger images are fitted on this many of their pixels (a fixed-seed random subset, so
#: that fits repeat exactly and periodic textures cannot alias); alpha still covers every
#: pixel. The model has at most 19 parameters, which 2^16 points pin down far more
#: closely than the model fits a real photo, and EM's cost grows with the points.
MAX_FIT_PIXELS = 2**16

#: Accepted values of ``polarity``: the object is chosen from the border, or is the
#: darker or the brighter class.
POLARITIES = ("auto", *CLASS_NAMES)


@dataclass(frozen=True, eq=False)
class DataTerm:
    """The field of the segmentation posterior fitted to one image.

    Attributes:
        alpha: ``[H, W]`` float64, finite, within ``[-ALPHA_BOUND, ALPHA_BOUND]``;
            positive where the pixel looks more like the object.
        model: the fitted :class:`TwoClassModel` (class 0 dark, class 1 bright).
        polarity: the object class used, ``"dark"`` or ``"bright"``.
        auto_polarity: what ``polarity="auto"`` picks, with its reason sentence.
        colour: True when the image was modelled in Lab colour, False in luma.
        likelier: ``[H, W]`` float64 start state, each site at its likelier class:
            +1 where ``alpha >= 0``, else -1.
    """

    alpha: np.ndarray
    model: TwoClassModel
    polarity: str
    auto_polarity: Polarity
    colour: bool
    likelier: np.ndarray


def fit_data_term(image, mu: float = 1.0, sigma: float = 1.0, polarity: str = "auto") -> DataTerm:
    """Fit the two-class model to ``image`` and return the Ising field ``alpha`` (see module).

    Args:
        image: a :class:`~lsbcore.image.Photo`, an RGB array ``[H, W, 3]`` or a gray
            array ``[H, W]``, with values in [0, 1]. Colour is modelled in Lab; a Photo
            without colour, or an RGB array whose channels are equal, in luma.
        mu: weight of the data term, finite and >= 0.
        sigma: widening of both classes, finite and > 0.
        polarity: ``"auto"`` (the class that touches the border less is the object),
            ``"dark"`` or ``"bright"``.

    Raises:
        ValueError: an argument is out of range, or the image is constant (there is
            nothing to separate).
    """
    mu = real_number(mu, "mu", minimum=0.0)
    sigma = real_number(sigma, "sigma", positive=True)
    if not isinstance(polarity, str) or polarity not in POLARITIES:
        raise ValueError(f"polarity must be one of {', '.join(POLARITIES)}; got {polarity!r}.")
    features, colour = image_features(image)  # [H, W, d]
    height, width, d = features.shape
    flat = features.reshape(-1, d)
    if not np.ptp(flat, axis=0).any():
        raise ValueError("image is constant (every pixel alike), so there is nothing to separate.")

    model = fit_two_class_model(_fitting_sample(flat))
    auto = border_polarity(model, features)
    obj = auto.object_class if polarity == "auto" else CLASS_NAMES.index(polarity)
    log_n = model.class_log_likelihoods(flat, scale=sigma)  # [N, 2]
    half_ratio = 0.5 * (log_n[:, obj] - log_n[:, 1 - obj])
    alpha = np.clip(mu * half_ratio, -ALPHA_BOUND, ALPHA_BOUND).reshape(height, width)
    return DataTerm(
        alpha=alpha,
        model=model,
        polarity=CLASS_NAMES[obj],
        auto_polarity=auto,
        colour=colour,
        likelier=np.where(alpha >= 0, 1.0, -1.0),
    )


def _fitting_sample(flat: np.ndarray) -> np.ndarray:
    """At most MAX_FIT_PIXELS rows of ``flat`` [N, d]; all of them when a subset is constant."""
    if len(flat) <= MAX_FIT_PIXELS:
        return flat
    rows = np.sort(np.random.default_rng(0).choice(len(flat), MAX_FIT_PIXELS, replace=False))
    sample = flat[rows]
    return sample if np.ptp(sample, axis=0).any() else flat


def image_features(image) -> tuple[np.ndarray, bool]:
    """``([H, W, d], colour)``: Lab / 100 (d = 3) for colour images, luma (d = 1) otherwise.

    Raises:
        ValueError: ``image`` is not a Photo or a finite ``[H, W]`` or ``[H, W, 3]`` array
            in [0, 1] with at least one pixel.
    """
    if isinstance(image, Photo):
        arr = _checked_image(image.rgb if image.is_colour else image.luma)
    else:
        arr = _checked_image(image)
        if arr.ndim == 3 and (arr == arr[..., :1]).all():
            arr = arr[..., 0]  # equal channels: gray, and each channel is its luma
    if arr.ndim == 2:
        return arr[..., None], False
    return srgb_to_lab(arr) / 100.0, True


def _checked_image(image) -> np.ndarray:
    arr = real_array(image, "image")
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise ValueError(f"image must have shape [H, W] or [H, W, 3], got {arr.shape}.")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"image must have at least one pixel, got shape {arr.shape}.")
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(
            f"image values must lie in [0, 1], got the range [{arr.min():g}, {arr.max():g}]."
        )
    return arr
