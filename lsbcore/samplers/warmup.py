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
3 x 3 grid network. Once the lattice's kernels are in, ``measure_rate`` times a short
checkerboard Gibbs run (``site_update_rate``), from which the app picks a photo's working
resolution.

The learning kernels' parallel twins (``chain_groups``) are not compiled here: compiling them,
launched or not, loads numba's OpenMP layer in this thread, and the paper page's runs then mixed
at 25-50% of the library's rate against 71-79% (``tools.live_speed``, BENCHMARKS.md). The app
compiles them in a child process after this (``twin_warmup``).

The lattice samplers' kernels come first (about 21 of the 69 s a fresh install takes on two
cores): ``ready("lattice")`` says they are, and the app's runs on a pairwise target (the paper
page) take them from then on; then the RBM's (``ready("rbm")``, the RBM pages' runs), then the
networks'.

``python -m lsbcore.samplers.warmup [lattice] [rbm] [network]`` compiles the named sections
(``make kernels`` runs two such commands at once before the test suite, and the twins by target
with ``python -m lsbcore.samplers.twin_warmup``).

The app calls it in a background thread (``compile_in_background``; it steps with torch until
``ready``); the tests and the photo and annealing benchmarks call it first. It drives the
samplers through the registry, so it sits on top of them: no sampler, target or backend imports
it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time

import torch

from lsbcore import interrupt
from lsbcore.backends import threads
from lsbcore.samplers import twin_warmup
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.samplers.twin_warmup import FACTOR_GRAPH_LEARNING, RBM_LEARNING
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.rbm import RBM

log = logging.getLogger(__name__)

#: whether ``compile_in_background`` compiles the twins in a child process (the test suite's
#: app tests turn it off: their processes' children only cost CPU, tests/conftest.py)
TWINS_IN_CHILD = True
_compiled = threading.Event()
# each section's kernels are compiled (``ready(section)``): a page's runs take them from then on
_sections = {"lattice": threading.Event(), "rbm": threading.Event(), "network": threading.Event()}
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


def measure_rate(side: int = 96, n_chains: int = 4, seconds: float = 0.3, clock=None) -> float:
    """Checkerboard Gibbs site updates per second on a ``side``-square lattice (compiled).

    The compiled steps are timed in this thread's CPU time: the machine's speed, not its load
    of the moment, which the pick would keep for the server's life. On the wall clock a thread
    running Python beside it (the server's, building a page) cut the rate about 10x: this
    thread waits for the interpreter lock after each kernel call (``tools.rate_under_load``,
    BENCHMARKS.md); a CI server's 80 x 60 photo got 32 px where an idle machine picks 80.
    Torch's steps may spread over its threads: the wall clock then. ``clock``: another timer
    (``tools.rate_under_load`` compares the wall clock's reading).
    """
    field = torch.linspace(-1, 1, side * side, dtype=torch.float64).view(side, side)
    sampler = make_sampler("checkerboard", IsingPosterior(field, 1.0), n_chains, device="cpu")
    sampler.step(2)
    # one chain group at this size (threads.chain_groups): the kernel runs in this thread
    if clock is None:
        clock = time.thread_time if sampler.backend == "compiled" else time.perf_counter
    sweeps, start, wall = 0, clock(), time.perf_counter()
    while clock() - start < seconds and time.perf_counter() - wall < 20 * seconds:
        sampler.step(5)
        sweeps += 5
    rate = sweeps * side * side * n_chains / (clock() - start)
    _rate[:] = [rate]
    return rate


def site_update_rate() -> float | None:
    """The measured rate (site updates per second), or None before the lattice's kernels are
    compiled (``measure_rate`` follows them)."""
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
# compiles the kernel for every fixed function (the function is a value it reads)
FACTOR_GRAPH_STEPS = ("gibbs", "metropolis", "barker")


def _warm_up() -> None:
    for name, compile_section in SECTIONS.items():  # the paper page's lattice first
        compile_section()
        _sections[name].set()  # that page's runs take the compiled steps from here
        if name == "lattice":  # a photo's pick needs only these; the others take a minute more
            measure_rate()


def _lattice_kernels() -> None:
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
    # the pairwise block moves (lsbcore.backends.block_kernels): "auto" picks them on the CPU
    for name, options in RBM_STEPS:
        if name in ("block-gibbs", "hamming-ball"):
            make_sampler(name, target, 2, device="cpu", backend="auto", **options).step(2)


def _rbm_kernels() -> None:
    """The RBM's compiled steps (``lsbcore.backends.rbm_kernels``) and learning steps
    (``rbm_learning_kernels``)."""
    rbm = RBM.random(6, 3)
    for name, options in RBM_STEPS:
        make_sampler(name, rbm, 2, device="cpu", backend="auto", **options).step(2)
    for name in RBM_LEARNING:
        make_sampler(name, rbm, 2, device="cpu", backend="auto").step(2, learn=True)


def _network_kernels() -> None:
    """The factor graph's compiled steps and learning steps (``factor_kernels``)."""
    network = grid_network(3, 0.5, 0)
    for name in FACTOR_GRAPH_STEPS:
        make_sampler(name, network, 2, device="cpu", backend="auto").step(2)
    for name in FACTOR_GRAPH_LEARNING:
        make_sampler(name, network, 2, device="cpu", backend="auto").step(2, learn=True)


#: the warm-up's sections, which ``python -m lsbcore.samplers.warmup`` compiles by name
SECTIONS = {"lattice": _lattice_kernels, "rbm": _rbm_kernels, "network": _network_kernels}


def compile_in_background() -> threading.Thread:
    """Start compiling in a daemon thread (the app's first frame never waits for it): the
    kernels, then their parallel twins in a child process (``twin_warmup``), the learning
    kernels in one chain group until those are in numba's disk cache."""
    twins = threading.Event()
    threads.hold_groups(twins)

    def compile_all() -> None:
        try:
            compile_kernels()
        except Exception:  # no page may wait for a warm-up that has stopped
            log.exception("the warm-up failed: each kernel compiles at its first use instead")
            _compiled.set()
        if TWINS_IN_CHILD:
            twin_warmup.compile_elsewhere(twins)
        else:
            twins.set()

    thread = threading.Thread(target=compile_all, name="lsb-kernels", daemon=True)
    thread.start()
    return thread


def ready(section: str | None = None) -> bool:
    """Whether the kernels are compiled (or this thread is compiling them); ``section``: only
    those of one of ``SECTIONS``, which the warm-up compiles in turn (on a fresh install on two
    cores the lattice's are ready after about 21 of its 69 s, the RBM's after about 60)."""
    return (
        _compiled.is_set()
        or getattr(_warming, "active", False)
        or (section is not None and _sections[section].is_set())
    )


def main(argv: list[str] | None = None) -> int:
    """Compile the named sections into numba's disk cache (all when none is named), saying how
    long each took: ``make test`` runs two at once before the suite, so that its two workers
    load the kernels instead of both compiling all of them."""
    parser = argparse.ArgumentParser(prog="python -m lsbcore.samplers.warmup")
    parser.add_argument(
        "sections", nargs="*", metavar="SECTION", help=f"among {', '.join(SECTIONS)} (default: all)"
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"no section {unknown[0]!r}: the sections are {', '.join(SECTIONS)}")
    torch.set_num_threads(1)
    for name in args.sections or SECTIONS:
        start = time.perf_counter()
        SECTIONS[name]()
        print(f"{name} kernels: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(interrupt.run_command(main, "python -m lsbcore.samplers.warmup"))
