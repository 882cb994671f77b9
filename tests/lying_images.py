"""Image files whose header claims another size than their data holds, made in the tests.

A small JPEG or PNG is encoded with Pillow, then its size fields are edited: the JPEG's
start-of-frame marker (SOF0, or SOF2 for a progressive file), the PNG's IHDR chunk with its
CRC recomputed, so that only the decoded data can tell that the header lies. The builders live
with the hostile-file corpus (``lsbcore.studies.benchmarks.hostile_files``).
"""

from lsbcore.studies.benchmarks.hostile_files import (
    small_jpeg,
    small_png,
    with_jpeg_size,
    with_png_size,
)

__all__ = ["small_jpeg", "small_png", "with_jpeg_size", "with_png_size"]
