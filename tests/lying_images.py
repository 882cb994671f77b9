"""Image files whose header claims another size than their data holds, made in the tests.

A small JPEG or PNG is encoded with Pillow, then its size fields are edited: the JPEG's
start-of-frame marker (SOF0, or SOF2 for a progressive file), the PNG's IHDR chunk with its
CRC recomputed, so that only the decoded data can tell that the header lies.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
from PIL import Image

_SOF_MARKERS = (0xC0, 0xC1, 0xC2)


def small_jpeg(side: int = 64, **options) -> bytes:
    """A ``side`` x ``side`` colour JPEG of random pixels (options go to Pillow's encoder)."""
    pixels = (np.random.default_rng(0).random((side, side, 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90, **options)
    return buffer.getvalue()


def with_jpeg_size(data: bytes, width: int, height: int) -> bytes:
    """``data`` with the size in its start-of-frame marker replaced by ``width`` x ``height``."""
    pos = 2  # after SOI
    while pos < len(data):
        marker = data[pos + 1]
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if marker in _SOF_MARKERS:  # FF Cn, length, precision, height, width
            return data[: pos + 5] + struct.pack(">HH", height, width) + data[pos + 9 :]
        pos += 2 + length
    raise ValueError("no start-of-frame marker")


def small_png(side: int = 64) -> bytes:
    pixels = (np.random.default_rng(1).random((side, side, 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def with_png_size(data: bytes, width: int, height: int) -> bytes:
    """``data`` with the size in its IHDR chunk replaced, and the chunk's CRC made right."""
    start = 8 + 4  # signature, then the chunk's length
    assert data[start : start + 4] == b"IHDR"
    body = b"IHDR" + struct.pack(">II", width, height) + data[start + 12 : start + 17]
    crc = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return data[:start] + body + crc + data[start + 21 :]
