"""Which of the two fitted classes is the object: the one that touches the border less.

A photo is usually framed around its subject, so the background runs off the edges of
the picture and the object mostly does not. The fitted mixture assigns every border
pixel to its more probable class; the class holding the smaller share of the border is
the object. On an exact tie the darker class is the object, as in most of the shipped
samples (a dark subject on a light ground).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsbcore.segmentation.arguments import real_array
from lsbcore.segmentation.mixture import TwoClassModel

__all__ = ["CLASS_NAMES", "Polarity", "border_polarity", "labels_polarity"]

#: The classes by index: 0 is the darker (lower mean of the first feature).
CLASS_NAMES = ("dark", "bright")


@dataclass(frozen=True)
class Polarity:
    """The object class chosen from the border, with the evidence for the page.

    Attributes:
        object_class: 0 (the dark class is the object) or 1 (the bright class is).
        border_fraction: share of the border pixels assigned to class 0 and to class 1.
        reason: one sentence saying why, e.g. "the bright class covers 12% of the border,
            the dark class 88%: the bright class is the object".
    """

    object_class: int
    border_fraction: tuple[float, float]
    reason: str

    @property
    def name(self) -> str:
        """``"dark"`` or ``"bright"``: the object's class by name."""
        return CLASS_NAMES[self.object_class]


def border_polarity(model: TwoClassModel, features) -> Polarity:
    """Choose the object class of ``model`` from the border of ``features`` ``[H, W, d]``.

    Raises:
        ValueError: ``model`` is not a :class:`TwoClassModel`, or ``features`` is not a
            finite ``[H, W, d]`` array matching the model's ``d``.
    """
    if not isinstance(model, TwoClassModel):
        raise ValueError(f"model must be a TwoClassModel, got {type(model).__name__}.")
    grid = real_array(features, "features")
    if grid.ndim != 3 or grid.shape[0] < 1 or grid.shape[1] < 1:
        raise ValueError(f"features must have shape [H, W, d], got {grid.shape}.")
    if grid.shape[2] != model.dimension:
        raise ValueError(
            f"features have {grid.shape[2]} channels but the model has {model.dimension}."
        )
    return _from_border_classes(model.most_probable_class(grid[_border(grid.shape[:2])]))


def labels_polarity(bright) -> Polarity:
    """The object class of a hard split ``bright`` ``[H, W]`` (True: the bright class), such as
    the mid-grey threshold's, by the same border rule."""
    bright = np.asarray(bright)
    if bright.ndim != 2 or bright.size == 0 or bright.dtype != bool:
        raise ValueError(f"bright must be a non-empty boolean [H, W] array, got {bright.shape}.")
    return _from_border_classes(bright[_border(bright.shape)].astype(np.int64))


def _border(shape: tuple[int, int]) -> np.ndarray:
    on_border = np.zeros(shape, dtype=bool)
    on_border[[0, -1], :] = True
    on_border[:, [0, -1]] = True
    return on_border


def _from_border_classes(classes: np.ndarray) -> Polarity:
    counts = np.bincount(classes, minlength=2)
    fraction = (float(counts[0] / counts.sum()), float(counts[1] / counts.sum()))
    # fewer border pixels makes the object; a tie goes to the dark class
    object_class = 1 if counts[1] < counts[0] else 0
    return Polarity(
        object_class=object_class,
        border_fraction=fraction,
        reason=_reason(object_class, fraction, tie=counts[0] == counts[1]),
    )


def _reason(object_class: int, fraction: tuple[float, float], tie: bool) -> str:
    obj, bg = object_class, 1 - object_class
    if tie:
        return (
            f"the dark and bright classes each cover {fraction[0]:.0%} of the border: "
            "the dark class is taken as the object, as in most photos"
        )
    # whole percents, unless they would read as a tie (50% and 50%)
    digits = 0 if f"{fraction[obj]:.0%}" != f"{fraction[bg]:.0%}" else 1
    return (
        f"the {CLASS_NAMES[obj]} class covers {fraction[obj]:.{digits}%} of the border, "
        f"the {CLASS_NAMES[bg]} class {fraction[bg]:.{digits}%}: the {CLASS_NAMES[obj]} class "
        "is the object"
    )
