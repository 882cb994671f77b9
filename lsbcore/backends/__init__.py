"""Where a step runs: on which device, and on which backend there.

Backends: ``"torch"`` (any device), ``"compiled"`` (numba loops on the CPU, ``kernels`` and
``learning_kernels``) or ``"device"`` (Triton kernels on a CUDA GPU, ``device``; samplers without
one take torch steps). A sampler takes the device and the backend as arguments; ``"auto"`` picks
the compiled loops on the CPU when numba is installed, else torch; on CUDA it picks torch until
the device kernels are measured faster on a real GPU (``AUTO_PICKS_CUDA``, the one flag that
also lets ``device="auto"`` choose the GPU), then ``"device"``.

All three backends keep the same cached state and invariants and draw their uniforms in the same
layout, so one seed gives the same chains on any of them.
"""

from __future__ import annotations

import importlib.util

import torch

from lsbcore.backends.device import unavailable_reason
from lsbcore.backends.kernel_cache import drop_stale

drop_stale()  # before any kernel module is compiled or loaded from numba's cache

BACKENDS = ("auto", "compiled", "torch", "device")

# Whether "auto" may pick CUDA (``resolve_device``), and the device kernels there
# (``resolve_backend``). Not until the device kernels have been measured faster than the
# compiled CPU steps on a real GPU: the torch steps a GPU runs issue ~290 kernel launches and a
# dozen host syncs per iteration of the paper comparison, an estimated ~600 iterations/s on an
# H100 against ~9,000 for the compiled CPU steps on two cores; the device kernels
# (backend="device": block Gibbs, the six paper samplers' frozen and learning steps, one launch
# per chunk) are proven on the CPU and not measured yet (BENCHMARKS.md, GPU). "cuda" stays an
# explicit choice.
AUTO_PICKS_CUDA = False
AUTO_NOTE = (
    "auto runs on the CPU: its compiled steps are faster than the GPU's torch steps until "
    "device kernels are measured faster on a real GPU; choose cuda to sample on the GPU."
)


def resolve_device(device) -> torch.device:
    """``None`` or ``"auto"``: the faster path, the CPU until ``AUTO_PICKS_CUDA`` (see there).
    ``"cuda"`` without a GPU is an error."""
    if device is None or device == "auto":
        cuda = AUTO_PICKS_CUDA and torch.cuda.is_available()
        return torch.device("cuda" if cuda else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'cpu', 'cuda' or None, got {device!r}.") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but no CUDA GPU is available; use 'cpu'.")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}.")
    return device


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
        measured = AUTO_PICKS_CUDA and unavailable_reason(device) is None
        return "device" if measured else "torch"
    if backend == "device":
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
