"""Compiling the CPU kernels: every registered sampler takes a few steps on a tiny target.

numba compiles a kernel for the argument types it is first called with; running each sampler
(frozen and, where it learns, learning) on a 3x3 lattice reaches every kernel with the types
real runs use. Compiled code is cached on disk, so later processes load it in about 2 s. Then
a short block Gibbs run measures this machine's speed (``site_update_rate``), from which the
app picks a photo's working resolution.
It drives the samplers, so it sits on top of them: nothing in ``lsbcore`` imports it (the
app, the tests and the benchmark call it), and ``lsbcore.backends`` imports nothing of
``lsbcore``.
"""

from __future__ import annotations

import threading
import time

import torch

from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.targets.ising import IsingPosterior

_compiled = threading.Event()
_lock = threading.Lock()
_warming = threading.local()  # set in the thread that runs the warm-up
_rate: list[float] = []  # site updates per second of checkerboard Gibbs, once measured


def compile_kernels() -> None:
    """Compile (or load from numba's on-disk cache) every kernel; idempotent, thread-safe."""
    if ready():
        return
    with _lock:
        if _compiled.is_set():
            return
        _warming.active = True
        try:
            _warm_up()
        finally:
            _warming.active = False
        _compiled.set()
    measure_rate()


def measure_rate(side: int = 96, n_chains: int = 4, seconds: float = 0.3) -> float:
    """Checkerboard Gibbs site updates per second on a ``side``-square lattice (compiled)."""
    field = torch.linspace(-1, 1, side * side, dtype=torch.float64).view(side, side)
    sampler = make_sampler("checkerboard", IsingPosterior(field, 1.0), n_chains, device="cpu")
    sampler.step(2)
    sweeps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sampler.step(5)
        sweeps += 5
    rate = sweeps * side * side * n_chains / (time.perf_counter() - start)
    _rate[:] = [rate]
    return rate


def site_update_rate() -> float | None:
    """The measured rate (site updates per second), or None before ``compile_kernels`` ends."""
    return _rate[0] if _rate else None


def _warm_up() -> None:
    target = IsingPosterior(torch.linspace(-1, 1, 9).view(3, 3), 0.5, "free")
    for name, spec in REGISTRY.items():
        if spec.needs_balancing:
            continue
        sampler = make_sampler(name, target, 2, device="cpu", backend="compiled")
        sampler.track_statistics()
        if sampler.learnable:
            sampler.step(2, learn=True, trace=torch.zeros(2, 2, 5, dtype=torch.float64))
        sampler.step(2, trace=torch.zeros(2, 2, 5, dtype=torch.float64))


def compile_in_background() -> threading.Thread:
    """Start compiling in a daemon thread (the app's first frame never waits for it)."""
    thread = threading.Thread(target=compile_kernels, name="lsb-kernels", daemon=True)
    thread.start()
    return thread


def ready() -> bool:
    """Whether the kernels are compiled (or this thread is compiling them)."""
    return _compiled.is_set() or getattr(_warming, "active", False)
