"""Any two samplers the app can draw side by side are told apart at a glance: their colours
differ by at least ``MIN_DELTA_E`` in CIEDE2000 (about 10 reads as "a different colour" on a
chart line; 15 keeps that margin on thin lines and for weaker colour vision)."""

import itertools

import numpy as np
from skimage.color import deltaE_ciede2000, rgb2lab

import lsbcore
from app.views.rbm_mmd import FLOOR_COLOUR
from lsbcore.rbm.variants import LABELS
from lsbcore.studies.figures import sampler_colour

MIN_DELTA_E = 15.0


def _lab(hex_colour: str) -> np.ndarray:
    h = hex_colour.lstrip("#")
    rgb = np.array([[[int(h[i : i + 2], 16) / 255 for i in (0, 2, 4)]]])
    return rgb2lab(rgb)[0, 0]


def _closest_pair(colours: dict[str, str]) -> tuple[float, str, str]:
    return min(
        (float(deltaE_ciede2000(_lab(colours[a]), _lab(colours[b]))), a, b)
        for a, b in itertools.combinations(colours, 2)
    )


def test_every_registered_sampler_has_a_distinct_colour():
    colours = {name: sampler_colour(name) for name in lsbcore.SAMPLERS}
    distance, a, b = _closest_pair(colours)
    assert distance >= MIN_DELTA_E, f"{a} and {b}: CIEDE2000 {distance:.1f}"


def test_every_rbm_variant_and_the_noise_floor_have_distinct_colours():
    # the MMD chart draws every variant of the RBM study and the noise floor together
    colours = {label: sampler_colour(label) for label in LABELS}
    colours["noise floor"] = FLOOR_COLOUR
    distance, a, b = _closest_pair(colours)
    assert distance >= MIN_DELTA_E, f"{a} and {b}: CIEDE2000 {distance:.1f}"


def test_registry_and_variants_together_keep_the_margin():
    # a sweep report or a pinned run may set a registry sampler beside an RBM variant
    names = {*lsbcore.SAMPLERS, *LABELS}
    distance, a, b = _closest_pair({n: sampler_colour(n) for n in names})
    assert distance >= MIN_DELTA_E, f"{a} and {b}: CIEDE2000 {distance:.1f}"
