"""Where a step runs: ``"torch"`` (any device), ``"compiled"`` (numba loops on the CPU,
``kernels`` and ``learning_kernels``) or ``"device"`` (Triton kernels on a CUDA GPU, ``device``;
samplers without one take torch steps). A sampler takes the backend as an argument; ``"auto"``
picks the compiled loops on the CPU when numba is installed, else torch; on CUDA it picks torch
until the device kernels are measured faster on a real GPU (``samplers.base.AUTO_PICKS_CUDA``,
the one flag that also lets ``device="auto"`` choose the GPU), then ``"device"``.

Both backends keep the same cached state and invariants and draw their uniforms in the same
layout, so one seed gives the same chains on either.
"""

from __future__ import annotations

import importlib.util

import torch

BACKENDS = ("auto", "compiled", "torch", "device")


def compiled_available() -> bool:
    """Whether numba (the compiled backend's compiler) is installed."""
    return importlib.util.find_spec("numba") is not None


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"compiled"``, ``"torch"`` or ``"device"`` for a sampler on ``device``; a clear error
    where the requested backend cannot run there."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    if backend == "auto":
        if device.type == "cpu":
            return "compiled" if compiled_available() else "torch"
        from lsbcore.backends.device import unavailable_reason
        from lsbcore.samplers import base  # the flag lives with device="auto"'s

        measured = base.AUTO_PICKS_CUDA and unavailable_reason(device) is None
        return "device" if measured else "torch"
    if backend == "device":
        from lsbcore.backends.device import unavailable_reason

        reason = unavailable_reason(device)
        if reason is not None:
            raise ValueError(reason)
    if backend == "compiled":
        if device.type != "cpu":
            raise ValueError(
                f"the compiled backend runs on the CPU only, not on {device.type!r}; "
                "use backend='torch' or 'auto' there."
            )
        if not compiled_available():
            raise ValueError("the compiled backend needs numba; install it or use 'torch'.")
    return backend
