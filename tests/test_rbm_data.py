"""RBM training data: the shipped digits are scikit-learn's, binarised as documented, and a
user's .npy or zip of images is read, binarised like the photo pipeline, or refused in a
sentence (wrong values, dimensions, sizes, zip bombs) before anything large is unpacked."""

from __future__ import annotations

import importlib.util
import io
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hostile_files import gif_claiming, gif_on_screen, npy_header
from PIL import Image

from lsbcore.rbm import data as data_module
from lsbcore.rbm.data import (
    IMAGE_SIDE,
    MAX_ROWS,
    MAX_VISIBLE,
    digits,
    load_binary_data,
)

ROOT = Path(__file__).resolve().parents[1]


def make_digits_script():
    spec = importlib.util.spec_from_file_location("make_digits", ROOT / "assets/make_digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- the digits
def test_shipped_digits_are_scikit_learns_thresholded_at_half_intensity():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images, labels = digits(8)
    assert images.shape == (1797, 64) and images.dtype == np.uint8
    assert np.array_equal(images, (bunch.data > 8).astype(np.uint8))
    assert np.array_equal(labels, bunch.target)
    upsample = make_digits_script().upsample
    for size in (16, 28):
        large, large_labels = digits(size)
        assert large.shape == (1797, size * size) and set(np.unique(large)) == {0, 1}
        for i in (0, 5, 1796):
            expected = upsample(bunch.images[i], size) > 8
            assert np.array_equal(large[i].reshape(size, size), expected)
        assert np.array_equal(large_labels, labels)
        # the upsampled strokes cover about what the 8 x 8 ones do, not a blur of everything
        assert abs(large.mean() - images.mean()) < 0.05


def test_digits_are_read_only_and_refuse_other_sizes():
    images, _ = digits(8)
    with pytest.raises(ValueError):
        images[0, 0] = 1
    for size in (4, 12, True, "8"):
        with pytest.raises(ValueError, match="size must be 8, 16 or 28"):
            digits(size)


# ----------------------------------------------------------------------------- .npy files
def npy(array, **options) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, **options)
    return buffer.getvalue()


def test_npy_rows_and_images_are_read_as_0_1_rows():
    rows = np.array([[0, 1, 1], [1, 0, 0]])
    for array in (rows, rows.astype(bool), rows.astype(np.float32), 2 * rows - 1):
        got, shape = load_binary_data(npy(array), "data.npy")
        assert got.dtype == np.uint8 and np.array_equal(got, rows) and shape is None
    pictures = np.arange(24).reshape(2, 3, 4) % 2
    got, shape = load_binary_data(npy(pictures), "Pictures.NPY")
    assert shape == (3, 4) and np.array_equal(got, pictures.reshape(2, 12))


@pytest.mark.parametrize(
    "array, words",
    [
        (np.array([[0, 1, 2]]), "values other than 0 and 1"),
        (np.array([[0.0, 0.5]]), "values other than 0 and 1"),
        (np.array([[0.0, np.nan]]), "NaN or infinite"),
        (np.array([[0.0, np.inf]]), "NaN or infinite"),
        (np.array([0, 1, 1]), "1 dimensions"),
        (np.zeros((2, 2, 2, 2)), "4 dimensions"),
        (np.zeros((0, 5)), "no data"),
        (np.zeros((3, 0)), "no data"),
        (np.zeros((MAX_ROWS + 1, 1), dtype=np.uint8), f"at most {MAX_ROWS:,}"),
        (np.zeros((1, MAX_VISIBLE + 1), dtype=np.uint8), f"at most {MAX_VISIBLE:,}"),
        (np.array([["0", "1"]]), "type <U1"),
        (np.array([[1 + 0j, 0]]), "type complex128"),
    ],
)
def test_bad_npy_files_are_refused_in_a_sentence(array, words):
    with pytest.raises(ValueError, match=words):
        load_binary_data(npy(array), "rows.npy")


def test_damaged_empty_and_unknown_files_are_refused(monkeypatch):
    whole = npy(np.zeros((50, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="cut short"):
        load_binary_data(whole[:-20], "rows.npy")
    with pytest.raises(ValueError, match="header is damaged"):
        load_binary_data(b"\x93NUMPY garbage", "rows.npy")
    with pytest.raises(ValueError, match="type object"):
        load_binary_data(npy(np.array([[None, 1]], dtype=object), allow_pickle=True), "rows.npy")
    with pytest.raises(ValueError, match="The file is empty"):
        load_binary_data(b"", "rows.npy")
    with pytest.raises(ValueError, match="neither an .npy"):
        load_binary_data(whole, "rows.csv")
    with pytest.raises(ValueError, match="bytes of a file"):
        load_binary_data("rows.npy", "rows.npy")
    monkeypatch.setattr(data_module, "MAX_FILE_BYTES", len(whole) - 1)
    with pytest.raises(ValueError, match="files up to"):
        load_binary_data(whole, "rows.npy")


@pytest.mark.parametrize("shape", [(2, 2**32, 2**32), (3, 2**62, 4), (2**64, 1)])
def test_an_npy_whose_shape_overflows_is_refused_for_its_size(shape):
    """Issue 47: numpy's product of a shape wraps around in 64 bits (2^32 x 2^32 is 0), so such
    a file was refused as holding no data; the shape is multiplied exactly, and the refusal
    names the true count and the cap."""
    with pytest.raises(ValueError) as refused:
        load_binary_data(npy_header(shape), "overflow.npy")
    message = str(refused.value)
    if shape[0] > MAX_ROWS:
        assert message == f"The file holds {shape[0]:,} rows; at most {MAX_ROWS:,} are accepted."
    else:
        n = int(np.prod(np.array(shape[1:], dtype=object)))  # exact, in Python's integers
        assert message == (
            f"The rows have {n:,} values; at most {MAX_VISIBLE:,} (a 64 x 64 image) are accepted."
        )


def test_an_npy_whose_header_claims_more_than_the_file_holds_is_refused_before_allocating():
    """Issue 47: numpy allocates the array its header describes before reading a value, so 8
    bytes behind a header claiming 20,000 x 4,096 float64 cost 655 MB; the header is checked
    against the bytes that follow it first."""
    lying = npy_header((MAX_ROWS, MAX_VISIBLE)) + bytes(8)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as refused:
            load_binary_data(lying, "lying.npy")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(refused.value) == (
        "The file's header says it holds 20,000 x 4,096 values of 8 bytes (655.4 MB), but only "
        "8 bytes follow it: the file is cut short or its header was altered."
    )
    assert peak < 10 * 2**20
    # the same header over all its values is read
    whole = npy_header((3, 2), descr="|u1") + bytes([0, 1, 1, 0, 1, 1])
    rows, _ = load_binary_data(whole, "honest.npy")
    assert rows.tolist() == [[0, 1], [1, 0], [1, 1]]


# ----------------------------------------------------------------------------- zips of images
CROSS = np.zeros((8, 8), dtype=np.uint8)
CROSS[3:5, 1:7] = CROSS[1:7, 3:5] = 1


def png(mask: np.ndarray, ink: int = 20, paper: int = 235, size: int | None = None) -> bytes:
    """A picture of ``mask`` (1 = ink), optionally scaled up by whole pixels."""
    picture = Image.fromarray(np.where(mask == 1, ink, paper).astype(np.uint8), mode="L")
    if size:
        picture = picture.resize((size, size), Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def zipped(files: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_zip_images_are_binarised_with_the_object_the_class_off_the_border():
    """Dark ink on light paper and light ink on dark paper give the same rows."""
    other = np.zeros((8, 8), dtype=np.uint8)
    other[2:6, 2:6] = 1
    archive = zipped(
        {
            "b.png": png(other, ink=250, paper=10),  # light on dark: still the square
            "a.png": png(CROSS),
            "c.png": png(np.zeros((8, 8), dtype=np.uint8)),  # blank: all off
            "notes.txt": b"ignored",
            "__MACOSX/._a.png": b"ignored",
            "folder/": b"",
        }
    )
    rows, shape = load_binary_data(archive, "mine.zip")
    assert shape == (8, 8) and rows.dtype == np.uint8
    assert np.array_equal(rows, np.stack([CROSS, other, np.zeros((8, 8))]).reshape(3, 64))


def test_large_images_in_a_zip_are_scaled_like_photos():
    rows, shape = load_binary_data(zipped({"big.png": png(CROSS, size=8 * 16)}), "x.zip")
    assert shape == (IMAGE_SIDE, IMAGE_SIDE)
    expected = np.kron(CROSS, np.ones((8, 8), dtype=np.uint8))
    assert np.array_equal(rows[0].reshape(IMAGE_SIDE, IMAGE_SIDE), expected)


def test_bad_zips_are_refused_in_a_sentence():
    cases = [
        (b"PK\x03\x04 not really", "not a readable zip"),
        (zipped({"readme.txt": b"hello"}), "holds no images"),
        (zipped({"a.png": png(CROSS), "b.png": png(CROSS, size=16)}), "one size: 'b.png'"),
        (zipped({"a.png": b"not an image"}), "'a.png' in the zip:"),
    ]
    for archive, words in cases:
        with pytest.raises(ValueError, match=words):
            load_binary_data(archive, "x.zip")


def test_zip_bombs_are_refused_from_their_headers_before_unpacking(monkeypatch):
    # 6 MB of zeros packs to a few kB: refused by its declared size and its ratio
    bomb = zipped({"a.png": bytes(6_000_000)})
    dense = zipped({"a.png": bytes(1_000_000)})
    assert len(bomb) < 50_000
    unpacked = []  # members opened (after the archives above were written)
    original = zipfile.ZipFile.open
    monkeypatch.setattr(
        zipfile.ZipFile, "open", lambda self, *a, **k: unpacked.append(a) or original(self, *a, **k)
    )
    with pytest.raises(ValueError, match="'a.png' in the zip unpacks to 6.0 MB"):
        load_binary_data(bomb, "x.zip")
    # under the per-image size but packed more than 200 to 1
    with pytest.raises(ValueError, match="packed at most 200 to 1"):
        load_binary_data(dense, "x.zip")
    assert unpacked == []
    monkeypatch.undo()
    # together too large
    images = {f"{i}.png": png(CROSS, size=64) for i in range(5)}
    monkeypatch.setattr(data_module, "MAX_UNPACKED_BYTES", sum(map(len, images.values())) - 1)
    with pytest.raises(ValueError, match="The zip's images unpack to .* MB are accepted"):
        load_binary_data(zipped(images, zipfile.ZIP_STORED), "x.zip")


def test_a_zip_member_larger_than_its_header_is_refused(monkeypatch):
    archive = zipped({"a.png": png(CROSS)}, zipfile.ZIP_STORED)
    # claim a smaller size in both headers: the read is capped at the claim plus one byte
    real = len(png(CROSS))
    claimed = (real - 10).to_bytes(4, "little")
    patched = archive.replace(real.to_bytes(4, "little") * 2, claimed * 2)
    assert patched != archive
    with pytest.raises(ValueError, match="'a.png' in the zip (is larger than|cannot be)"):
        load_binary_data(patched, "x.zip")


def test_too_many_images_are_refused_before_any_is_decoded(monkeypatch):
    monkeypatch.setattr(data_module, "MAX_ROWS", 2)
    archive = zipped({f"{i}.png": b"never decoded" for i in range(3)})
    with pytest.raises(ValueError, match="3 rows; at most 2"):
        load_binary_data(archive, "x.zip")


def test_a_zip_of_images_with_too_many_pixels_together_is_refused_before_decoding(monkeypatch):
    """Issue 47: 100 GIFs of 37 bytes claiming 6,324 x 6,324 (40 megapixels each, under the
    per-image cap) took 16-24 s and 150 MB to decode; their headers are summed first. (The red
    team's claimed it with their screens, which no longer counts: see the next test; these
    claim it with their frames.)"""
    gif = gif_claiming(6_324)
    assert len(gif) < 64 and Image.open(io.BytesIO(gif)).size == (6_324, 6_324)
    hostile = zipped({f"{i:03d}.gif": gif for i in range(100)})
    assert len(hostile) < 20_000
    decoded = []
    original = data_module.load_image
    monkeypatch.setattr(
        data_module, "load_image", lambda *a, **k: decoded.append(a) or original(*a, **k)
    )
    start = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        load_binary_data(hostile, "hostile.zip")
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0 and decoded == []
    message = str(refused.value)
    assert message.startswith("'010.gif' in the zip is 6,324 x 6,324 pixels")
    assert f"at most {data_module.MAX_TOTAL_PIXELS // 10**6:,} megapixels in all" in message
    # one image past the per-image caps is refused from its header too
    with pytest.raises(ValueError, match="'big.gif' in the zip: .* 7000 x 7000 pixels .*up to 40"):
        load_binary_data(zipped({"big.gif": gif_claiming(7_000)}), "x.zip")
    assert decoded == []
    # an ordinary zip of small digits still loads, under a cap it fits exactly
    images, _ = digits(16)
    pictures = {f"{i:02d}.png": png(images[i].reshape(16, 16)) for i in range(20)}
    monkeypatch.setattr(data_module, "MAX_TOTAL_PIXELS", 20 * 16 * 16)
    rows, shape = load_binary_data(zipped(pictures), "digits.zip")
    assert shape == (16, 16) and np.array_equal(rows, images[:20]) and len(decoded) == 20
    monkeypatch.setattr(data_module, "MAX_TOTAL_PIXELS", 20 * 16 * 16 - 1)
    with pytest.raises(
        ValueError, match="'19.png' in the zip is 16 x 16 pixels.* in all are accepted"
    ):
        load_binary_data(zipped(pictures), "digits.zip")


def test_gifs_whose_one_pixel_frame_sits_on_a_40_megapixel_screen_are_one_pixel_pictures(
    monkeypatch,
):
    """Issue 47: the red team's 100 GIFs of 37 bytes on 6,324 x 6,324 screens. A GIF's pixels are
    its frame's; the screen around it is background, so each is a one-pixel picture: summed as
    one pixel and decoded as one, not as 40 megapixels."""
    gif = gif_on_screen(6_324)
    assert Image.open(io.BytesIO(gif)).size == (6_324, 6_324)  # as Pillow would decode it
    sizes = []
    original = data_module.image_size
    monkeypatch.setattr(
        data_module, "image_size", lambda raw: sizes.append(original(raw)) or sizes[-1]
    )
    rows, shape = load_binary_data(zipped({f"{i:03d}.gif": gif for i in range(100)}), "red.zip")
    assert shape == (1, 1) and rows.shape == (100, 1)
    assert sizes == [(1, 1)] * 100


def test_the_refusals_name_values_and_sizes_in_plain_words():
    """What a person reads: a number (not numpy's repr), sizes in units that fit."""
    with pytest.raises(ValueError) as refused:
        load_binary_data(npy(np.array([[0.0, 0.25], [1.0, 0.0]])), "x.npy")
    assert "(for example 0.25)" in str(refused.value) and "np." not in str(refused.value)
    bomb = zipped({"a.png": b"\0" * 3_000_000})
    with pytest.raises(ValueError) as refused:
        load_binary_data(bomb, "bomb.zip")
    assert "unpacks to 3.0 MB from " in str(refused.value) and " kB;" in str(refused.value)


def test_rows_of_unknown_shape_are_drawn_on_the_most_square_grid():
    assert data_module.default_layout(36) == (6, 6)
    assert data_module.default_layout(40) == (5, 8)
    assert data_module.default_layout(64) == (8, 8)
    assert data_module.default_layout(37) == (1, 37)  # a prime: one row
    assert data_module.default_layout(1) == (1, 1)
