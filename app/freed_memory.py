"""Hand memory that Python has freed back to the operating system.

A photo's decode allocates tens of megabytes for a moment (the reduced-scale JPEG, its float
copies) in the thread that runs the visitor's script. glibc keeps what such a thread frees in
that thread's own arena for later use, and each session's script runs in threads of its own, so
a server with eight photo pages held eight such reserves: about 100 MB a page for an 8,900 px
photo whose live state is a quarter of it (``python -m tools.page_memory``). ``malloc_trim``
returns the free pages of every arena to the system; it takes milliseconds, so it runs after
the large, rare work (a new upload decoded), not on every rerun.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)


@functools.cache
def _trim():
    """glibc's ``malloc_trim``, or None where the C library is another (macOS, musl)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release() -> bool:
    """Return freed heap pages to the system; True where the C library can (glibc)."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
