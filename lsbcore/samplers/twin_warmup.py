"""The learning kernels' parallel twins compiled ahead, in a separate process.

A twin (``backends.chain_groups.parallel_twin``) compiles at its first call with several chain
groups: 10-11 s each on a fresh install (the RBM 16 x 16 page's first run waited 21 s for LSB 1's
and FLSB 1's), then loads from numba's disk cache in 0.04 s. The app's warm-up thread cannot
compile them itself: compiling one loads numba's OpenMP layer in that thread, and the paper
page then mixed at 25-50% of the library's rate (``warmup``). So the app compiles them in a
child process at low priority (``compile_elsewhere``), which shares only the disk cache with the
server, and holds every learning kernel to one group until it has (``threads.hold_groups``).

``compile_twins`` drives every learnable sampler's learning steps with two groups forced on
small targets, through the samplers as real runs call them, so each twin compiles for the
argument types real runs pass. ``python -m lsbcore.samplers.twin_warmup`` runs it.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import torch

from lsbcore import interrupt
from lsbcore.backends import chain_groups, threads
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.rbm import RBM

log = logging.getLogger(__name__)
#: Learnable samplers whose learning steps on an RBM compile ``rbm_learning_kernels``' two
#: kernels (each serves LSB 1 and LSB 2: the function's kind is a value it reads)
RBM_LEARNING = ("lsb1", "flsb1")
#: ... and on a factor graph ``factor_learning_kernels``' one (LSB 1, LSB 2, LSB 2' and FLSB,
#: the function's kind a value it reads), which a network page's first run would wait for
FACTOR_GRAPH_LEARNING = ("lsb1",)
ROOT = Path(__file__).resolve().parents[2]
#: a fresh install compiled the four twins in 44.7 s on two cores (BENCHMARKS.md)
TIMEOUT_S = 900
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent thread ends


#: the targets whose learning kernels have twins, which ``compile_twins`` takes by name
KINDS = ("lattice", "rbm", "network")


def compile_twins(kinds: tuple[str, ...] = KINDS) -> bool:
    """Every learning kernel's twin on the targets ``kinds`` (all by default) compiled for real
    runs' argument types (or loaded from numba's disk cache); False where this process has no
    safe parallel layer (no twin runs)."""
    if not threads.parallel_ready():
        return False
    samplers = []
    if "lattice" in kinds:
        lattice = IsingPosterior(torch.linspace(-1, 1, 9).view(3, 3), 0.5, "free")
        samplers += [
            make_sampler(name, lattice, 2, device="cpu", backend="auto")
            for name, spec in REGISTRY.items()
            if not (spec.needs_balancing or spec.batched_only)
        ]
    if "rbm" in kinds:
        rbm = RBM.random(6, 3)
        samplers += [
            make_sampler(name, rbm, 2, device="cpu", backend="auto") for name in RBM_LEARNING
        ]
    if "network" in kinds:
        network = grid_network(3, 0.5, 0)
        samplers += [
            make_sampler(name, network, 2, device="cpu", backend="auto")
            for name in FACTOR_GRAPH_LEARNING
        ]
    with threads.forced_groups(2):
        for sampler in samplers:
            if sampler.learnable:
                sampler.track_statistics()
                sampler.step(2, learn=True, trace=torch.zeros(2, 2, 5, dtype=torch.float64))
                sampler.step(2, learn=True)
    return True


def all_cached() -> bool:
    """Whether numba's disk cache holds every learning kernel's twin (``chain_groups``)."""
    from lsbcore.backends import (  # noqa: F401  (importing a kernel module makes its twins)
        factor_learning_kernels,
        learning_kernels,
        rbm_learning_kernels,
    )

    return all(chain_groups.in_disk_cache(twin) for twin in chain_groups.TWINS)


def compile_elsewhere(done: threading.Event, timeout_s: float = TIMEOUT_S) -> bool:
    """Set ``done`` once the twins are in numba's disk cache: at once where they are, else
    after ``compile_twins`` has run in a child process at low priority (or found that no twin
    can run here). On failure ``done`` stays unset: the kernels keep one group, slower on
    several cores and the same chains."""
    if all_cached():
        done.set()
        return True
    try:
        result = subprocess.run(
            [sys.executable, "-m", "lsbcore.samplers.twin_warmup", "--parent", str(os.getpid())],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        log.warning("the learning kernels keep one chain group: compiling their twins: %s", error)
        return False
    if result.returncode != 0:
        log.warning(
            "the learning kernels keep one chain group: compiling their twins ended with %d:\n%s",
            result.returncode, result.stderr[-2000:],
        )  # fmt: skip
        return False
    done.set()
    return True


def _end_with(parent: int) -> bool:
    """Have the kernel end this process when ``parent`` does (Linux; elsewhere it runs to its
    end): a server stopped mid-compile leaves nothing compiling. False if it is gone already."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    return os.getppid() == parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lsbcore.samplers.twin_warmup")
    parser.add_argument(
        "kinds", nargs="*", metavar="KIND", help=f"among {', '.join(KINDS)} (default: all)"
    )
    parser.add_argument("--parent", type=int, default=None, help="end when this process ends")
    args = parser.parse_args(argv)
    unknown = [kind for kind in args.kinds if kind not in KINDS]
    if unknown:
        parser.error(f"no kind {unknown[0]!r}: the kinds are {', '.join(KINDS)}")
    if args.parent is not None and not _end_with(args.parent):
        return 0
    if hasattr(os, "nice"):  # the server's live runs come first (set here: the server has threads)
        os.nice(10)
    torch.set_num_threads(1)
    compiled = compile_twins(tuple(args.kinds) or KINDS)
    print("twins compiled" if compiled else "no safe parallel layer: no twins")
    return 0


if __name__ == "__main__":
    sys.exit(interrupt.run_command(main, "python -m lsbcore.samplers.twin_warmup"))
