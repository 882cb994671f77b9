"""Numba's on-disk cache of the compiled kernels, kept in step with their sources.

numba keys a cached kernel by its own file (its modification time and size) only. A kernel that
calls or inlines a helper from another file of this package (``rbm_kernels`` reads
``kernels.log_g``) keeps the helper's old machine code after the helper changes: a new kind of
balancing function was silently computed as another. So the cache carries a digest of every
kernel source (``DIGEST_FILE``); at import, a cache whose digest differs is emptied, and numba
compiles afresh (about 20 s once).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / "__pycache__"
DIGEST_FILE = CACHE / "kernel-sources.sha256"
NUMBA_FILES = ("*.nbi", "*.nbc")  # numba's index and data files


def sources_digest(folder: Path = HERE) -> str:
    """SHA-256 of the package's Python sources, file names and contents in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def drop_stale(cache: Path = CACHE, folder: Path = HERE) -> bool:
    """Empty ``cache`` of numba's files when the sources changed since they were compiled;
    True when it did. A cache that cannot be read or written is left to numba (which then
    compiles in memory)."""
    digest = sources_digest(folder)
    stamp = cache / DIGEST_FILE.name
    try:
        if stamp.read_text().strip() == digest:
            return False
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for pattern in NUMBA_FILES:
            for path in cache.glob(pattern):
                path.unlink(missing_ok=True)
        stamp.write_text(digest + "\n")
    except OSError:
        return False
    return True
