"""What a fresh process sees after the app's warm-up (``samplers.warmup.compile_kernels``)."""

from __future__ import annotations

import subprocess
import sys


def after_warm_up(probe: str) -> str:
    """The last line that ``probe`` (Python statements) prints in a fresh process, run after the
    warm-up has compiled the kernels, where nothing else has run them."""
    code = f"from lsbcore.samplers import warmup; warmup.compile_kernels(); {probe}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]
