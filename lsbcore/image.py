"""Load an uploaded or shipped image as a small array in [0, 1]: luma, or colour too.

The dashboard segments images of at most a few thousand pixels, but users upload
whatever they have: phone photos with EXIF rotation, 16-bit scans, palette GIFs,
transparent logos, or files that are not images at all. :func:`load_image` turns all
of these into one well-defined grayscale form, :func:`load_photo` into that form plus
its colour (a :class:`Photo`); both share one decoder, and turn every failure into an
:class:`ImageError` whose message can be shown to the user as it is.
:func:`image_size` reads a file's size from its header alone, with the same checks, so that a
caller can bound the pixels of many files together before decoding any.

Resource limits are enforced *before* pixels are decoded: the input size in bytes
is bounded, the header's pixel count is checked right after the lazy
``Image.open``, and JPEGs are decoded at a reduced scale (``Image.draft``), so a
hostile or merely huge upload cannot make the app allocate gigabytes. A JPEG whose
header claims more pixels than its coded data can hold (libjpeg would fill the rest
with grey, silently) is refused, so that no one sizes outputs from a size that lies;
:func:`rgb_rows` hands the colour over a band of rows at a time for large outputs. No global
Pillow setting is changed: Pillow's own decompression-bomb check stays as it is
(for headers between about 89 and 179 megapixels it emits its
``DecompressionBombWarning`` before this module refuses the image; with warnings
turned into errors, that error is converted to :class:`ImageError` too).
"""

from __future__ import annotations

import io
import operator
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

import numpy as np
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

__all__ = [
    "ImageError",
    "Photo",
    "load_image",
    "load_photo",
    "image_size",
    "rgb_rows",
    "MAX_BYTES",
    "MAX_PIXELS",
    "MAX_JPEG_PIXELS",
    "MAX_INPUT_SIDE",
    "MAX_SIDE_LIMIT",
]

#: Largest accepted input, in bytes (25 MB).
MAX_BYTES = 25 * 1000 * 1000
#: Largest accepted image, in pixels, for formats that are decoded at full size.
MAX_PIXELS = 40_000_000
#: JPEGs are decoded at 1/2, 1/4 or 1/8 scale when that is enough (``Image.draft``),
#: so larger photos (48 and 64 megapixel phone cameras) stay cheap. This stays below
#: Pillow's own decompression-bomb threshold (about 89.5 megapixels).
MAX_JPEG_PIXELS = 80_000_000
#: Longest accepted side of the input, whatever its pixel count.
MAX_INPUT_SIDE = 30_000
#: Largest accepted value of ``max_side``.
MAX_SIDE_LIMIT = 4096

# Formats tried by Image.open. Restricting the list keeps rarely used (and rarely
# hardened) decoders away from untrusted uploads. Camera JPEGs that Pillow opens as
# MPO come through "JPEG" (its opener returns the MPO class when it applies).
_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "TIFF", "BMP")
_SUPPORTED_TEXT = "PNG, JPEG, GIF, WebP, TIFF and BMP are supported"

# ITU-R BT.601 luma weights, the same as Pillow's convert("L").
_LUMA = np.array([0.299, 0.587, 0.114])

# JFIF's YCbCr -> RGB matrix (the inverse of the BT.601 luma above), applied to (Y, Cb - 128,
# Cr - 128) in 8-bit units. A gray pixel (Cb = Cr = 128) gives R = G = B = Y exactly.
_YCBCR_TO_RGB = np.array(
    [
        [1.0, 0.0, 1.402],
        [1.0, -0.344136, -0.714136],
        [1.0, 1.772, 0.0],
    ]
)

# Working modes that carry colour (the others are gray: L, La, F). RGBX is RGB whose X band
# holds the luma libjpeg decodes (see _decode).
_COLOUR_MODES = frozenset({"RGB", "RGBa", "RGBX", "YCbCr"})

# Modes that carry an alpha channel (premultiplied or not).
_ALPHA_MODES = frozenset({"LA", "La", "PA", "RGBA", "RGBa"})

# File signatures of the supported formats: used only to choose between "not an
# image" and "a damaged image" when decoding fails.
_SIGNATURES = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",
    b"GIF87a",
    b"GIF89a",
    b"II*\x00",
    b"MM\x00*",
    b"BM",
)

ImageInput = bytes | bytearray | memoryview | str | os.PathLike[str] | IO[bytes]


class ImageError(ValueError):
    """The input cannot be used as an image; the message is meant for the end user."""


@dataclass(frozen=True, eq=False)
class Photo:
    """A decoded image at working resolution, in colour and in luma.

    Attributes:
        rgb: ``[H, W, 3]`` float64 in [0, 1]; without colour, each channel is exactly
            ``luma``. Transparency is composited over white, as for ``luma``.
        luma: ``[H, W]`` float64 in [0, 1], exactly what :func:`load_image` returns for
            the same input and ``max_side``.
        original_shape: ``(height, width)`` of the full-size image after EXIF
            orientation, i.e. the size the user sees.
        is_colour: False when the source has no colour: gray, 16-bit, float and
            bilevel images, or colour images whose R, G and B channels are identical.
    """

    rgb: np.ndarray
    luma: np.ndarray
    original_shape: tuple[int, int]
    is_colour: bool


def load_image(data: ImageInput, max_side: int = 64) -> np.ndarray:
    """Decode ``data`` into a 2-D float64 luminance array with values in [0, 1].

    ``data`` may be bytes-like, a path, or a binary file object (anything with
    ``read()``, such as Streamlit's ``UploadedFile``; objects with ``getvalue()``
    are read whole, whatever their current position, so reruns that reuse the
    object still work).

    The image is downscaled with an area-averaging (box) filter so that its longer
    side is at most ``max_side``; aspect ratio is kept, images are never upscaled,
    and each side is at least one pixel. Box averaging is used rather than Lanczos
    because it cannot overshoot and so adds no halo around edges that the
    segmentation would pick up.

    Conventions:

    * EXIF orientation is applied, so the array is upright as viewers show it.
    * Colour is reduced to BT.601 luma (as Pillow's ``convert("L")``).
    * Transparent areas are composited over **white**, which is how viewers and
      browsers usually show them, and which keeps a dark logo or drawing on a
      transparent background a dark object on a light background. A fully
      transparent image is refused.
    * 16-bit images are scaled by 1/65535. 32-bit integer images are scaled by
      1/65535 when their values lie in [0, 65535] and min-max scaled otherwise;
      float images are used as they are when their values lie in [0, 1] and
      min-max scaled otherwise.
    * Animated images (GIF, WebP, APNG) and multi-page TIFFs give their first frame.
    * Embedded ICC colour profiles are ignored.

    A constant image is returned as it is; deciding whether it can be segmented is
    up to the caller.

    Raises:
        ImageError: the input is not a usable image (the message says why, in
            words a non-expert understands).
        ValueError: ``max_side`` is not an integer in [1, 4096].
        TypeError: ``data`` is of an unsupported type, or a file object was
            opened in text mode.
    """
    work, _ = _load(data, max_side, colour=False, caller="load_image")
    return _to_luma(work)


def load_photo(data: ImageInput, max_side: int = 64) -> Photo:
    """Decode ``data`` into a :class:`Photo`: colour and luma at working resolution.

    Inputs, limits, downscaling and every convention are those of :func:`load_image`
    (whose result is ``load_photo(data, max_side).luma``), with colour kept: palette
    images give their palette colours, CMYK is converted to RGB, transparent areas
    are composited over white in each channel.

    Downscaled colour JPEGs are decoded by libjpeg at reduced scale in YCbCr, their
    own colour space, rather than in RGB: the Y channel is then the very luma that
    :func:`load_image` decodes, from a single decode, and RGB follows with the JFIF
    matrix in floating point. JPEGs stored in RGB (Adobe transform 0) are decoded in
    RGB, and their luma is Pillow's ``convert("L")`` at the decoded scale, which has
    libjpeg's weights and rounding.

    Raises:
        ImageError, ValueError, TypeError: as :func:`load_image`.
    """
    work, original_shape = _load(data, max_side, colour=True, caller="load_photo")
    luma = _to_luma(work)
    rgb = _to_rgb(work)
    is_colour = work.mode in _COLOUR_MODES and not (
        np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 0], rgb[..., 2])
    )
    if not is_colour:
        # every channel exactly the luma (the weighted sum of equal channels may differ
        # from them in the last bit)
        rgb = np.ascontiguousarray(np.repeat(luma[..., None], 3, axis=-1))
    return Photo(rgb=rgb, luma=luma, original_shape=original_shape, is_colour=is_colour)


def rgb_rows(data: ImageInput, max_side: int = 64, rows: int = 256) -> Iterator[np.ndarray]:
    """``load_photo(data, max_side).rgb`` a band of ``rows`` rows at a time, top to bottom.

    The photo is decoded once (as by :func:`load_photo`) and only each band becomes float64,
    so a large photo's float copy (24 bytes a pixel) never exists whole: full-size downloads
    are drawn this way. Bands equal the rows of ``load_photo(...).rgb`` up to the last bit
    (a gray photo stored in RGB gives its luma there, the RGB here).

    Raises:
        ImageError, ValueError, TypeError: as :func:`load_image` (when the first band is
            asked for); ValueError also for ``rows`` that is not a positive integer.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"rows must be a positive integer, got {rows!r}")
    work, _ = _load(data, max_side, colour=True, caller="rgb_rows")
    width, height = work.size
    for top in range(0, height, rows):
        yield _to_rgb(work.crop((0, top, width, min(height, top + rows))))


def _load(
    data: ImageInput, max_side: int, *, colour: bool, caller: str
) -> tuple[Image.Image, tuple[int, int]]:
    """The decoded working-mode image and the full-size (height, width) the user sees."""
    max_side = _check_max_side(max_side)
    raw = _read_bytes(data, caller)
    if not raw:
        raise ImageError("The file is empty.")
    with _image_errors(raw):
        return _decode(raw, max_side, colour=colour)


def image_size(data: ImageInput) -> tuple[int, int]:
    """``(width, height)`` from the header alone, nothing decoded, as :func:`load_image` sees it.

    The size is the one decoding fills, before EXIF rotation: a GIF's is its first frame's,
    whatever its logical screen claims (``_gif_as_its_frame``). The per-image limits of
    :func:`load_image` (bytes, sides, megapixels) are applied, and a file that is not a
    supported image is refused, with the same :class:`ImageError` sentences; callers sum sizes
    over many files before decoding any of them.
    """
    raw = _read_bytes(data, "image_size")
    if not raw:
        raise ImageError("The file is empty.")
    with _image_errors(raw), _open_checked(raw) as im:
        return im.size


@contextmanager
def _image_errors(raw: bytes) -> Iterator[None]:
    """Turn any failure while opening or decoding ``raw`` into an :class:`ImageError`."""
    try:
        yield
    except ImageError:
        raise
    except MemoryError:
        raise ImageError("The image is too large to decode with the memory available.") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # DecompressionBombWarning only arrives here when warnings are errors.
        raise ImageError(
            f"The image has too many pixels; images up to {MAX_PIXELS // 1_000_000} "
            "megapixels are accepted."
        ) from None
    except Exception as exc:  # any decoder failure is a bad file
        raise ImageError(_describe_unreadable(raw)) from exc


def _check_max_side(max_side: object) -> int:
    """Return ``max_side`` as an int, or raise ValueError naming it."""
    if isinstance(max_side, bool):
        value = None
    else:
        try:
            value = operator.index(max_side)  # ints and numpy integers, not floats
        except TypeError:
            value = None
    if value is None or not 1 <= value <= MAX_SIDE_LIMIT:
        raise ValueError(
            f"max_side must be an integer between 1 and {MAX_SIDE_LIMIT}, got {max_side!r}"
        )
    return value


def _too_big_message(n_bytes: int | None) -> str:
    limit = f"{MAX_BYTES // 1_000_000} MB"
    if n_bytes is None:
        return f"The file is larger than {limit}, the largest size accepted."
    return f"The file is {n_bytes / 1e6:.1f} MB; files up to {limit} are accepted."


def _read_bytes(data: object, caller: str) -> bytes:
    """Return the input's bytes, refusing anything over MAX_BYTES before reading it all."""
    if isinstance(data, bytes | bytearray | memoryview):
        view = memoryview(data)
        if view.nbytes > MAX_BYTES:
            raise ImageError(_too_big_message(view.nbytes))
        return view.tobytes()
    if isinstance(data, str | os.PathLike):
        path = os.fspath(data)
        try:
            size = os.stat(path).st_size
            if size > MAX_BYTES:
                raise ImageError(_too_big_message(size))
            with open(path, "rb") as fh:
                raw = fh.read(MAX_BYTES + 1)
        except ImageError:
            raise
        except FileNotFoundError:
            raise ImageError(f"The file {path!r} does not exist.") from None
        except IsADirectoryError:
            raise ImageError(f"{path!r} is a folder, not an image file.") from None
        except (OSError, ValueError) as exc:
            raise ImageError(f"The file {path!r} could not be read ({exc}).") from None
        if len(raw) > MAX_BYTES:
            raise ImageError(_too_big_message(None))
        return raw
    getvalue = getattr(data, "getvalue", None)
    read = getattr(data, "read", None)
    if callable(getvalue):
        raw = getvalue()
    elif callable(read):
        try:
            raw = read(MAX_BYTES + 1)
        except OSError as exc:
            raise ImageError(f"The file could not be read ({exc}).") from None
    else:
        raise TypeError(
            f"{caller} expects bytes, a path or a binary file object, not {type(data).__name__}"
        )
    if isinstance(raw, str):
        raise TypeError(f"{caller} needs a file opened in binary mode ('rb'), not text mode")
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise TypeError(f"the file object returned {type(raw).__name__}, not bytes")
    if len(raw) > MAX_BYTES:
        raise ImageError(_too_big_message(len(raw) if callable(getvalue) else None))
    return bytes(raw)


def _describe_unreadable(raw: bytes) -> str:
    """A one-sentence explanation for bytes that Pillow could not decode."""
    head = raw[:1024]
    lowered = head.lower()
    if b"<svg" in lowered or (lowered.lstrip().startswith(b"<?xml") and b"svg" in lowered):
        return "SVG drawings are not supported; export the drawing as a PNG first."
    if head[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1", b"ftypmsf1", b"ftyphevc"):
        return "HEIC/HEIF photos are not supported; save the photo as JPEG or PNG first."
    if head.startswith(b"%PDF"):
        return "PDF documents are not supported; export the page as a PNG first."
    if head.startswith(_SIGNATURES) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return "The image file is damaged or incomplete, so it could not be decoded."
    return f"This file is not an image that can be read ({_SUPPORTED_TEXT})."


def target_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Size with the longer side min(max_side, longer side), aspect kept, sides >= 1."""
    longer = max(width, height)
    if longer <= max_side:
        return width, height

    def scale(side: int) -> int:
        # round(side * max_side / longer) in exact integer arithmetic
        return max(1, (2 * side * max_side + longer) // (2 * longer))

    return scale(width), scale(height)


def _open_checked(raw: bytes) -> Image.Image:
    """Open lazily (header only) and refuse images whose size is unusable."""
    try:
        im = Image.open(io.BytesIO(raw), formats=_FORMATS)
        if im.format == "GIF" and im.tile and im.tile[0].extents != (0, 0, *im.size):
            im = Image.open(io.BytesIO(_gif_as_its_frame(raw)), formats=("GIF",))
    except UnidentifiedImageError:
        raise ImageError(_describe_unreadable(raw)) from None
    width, height = im.size
    if width < 1 or height < 1:
        raise ImageError("The image has no pixels (its width or height is zero).")
    if max(width, height) > MAX_INPUT_SIDE:
        raise ImageError(
            f"The image is {width} x {height} pixels; sides longer than "
            f"{MAX_INPUT_SIDE} pixels are not accepted."
        )
    limit = MAX_JPEG_PIXELS if im.format in ("JPEG", "MPO") else MAX_PIXELS
    if width * height > limit:
        raise ImageError(
            f"The image is {width} x {height} pixels ({width * height / 1e6:.0f} megapixels); "
            f"images up to {limit // 1_000_000} megapixels are accepted."
        )
    return im


def _gif_as_its_frame(raw: bytes) -> bytes:
    """The GIF ``raw`` with its logical screen cut to its first frame.

    A GIF's pixels are its frames; the logical screen only says where they are drawn, and
    decoders fill the rest of it with the background. A 37-byte file whose one-pixel frame
    sits on a 6,324 x 6,324 screen is therefore a one-pixel photo, not a 40-megapixel one:
    its screen (bytes 6-9) is set to the frame's size and the frame moved to the corner, so
    that the size checked, and the array decoded, are the frame's.
    """
    flags = raw[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)  # after the global palette
    while pos < len(raw) and raw[pos] == 0x21:  # extensions: label, sub-blocks, then a 0
        pos += 2
        while pos < len(raw) and raw[pos]:
            pos += 1 + raw[pos]
        pos += 1
    if pos + 9 >= len(raw) or raw[pos] != 0x2C:
        return raw  # no frame where one must be: the decoder will judge the file
    size = raw[pos + 5 : pos + 9]  # the frame's width and height
    return raw[:6] + size + raw[10 : pos + 1] + bytes(4) + raw[pos + 5 :]


def _decode(raw: bytes, max_side: int, *, colour: bool) -> tuple[Image.Image, tuple[int, int]]:
    """Decode to a working-mode image of the target size (see ``_to_working_mode``).

    With ``colour`` False the result may have lost its colour (JPEGs decoded to luma).
    Also returns the full-size (height, width) after EXIF orientation.
    """
    im = _open_checked(raw)
    width, height = im.size
    if im.format in ("JPEG", "MPO"):
        _check_jpeg_data(raw, width, height)
    target = target_size(width, height, max_side)

    rgb_jpeg_drafted = False
    if im.format in ("JPEG", "MPO") and target != (width, height):
        # Let libjpeg decode at 1/2, 1/4 or 1/8 scale (never below the target) and,
        # for colour JPEGs, straight to luma, or to YCbCr whose Y is that same luma.
        mode = None
        if im.mode == "RGB" and not colour:
            mode = "L"
        elif im.mode == "RGB" and not _jpeg_stores_rgb(im):
            mode = "YCbCr"
        drafted = im.draft(mode, target) is not None
        rgb_jpeg_drafted = drafted and colour and im.mode == "RGB"
    im.load()  # the actual decode; truncated or corrupt data fails here
    if rgb_jpeg_drafted:
        # Without colour this file decodes to L by libjpeg's RGB -> gray, whose weights and
        # rounding are Pillow's convert("L"): that luma travels as the fourth band.
        im = Image.merge("RGBX", (*im.split(), im.convert("L")))

    try:
        orientation = im.getexif().get(ExifTags.Base.Orientation, 1)
    except Exception:  # broken EXIF must not make a good image unusable
        orientation = 1
    original_shape = (height, width)
    if orientation in (2, 3, 4, 5, 6, 7, 8):
        im = ImageOps.exif_transpose(im)
        if orientation in (5, 6, 7, 8):
            target = target[::-1]
            original_shape = (width, height)

    work = _to_working_mode(im)
    if work.size != target:
        work = work.resize(target, Image.Resampling.BOX)
    if work.size != target:  # pragma: no cover - defensive
        raise ImageError("The image could not be decoded to the expected size.")
    return work, original_shape


# Start-of-frame markers: Huffman-coded (SOF0-3, SOF5-7) and arithmetic-coded (SOF9-11, SOF13-15).
_HUFFMAN_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7})
_ARITHMETIC_FRAMES = frozenset({0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
# Where a scan's entropy-coded data ends: 0xFF followed by a marker code other than a
# stuffed zero, a restart marker (RST0-7) or a fill byte.
_SCAN_END = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
_RESTART = re.compile(rb"\xff[\xd0-\xd7]")


def _check_jpeg_data(raw: bytes, width: int, height: int) -> None:
    """Refuse a JPEG whose coded data cannot cover the size its header claims.

    libjpeg decodes a scan that ends early as flat grey without an error, so a small photo
    whose header is edited to claim 8900 x 8900 would pass as a huge one. In a Huffman-coded
    JPEG every 8 x 8 block of every component costs at least one bit (its DC code, whose
    length is at least 1), so the coded bits must number at least the blocks the header
    claims. Arithmetic-coded JPEGs have no such bound (browsers do not show them either) and
    are refused.
    """
    frame, components, coded_bits = None, [], 0
    pos = 2  # after SOI
    while pos + 4 <= len(raw):
        if raw[pos] != 0xFF:
            break  # not a marker where one must be: the decoder will judge the file
        marker = raw[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker == 0xD9:  # EOI: later bytes (MPO's other pictures) belong to other images
            break
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:  # markers without a length
            pos += 2
            continue
        length = int.from_bytes(raw[pos + 2 : pos + 4], "big")
        segment = raw[pos + 4 : pos + 2 + length]
        if frame is None and (marker in _HUFFMAN_FRAMES or marker in _ARITHMETIC_FRAMES):
            frame = marker
            count = segment[5] if len(segment) > 5 else 0
            components = [
                (segment[7 + 3 * i] >> 4, segment[7 + 3 * i] & 15)
                for i in range(count)
                if len(segment) >= 9 + 3 * i
            ]
        pos += 2 + length
        if marker == 0xDA:  # start of scan: its entropy-coded data runs to the next marker
            end = _SCAN_END.search(raw, pos)
            stop = len(raw) if end is None else end.start()
            data = raw[pos:stop]
            coded_bits += 8 * (len(data) - data.count(b"\xff\x00"))
            coded_bits -= 16 * len(_RESTART.findall(data))
            pos = stop
    if frame in _ARITHMETIC_FRAMES:
        raise ImageError(
            "Arithmetic-coded JPEGs are not supported; save the photo as an ordinary JPEG "
            "or a PNG first."
        )
    if frame is None or not components or any(h < 1 or v < 1 for h, v in components):
        return  # no usable frame header: the decoder will refuse the file
    h_max = max(h for h, _ in components)
    v_max = max(v for _, v in components)
    # a component subsampled h_max / h times across holds ceil(width * h / h_max) columns
    blocks = sum(
        _ceil_div(_ceil_div(width * h, h_max), 8) * _ceil_div(_ceil_div(height * v, v_max), 8)
        for h, v in components
    )
    if coded_bits < blocks:
        raise ImageError(
            f"The file's header says the photo is {width} x {height} pixels, but the file holds "
            "the data of a far smaller one (it is damaged or its header was altered), so it "
            "cannot be used."
        )


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _jpeg_stores_rgb(im: Image.Image) -> bool:
    """Whether a 3-channel JPEG stores RGB rather than YCbCr, by libjpeg's own rule.

    libjpeg (``default_decompress_parms``) takes YCbCr when there is a JFIF marker,
    else follows an Adobe marker (transform 0 is RGB), else takes the component ids
    'R', 'G', 'B' as RGB. Only YCbCr files can be decoded to YCbCr.
    """
    if "jfif" in im.info:
        return False
    if "adobe_transform" in im.info:
        return im.info["adobe_transform"] == 0
    ids = tuple(layer[0] for layer in getattr(im, "layer", ()))
    return ids == (ord("R"), ord("G"), ord("B"))


def _to_working_mode(im: Image.Image) -> Image.Image:
    """Convert to one of L, RGB, RGBa/La (premultiplied alpha), F, YCbCr or RGBX for resizing.

    YCbCr and RGBX only come from JPEGs decoded for colour, and are kept so that the
    luma stays the one libjpeg decodes (Y, or the X band).
    """
    mode = im.mode
    if mode in ("YCbCr", "RGBX"):
        return im
    if mode.startswith("I;16"):
        arr = np.asarray(im).astype(np.float32) / np.float32(65535)
        return Image.fromarray(arr)
    if mode == "I":
        ints = np.asarray(im)
        lo, hi = int(ints.min()), int(ints.max())
        if lo >= 0 and hi <= 65535:
            arr = ints.astype(np.float32) / np.float32(65535)
        else:
            arr = _minmax(ints.astype(np.float32), lo, hi)
        return Image.fromarray(arr)
    if mode == "F":
        arr = np.asarray(im)
        if not np.isfinite(arr).all():
            raise ImageError("The image contains invalid pixel values (NaN or infinity).")
        lo, hi = float(arr.min()), float(arr.max())
        if lo >= 0 and hi <= 1:
            return im
        return Image.fromarray(_minmax(arr.astype(np.float32), lo, hi))

    has_alpha = mode in _ALPHA_MODES or im.info.get("transparency") is not None
    if has_alpha:
        if mode == "La":
            work = im
        else:
            rgba = im if mode in ("RGBA", "RGBa") else im.convert("RGBA")
            work = rgba if rgba.mode == "RGBa" else rgba.convert("RGBa")
        if work.getchannel(work.mode[-1]).getextrema()[1] == 0:
            raise ImageError("The image is fully transparent, so there is nothing to segment.")
        return work
    if mode in ("L", "RGB"):
        return im  # already a working mode: no full-size copy (convert would make one)
    if mode == "1":
        return im.convert("L")
    try:
        return im.convert("RGB")
    except Exception:
        raise ImageError(
            f"The image uses a colour format ({mode}) that is not supported."
        ) from None


def _minmax(arr: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Rescale ``arr`` (with minimum ``lo`` and maximum ``hi``) to [0, 1] in place.

    A constant array becomes all zeros.
    """
    if hi <= lo:
        arr[...] = 0
        return arr
    arr -= np.float32(lo)
    arr /= np.float32(hi - lo)
    return arr


def _to_luma(work: Image.Image) -> np.ndarray:
    """Turn a working-mode image into the final float64 array in [0, 1]."""
    arr = np.asarray(work, dtype=np.float64)
    mode = work.mode
    if mode == "F":
        out = arr
    elif mode == "L":
        out = arr / 255.0
    elif mode == "RGB":
        out = (arr / 255.0) @ _LUMA
    elif mode == "RGBa":
        # Premultiplied colour plus white times the uncovered fraction.
        out = (arr[..., :3] / 255.0) @ _LUMA + (1.0 - arr[..., 3] / 255.0)
    elif mode == "La":
        out = arr[..., 0] / 255.0 + (1.0 - arr[..., 1] / 255.0)
    elif mode == "YCbCr":
        out = arr[..., 0] / 255.0
    elif mode == "RGBX":
        out = arr[..., 3] / 255.0
    else:  # pragma: no cover - _to_working_mode only produces the modes above
        raise ImageError(f"The image uses a colour format ({mode}) that is not supported.")
    return np.ascontiguousarray(np.clip(out, 0.0, 1.0), dtype=np.float64)


def _to_rgb(work: Image.Image) -> np.ndarray:
    """Turn a working-mode image into ``[H, W, 3]`` float64 RGB in [0, 1]."""
    mode = work.mode
    if mode not in _COLOUR_MODES:
        # Gray sources (L, La, F): the luma in every channel.
        return np.repeat(_to_luma(work)[..., None], 3, axis=-1)
    arr = np.asarray(work, dtype=np.float64)
    if mode in ("RGB", "RGBX"):
        out = arr[..., :3] / 255.0
    elif mode == "RGBa":
        # Premultiplied colour plus white times the uncovered fraction, in each channel.
        out = arr[..., :3] / 255.0 + (1.0 - arr[..., 3:] / 255.0)
    else:  # YCbCr
        centred = arr - np.array([0.0, 128.0, 128.0])
        out = (centred @ _YCBCR_TO_RGB.T) / 255.0
    return np.ascontiguousarray(np.clip(out, 0.0, 1.0), dtype=np.float64)
