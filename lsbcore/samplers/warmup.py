"""Compiling the CPU kernels ahead of their first use, and measuring this machine's speed.

numba compiles a kernel for the argument types it is first called with (or loads it from its
on-disk cache, about 2 s for all of them). ``compile_kernels`` builds every registered pairwise
sampler that needs no loaded function on a 3x3 lattice with the backend ``"auto"`` picks on the
CPU (the compiled loops where numba is installed) and takes two steps with statistics tracked
and a trace, and two learning steps where it learns: the argument types real runs use. The
samplers on any target (``SamplerSpec.batched_only``) run torch steps only and are skipped,
except the RBM's compiled steps (``RBM_STEPS``, and ``RBM_LEARNING``'s learning steps), taken on
a 6-visible RBM (the block moves on the lattice too), and the factor
graph's (``FACTOR_GRAPH_STEPS``, and ``FACTOR_GRAPH_LEARNING``'s learning steps), taken on a
3 x 3 grid network. Then
``measure_rate`` times a short checkerboard Gibbs run (``site_update_rate``), from which the app
picks a photo's working resolution.

The app calls it in a background thread (``compile_in_background``; it steps with torch until
``ready``), which then compiles the learning kernels' parallel twins (``compile_parallel_twins``:
a page's first run with many chains would wait 10-11 s for each); the tests and the photo and
annealing benchmarks call ``compile_kernels`` first. It drives the
samplers through the registry, so it sits on top of them: no sampler, target or backend imports
it.
"""

from __future__ import annotations

import threading
import time

import torch

from lsbcore.backends import threads
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.rbm import RBM

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


# every compiled RBM step, by its block picker (random, sweep and shuffled blocks differ); one
# exact locally balanced sampler compiles its kernel for every function (a value it reads)
RBM_STEPS = (
    ("gwg", {}), ("gibbs", {}), ("metropolis", {}), ("barker", {}),
    *(("block-gibbs", {"block_size": 2, "blocks": b}) for b in ("random", "sweep", "shuffled")),
    *(("hamming-ball", {"block_size": 3, "radius": 1, "blocks": b})
      for b in ("random", "sweep", "shuffled")),
)  # fmt: skip


# every compiled factor-graph step (lsbcore.backends.factor_kernels): one balanced sampler
#: Learnable samplers whose learning steps on an RBM compile ``rbm_learning_kernels``' two
#: kernels (each serves LSB 1 and LSB 2: the function's kind is a value it reads)
RBM_LEARNING = ("lsb1", "flsb1")
# compiles the kernel for every fixed function (the function is a value it reads)
FACTOR_GRAPH_STEPS = ("gibbs", "metropolis", "barker")
#: ... and the learning steps' kernel (``factor_learning_kernels``: LSB 1, LSB 2, LSB 2' and
#: FLSB, the function's kind a value it reads), which a network page's first run would wait for
FACTOR_GRAPH_LEARNING = ("lsb1",)


def _warm_up() -> None:
    target = IsingPosterior(torch.linspace(-1, 1, 9).view(3, 3), 0.5, "free")
    for name, spec in REGISTRY.items():
        if spec.needs_balancing or spec.batched_only:  # torch steps only: nothing to compile
            continue
        # "auto" on the CPU: the compiled loops where numba is installed, else torch
        sampler = make_sampler(name, target, 2, device="cpu", backend="auto")
        sampler.track_statistics()
        if sampler.learnable:
            sampler.step(2, learn=True, trace=torch.zeros(2, 2, 5, dtype=torch.float64))
        sampler.step(2, trace=torch.zeros(2, 2, 5, dtype=torch.float64))
    # the RBM's compiled steps (lsbcore.backends.rbm_kernels) and the pairwise block moves
    # (lsbcore.backends.block_kernels): "auto" picks them on the CPU
    rbm = RBM.random(6, 3)
    for name, options in RBM_STEPS:
        make_sampler(name, rbm, 2, device="cpu", backend="auto", **options).step(2)
        if name in ("block-gibbs", "hamming-ball"):
            make_sampler(name, target, 2, device="cpu", backend="auto", **options).step(2)
    for name in RBM_LEARNING:  # their learning steps (lsbcore.backends.rbm_learning_kernels)
        make_sampler(name, rbm, 2, device="cpu", backend="auto").step(2, learn=True)
    network = grid_network(3, 0.5, 0)
    for name in FACTOR_GRAPH_STEPS:
        make_sampler(name, network, 2, device="cpu", backend="auto").step(2)
    for name in FACTOR_GRAPH_LEARNING:
        make_sampler(name, network, 2, device="cpu", backend="auto").step(2, learn=True)


def compile_parallel_twins() -> None:
    """Compile (or load) the learning kernels' parallel twins (``backends.chain_groups``), which
    steps take from a few chains of a large model: LSB 2's on a lattice, the RBM's two and the
    factor graph's, on tiny targets in two forced groups. A fresh install's RBM 16 x 16 page
    (8 chains) waited 11.2 s for LSB 1's and 9.8 s for FLSB 1's at its first learning step, a
    network page with 6 chains or more 11.4 s; from numba's cache each loads in about 0.04 s.
    Where numba has no thread-safe layer the steps never take them: nothing to do."""
    if not threads.parallel_ready():
        return
    with threads.forced_groups(2):
        lattice = IsingPosterior(torch.linspace(-1, 1, 9).view(3, 3), 0.5, "free")
        make_sampler("lsb2", lattice, 2, device="cpu", backend="auto").step(2, learn=True)
        rbm, network = RBM.random(6, 3), grid_network(3, 0.5, 0)
        for name in RBM_LEARNING:
            make_sampler(name, rbm, 2, device="cpu", backend="auto").step(2, learn=True)
        for name in FACTOR_GRAPH_LEARNING:
            make_sampler(name, network, 2, device="cpu", backend="auto").step(2, learn=True)


def _warm_up_all() -> None:
    compile_kernels()
    compile_parallel_twins()  # after ``ready``: the serial kernels serve runs meanwhile


def compile_in_background() -> threading.Thread:
    """Start compiling in a daemon thread (the app's first frame never waits for it)."""
    thread = threading.Thread(target=_warm_up_all, name="lsb-kernels", daemon=True)
    thread.start()
    return thread


def ready() -> bool:
    """Whether the kernels are compiled (or this thread is compiling them)."""
    return _compiled.is_set() or getattr(_warming, "active", False)
