"""Binary training data for an RBM: the shipped handwritten digits, and a user's own file.

The digits are scikit-learn's copy of the UCI handwritten digits (1,797 images of 8 x 8),
binarised once by ``assets/make_digits.py`` and shipped as packed bits, so that neither the
library nor the app needs scikit-learn.
"""

from __future__ import annotations

import io
import math
import zipfile
from functools import lru_cache
from pathlib import Path, PurePosixPath

import numpy as np

from lsbcore.image import ImageError, image_size, load_image
from lsbcore.segmentation.mixture import otsu_threshold

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DIGITS_FILE = ASSETS / "digits.npz"
DIGIT_SIZES = (8, 16, 28)

# What a user's file may hold: the caps are checked before anything large is read or unpacked
MAX_FILE_BYTES = 25 * 1000 * 1000  # the upload itself
MAX_ROWS = 20_000  # training rows (images)
MAX_VISIBLE = 4_096  # values per row: up to 64 x 64 images
MAX_UNPACKED_BYTES = 100 * 1000 * 1000  # a zip's members together, by their headers
MAX_IMAGE_BYTES = 5 * 1000 * 1000  # one image inside a zip
MAX_COMPRESSION_RATIO = 200  # a member that unpacks to more than 200 x its size is a zip bomb
# A zip's images together, in pixels by their headers (a GIF's screen when larger than its
# frame), before any is decoded: decoding costs about 7 ns a pixel for 8-bit gray and up to
# about 30 ns for RGBA or 16-bit PNGs, whatever the few bytes the file takes, so 100 GIFs of
# 37 bytes claiming 6,324 x 6,324 took 16-24 s and 20,000 of them would take an hour. The page
# keeps at most 64 x 64 = 4,096 pixels an image; 20,000 pixels an image (141 x 141, five
# times that) at the 20,000-row cap is 400 megapixels: a few seconds for gray pictures, about
# 12 s at worst, and still 400 pictures of 1 megapixel or 10 of the largest accepted alone.
MAX_TOTAL_PIXELS = 400_000_000
IMAGE_SIDE = 64  # images in a zip are scaled so their longer side is at most this
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".tif", ".tiff", ".bmp")


@lru_cache(maxsize=len(DIGIT_SIZES))
def _digits(size: int) -> tuple[np.ndarray, np.ndarray]:
    with np.load(DIGITS_FILE, allow_pickle=False) as stored:
        bits = stored[f"bits_{size}"]
        labels = stored["labels"]
    images = np.unpackbits(bits, axis=1, count=size * size)
    for array in (images, labels):
        array.setflags(write=False)  # cached: callers get views they cannot spoil
    return images, labels


def digits(size: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """The binarised digits: ``images [1797, size * size]`` uint8 in {0, 1} (row-major
    ``size x size`` pictures, 1 = ink) and ``labels [1797]`` (0..9). ``size`` 8 is the original
    resolution thresholded at half intensity; 16 and 28 (MNIST's size, not MNIST) are upsampled
    bicubically, then thresholded.
    The arrays are read-only (copy them to change them)."""
    if isinstance(size, bool) or size not in DIGIT_SIZES:
        raise ValueError(f"size must be 8, 16 or 28 (pixels per side), got {size!r}.")
    return _digits(int(size))


def load_binary_data(data: bytes, filename: str) -> tuple[np.ndarray, tuple[int, int] | None]:
    """A user's training data: rows ``[N, n]`` uint8 of 0/1 and the image shape when known.

    ``filename`` picks the reader: ``.npy`` holds 0/1 values (or booleans, or -1/+1), 2-D rows
    or 3-D images ``[N, H, W]``; ``.zip`` holds images (PNG, JPEG, GIF, WebP, TIFF, BMP) of one
    size, each read as the photo pipeline reads photos (luma, scaled so the longer side is at
    most ``IMAGE_SIDE``) and binarised there: Otsu's threshold splits dark from light, and
    the class that touches the border less is on (ink on paper, whichever its shade); the
    images' pixels are summed from their headers, and capped, before any is decoded. Every
    refusal is a ValueError with one sentence for the user.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"data must be the bytes of a file, got {type(data).__name__}.")
    if not isinstance(filename, str):
        raise ValueError(f"filename must be a string, got {type(filename).__name__}.")
    data = bytes(data)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(
            f"The file is {len(data) / 1e6:.1f} MB; files up to {MAX_FILE_BYTES // 10**6} MB "
            "are accepted."
        )
    if not data:
        raise ValueError("The file is empty.")
    suffix = PurePosixPath(filename.lower()).suffix
    if suffix == ".npy":
        return _from_npy(data)
    if suffix == ".zip":
        return _from_zip(data)
    raise ValueError(
        f"{filename!r} is neither an .npy array of 0/1 rows nor a .zip of images; those two "
        "are accepted."
    )


def _size(n_bytes: int) -> str:
    """``n_bytes`` in words: "30.0 MB", "29.3 kB", "12 bytes"."""
    if n_bytes >= 10**6:
        return f"{n_bytes / 1e6:.1f} MB"
    return f"{n_bytes / 1e3:.1f} kB" if n_bytes >= 10**3 else f"{n_bytes} bytes"


def default_layout(n: int) -> tuple[int, int]:
    """The most square ``h x w`` grid of ``n`` units (``h <= w``, ``h w = n``) to draw rows of
    unknown shape: 36 values as 6 x 6, 40 as 5 x 8, a prime count as one row."""
    h = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return h, n // h


def _check_size(n_rows: int, n: int) -> None:
    if n_rows < 1 or n < 1:
        raise ValueError("The file holds no data (no rows, or rows of no values).")
    if n_rows > MAX_ROWS:
        raise ValueError(f"The file holds {n_rows:,} rows; at most {MAX_ROWS:,} are accepted.")
    if n > MAX_VISIBLE:
        raise ValueError(
            f"The rows have {n:,} values; at most {MAX_VISIBLE:,} (a 64 x 64 image) are accepted."
        )


def _from_npy(data: bytes) -> tuple[np.ndarray, tuple[int, int] | None]:
    buffer = io.BytesIO(data)
    try:
        # the header alone first: shape and type are refused before the values are read
        version = np.lib.format.read_magic(buffer)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(buffer)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(buffer)
    except Exception:
        raise ValueError("The file is not a readable .npy array (its header is damaged).") from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise ValueError(
            f"The array holds values of type {dtype}; 0/1 numbers or booleans are accepted."
        )
    if len(shape) not in (2, 3):
        raise ValueError(
            f"The array has {len(shape)} dimensions; 2 (rows of values) or 3 (images "
            "[N, height, width]) are accepted."
        )
    n_rows, n = shape[0], math.prod(shape[1:])  # Python's integers: no int64 overflow
    _check_size(n_rows, n)
    # numpy allocates the array the header describes before it reads a value: a header that
    # claims more values than the file holds is refused first, not after a 655 MB allocation
    needed, held = n_rows * n * dtype.itemsize, len(data) - buffer.tell()
    if held < needed:
        raise ValueError(
            f"The file's header says it holds {n_rows:,} x {n:,} values of {dtype.itemsize} "
            f"bytes ({_size(needed)}), but only {_size(held)} follow it: the file is cut short or "
            "its header was altered."
        )
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:
        raise ValueError("The file is not a readable .npy array (its data is cut short).") from None
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError("The array holds NaN or infinite values; only 0 and 1 are accepted.")
    if array.dtype.kind != "b":
        values = np.unique(array)
        if set(values.tolist()) == {-1, 1}:
            array = array > 0
        elif not set(values.tolist()) <= {0, 1}:
            raise ValueError(
                "The array holds values other than 0 and 1 (for example "
                f"{float(values[(values != 0) & (values != 1)][0]):.6g}); binary data is "
                "accepted."
            )
    rows = np.ascontiguousarray(array.reshape(n_rows, n), dtype=np.uint8)
    return rows, (tuple(int(s) for s in shape[1:]) if len(shape) == 3 else None)


def _binarise(luma: np.ndarray) -> np.ndarray:
    """On: the Otsu class that touches the border less (a constant picture: all off)."""
    if luma.min() == luma.max():
        return np.zeros(luma.shape, dtype=np.uint8)
    dark = luma <= otsu_threshold(luma)
    border = np.concatenate([dark[0], dark[-1], dark[1:-1, 0], dark[1:-1, -1]])
    on = dark if border.mean() <= 0.5 else ~dark
    return on.astype(np.uint8)


def _unpack(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, never more than its header promised."""
    try:
        with archive.open(info) as member:
            raw = member.read(info.file_size + 1)
    except (zipfile.BadZipFile, OSError, RuntimeError, ValueError):
        raise ValueError(f"{info.filename!r} in the zip cannot be unpacked.") from None
    if len(raw) > info.file_size:
        raise ValueError(f"{info.filename!r} in the zip is larger than its header says.")
    return raw


def _from_zip(data: bytes) -> tuple[np.ndarray, tuple[int, int]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [
            info
            for info in archive.infolist()
            if not info.is_dir()
            and PurePosixPath(info.filename).suffix.lower() in IMAGE_SUFFIXES
            and not PurePosixPath(info.filename).name.startswith(".")
            and "__MACOSX" not in info.filename
        ]
    except (zipfile.BadZipFile, OSError, ValueError):
        raise ValueError("The file is not a readable zip archive.") from None
    if not members:
        raise ValueError(
            "The zip holds no images (PNG, JPEG, GIF, WebP, TIFF or BMP files are read)."
        )
    _check_size(len(members), 1)
    # sizes from the headers, before anything is unpacked (the reads below are capped too)
    unpacked = sum(info.file_size for info in members)
    if unpacked > MAX_UNPACKED_BYTES:
        raise ValueError(
            f"The zip's images unpack to {unpacked / 1e6:.0f} MB; at most "
            f"{MAX_UNPACKED_BYTES // 10**6} MB are accepted."
        )
    for info in members:
        if info.file_size > MAX_IMAGE_BYTES or info.file_size > MAX_COMPRESSION_RATIO * max(
            info.compress_size, 1
        ):
            raise ValueError(
                f"{info.filename!r} in the zip unpacks to {_size(info.file_size)} from "
                f"{_size(info.compress_size)}; images of at most "
                f"{MAX_IMAGE_BYTES // 10**6} MB, packed at most {MAX_COMPRESSION_RATIO} to 1, "
                "are accepted."
            )
    members.sort(key=lambda item: item.filename)
    # pixels from the images' own headers, summed before any image is decoded
    total = 0
    for info in members:
        try:
            width, height = image_size(_unpack(archive, info))
        except ImageError as error:
            raise ValueError(f"{info.filename!r} in the zip: {error}") from None
        total += width * height
        if total > MAX_TOTAL_PIXELS:
            raise ValueError(
                f"{info.filename!r} in the zip is {width:,} x {height:,} pixels, which brings the "
                f"images to {total / 1e6:,.0f} megapixels; at most "
                f"{MAX_TOTAL_PIXELS // 10**6:,} megapixels in all are accepted (they are read at "
                f"{IMAGE_SIDE} pixels a side at most: scale them down first)."
            )
    pictures, shape = [], None
    for info in members:
        try:
            luma = load_image(_unpack(archive, info), max_side=IMAGE_SIDE)
        except ImageError as error:
            raise ValueError(f"{info.filename!r} in the zip: {error}") from None
        if shape is None:
            shape = luma.shape
        elif luma.shape != shape:
            raise ValueError(
                f"The images must all have one size: {info.filename!r} is "
                f"{luma.shape[1]} x {luma.shape[0]} after scaling, the first was "
                f"{shape[1]} x {shape[0]}."
            )
        pictures.append(_binarise(luma).reshape(-1))
    _check_size(len(pictures), pictures[0].size)
    return np.stack(pictures), (int(shape[0]), int(shape[1]))


__all__ = [
    "digits",
    "load_binary_data",
    "DIGIT_SIZES",
    "DIGITS_FILE",
    "MAX_FILE_BYTES",
    "MAX_ROWS",
    "MAX_VISIBLE",
    "MAX_UNPACKED_BYTES",
    "MAX_IMAGE_BYTES",
    "MAX_COMPRESSION_RATIO",
    "MAX_TOTAL_PIXELS",
    "IMAGE_SIDE",
]
