"""Tests for lsbcore.image.load_image. Every file is generated in memory."""

from __future__ import annotations

import io
import struct
import time
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import ExifTags, Image, ImageFile, features

from lsbcore.image import MAX_BYTES, ImageError, image_size, load_image, load_photo, rgb_rows
from tests.hostile_files import gif_on_screen
from tests.lying_images import small_jpeg, small_png, with_jpeg_size, with_png_size

needs_webp = pytest.mark.skipif(not features.check("webp"), reason="Pillow built without WebP")


def encode(im: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kwargs)
    return buf.getvalue()


def gray_ramp(width: int = 10, height: int = 7) -> np.ndarray:
    """A uint8 image with distinct values, so that a transposed or shifted result shows."""
    return ((np.arange(width * height).reshape(height, width) * 3) % 256).astype(np.uint8)


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF)
    )


def crafted_gray_png(width: int, height: int, *, real_data: bool) -> bytes:
    """An 8-bit grayscale PNG of any claimed size, built without allocating its pixels.

    With ``real_data`` the IDAT stream holds valid all-zero rows (a genuine, highly
    compressed big image); otherwise it holds almost nothing and only the header lies.
    """
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    comp = zlib.compressobj(9)
    if real_data:
        row_block = bytes((width + 1) * 64)  # filter byte + pixels, 64 rows at a time
        parts = [comp.compress(row_block) for _ in range(height // 64)]
        parts.append(comp.compress(bytes((width + 1) * (height % 64))))
    else:
        parts = [comp.compress(bytes(width + 1))]
    idat = b"".join(parts) + comp.flush()
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------------- basics


def test_grayscale_png_values_exact():
    arr = gray_ramp()
    out = load_image(encode(Image.fromarray(arr), "PNG"))
    assert out.dtype == np.float64
    assert out.ndim == 2 and out.shape == arr.shape
    np.testing.assert_allclose(out, arr / 255.0, atol=1e-12)


def test_rgb_png_uses_bt601_luma():
    rgb = np.zeros((1, 4, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[0, 1] = (0, 255, 0)
    rgb[0, 2] = (0, 0, 255)
    rgb[0, 3] = (255, 255, 255)
    out = load_image(encode(Image.fromarray(rgb), "PNG"))
    np.testing.assert_allclose(out[0], [0.299, 0.587, 0.114, 1.0], atol=1e-9)


def test_output_is_in_unit_interval_and_contiguous():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, size=(150, 90, 3), dtype=np.uint8)
    out = load_image(encode(Image.fromarray(rgb), "PNG"), max_side=40)
    assert out.shape == (40, 24)
    assert out.flags.c_contiguous
    assert 0.0 <= out.min() and out.max() <= 1.0
    assert np.isfinite(out).all()


@pytest.mark.parametrize(
    ("size", "max_side", "expected_hw"),
    [
        ((200, 100), 64, (32, 64)),  # landscape: width is the longer side
        ((100, 300), 64, (64, 21)),  # portrait, 21.33 rounds to 21
        ((50, 20), 64, (20, 50)),  # smaller than max_side: never upscaled
        ((64, 64), 64, (64, 64)),
        ((1000, 1), 64, (1, 64)),  # the short side stays at least one pixel
        ((300, 200), 1, (1, 1)),
        ((97, 13), 96, (13, 96)),  # 12.87 rounds to 13
    ],
)
def test_downscale_keeps_aspect_ratio(size, max_side, expected_hw):
    im = Image.new("L", size, 128)
    out = load_image(encode(im, "PNG"), max_side=max_side)
    assert out.shape == expected_hw
    assert max(out.shape) == min(max_side, max(size))
    np.testing.assert_allclose(out, 128 / 255, atol=1e-12)


def test_downscale_averages_areas():
    # A one-pixel checkerboard halved in size becomes uniform mid-gray with an
    # area-averaging filter; nearest-neighbour would keep pure black or white.
    board = (np.indices((128, 128)).sum(axis=0) % 2 * 255).astype(np.uint8)
    out = load_image(encode(Image.fromarray(board), "PNG"), max_side=64)
    assert out.shape == (64, 64)
    np.testing.assert_allclose(out, 0.5, atol=1 / 255)


def test_constant_image_is_returned():
    out = load_image(encode(Image.new("L", (30, 20), 77), "PNG"))
    assert out.shape == (20, 30)
    assert np.ptp(out) == 0 and out[0, 0] == pytest.approx(77 / 255)


def test_one_by_one():
    out = load_image(encode(Image.new("RGB", (1, 1), (10, 200, 30)), "PNG"))
    assert out.shape == (1, 1)
    assert out[0, 0] == pytest.approx((0.299 * 10 + 0.587 * 200 + 0.114 * 30) / 255)


def test_one_bit_image():
    bits = np.zeros((6, 8), bool)
    bits[:, 4:] = True
    data = encode(Image.fromarray(bits), "PNG")
    assert Image.open(io.BytesIO(data)).mode == "1"
    out = load_image(data)
    assert set(np.unique(out)) == {0.0, 1.0}
    assert (out[:, 4:] == 1.0).all() and (out[:, :4] == 0.0).all()


# --------------------------------------------------------------------------- EXIF


def marker_image(width: int, height: int) -> Image.Image:
    """Dark image with a bright square in the top-left corner."""
    arr = np.full((height, width), 30, np.uint8)
    s = min(width, height) // 2
    arr[:s, :s] = 230
    return Image.fromarray(arr)


def corner_means(out: np.ndarray) -> dict[str, float]:
    q = max(min(out.shape) // 4, 1)
    return {
        "top_left": out[:q, :q].mean(),
        "top_right": out[:q, -q:].mean(),
        "bottom_left": out[-q:, :q].mean(),
        "bottom_right": out[-q:, -q:].mean(),
    }


@pytest.mark.parametrize(("width", "height", "max_side"), [(40, 20, 64), (400, 200, 64)])
def test_exif_orientation_6_rotates_clockwise(width, height, max_side):
    im = marker_image(width, height)
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6  # "rotate 90 degrees clockwise to display"
    rotated = load_image(encode(im, "JPEG", quality=95, exif=exif), max_side=max_side)
    plain = load_image(encode(im, "JPEG", quality=95), max_side=max_side)

    scale = min(1.0, max_side / max(width, height))
    assert plain.shape == (round(height * scale), round(width * scale))
    assert rotated.shape == plain.shape[::-1]  # width and height swapped
    # Without EXIF the marker stays top-left; rotated clockwise it ends top-right.
    corners = corner_means(plain)
    assert max(corners, key=corners.get) == "top_left"
    corners = corner_means(rotated)
    assert max(corners, key=corners.get) == "top_right"
    assert corners["top_right"] > 0.7 and corners["top_left"] < 0.3


# --------------------------------------------------------------------------- bit depth


@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_16bit_scaled_not_clipped(fmt):
    arr = np.zeros((4, 5), np.uint16)
    arr[0] = [0, 1000, 16384, 32768, 65535]
    data = encode(Image.fromarray(arr), fmt)
    assert Image.open(io.BytesIO(data)).mode.startswith("I;16")
    out = load_image(data)
    np.testing.assert_allclose(out[0], arr[0] / 65535.0, atol=1e-6)
    assert out.max() == pytest.approx(1.0)
    assert out[0, 3] == pytest.approx(0.5, abs=1e-3)  # clipping at 255 would give 1.0


def test_16bit_downscaled_keeps_precision():
    arr = np.tile(np.linspace(0, 65535, 256).astype(np.uint16), (128, 1))
    out = load_image(encode(Image.fromarray(arr), "PNG"), max_side=64)
    assert out.shape == (32, 64)
    assert out[:, 0].max() < 0.02 and out[:, -1].min() > 0.98
    assert (np.diff(out[0]) > 0).all()  # still a strictly increasing ramp


def test_32bit_integer_tiff():
    arr = np.array([[0, 255, 65535]], np.int32)
    out = load_image(encode(Image.fromarray(arr), "TIFF"))
    np.testing.assert_allclose(out[0], [0.0, 255 / 65535, 1.0], atol=1e-6)
    wide = np.array([[-100, 0, 100_000]], np.int32)
    out = load_image(encode(Image.fromarray(wide), "TIFF"))
    np.testing.assert_allclose(out[0], [0.0, 100 / 100_100, 1.0], atol=1e-6)


def test_float_tiff():
    arr = np.array([[0.0, 0.25, 1.0]], np.float32)
    data = encode(Image.fromarray(arr), "TIFF")
    assert Image.open(io.BytesIO(data)).mode == "F"
    np.testing.assert_allclose(load_image(data)[0], [0.0, 0.25, 1.0], atol=1e-7)
    wide = np.array([[-5.0, 0.0, 10.0]], np.float32)
    out = load_image(encode(Image.fromarray(wide), "TIFF"))
    np.testing.assert_allclose(out[0], [0.0, 1 / 3, 1.0], atol=1e-6)


def test_float_tiff_with_nan_refused():
    arr = np.array([[0.0, np.nan, 1.0]], np.float32)
    with pytest.raises(ImageError, match="invalid pixel values"):
        load_image(encode(Image.fromarray(arr), "TIFF"))


# --------------------------------------------------------------------------- colour modes


@pytest.mark.parametrize("fmt", ["PNG", "GIF"])
def test_palette_with_transparency_composited_over_white(fmt):
    im = Image.new("P", (6, 4), 0)
    im.putpalette([0, 0, 0, 100, 100, 100] + [0, 0, 0] * 254)
    im.paste(1, (3, 0, 6, 4))  # right half: opaque gray 100
    data = encode(im, fmt, transparency=0)  # left half: transparent black
    out = load_image(data)
    np.testing.assert_allclose(out[:, :3], 1.0)
    np.testing.assert_allclose(out[:, 3:], 100 / 255, atol=1e-9)


def test_palette_without_transparency():
    im = Image.new("P", (4, 2), 1)
    im.putpalette([0, 0, 0, 255, 0, 0] + [0, 0, 0] * 254)
    out = load_image(encode(im, "PNG"))
    np.testing.assert_allclose(out, 0.299, atol=1e-9)


def test_rgba_alpha_composited_over_white():
    rgba = np.zeros((2, 3, 4), np.uint8)  # black everywhere
    rgba[..., 3] = [255, 128, 0]  # opaque, half, fully transparent columns
    out = load_image(encode(Image.fromarray(rgba), "PNG"))
    np.testing.assert_allclose(out[:, 0], 0.0, atol=1e-9)
    np.testing.assert_allclose(out[:, 1], 1 - 128 / 255, atol=1e-9)
    np.testing.assert_allclose(out[:, 2], 1.0, atol=1e-9)


def test_gray_alpha_downscaled_uses_premultiplied_average():
    la = np.zeros((2, 2, 2), np.uint8)  # black; left column opaque, right transparent
    la[:, 0, 1] = 255
    la[:, 1, 0] = 255  # colour under zero alpha must not leak into the average
    im = Image.fromarray(la)
    assert im.mode == "LA"
    data = encode(im, "PNG")
    out = load_image(data, max_side=1)
    assert out.shape == (1, 1)
    assert out[0, 0] == pytest.approx(0.5, abs=1 / 255)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_fully_transparent_refused(mode):
    if mode == "P":
        im = Image.new("P", (8, 8), 0)
        data = encode(im, "PNG", transparency=0)
    else:
        im = Image.new(mode, (8, 8), (200,) * len(mode[:-1]) + (0,))
        data = encode(im, "PNG")
    with pytest.raises(ImageError, match="fully transparent"):
        load_image(data)


def test_cmyk_jpeg():
    im = Image.new("CMYK", (16, 8), (0, 0, 0, 255))  # black ink
    im.paste((0, 0, 0, 0), (8, 0, 16, 8))  # no ink: white
    data = encode(im, "JPEG", quality=95)
    assert Image.open(io.BytesIO(data)).mode == "CMYK"
    out = load_image(data)
    assert out.shape == (8, 16)
    assert out[:, :6].max() < 0.05
    assert out[:, 10:].min() > 0.95


def test_color_jpeg_downscaled_through_draft_matches_luma():
    im = Image.new("RGB", (800, 400), (200, 40, 40))
    out = load_image(encode(im, "JPEG", quality=95), max_side=64)
    assert out.shape == (32, 64)
    expected = (0.299 * 200 + 0.587 * 40 + 0.114 * 40) / 255
    np.testing.assert_allclose(out, expected, atol=3 / 255)


# --------------------------------------------------------------------------- formats


def two_frames() -> list[Image.Image]:
    return [Image.new("L", (12, 10), 60), Image.new("L", (12, 10), 200)]


@pytest.mark.parametrize(
    ("fmt", "kwargs"),
    [
        ("GIF", {"duration": 100, "loop": 0}),
        ("PNG", {"duration": 100}),  # APNG
        pytest.param("WEBP", {"duration": 100, "lossless": True}, marks=needs_webp),
    ],
)
def test_animation_uses_first_frame(fmt, kwargs):
    first, second = two_frames()
    data = encode(first, fmt, save_all=True, append_images=[second], **kwargs)
    assert getattr(Image.open(io.BytesIO(data)), "n_frames", 1) == 2
    out = load_image(data)
    assert out.shape == (10, 12)
    np.testing.assert_allclose(out, 60 / 255, atol=1 / 255)


def test_mpo_camera_jpeg_uses_first_picture():
    first, second = two_frames()
    data = encode(first, "MPO", save_all=True, append_images=[second], quality=95)
    opened = Image.open(io.BytesIO(data))
    assert (opened.format, opened.n_frames) == ("MPO", 2)
    np.testing.assert_allclose(load_image(data), 60 / 255, atol=3 / 255)


@pytest.mark.parametrize(
    ("fmt", "kwargs"),
    [
        ("TIFF", {}),
        ("TIFF", {"compression": "tiff_lzw"}),
        ("BMP", {}),
        ("GIF", {}),
        pytest.param("WEBP", {"lossless": True}, marks=needs_webp),
    ],
)
def test_lossless_formats_round_trip(fmt, kwargs):
    arr = gray_ramp(33, 17)
    out = load_image(encode(Image.fromarray(arr), fmt, **kwargs))
    np.testing.assert_allclose(out, arr / 255.0, atol=1e-9)


@needs_webp
def test_lossy_webp_rgb():
    im = Image.new("RGB", (50, 30), (0, 0, 0))
    im.paste((255, 255, 255), (25, 0, 50, 30))
    out = load_image(encode(im, "WEBP", quality=90), max_side=25)
    assert out.shape == (15, 25)
    assert out[:, :10].max() < 0.1 and out[:, 15:].min() > 0.9


# --------------------------------------------------------------------------- inputs


@pytest.fixture
def sample_png(tmp_path: Path) -> tuple[bytes, Path]:
    rng = np.random.default_rng(1)
    data = encode(Image.fromarray(rng.integers(0, 256, (70, 90, 3), np.uint8)), "PNG")
    path = tmp_path / "sample.png"
    path.write_bytes(data)
    return data, path


class ReadOnly:
    """A minimal binary file object with read() and nothing else."""

    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._buf.read(n)


def test_path_bytes_and_file_objects_agree(sample_png):
    data, path = sample_png
    reference = load_image(data, max_side=32)
    assert reference.shape == (25, 32)
    consumed = io.BytesIO(data)
    consumed.read()  # like a Streamlit UploadedFile on a rerun: position at the end
    with open(path, "rb") as fh:
        from_open_file = load_image(fh, max_side=32)
    for source in [
        str(path),
        path,
        bytearray(data),
        memoryview(data),
        io.BytesIO(data),
        consumed,
        ReadOnly(data),
    ]:
        np.testing.assert_array_equal(load_image(source, max_side=32), reference)
    np.testing.assert_array_equal(from_open_file, reference)


def test_wrong_input_types(tmp_path):
    for bad in (42, None, 3.5, ["a"]):
        with pytest.raises(TypeError):
            load_image(bad)
    text_file = tmp_path / "a.txt"
    text_file.write_text("hello")
    with open(text_file, encoding="utf-8") as fh, pytest.raises(TypeError, match="binary"):
        load_image(fh)


def test_missing_path_and_folder(tmp_path):
    with pytest.raises(ImageError, match="does not exist"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(ImageError, match="folder"):
        load_image(tmp_path)


@pytest.mark.parametrize("bad", [0, -1, 4097, 64.0, True, "64", None])
def test_bad_max_side(bad):
    data = encode(Image.new("L", (4, 4)), "PNG")
    with pytest.raises(ValueError, match="max_side") as info:
        load_image(data, max_side=bad)
    assert not isinstance(info.value, ImageError)


def test_good_max_side_variants():
    data = encode(Image.new("L", (5000, 10)), "PNG")
    assert load_image(data, max_side=np.int64(100)).shape == (1, 100)
    assert load_image(data, max_side=4096).shape == (8, 4096)


# --------------------------------------------------------------------------- bad files


def one_sentence(message: str) -> bool:
    return message[:1].isupper() and message.endswith(".") and "\n" not in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "empty"),
        (np.random.default_rng(2).bytes(4096), "not an image"),
        (b"This is a shopping list, not a picture.\n" * 20, "not an image"),
        (
            b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" '
            b'height="10"><rect width="10" height="10"/></svg>',
            "SVG",
        ),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "PDF"),
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "HEIC"),
        (b"\x89PNG\r\n\x1a\n", "damaged"),
    ],
    ids=["empty", "random", "text", "svg", "pdf", "heic", "png-signature-only"],
)
def test_unusable_bytes(data, expected):
    with pytest.raises(ImageError, match=expected) as info:
        load_image(data)
    assert one_sentence(str(info.value))


def test_text_file_named_png(tmp_path):
    path = tmp_path / "photo.png"
    path.write_text("definitely not a PNG\n", encoding="utf-8")
    with pytest.raises(ImageError, match="not an image") as info:
        load_image(path)
    assert one_sentence(str(info.value))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "TIFF", "BMP"])
def test_truncated_files(fmt):
    rng = np.random.default_rng(3)
    data = encode(Image.fromarray(rng.integers(0, 256, (64, 64), np.uint8)), fmt)
    with pytest.raises(ImageError) as info:
        load_image(data[: len(data) // 2])
    assert one_sentence(str(info.value))


def test_format_outside_allow_list_refused():
    data = encode(Image.new("RGB", (16, 16)), "ICO")  # Pillow reads ICO; we do not
    assert Image.open(io.BytesIO(data)).format == "ICO"
    with pytest.raises(ImageError, match="PNG, JPEG"):
        load_image(data)


def test_zero_size_png():
    with pytest.raises(ImageError):
        load_image(crafted_gray_png(0, 10, real_data=False))


@pytest.mark.filterwarnings("ignore::UserWarning:PIL.TiffImagePlugin")
def test_corrupted_bytes_never_leak_other_exceptions():
    # Flip bytes of valid files at random: the result is an image or an ImageError,
    # never an OSError, SyntaxError, struct.error, ...
    rng = np.random.default_rng(4)
    base = Image.fromarray(rng.integers(0, 256, (24, 24, 3), np.uint8))
    fmts = ["PNG", "JPEG", "GIF", "TIFF", "BMP"] + (["WEBP"] if features.check("webp") else [])
    for fmt in fmts:
        data = encode(base, fmt)
        for _ in range(40):
            corrupt = bytearray(data)
            for pos in rng.integers(0, len(data), size=3):
                corrupt[pos] = int(rng.integers(0, 256))
            try:
                out = load_image(bytes(corrupt), max_side=16)
            except ImageError:
                continue
            assert out.ndim == 2 and max(out.shape) <= 16
            assert np.isfinite(out).all() and 0 <= out.min() and out.max() <= 1


# --------------------------------------------------------------------------- limits


@pytest.fixture
def decoded(monkeypatch) -> list[tuple[int, int]]:
    """Record the size of every image whose pixels get decoded (ImageFile.load)."""
    sizes: list[tuple[int, int]] = []
    original = ImageFile.ImageFile.load

    def spy(self):
        sizes.append(self.size)
        return original(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", spy)
    return sizes


def test_a_gif_is_its_frame_whatever_screen_it_claims(decoded):
    """Issue 47: a 37-byte GIF whose one-pixel frame sits on a 6,324 x 6,324 logical screen was
    decoded into a 40-megapixel photo (the screen filled with background). A GIF's pixels are
    its frame's: the photo, its size from the header and its decode are the frame's."""
    gif = gif_on_screen(6_324)
    assert Image.open(io.BytesIO(gif)).size == (6_324, 6_324)  # what Pillow alone would fill
    photo = load_photo(gif)
    assert photo.original_shape == (1, 1) and photo.luma.shape == (1, 1)
    assert image_size(gif) == (1, 1)
    assert decoded and set(decoded) == {(1, 1)}  # nothing of the screen's size
    # a real frame drawn at (7, 5) of a larger screen is read as the frame alone, exactly
    frame = gray_ramp(30, 20)
    data = encode(Image.fromarray(frame), "GIF")
    descriptor = b"\x2c" + struct.pack("<4H", 0, 0, 30, 20)
    at = data.index(descriptor)
    moved = data[:6] + struct.pack("<HH", 300, 200) + data[10:at]
    moved += b"\x2c" + struct.pack("<4H", 7, 5, 30, 20) + data[at + 9 :]
    assert Image.open(io.BytesIO(moved)).size == (300, 200)
    assert image_size(moved) == (30, 20)
    np.testing.assert_array_equal(load_image(moved, max_side=64), load_image(data, max_side=64))
    np.testing.assert_array_equal(load_image(moved, max_side=64), frame / 255)


def test_header_bomb_refused_without_decoding(decoded):
    data = crafted_gray_png(30000, 30000, real_data=False)  # claims 900 megapixels
    assert len(data) < 200
    start = time.perf_counter()
    with pytest.raises(ImageError, match="too many pixels") as info:
        load_image(data)
    assert time.perf_counter() - start < 1.0
    assert decoded == []  # refused from the header alone
    assert one_sentence(str(info.value))


def test_real_compressed_big_png_refused_without_decoding(decoded):
    data = crafted_gray_png(7000, 6000, real_data=True)  # a valid 42 MP all-black PNG
    assert len(data) < 200_000
    assert Image.open(io.BytesIO(data)).size == (7000, 6000)
    start = time.perf_counter()
    with pytest.raises(ImageError, match="megapixels") as info:
        load_image(data)
    assert time.perf_counter() - start < 1.0
    assert decoded == []  # refused from the header alone
    assert "7000 x 6000" in str(info.value)


def test_pillow_bomb_warning_zone_refused(decoded):
    data = crafted_gray_png(10000, 10000, real_data=False)  # 100 MP: Pillow only warns
    with pytest.warns(Image.DecompressionBombWarning), pytest.raises(ImageError):
        load_image(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        with pytest.raises(ImageError, match="too many pixels"):
            load_image(data)
    assert decoded == []  # refused from the header alone


def test_absurd_side_refused(decoded):
    with pytest.raises(ImageError, match="sides longer than"):
        load_image(crafted_gray_png(40000, 1, real_data=False))
    assert decoded == []  # refused from the header alone


def test_byte_size_limit(tmp_path):
    big = bytes(MAX_BYTES + 1)
    with pytest.raises(ImageError, match="MB"):
        load_image(big)
    with pytest.raises(ImageError, match="MB"):
        load_image(ReadOnly(big))
    path = tmp_path / "big.png"
    with open(path, "wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: cheap to create
    with pytest.raises(ImageError, match="MB") as info:
        load_image(path)
    assert one_sentence(str(info.value))


def test_large_jpeg_loads_fast_and_correct(decoded):
    im = Image.new("RGB", (6000, 4000), (20, 20, 20))
    im.paste((235, 235, 235), (3000, 0, 6000, 4000))
    im.paste((20, 20, 20), (4500, 3000, 6000, 4000))  # dark bottom-right block
    data = encode(im, "JPEG", quality=90)
    start = time.perf_counter()
    out = load_image(data, max_side=64)
    elapsed = time.perf_counter() - start
    assert out.shape == (43, 64)  # 4000 * 64 / 6000 = 42.7
    assert out[:, :30].max() < 0.15
    assert out[:30, 34:].min() > 0.85
    assert out[-8:, -14:].max() < 0.15
    # libjpeg decoded at 1/8 scale (Image.draft), not the full 24 megapixels
    assert decoded and max(w * h for w, h in decoded) <= 750 * 500
    assert elapsed < 10.0  # about 0.01 s; generous for slow CI


def test_jpeg_above_png_pixel_limit_still_loads():
    # 54 MP: refused as a PNG, accepted as a JPEG because it is decoded at 1/8 scale.
    im = Image.new("L", (9000, 6000), 40)
    im.paste(220, (0, 0, 9000, 3000))
    out = load_image(encode(im, "JPEG", quality=85), max_side=48)
    assert out.shape == (32, 48)
    assert out[:14].min() > 0.8 and out[18:].max() < 0.2


def test_a_large_png_is_decoded_without_a_second_full_size_copy(tmp_path):
    """A legal 39.7-megapixel PNG (119 kB) cost +380 MB to decode; an RGB decode is kept as
    it is now, so the peak is the decode itself (4 bytes a pixel, about 160 MB)."""
    import subprocess
    import sys

    arr = np.zeros((5670, 7000, 3), np.uint8)
    arr[1400:4200, 1750:5250] = 200
    Image.fromarray(arr).save(tmp_path / "big.png")
    Image.fromarray(arr[:64, :64]).save(tmp_path / "small.png")
    del arr
    script = f"""
import resource, lsbcore
lsbcore.load_photo({str(tmp_path / "small.png")!r}, 8)  # imports and first-use allocations
raw = open({str(tmp_path / "big.png")!r}, "rb").read()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
photo = lsbcore.load_photo(raw, 512)
assert photo.original_shape == (5670, 7000) and photo.rgb.shape == (415, 512, 3)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[-1]) < 240  # MB above the baseline; a copy adds ~160


# --------------------------------------------------------------------------- headers that lie


def test_a_jpeg_whose_header_claims_more_pixels_than_its_data_is_refused_in_a_sentence():
    honest = small_jpeg(64)
    assert load_image(honest, max_side=32).shape == (32, 32)
    for options in ({}, {"progressive": True, "optimize": True}):
        lying = with_jpeg_size(small_jpeg(64, **options), 8900, 8900)  # 4 kB claiming 79 MP
        assert Image.open(io.BytesIO(lying)).size == (8900, 8900)
        with pytest.raises(ImageError, match="8900 x 8900") as info:
            load_photo(lying, max_side=256)
        assert one_sentence(str(info.value)) and "header" in str(info.value)


def test_a_png_whose_ihdr_claims_more_pixels_than_its_data_is_refused_in_a_sentence():
    lying = with_png_size(small_png(64), 6000, 6000)
    assert Image.open(io.BytesIO(lying)).size == (6000, 6000)  # the CRC is right
    with pytest.raises(ImageError, match="damaged") as info:
        load_photo(lying, max_side=256)
    assert one_sentence(str(info.value))


@pytest.mark.parametrize(
    "options", [{}, {"progressive": True, "optimize": True}, {"subsampling": 0}]
)
def test_a_large_flat_jpeg_is_not_mistaken_for_a_lying_one(options):
    # a flat photo compresses to about two bits per 8 x 8 block, the least a JPEG can hold
    data = encode(Image.new("RGB", (2000, 1500), (128, 128, 128)), "JPEG", **options)
    photo = load_photo(data, max_side=64)
    assert photo.original_shape == (1500, 2000)
    np.testing.assert_allclose(photo.luma, 128 / 255, atol=1 / 255)


# --------------------------------------------------------------------------- bands of rows


def with_orientation(im: Image.Image, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = orientation
    return encode(im, "JPEG", quality=95, exif=exif.tobytes())


@pytest.mark.parametrize("max_side", [40, 64, 200])
def test_rgb_rows_are_the_rows_of_load_photo(max_side):
    rng = np.random.default_rng(8)
    colour = Image.fromarray(rng.integers(0, 256, (90, 130, 3), np.uint8))
    rgba = np.dstack([rng.integers(0, 256, (50, 70, 3)), rng.integers(0, 256, (50, 70))])
    files = [
        encode(colour, "JPEG", quality=90),  # decoded at a reduced scale in YCbCr
        encode(colour, "PNG"),
        encode(Image.fromarray(rgba.astype(np.uint8), "RGBA"), "PNG"),  # over white
        encode(Image.fromarray(gray_ramp(60, 45)), "PNG"),
        with_orientation(colour, 6),  # turned a quarter: 130 rows of 90
    ]
    for data in files:
        whole = load_photo(data, max_side=max_side).rgb
        bands = list(rgb_rows(data, max_side=max_side, rows=7))
        assert [len(b) for b in bands[:-1]] == [7] * (len(bands) - 1)
        np.testing.assert_allclose(np.concatenate(bands), whole, atol=1e-12)


def test_rgb_rows_refuses_rows_that_are_not_a_positive_integer_and_bad_files_as_load_photo():
    data = encode(Image.new("RGB", (8, 8)), "PNG")
    for rows in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="rows"):
            next(rgb_rows(data, rows=rows))
    with pytest.raises(ImageError, match="8900 x 8900"):
        next(rgb_rows(with_jpeg_size(small_jpeg(64), 8900, 8900), max_side=64))
