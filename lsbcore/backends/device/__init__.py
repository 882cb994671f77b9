"""Device kernels (Triton): the compiled CPU steps' rules, run on a CUDA GPU.

Each kernel reads the uniforms the CPU kernels read (``Sampler._draw_uniforms``, layout
``[steps, chains, k]``) and writes the same cached state in place, so one seed gives the same
chains on the ``"device"`` and ``"compiled"`` backends; the tests check it step by step under
Triton's CPU interpreter (``TRITON_INTERPRET=1``). Modules: ``checkerboard`` (block Gibbs, one
launch per colour), ``balanced`` (frozen locally balanced steps, one launch per chunk, for all
six samplers of the paper comparison: barker, sqrt, min, max, LSB 1 and LSB 2), ``mixture`` and
``network`` (LSB 1's and LSB 2's learning steps, one launch per chunk) with ``learning`` (the
objective, optimiser, draw and flip they share), ``primitives`` and ``cross_compile``.

Values that change from launch to launch (a chunk's length, the step counter, a colour, a
fresh-cache flag, LSB 2's number of pieces) are not specialised (``do_not_specialize``): Triton
would otherwise compile a kernel again whenever one of them turns 1 or a multiple of 16 (about a
minute a learning kernel on a GPU machine, mid-run), and the cache built ahead
(``tools/gpu/cache.py``) could not know which to build.

Triton is imported lazily: the library works without it, and ``resolve_backend`` says why the
``"device"`` backend cannot run where it cannot.
"""

from __future__ import annotations

import importlib.util
import os

import torch


def interpreted() -> bool:
    """Whether Triton runs its kernels in its CPU interpreter (the tests' setting)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def unavailable_reason(device: torch.device) -> str | None:
    """Why the device kernels cannot run on ``device`` (a sentence), or None when they can."""
    if importlib.util.find_spec("triton") is None:
        return (
            "the device backend needs Triton (shipped with torch's CUDA builds; "
            "`pip install triton` elsewhere); use backend='compiled' or 'torch'."
        )
    if device.type == "cuda" or (device.type == "cpu" and interpreted()):
        return None
    return (
        f"the device backend runs Triton kernels on a CUDA GPU, not on {device.type!r} "
        "(on the CPU only under Triton's interpreter, TRITON_INTERPRET=1, for tests); "
        "use backend='compiled' or 'torch' there."
    )


def next_power_of_2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()
