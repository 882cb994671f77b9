"""Tests for the photo data model: colour decoding, Lab, Otsu, the two-class EM fit, the
border polarity and the Ising field fitted to an image. Every image is generated in memory,
except the shipped samples in assets/."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import ExifTags, Image
from scipy.stats import multivariate_normal

import lsbcore
from lsbcore.image import ImageError, Photo, load_image, load_photo
from lsbcore.segmentation import (
    ALPHA_BOUND,
    VARIANCE_FLOOR,
    TwoClassModel,
    border_polarity,
    fit_data_term,
    fit_two_class_model,
    image_features,
    otsu_threshold,
    srgb_to_lab,
)

ASSETS = Path(__file__).resolve().parent.parent / "assets"
LUMA = np.array([0.299, 0.587, 0.114])


def encode(im: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kwargs)
    return buf.getvalue()


def disc_mask(height: int, width: int, radius_fraction: float = 0.25) -> np.ndarray:
    """A centred disc (True inside), clear of the border."""
    yy, xx = np.mgrid[:height, :width]
    radius = radius_fraction * min(height, width)
    return (yy - (height - 1) / 2) ** 2 + (xx - (width - 1) / 2) ** 2 < radius**2


def colour_blocks(width: int = 40, height: int = 24) -> np.ndarray:
    """uint8 RGB: four saturated blocks, so a transposed or grayed result shows."""
    arr = np.zeros((height, width, 3), np.uint8)
    half_w, half_h = width // 2, height // 2
    arr[:half_h, :half_w] = (220, 30, 30)
    arr[:half_h, half_w:] = (30, 200, 40)
    arr[half_h:, :half_w] = (20, 40, 210)
    arr[half_h:, half_w:] = (240, 240, 60)
    return arr


# --------------------------------------------------------------------------- decoding


def test_rgb_png_decodes_to_exact_colour_and_the_luma_of_load_image():
    arr = colour_blocks()
    data = encode(Image.fromarray(arr), "PNG")
    photo = load_photo(data)
    assert isinstance(photo, Photo)
    assert photo.rgb.dtype == np.float64 and photo.rgb.shape == (24, 40, 3)
    np.testing.assert_array_equal(photo.rgb, arr / 255.0)
    np.testing.assert_array_equal(photo.luma, load_image(data))
    assert photo.is_colour is True
    assert photo.original_shape == (24, 40)


def test_gray_sources_give_three_equal_channels_and_no_colour():
    gray = ((np.arange(70).reshape(7, 10) * 3) % 256).astype(np.uint8)
    sixteen = (np.arange(70).reshape(7, 10) * 900).astype(np.uint16)
    sources = [
        Image.fromarray(gray),  # L
        Image.fromarray(gray).convert("1"),
        Image.fromarray(sixteen),  # I;16
        Image.merge("LA", (Image.fromarray(gray), Image.new("L", (10, 7), 128))),
        Image.fromarray(np.repeat(gray[..., None], 3, axis=2)),  # RGB with equal channels
    ]
    for im in sources:
        data = encode(im, "PNG")
        photo = load_photo(data)
        assert photo.is_colour is False, im.mode
        np.testing.assert_array_equal(photo.luma, load_image(data))
        for channel in range(3):
            np.testing.assert_array_equal(photo.rgb[..., channel], photo.luma)


def test_transparency_is_composited_over_white_in_colour():
    rgba = np.zeros((4, 6, 4), np.uint8)
    rgba[:, :2] = (255, 0, 0, 255)  # opaque red
    rgba[:, 2:4] = (0, 0, 255, 0)  # fully transparent blue: white
    rgba[:, 4:] = (0, 255, 0, 102)  # 40 % green over white
    data = encode(Image.fromarray(rgba, "RGBA"), "PNG")
    photo = load_photo(data)
    np.testing.assert_allclose(photo.rgb[0, 0], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(photo.rgb[0, 2], [1, 1, 1], atol=1e-12)
    np.testing.assert_allclose(photo.rgb[0, 4], [0.6, 1.0, 0.6], atol=1 / 255)
    np.testing.assert_array_equal(photo.luma, load_image(data))
    assert photo.is_colour


def test_palette_gif_with_transparency_keeps_its_colours():
    im = Image.new("P", (6, 4), 0)
    im.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    im.paste(1, (3, 0, 6, 4))
    data = encode(im, "GIF", transparency=1)
    photo = load_photo(data)
    np.testing.assert_allclose(photo.rgb[:, :3], np.broadcast_to([1.0, 0, 0], (4, 3, 3)))
    np.testing.assert_allclose(photo.rgb[:, 3:], 1.0)  # the transparent blue is white
    np.testing.assert_array_equal(photo.luma, load_image(data))


@pytest.mark.parametrize("keep_rgb", [False, True], ids=["ycbcr", "rgb-coded"])
@pytest.mark.parametrize("max_side", [64, 300, 800])
def test_colour_jpeg_luma_is_exactly_load_image_and_colour_is_kept(keep_rgb, max_side):
    rng = np.random.default_rng(0)
    arr = np.kron(colour_blocks(8, 4), np.ones((100, 100, 1), np.uint8))  # 800 x 400
    arr = np.clip(arr + rng.normal(0, 20, arr.shape), 0, 255).astype(np.uint8)
    data = encode(Image.fromarray(arr), "JPEG", quality=92, keep_rgb=keep_rgb)
    photo = load_photo(data, max_side=max_side)
    # one decode, and still the luma load_image decodes (drafted to L when downscaled)
    np.testing.assert_array_equal(photo.luma, load_image(data, max_side=max_side))
    assert photo.is_colour
    assert photo.original_shape == (400, 800)
    expected_hw = {64: (32, 64), 300: (150, 300), 800: (400, 800)}[max_side]
    assert photo.rgb.shape == (*expected_hw, 3)
    # the middle of each block averages to its colour, up to noise and JPEG loss
    h, w = expected_hw
    blocks = colour_blocks(8, 4) / 255.0
    for r, c in [(0, 0), (0, 4), (2, 0), (2, 4)]:
        rows = slice(r * h // 4 + h // 16, (r + 1) * h // 4 - h // 16)
        cols = slice(c * w // 8 + w // 32, (c + 1) * w // 8 - w // 32)
        middle = photo.rgb[rows, cols].mean(axis=(0, 1))
        assert np.abs(middle - blocks[r, c]).max() < 0.03


def test_gray_photo_saved_as_colour_jpeg_has_no_colour():
    rng = np.random.default_rng(1)
    gray = (rng.random((300, 500)) * 255).astype(np.uint8)
    data = encode(Image.fromarray(np.stack([gray] * 3, -1)), "JPEG", quality=90)
    photo = load_photo(data)
    assert photo.is_colour is False
    np.testing.assert_array_equal(photo.luma, load_image(data))


def test_cmyk_jpeg_gives_rgb():
    im = Image.new("CMYK", (16, 8), (0, 255, 255, 0))  # magenta + yellow ink: red
    im.paste((0, 0, 0, 0), (8, 0, 16, 8))  # no ink: white
    data = encode(im, "JPEG", quality=95)
    photo = load_photo(data)
    assert photo.is_colour
    assert photo.rgb[:, :6, 0].min() > 0.9 and photo.rgb[:, :6, 1:].max() < 0.1
    assert photo.rgb[:, 10:].min() > 0.95
    np.testing.assert_array_equal(photo.luma, load_image(data))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_exif_rotation_swaps_the_original_shape(fmt):
    arr = colour_blocks(300, 100)  # stored 300 wide, 100 high
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6  # shown rotated a quarter turn clockwise
    data = encode(Image.fromarray(arr), fmt, exif=exif.tobytes())
    photo = load_photo(data, max_side=30)
    assert photo.original_shape == (300, 100)  # what a viewer shows: 100 wide, 300 high
    assert photo.rgb.shape == (30, 10, 3)
    np.testing.assert_array_equal(photo.luma, load_image(data, max_side=30))
    # rotated clockwise, the stored bottom-left (blue) block is shown top-left
    assert photo.rgb[2, 2, 2] > 0.6 and photo.rgb[2, 2, 0] < 0.3


def test_photo_errors_are_those_of_load_image(tmp_path):
    with pytest.raises(ImageError, match="The file is empty"):
        load_photo(b"")
    with pytest.raises(ImageError, match="not an image"):
        load_photo(b"hello, this is text")
    with pytest.raises(ValueError, match="max_side"):
        load_photo(encode(Image.new("RGB", (4, 4)), "PNG"), max_side=0)
    with pytest.raises(TypeError, match="load_photo expects bytes"):
        load_photo(42)
    with pytest.raises(ImageError, match="fully transparent"):
        load_photo(encode(Image.new("RGBA", (4, 4), (9, 9, 9, 0)), "PNG"))
    with pytest.raises(ImageError, match="does not exist"):
        load_photo(tmp_path / "nope.png")


# --------------------------------------------------------------------------- colour


@pytest.mark.parametrize(
    ("rgb", "lab"),
    [
        ((1.0, 1.0, 1.0), (100.0, 0.0, 0.0)),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
        ((1.0, 0.0, 0.0), (53.2408, 80.0925, 67.2032)),
        ((0.0, 1.0, 0.0), (87.7347, -86.1827, 83.1793)),
        ((0.0, 0.0, 1.0), (32.2970, 79.1875, -107.8602)),
        ((0.5, 0.5, 0.5), (53.3890, 0.0, 0.0)),
    ],
)
def test_srgb_to_lab_matches_published_values(rgb, lab):
    np.testing.assert_allclose(srgb_to_lab(np.array(rgb)), lab, atol=0.05)


def test_srgb_to_lab_keeps_the_shape_and_uses_the_linear_segment_near_black():
    rgb = np.random.default_rng(0).random((5, 4, 3))
    assert srgb_to_lab(rgb).shape == (5, 4, 3)
    # 1/255 gray: linear 1/255/12.92 = Y, below (6/29)^3, so L = 903.3 Y (CIE's kappa)
    dark = srgb_to_lab(np.full(3, 1 / 255))
    np.testing.assert_allclose(dark[0], 24389 / 27 * (1 / 255 / 12.92), rtol=1e-5)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.array([1.2, 0.0, 0.0]), r"\[0, 1\]"),
        (np.array([np.nan, 0.0, 0.0]), "finite"),
        (np.zeros((4, 2)), r"\[\.\.\., 3\]"),
        (np.ones(3, dtype=bool), "real numbers"),
    ],
)
def test_srgb_to_lab_refuses_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        srgb_to_lab(bad)


# --------------------------------------------------------------------------- Otsu


def between_class_variance(values: np.ndarray, lower: np.ndarray) -> float:
    n0, n1 = lower.sum(), (~lower).sum()
    if n0 == 0 or n1 == 0:
        return -np.inf
    return n0 * n1 * (values[lower].mean() - values[~lower].mean()) ** 2 / len(values) ** 2


def test_otsu_matches_an_exhaustive_search_on_8_bit_levels():
    # 256 levels over [0, 1] give one level per bin: every cut between levels is a bin edge
    rng = np.random.default_rng(2)
    levels = np.concatenate([rng.normal(70, 25, 700), rng.normal(170, 30, 300), [0, 255]])
    values = np.clip(np.round(levels), 0, 255) / 255
    threshold = otsu_threshold(values)
    unique = np.unique(values)
    cuts = (unique[:-1] + unique[1:]) / 2
    best = max(between_class_variance(values, values <= c) for c in cuts)
    np.testing.assert_allclose(between_class_variance(values, values <= threshold), best)
    assert unique[unique <= threshold].max() < threshold < unique[unique > threshold].min()


def test_otsu_matches_an_exhaustive_search_over_bin_edges():
    values = np.random.default_rng(3).gamma(2.0, size=1000)
    bins = 32
    threshold = otsu_threshold(values, bins=bins)
    edges = np.linspace(values.min(), values.max(), bins + 1)[1:-1]
    best = max(between_class_variance(values, values < e) for e in edges)
    np.testing.assert_allclose(between_class_variance(values, values <= threshold), best)


def test_otsu_of_two_levels_is_their_midpoint():
    assert otsu_threshold([0.1] * 5 + [0.9] * 7) == pytest.approx(0.5)
    assert otsu_threshold([3, 3, 8], bins=2) == pytest.approx(5.5)


def test_otsu_refuses_what_it_cannot_split():
    with pytest.raises(ValueError, match="nothing to separate"):
        otsu_threshold(np.full(10, 0.3))
    with pytest.raises(ValueError, match="values must not be empty"):
        otsu_threshold([])
    for bad in (1, True, 2.5):
        with pytest.raises(ValueError, match="bins"):
            otsu_threshold([0.0, 1.0], bins=bad)


# --------------------------------------------------------------------------- EM fit


def sample_two_gaussians(rng, n, weights, means, covariances):
    labels = rng.random(n) < weights[1]
    y = np.where(
        labels[:, None],
        rng.multivariate_normal(means[1], covariances[1], n),
        rng.multivariate_normal(means[0], covariances[0], n),
    )
    return y, labels


def test_em_recovers_a_known_1d_mixture():
    rng = np.random.default_rng(4)
    y, _ = sample_two_gaussians(rng, 20000, [0.3, 0.7], [[0.2], [0.7]], [[[0.05**2]], [[0.1**2]]])
    model = fit_two_class_model(y)
    # standard errors: means 1e-3, sds 1e-3, weight 3e-3; tolerances are about 5 of them
    np.testing.assert_allclose(model.means[:, 0], [0.2, 0.7], atol=0.005)
    np.testing.assert_allclose(np.sqrt(model.covariances[:, 0, 0]), [0.05, 0.1], atol=0.004)
    np.testing.assert_allclose(model.weights, [0.3, 0.7], atol=0.015)
    assert model.weights.sum() == pytest.approx(1.0)


def test_em_recovers_a_known_3d_mixture_with_correlations():
    rng = np.random.default_rng(5)
    means = np.array([[0.3, 0.1, -0.2], [0.6, -0.3, 0.2]])
    covariances = np.array(
        [
            [[0.010, 0.004, 0.0], [0.004, 0.006, -0.002], [0.0, -0.002, 0.008]],
            [[0.004, -0.001, 0.001], [-0.001, 0.009, 0.003], [0.001, 0.003, 0.005]],
        ]
    )
    y, labels = sample_two_gaussians(rng, 20000, [0.6, 0.4], means, covariances)
    model = fit_two_class_model(y)
    np.testing.assert_allclose(model.means, means, atol=0.005)
    np.testing.assert_allclose(model.covariances, covariances, atol=6e-4)
    np.testing.assert_allclose(model.weights, [0.6, 0.4], atol=0.015)
    # the classes barely overlap, so the fit is the sample's own per-class moments
    for k, members in enumerate([~labels, labels]):
        np.testing.assert_allclose(model.means[k], y[members].mean(axis=0), atol=5e-4)
        np.testing.assert_allclose(model.covariances[k], np.cov(y[members].T, bias=True), atol=1e-4)


def test_em_log_likelihood_never_decreases():
    rng = np.random.default_rng(6)
    # overlapping classes with a clipped spike at 1: many iterations, and the floor in play
    y = np.clip(np.concatenate([rng.normal(0.35, 0.2, 3000), rng.normal(0.7, 0.2, 3000)]), 0, 1)
    model = fit_two_class_model(y[:, None])
    history = np.array(model.history)
    assert model.iterations == len(history) - 1 >= 10
    assert np.all(np.diff(history) >= -1e-12 * np.abs(history[:-1]))
    assert model.log_likelihood == history[-1]
    last, previous = history[-1], history[-2]
    assert abs(last - previous) <= 1e-6 * abs(previous) or model.iterations == 100


def test_em_is_deterministic_and_orders_the_darker_class_first():
    rng = np.random.default_rng(7)
    y, _ = sample_two_gaussians(
        rng, 3000, [0.8, 0.2], [[0.8, 0.1], [0.2, 0.0]], [np.eye(2) * 0.01] * 2
    )
    first, second = fit_two_class_model(y), fit_two_class_model(y)
    for name in ("means", "covariances", "weights"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert first.history == second.history
    assert first.means[0, 0] < first.means[1, 0]
    np.testing.assert_allclose(first.weights, [0.2, 0.8], atol=0.03)


def test_a_flat_class_stops_at_the_variance_floor():
    y = np.concatenate([np.full(50, 0.2), np.full(30, 0.8)])[:, None]
    model = fit_two_class_model(y)
    np.testing.assert_allclose(model.means[:, 0], [0.2, 0.8])
    np.testing.assert_allclose(model.covariances[:, 0, 0], [VARIANCE_FLOOR] * 2)
    np.testing.assert_allclose(model.weights, [50 / 80, 30 / 80])
    assert np.isfinite(model.log_likelihood)


def test_hue_alone_is_found_from_the_principal_component_start():
    # feature 0 (lightness) is constant: only the second and third features separate
    rng = np.random.default_rng(8)
    labels = rng.random(400) < 0.5
    y = np.zeros((400, 3))
    y[:, 0] = 0.5
    y[:, 1] = np.where(labels, 0.4, -0.4) + rng.normal(0, 0.02, 400)
    y[:, 2] = rng.normal(0, 0.02, 400)
    model = fit_two_class_model(y)
    np.testing.assert_allclose(np.sort(model.means[:, 1]), [-0.4, 0.4], atol=0.01)
    assert model.means[0, 1] < model.means[1, 1]  # feature 0 ties, feature 1 decides


def test_tiny_and_constant_inputs():
    model = fit_two_class_model(np.array([[0.0], [0.1], [0.9], [1.0]]))  # a 2 x 2 image
    assert np.isfinite(model.means).all() and np.isfinite(model.log_likelihood)
    assert (np.linalg.eigvalsh(model.covariances) >= VARIANCE_FLOOR * (1 - 1e-9)).all()
    two = fit_two_class_model(np.array([[0.2, 0.1, 0.0], [0.7, -0.1, 0.3]]))
    np.testing.assert_allclose(two.weights, [0.5, 0.5])
    with pytest.raises(ValueError, match="nothing to separate"):
        fit_two_class_model(np.full((16, 3), 0.4))
    with pytest.raises(ValueError, match="N >= 2"):
        fit_two_class_model(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="max_iter"):
        fit_two_class_model(np.array([[0.0], [1.0]]), max_iter=-1)
    start = fit_two_class_model(np.array([[0.0], [0.1], [0.9], [1.0]]), max_iter=0)
    assert start.iterations == 0 and len(start.history) == 1


def test_class_log_likelihoods_are_gaussian_log_densities_with_scaled_covariances():
    rng = np.random.default_rng(9)
    y, _ = sample_two_gaussians(
        rng, 2000, [0.5, 0.5], [[0.2, 0.0, 0.1], [0.7, 0.2, 0.0]], [np.eye(3) * 0.01] * 2
    )
    model = fit_two_class_model(y)
    points = y[:7]
    for scale in (1.0, 2.5):
        expected = np.stack(
            [
                multivariate_normal(model.means[k], scale**2 * model.covariances[k]).logpdf(points)
                for k in range(2)
            ],
            axis=1,
        )
        np.testing.assert_allclose(model.class_log_likelihoods(points, scale), expected, rtol=1e-10)
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        model.class_log_likelihoods(points[:, :2])
    with pytest.raises(ValueError, match="scale"):
        model.class_log_likelihoods(points, scale=0.0)


# --------------------------------------------------------------------------- polarity


def test_the_class_off_the_border_is_the_object():
    dark_disc = np.where(disc_mask(20, 20), 0.2, 0.8)
    features = dark_disc[..., None]
    model = fit_two_class_model(features.reshape(-1, 1))
    polarity = border_polarity(model, features)
    assert (polarity.object_class, polarity.name) == (0, "dark")
    assert polarity.border_fraction == (0.0, 1.0)
    assert polarity.reason == (
        "the dark class covers 0% of the border, the bright class 100%: the dark class is "
        "the object"
    )
    # the same classes, swapped in place: a bright disc in a dark frame
    bright = border_polarity(model, (1.0 - dark_disc)[..., None])
    assert (bright.object_class, bright.name) == (1, "bright")
    assert bright.border_fraction == (1.0, 0.0)


def test_a_border_tie_goes_to_the_dark_class():
    halves = np.zeros((6, 8))
    halves[:, 4:] = 1.0  # left half dark, right half bright: 14 border pixels each
    model = fit_two_class_model(halves.reshape(-1, 1))
    polarity = border_polarity(model, halves[..., None])
    assert polarity.border_fraction == (0.5, 0.5)
    assert polarity.object_class == 0
    assert "each cover 50% of the border" in polarity.reason


def test_border_polarity_validates():
    model = fit_two_class_model(np.array([[0.0], [1.0]]))
    with pytest.raises(ValueError, match="model must be a TwoClassModel"):
        border_polarity("model", np.zeros((2, 2, 1)))
    with pytest.raises(ValueError, match="channels"):
        border_polarity(model, np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match=r"\[H, W, d\]"):
        border_polarity(model, np.zeros((4, 1)))


# --------------------------------------------------------------------------- data term


def noisy_disc(rng, inside, outside, n=40, noise=0.08):
    mask = disc_mask(n, n)
    shape = (n, n) if np.ndim(inside) == 0 else (n, n, 3)
    clean = np.where(mask if np.ndim(inside) == 0 else mask[..., None], inside, outside)
    return np.clip(clean + rng.normal(0, noise, shape), 0, 1), mask


def test_swapping_polarity_negates_alpha_exactly():
    image, _ = noisy_disc(np.random.default_rng(10), 0.3, 0.7)
    dark, bright = fit_data_term(image, polarity="dark"), fit_data_term(image, polarity="bright")
    np.testing.assert_array_equal(dark.alpha, -bright.alpha)
    assert (dark.polarity, bright.polarity) == ("dark", "bright")
    assert dark.auto_polarity == bright.auto_polarity
    nonzero = dark.alpha != 0
    np.testing.assert_array_equal(dark.likelier[nonzero], -bright.likelier[nonzero])


def test_alpha_is_linear_in_mu():
    image, _ = noisy_disc(np.random.default_rng(11), 0.3, 0.7, noise=0.15)
    base = fit_data_term(image)
    assert np.abs(base.alpha).max() * 3 < ALPHA_BOUND  # nothing clipped below
    np.testing.assert_array_equal(fit_data_term(image, mu=2.0).alpha, 2.0 * base.alpha)
    np.testing.assert_allclose(fit_data_term(image, mu=np.float32(2.7)).alpha, 2.7 * base.alpha)
    np.testing.assert_array_equal(fit_data_term(image, mu=0).alpha, np.zeros_like(base.alpha))


def test_alpha_is_the_half_log_likelihood_ratio_with_widened_classes():
    image, _ = noisy_disc(np.random.default_rng(12), 0.3, 0.7, noise=0.15)
    term = fit_data_term(image, mu=1.5, sigma=2.0, polarity="dark")
    m, s = term.model.means[:, 0], np.sqrt(term.model.covariances[:, 0, 0])
    y = image.ravel()
    log_obj = multivariate_normal(m[0], (2.0 * s[0]) ** 2).logpdf(y)
    log_bg = multivariate_normal(m[1], (2.0 * s[1]) ** 2).logpdf(y)
    np.testing.assert_allclose(term.alpha.ravel(), 1.5 * 0.5 * (log_obj - log_bg), rtol=1e-10)
    assert term.colour is False


def test_auto_polarity_finds_a_dark_disc_and_a_bright_disc():
    rng = np.random.default_rng(13)
    dark_image, mask = noisy_disc(rng, 0.25, 0.65)
    bright_image, _ = noisy_disc(rng, 0.75, 0.35)
    for image, expected in [(dark_image, "dark"), (bright_image, "bright")]:
        term = fit_data_term(image)
        assert term.polarity == term.auto_polarity.name == expected
        assert term.auto_polarity.border_fraction[1 if expected == "dark" else 0] > 0.95
        assert (term.likelier == np.where(mask, 1.0, -1.0)).mean() > 0.97


def test_colour_separates_equal_luma_classes_that_luma_cannot():
    red = np.array([0.8, 0.2, 0.2])
    green = np.array([0.2, 0.0, 0.2])
    green[1] = (red @ LUMA - 0.2 * (LUMA[0] + LUMA[2])) / LUMA[1]  # the same BT.601 luma
    assert green @ LUMA == pytest.approx(red @ LUMA)
    image, mask = noisy_disc(np.random.default_rng(14), red, green, n=48, noise=0.05)
    truth = np.where(mask, 1.0, -1.0)

    colour = fit_data_term(image)
    assert colour.colour is True
    assert colour.auto_polarity.border_fraction[colour.model.means[:, 1].argmin()] > 0.95
    assert (colour.likelier == truth).mean() > 0.95

    gray = fit_data_term(image @ LUMA)
    assert gray.colour is False
    accuracy = (gray.likelier == truth).mean()
    assert max(accuracy, 1 - accuracy) < 0.7  # either polarity: luma holds no answer


def test_a_clean_two_level_image_thresholds_to_its_mask():
    mask = disc_mask(30, 36)
    mask[3:8, 10:30] = True  # a bar touching nothing
    gray = np.where(mask, 0.2, 0.85)
    term = fit_data_term(gray)
    np.testing.assert_array_equal(term.likelier, np.where(mask, 1.0, -1.0))
    # each class sits at the variance floor, so the ratio is far beyond the clip
    np.testing.assert_array_equal(np.abs(term.alpha), np.full(mask.shape, ALPHA_BOUND))

    rgb = np.where(mask[..., None], [0.1, 0.3, 0.9], [0.9, 0.8, 0.1])
    term = fit_data_term(rgb)
    assert term.colour
    np.testing.assert_array_equal(term.likelier, np.where(mask, 1.0, -1.0))


def test_photo_input_uses_its_colour_or_its_luma():
    rgb = np.where(disc_mask(16, 16)[..., None], [0.8, 0.1, 0.1], [0.1, 0.6, 0.1])
    photo = load_photo(encode(Image.fromarray((rgb * 255).astype(np.uint8)), "PNG"))
    from_photo = fit_data_term(photo)
    assert from_photo.colour
    np.testing.assert_array_equal(from_photo.alpha, fit_data_term(photo.rgb).alpha)

    gray = np.where(disc_mask(16, 16), 0.3, 0.7)
    gray_photo = Photo(np.repeat(gray[..., None], 3, axis=2), gray, (16, 16), False)
    as_gray = fit_data_term(gray_photo)
    assert as_gray.colour is False
    np.testing.assert_array_equal(as_gray.alpha, fit_data_term(gray).alpha)
    # an RGB array with equal channels is gray too
    np.testing.assert_array_equal(fit_data_term(gray_photo.rgb).alpha, as_gray.alpha)
    features, colour = image_features(gray_photo.rgb)
    assert features.shape == (16, 16, 1) and not colour


def test_tiny_images_fit():
    term = fit_data_term(np.array([[0.1, 0.2], [0.8, 0.9]]))
    assert term.alpha.shape == (2, 2) and np.isfinite(term.alpha).all()
    np.testing.assert_array_equal(term.likelier, [[1, 1], [-1, -1]])  # a tie: dark object


def test_large_images_are_fitted_on_a_fixed_subset():
    rng = np.random.default_rng(15)
    image, mask = noisy_disc(rng, 0.3, 0.7, n=300, noise=0.1)  # 90 000 pixels
    first, second = fit_data_term(image), fit_data_term(image)
    np.testing.assert_array_equal(first.alpha, second.alpha)
    assert first.alpha.shape == (300, 300)
    assert (first.likelier == np.where(mask, 1.0, -1.0)).mean() > 0.97


@pytest.mark.parametrize(
    ("name", "expected"),
    [("camera", "dark"), ("horse", "dark"), ("cell", "bright"), ("synthetic_disc_letter", "dark")],
)
def test_shipped_samples_get_the_polarity_a_person_would_pick(name, expected):
    photo = load_photo(ASSETS / f"{name}.png")  # as the app loads them: 64 px
    term = fit_data_term(photo)
    assert term.colour is False
    assert term.polarity == expected
    obj = term.auto_polarity.object_class
    assert term.auto_polarity.border_fraction[obj] < 0.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mu": -1.0}, "mu must be >= 0"),
        ({"mu": float("inf")}, "mu must be finite"),
        ({"mu": float("nan")}, "mu must be finite"),
        ({"mu": True}, "mu must be a real number"),
        ({"mu": "1"}, "mu must be a real number"),
        ({"sigma": 0.0}, "sigma must be > 0"),
        ({"sigma": -2}, "sigma must be > 0"),
        ({"sigma": np.bool_(True)}, "sigma must be a real number"),
        ({"polarity": "Dark"}, "polarity must be one of auto, dark, bright"),
        ({"polarity": None}, "polarity must be one of"),
    ],
)
def test_fit_data_term_refuses_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fit_data_term(np.array([[0.1, 0.9]]), **kwargs)


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (np.array([[0.1, 1.5]]), r"image values must lie in \[0, 1\]"),
        (np.array([[0.1, np.nan]]), "image must contain only finite values"),
        (np.zeros((3, 3, 4)), r"image must have shape \[H, W\] or \[H, W, 3\]"),
        (np.zeros(5), r"image must have shape"),
        (np.zeros((0, 5)), "at least one pixel"),
        (np.ones((3, 3), dtype=bool), "image must hold real numbers"),
        (np.full((4, 4), 0.5), "image is constant"),
        (np.full((4, 4, 3), [0.2, 0.5, 0.1]), "image is constant"),
    ],
)
def test_fit_data_term_refuses_bad_images(image, message):
    with pytest.raises(ValueError, match=message):
        fit_data_term(image)


def test_numpy_scalars_are_accepted():
    image = np.array([[0.1, 0.2], [0.8, 0.9]])
    reference = fit_data_term(image, mu=2.0, sigma=1.5)
    again = fit_data_term(image, mu=np.int64(2), sigma=np.float32(1.5))
    np.testing.assert_array_equal(again.alpha, reference.alpha)


def test_public_names_are_exported():
    for name in (
        "load_photo",
        "Photo",
        "fit_data_term",
        "DataTerm",
        "TwoClassModel",
        "otsu_threshold",
        "srgb_to_lab",
    ):
        assert name in lsbcore.__all__ and hasattr(lsbcore, name)
    assert lsbcore.TwoClassModel is TwoClassModel
