"""What the user says the object is: a box around it, and object or background points.

Coordinates are fractions of the image's width and height (0 at the left and top edge, 1 at
the right and bottom one), so one prompt means the same region on the photo at its own size,
on any working lattice and in the app's figure. A box is ``(left, top, right, bottom)``; a
point is ``(x, y, label)`` with label +1 (or ``"object"``) for the object and -1 (or
``"background"``) for the background.

On a lattice ``[H, W]`` the prompt names three kinds of site (``PromptRegions``), as GrabCut's
trimap does: sites known to be background (outside the box, and near a background point),
sites known to be the object (near an object point), and the rest, to be decided by the data
(inside the box; everywhere else when there is no box). A point marks a small disc rather
than one site, so that a click is enough to give its class's colour model some pixels.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_POINTS", "POINT_RADIUS", "Prompt", "PromptRegions", "make_prompt"]

MAX_POINTS = 200
#: A point marks the sites within this fraction of the lattice's longer side (at least one
#: site around it): 2.5 sites on a 128-px lattice, 5 on a 256-px one.
POINT_RADIUS = 0.02
_LABELS = {1: 1, -1: -1, "object": 1, "background": -1}


@dataclass(frozen=True)
class PromptRegions:
    """A prompt on one lattice: ``[H, W]`` boolean masks."""

    inside_box: np.ndarray  # inside the box (everywhere when there is no box)
    object_seeds: np.ndarray  # near an object point: known object
    background_seeds: np.ndarray  # outside the box or near a background point: known background

    @property
    def free(self) -> np.ndarray:
        """Sites the prompt leaves to the data."""
        return ~(self.object_seeds | self.background_seeds)

    @property
    def pinned(self) -> np.ndarray:
        """``[H, W]`` int8: +1 known object, -1 known background, 0 free."""
        return self.object_seeds.astype(np.int8) - self.background_seeds.astype(np.int8)


@dataclass(frozen=True)
class Prompt:
    """A validated prompt (build it with ``make_prompt``)."""

    box: tuple[float, float, float, float] | None = None
    points: tuple[tuple[float, float, int], ...] = ()

    @property
    def object_points(self) -> tuple[tuple[float, float], ...]:
        return tuple((x, y) for x, y, label in self.points if label == 1)

    @property
    def background_points(self) -> tuple[tuple[float, float], ...]:
        return tuple((x, y) for x, y, label in self.points if label == -1)

    def describe(self) -> str:
        """The prompt in words, for the page: 'a box (12%-80% across, 5%-95% down) and 2
        object points'."""
        parts = []
        if self.box is not None:
            left, top, right, bottom = self.box
            parts.append(f"a box ({left:.0%}–{right:.0%} across, {top:.0%}–{bottom:.0%} down)")
        for count, name in (
            (len(self.object_points), "object"),
            (len(self.background_points), "background"),
        ):
            if count:
                parts.append(f"{count} {name} point{'s' if count > 1 else ''}")
        return " and ".join(parts) if len(parts) < 3 else f"{parts[0]}, {parts[1]} and {parts[2]}"

    def regions(self, shape: tuple[int, int]) -> PromptRegions:
        """The prompt on a lattice of ``shape = (H, W)``.

        Raises:
            ValueError: the box holds no site of this lattice, or it covers the whole lattice
                and no background point is given (nothing would be known to be background).
        """
        height, width = shape
        rows, cols = np.mgrid[:height, :width]
        inside = np.ones(shape, dtype=bool)
        if self.box is not None:
            left, top, right, bottom = self.box
            # a site is inside when its centre is: site j spans [j, j + 1) / W
            centre_x, centre_y = (cols + 0.5) / width, (rows + 0.5) / height
            inside = (
                (centre_x >= left) & (centre_x <= right) & (centre_y >= top) & (centre_y <= bottom)
            )
            if not inside.any():
                raise ValueError(
                    f"The box holds no pixel of the {width} × {height} working image: draw it "
                    "larger."
                )
        radius = max(1.0, POINT_RADIUS * max(height, width))
        near = {1: np.zeros(shape, dtype=bool), -1: np.zeros(shape, dtype=bool)}
        for x, y, label in self.points:
            px, py = min(x * width, width - 0.5), min(y * height, height - 0.5)
            near[label] |= (cols + 0.5 - px) ** 2 + (rows + 0.5 - py) ** 2 <= radius**2
        background = near[-1] | (~inside if self.box is not None else False)
        objects = near[1] & ~background  # a disc that reaches past the box stops at it
        if not background.any():
            raise ValueError(
                "The box covers the whole photo, so no part of it is known to be background: "
                "draw the box inside the photo's edges, or mark a background point."
            )
        if self.box is None and not objects.any():
            raise ValueError("Mark at least one object point (or draw a box around the object).")
        if self.box is not None and not (inside & ~background).any():
            raise ValueError(
                "Background points cover the whole box: nothing is left that could be the object."
            )
        return PromptRegions(inside_box=inside, object_seeds=objects, background_seeds=background)


def _fraction(value, what: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number between 0 and 1, got {value!r}.")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValueError(
            f"{what} must be between 0 and 1 (a fraction of the image's size), got {value!r}."
        )
    return number


def _box(box) -> tuple[float, float, float, float]:
    try:
        values = tuple(box)
    except TypeError:
        raise ValueError(
            f"box must be four numbers (left, top, right, bottom), got {box!r}."
        ) from None
    if len(values) != 4:
        raise ValueError(
            f"box must be four numbers (left, top, right, bottom), got {len(values)} of them."
        )
    names = ("box left", "box top", "box right", "box bottom")
    left, top, right, bottom = (_fraction(v, n) for v, n in zip(values, names, strict=True))
    if not (left < right and top < bottom):
        raise ValueError(
            "box must have left < right and top < bottom (fractions of the width and height), "
            f"got {box!r}."
        )
    return left, top, right, bottom


def _point(point, index: int) -> tuple[float, float, int]:
    try:
        values = tuple(point)
    except TypeError:
        values = ()
    if len(values) != 3:
        raise ValueError(
            f"point {index + 1} must be (x, y, label) with label +1 (object) or -1 "
            f"(background), got {point!r}."
        )
    x = _fraction(values[0], f"point {index + 1}'s x")
    y = _fraction(values[1], f"point {index + 1}'s y")
    label = values[2]
    key = label.lower() if isinstance(label, str) else label
    if isinstance(label, bool | np.bool_) or key not in _LABELS:
        raise ValueError(
            f"point {index + 1}'s label must be +1 or 'object', -1 or 'background', got {label!r}."
        )
    return x, y, _LABELS[key]


def make_prompt(box=None, points=None) -> Prompt | None:
    """A validated ``Prompt``, or None when neither a box nor any point is given.

    Raises:
        ValueError: with a sentence naming what is wrong: a malformed box or point, more than
            ``MAX_POINTS`` points, an object point outside the box, or points without a box
            that do not mark both an object and a background point.
    """
    points = () if points is None else points
    if isinstance(points, str | bytes) or not hasattr(points, "__iter__"):
        raise ValueError(f"points must be a list of (x, y, label), got {points!r}.")
    points = tuple(points)
    if len(points) > MAX_POINTS:
        raise ValueError(f"at most {MAX_POINTS} points can be marked, got {len(points)}.")
    checked = tuple(_point(p, i) for i, p in enumerate(points))
    box = None if box is None else _box(box)
    if box is None and not checked:
        return None
    labels = {label for _, _, label in checked}
    if box is None and labels != {1, -1}:
        missing = "an object" if 1 not in labels else "a background"
        raise ValueError(
            f"Without a box, mark at least one object and one background point; {missing} "
            "point is missing."
        )
    if box is not None:
        left, top, right, bottom = box
        for i, (x, y, label) in enumerate(checked):
            if label == 1 and not (left <= x <= right and top <= y <= bottom):
                raise ValueError(
                    f"Object point {i + 1} lies outside the box, and everything outside the "
                    "box is background: move the point or widen the box."
                )
    return Prompt(box=box, points=checked)
