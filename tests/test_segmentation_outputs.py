"""Segmentation outputs: maps carried to the photo's size; PNG and .npy files decoded back."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from app import photo_downloads
from lsbcore import (
    binary_entropy,
    entropy_png,
    load_photo,
    mask_png,
    npy_bytes,
    overlay_png,
    probability_png,
    upsample,
)
from lsbcore.segmentation.outputs import TINT, TINT_OPACITY


def decode(png: bytes) -> tuple[str, np.ndarray]:
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    return image.mode, np.asarray(image)


def bilinear(values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Bilinear interpolation on pixel centres, clamped at the edges: the reference."""
    h, w = values.shape
    rows = np.clip((np.arange(shape[0]) + 0.5) * h / shape[0] - 0.5, 0, h - 1)
    cols = np.clip((np.arange(shape[1]) + 0.5) * w / shape[1] - 0.5, 0, w - 1)
    along = np.stack([np.interp(cols, np.arange(w), row) for row in values])  # [h, W]
    return np.stack([np.interp(rows, np.arange(h), col) for col in along.T], 1)  # [H, W]


# ----------------------------------------------------------------- upsample
def test_upsample_of_a_constant_stays_constant_at_the_exact_size():
    out = upsample(np.full((5, 7), 0.3), (123, 45))
    assert out.shape == (123, 45) and out.dtype == np.float32
    assert np.all(out == np.float32(0.3))


def test_upsample_of_a_ramp_stays_linear_away_from_the_edges():
    ramp = np.tile(np.linspace(0.0, 1.0, 10), (4, 1))  # [4, 10], 1/9 per pixel
    out = upsample(ramp, (8, 100))
    # each output pixel is a tenth of an input pixel: 1/90 per pixel inside the outer halves
    steps = np.diff(out[:, 5:95], axis=1)
    np.testing.assert_allclose(steps, 1.0 / 90.0, atol=1e-6)
    assert out.min() == 0.0 and out.max() == 1.0


def test_upsample_is_bilinear_interpolation_of_a_random_map():
    values = np.random.default_rng(0).random((6, 9))
    np.testing.assert_allclose(upsample(values, (17, 40)), bilinear(values, (17, 40)), atol=1e-5)


def test_upsample_keeps_the_input_range_and_may_shrink():
    values = 0.2 + 0.5 * np.random.default_rng(1).random((30, 20))
    for shape in [(3, 5), (1, 1), (61, 17), (300, 200)]:
        out = upsample(values, shape)
        assert out.shape == shape
        assert out.min() >= np.float32(values.min()) and out.max() <= np.float32(values.max())


def test_upsample_takes_a_tensor():
    out = upsample(torch.ones(2, 2, dtype=torch.float64), (3, 3))
    assert np.all(out == 1.0)


@pytest.mark.parametrize(
    ("values", "shape", "message"),
    [
        (np.zeros(5), (4, 4), r"values must be a non-empty \[H, W\] array"),
        (np.zeros((0, 3)), (4, 4), r"values must be a non-empty \[H, W\] array"),
        (np.array([[0.0, np.nan]]), (4, 4), "values must contain only finite values"),
        (np.array([[1e300]]), (4, 4), "values must fit in float32"),
        (np.zeros((2, 2)), (4,), r"shape must be a pair of integers \(H, W\)"),
        (np.zeros((2, 2)), (4.0, 4), r"shape must be a pair of integers \(H, W\)"),
        (np.zeros((2, 2)), (0, 4), "shape must have both sides >= 1"),
        (np.zeros((2, 2)), (10_000, 9_000), "at most 80,000,000 \\(80 megapixels\\)"),
    ],
)
def test_upsample_refuses_bad_input(values, shape, message):
    with pytest.raises(ValueError, match=message):
        upsample(values, shape)


# ----------------------------------------------------------------- entropy
def test_binary_entropy_in_bits():
    p = np.array([0.0, 1.0, 0.5, 0.25, 0.75, -0.1, 1.2])
    expected = [0.0, 0.0, 1.0, 0.8112781244591328, 0.8112781244591328, 0.0, 0.0]
    np.testing.assert_allclose(binary_entropy(p), expected, rtol=0, atol=1e-15)
    assert binary_entropy(0.5).shape == ()


def test_binary_entropy_refuses_nan_and_text():
    with pytest.raises(ValueError, match="p must not contain NaN"):
        binary_entropy([0.2, np.nan])
    with pytest.raises(ValueError, match="p must hold numbers or booleans"):
        binary_entropy(np.array(["a"]))


# ----------------------------------------------------------------- PNGs
def test_probability_png_is_8_bit_gray_of_255_p():
    p = np.array([[0.0, 0.5, 1.0], [0.25, 0.002, 0.998]])
    mode, pixels = decode(probability_png(p))
    assert mode == "L" and pixels.shape == (2, 3)
    np.testing.assert_array_equal(pixels, [[0, 128, 255], [64, 1, 254]])


def test_probability_png_refuses_values_outside_the_unit_interval():
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\], got values from -0.1 to 1"):
        probability_png(np.array([[-0.1, 1.0]]))
    with pytest.raises(ValueError, match=r"p must be a non-empty \[H, W\] array"):
        probability_png(np.zeros((2, 2, 2)))


def test_entropy_png_is_white_at_one_bit():
    mode, pixels = decode(entropy_png(np.array([[0.0, 0.5, 1.0, 0.25]])))
    assert mode == "L"
    np.testing.assert_array_equal(pixels, [[0, 255, 0, 207]])  # 255 * 0.8113 = 206.9


def test_mask_png_is_object_255_background_0():
    mask = np.array([[True, False, True], [False, False, True]])
    for given in (mask, mask.astype(np.int64), torch.tensor(mask, dtype=torch.float32)):
        mode, pixels = decode(mask_png(given))
        assert mode == "L" and pixels.shape == (2, 3)
        np.testing.assert_array_equal(pixels, np.where(mask, 255, 0))


def test_mask_png_refuses_spins():
    with pytest.raises(ValueError, match="mask must hold booleans or 0 and 1 only.*x > 0"):
        mask_png(np.array([[1.0, -1.0]]))


def test_overlay_png_tints_the_object_and_outlines_it():
    image = np.full((7, 7), 0.4)
    mask = np.zeros((7, 7), dtype=bool)
    mask[2:5, 2:5] = True
    mode, pixels = decode(overlay_png(image, mask))
    assert mode == "RGB" and pixels.shape == (7, 7, 3)
    gray = round(0.4 * 255)
    blend = np.round(255 * ((1 - TINT_OPACITY) * 0.4 + TINT_OPACITY * np.array(TINT) / 255))
    np.testing.assert_array_equal(pixels[0, 0], [gray] * 3)  # background untouched
    np.testing.assert_array_equal(pixels[3, 3], blend)  # inside: translucent
    for edge in [(2, 2), (2, 3), (4, 4), (3, 2)]:  # boundary: solid
        np.testing.assert_array_equal(pixels[edge], TINT)
    assert (pixels == TINT).all(axis=2).sum() == 8  # the 3 x 3 block's ring


def test_overlay_png_keeps_colour_and_does_not_outline_the_frame():
    image = np.zeros((4, 5, 3))
    image[..., 1] = 1.0  # green
    mode, pixels = decode(overlay_png(image, np.ones((4, 5), dtype=bool)))
    assert mode == "RGB" and pixels.shape == (4, 5, 3)
    blend = np.round(
        255 * ((1 - TINT_OPACITY) * np.array([0, 1, 0]) + TINT_OPACITY * np.array(TINT) / 255)
    )
    assert (pixels == blend).all()


def test_overlay_png_refuses_mismatched_or_bad_input():
    with pytest.raises(ValueError, match=r"mask must have the image's size \(4, 5\)"):
        overlay_png(np.zeros((4, 5)), np.zeros((5, 4), dtype=bool))
    with pytest.raises(ValueError, match=r"image must be \[H, W\] or \[H, W, 3\]"):
        overlay_png(np.zeros((4, 5, 4)), np.zeros((4, 5), dtype=bool))
    with pytest.raises(ValueError, match=r"image must lie in \[0, 1\]"):
        overlay_png(np.full((4, 5), 255.0), np.zeros((4, 5), dtype=bool))


# ----------------------------------------------------------------- .npy
def test_npy_bytes_round_trip_exactly():
    values = np.random.default_rng(2).random((3, 4, 5))
    np.testing.assert_array_equal(np.load(io.BytesIO(npy_bytes(values))), values)
    spins = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    loaded = np.load(io.BytesIO(npy_bytes(spins)))
    assert loaded.dtype == np.float64
    np.testing.assert_array_equal(loaded, [[1.0, -1.0]])
    mask = np.array([True, False])
    assert np.load(io.BytesIO(npy_bytes(mask))).dtype == bool


def test_npy_bytes_refuses_objects():
    with pytest.raises(ValueError, match="array must hold numbers or booleans"):
        npy_bytes(np.array([{"a": 1}], dtype=object))


# ----------------------------------------------------------------- the app's photo-sized downloads
def photo_png(height: int, width: int) -> bytes:
    pixels = (np.random.default_rng(5).random((height, width, 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_photo_downloads_equal_the_full_size_encoders_pixel_for_pixel(monkeypatch):
    # bands of 7 rows (a 13 x 9 lattice carried to 301 x 230): every band edge is crossed
    monkeypatch.setattr(photo_downloads, "BAND_PIXELS", 7 * 230)
    rng = np.random.default_rng(6)
    marginal = rng.random((13, 9))
    marginal[4:9, 2:7] = 0.95  # an object whose outline crosses bands
    shape = (301, 230)
    upsampled = upsample(marginal, shape)
    source = photo_png(*shape)
    pairs = [
        (photo_downloads.mask_png(marginal, shape, 0.4), mask_png(upsampled >= 0.4)),
        (photo_downloads.probability_png(marginal, shape), probability_png(upsampled)),
        (photo_downloads.entropy_png(marginal, shape), entropy_png(upsampled)),
        (
            photo_downloads.overlay_png(source, marginal, shape, 0.4),
            overlay_png(load_photo(source, max_side=301).rgb, upsampled >= 0.4),
        ),
    ]
    for banded, whole in pairs:
        mode, pixels = decode(banded)
        assert pixels.shape[:2] == shape and mode == decode(whole)[0]
        np.testing.assert_array_equal(pixels, decode(whole)[1])


def test_photo_downloads_are_capped_on_the_long_side_and_the_page_says_why():
    cap = photo_downloads.MAX_SIDE
    assert photo_downloads.download_shape((600, 400)) == (600, 400)
    assert photo_downloads.cap_note((600, 400)) is None
    assert photo_downloads.download_shape((cap, 10)) == (cap, 10)
    assert photo_downloads.download_shape((8000, 8000)) == (cap, cap)
    assert photo_downloads.download_shape((6000, 8000)) == (round(cap * 0.75), cap)
    assert photo_downloads.download_shape((1, 30_000)) == (1, cap)  # never a zero side
    note = photo_downloads.cap_note((6000, 8000))
    assert note == (
        f"Downloads are at most {cap:,} px on the long side, so that building one stays within "
        f"the server's memory; this photo is 8,000 × 6,000 px, so they are scaled to "
        f"{cap:,} × {round(cap * 0.75):,}."
    )


def test_the_capped_overlay_redraws_a_larger_photo_at_the_cap(monkeypatch):
    monkeypatch.setattr(photo_downloads, "MAX_SIDE", 64)
    source = photo_png(90, 120)
    shape = photo_downloads.download_shape((90, 120))
    assert shape == (48, 64)
    marginal = np.random.default_rng(7).random((9, 12))
    mode, pixels = decode(photo_downloads.overlay_png(source, marginal, shape, 0.5))
    assert mode == "RGB" and pixels.shape == (48, 64, 3)
    expected = overlay_png(load_photo(source, max_side=64).rgb, upsample(marginal, shape) >= 0.5)
    np.testing.assert_array_equal(pixels, decode(expected)[1])
