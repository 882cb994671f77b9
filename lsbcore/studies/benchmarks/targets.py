"""Speed on targets beyond pairwise: ``python -m lsbcore.studies.benchmarks.samplers --target
rbm|factor-graph``.

Also ``python -m lsbcore.studies.benchmarks.targets --target rbm [--samplers gwg,pas]``. Every
figure is the
steps per second of one sampler (a step advances every chain once), the best of ``--repeats``
timed runs after a warm-up, with what one step costs in target evaluations (``docs/method.md``).
The samplers run with ``--backend`` (default ``auto``: on an RBM on the CPU, the compiled steps
of ``lsbcore.backends.rbm_kernels`` where a sampler has them, else batched torch operations;
``torch``: torch operations only, on the CPU or on CUDA); each row names the steps that ran.

- ``rbm``: an RBM with 100 visible and 25 hidden units in the public Gibbs-with-Gradients
  code's "random" setting, 100 chains: ``gwg``, ``block-gibbs`` (k = 2) and ``hamming-ball``
  (10, 1), which issue 23 compares with that code run side by side (``tools/gwg_reference.py``),
  and ``flsb2``, ``pas``, ``dmala``, ``sqrt``, ``gibbs`` for context; then RBM 784 x 500 with
  random weights of the same law (the public code trains that one on MNIST, which is not
  shipped; the cost of a step does not depend on the weights' values), 100 chains: ``gwg``,
  ``flsb1``, ``flsb2``, ``pas``, and the learning steps of FLSB 1/2 and LSB 1/2.
- ``grid-64``: single-site samplers (Gibbs, Metropolis, Barker, sqrt, min, max) on a 64 x 64 grid
  network and on an Ising posterior of the same size (pairwise, compiled steps on the CPU),
  8 chains each: how far the factor graph's steps are from the pairwise ones (issue 45).
- ``photo-blocks``: block Gibbs (k = 4, 8) and the Hamming ball sampler (10, 1) on the
  256 x 256 photo posterior of ``assets/camera.png`` (``photo_target``), 4 chains, beside
  checkerboard Gibbs and two single-site samplers on it: the block moves' site updates per
  second against the checkerboard's (issue 45).
- ``factor-graph``: a 10 x 10 grid network like the LSB paper's MN 1 (``grid_network``), 30
  chains: Gibbs, block Gibbs, the Hamming ball sampler, the locally balanced samplers and the
  gradient ones, where the target offers a gradient, and the learning steps of FLSB 1/2 and
  LSB 1/2.

A sampler that is not registered, or that the registry refuses for the target, shows its
sentence instead of a number.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from lsbcore import interrupt
from lsbcore.samplers.base import resolve_device
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.registry import make_sampler
from lsbcore.segmentation.contrast import contrast_scale
from lsbcore.segmentation.data_term import fit_data_term
from lsbcore.segmentation.segment import read_photo
from lsbcore.targets.base import Target
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.rbm import RBM
from lsbcore.timing import per_second

#: The grid network of the factor-graph figures: like the paper's MN 1 (100 variables with
#: near-deterministic conditional tables); half the variables' tables near-deterministic, as
#: the least deterministic of the UAI grids (50, 75 and 90 %). A step's cost does not depend on it.
GRID_SIDE = 10
GRID_DETERMINISM = 0.5
#: The large grid network of ``--target grid-64`` (issue 45), beside an Ising posterior of the
#: same size, whose pairwise compiled steps are the speed the single-site samplers aim at
LARGE_SIDE = 64


@dataclass(frozen=True)
class Run:
    """One sampler with its options, as ``make_sampler(name, ..., **options)`` takes them;
    ``steps_share`` scales the workload's steps for a sampler whose steps are slow; ``learn``
    times its learning (burn-in) steps."""

    sampler: str
    options: tuple[tuple[str, object], ...] = ()
    steps_share: float = 1.0
    learn: bool = False

    @property
    def label(self) -> str:
        words = [self.sampler, *(f"{k}={v}" for k, v in self.options)]
        return " ".join(words + (["(learning)"] if self.learn else []))


@dataclass(frozen=True)
class Workload:
    """A target, a number of chains and the samplers timed on it.

    ``steps_share`` scales ``--steps`` for targets whose steps are slow.
    """

    title: str
    build: Callable[[], Target]
    n_chains: int
    runs: tuple[Run, ...]
    steps_share: float = 1.0


def rbm_target(n_visible: int, n_hidden: int, seed: int = 0) -> RBM:
    """An RBM in the public GWG code's "random" setting (``RBM.random``: weights N(0, 0.05),
    both biases N(0, 1)), drawn from ``seed``."""
    return RBM.random(n_visible, n_hidden, seed)


def grid_target(side: int = GRID_SIDE, seed: int = 0) -> FactorGraph:
    return grid_network(side, GRID_DETERMINISM, seed)


def ising_target(side: int, seed: int = 0) -> IsingPosterior:
    """An Ising posterior on a ``side x side`` lattice with standard normal fields."""
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.randn(side, side, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, lam=1.0, boundary="free")


PHOTO = Path(__file__).resolve().parents[3] / "assets" / "camera.png"
#: The photo posterior's lattice: the longer side of ``PHOTO`` scaled to this (issue 45's goal)
PHOTO_SIDE = 256


def photo_target(side: int = PHOTO_SIDE) -> IsingPosterior:
    """The Ising posterior ``segment`` samples for ``PHOTO`` at ``side`` (lambda 1, the fitted
    two-class data term, contrast-sensitive edges: every edge its own weight)."""
    photo = read_photo(PHOTO, side)
    data = fit_data_term(photo)
    return IsingPosterior(data.alpha, 1.0, edge_scale=contrast_scale(photo.rgb))


SINGLE_SITE = ("gibbs", "metropolis", "barker", "sqrt", "min", "max")


BALANCED = ("barker", "sqrt", "min", "max", "lsb1", "lsb2")
LEARNED = ("flsb1", "flsb2", "lsb1", "lsb2")  # their learning steps (burn-in) timed too
WORKLOADS: dict[str, tuple[Workload, ...]] = {
    "rbm": (
        Workload(
            "RBM 100 x 25, random weights, 100 chains",
            lambda: rbm_target(100, 25),
            100,
            (
                Run("gwg"),
                Run("block-gibbs", (("block_size", 2),)),
                Run("hamming-ball", (("block_size", 10), ("radius", 1))),
                Run("flsb1"),
                Run("flsb2"),
                Run("pas"),
                Run("dmala"),
                Run("sqrt", steps_share=0.1),  # exact ratios: n evaluations a step
                Run("gibbs"),
                Run("metropolis"),
                *(Run(name, steps_share=0.1) for name in ("barker", "lsb1", "lsb2")),
                *(Run(name, steps_share=0.05, learn=True) for name in LEARNED),
            ),
        ),
        Workload(
            "RBM 784 x 500, random weights, 100 chains",
            lambda: rbm_target(784, 500),
            100,
            (
                Run("gwg"),
                Run("flsb1"),
                Run("flsb2"),
                Run("pas"),
                Run("lsb1", steps_share=0.1),  # exact ratios: every ratio at x', n m a step
                *(Run(name, steps_share=0.1, learn=True) for name in ("flsb1", "flsb2")),
                *(Run(name, steps_share=0.1, learn=True) for name in ("lsb1", "lsb2")),
            ),
            steps_share=0.05,
        ),
    ),
    "photo-blocks": (
        Workload(
            f"photo posterior {PHOTO_SIDE} x {PHOTO_SIDE} (camera.png), 4 chains",
            photo_target,
            4,
            (
                Run("checkerboard", steps_share=0.01),  # a step is a sweep
                Run("gibbs"),  # single sites: their resyncs are a large lattice's cost
                Run("barker"),
                Run("block-gibbs", (("block_size", 4),)),
                Run("block-gibbs", (("block_size", 8),)),
                Run("hamming-ball", (("block_size", 10), ("radius", 1))),
            ),
        ),
    ),
    "factor-graph": (
        Workload(
            f"grid network {GRID_SIDE} x {GRID_SIDE} (like MN 1), 30 chains",
            grid_target,
            30,
            (
                Run("gibbs"),
                Run("metropolis"),
                Run("block-gibbs", (("block_size", 2),)),
                Run("block-gibbs", (("block_size", 10),), steps_share=0.01),  # 1,024 states
                # the paper's Gibbs-10: a sweep of a shuffled order, every subset scored
                Run("block-gibbs", (("block_size", 10), ("blocks", "shuffled")), steps_share=0.01),
                Run("hamming-ball", (("block_size", 10), ("radius", 1))),
                *(Run(name) for name in BALANCED),
                Run("gwg"),
                Run("flsb1"),
                Run("flsb2"),
                *(Run(name, steps_share=0.1, learn=True) for name in LEARNED),
            ),
        ),
    ),
    "grid-64": (
        Workload(
            f"grid network {LARGE_SIDE} x {LARGE_SIDE}, 8 chains",
            lambda: grid_target(LARGE_SIDE),
            8,
            tuple(Run(name) for name in SINGLE_SITE),
            steps_share=50.0,  # compiled steps, as the lattice's (--backend torch: shorten --steps)
        ),
        Workload(
            f"Ising posterior {LARGE_SIDE} x {LARGE_SIDE} (pairwise), 8 chains",
            lambda: ising_target(LARGE_SIDE),
            8,
            tuple(Run(name) for name in SINGLE_SITE),
            steps_share=50.0,  # compiled steps: long enough runs to time
        ),
    ),
}
TARGETS = tuple(WORKLOADS)


def steps_per_second(sampler, steps: int, repeats: int, learn: bool = False) -> float:
    """``sampler.step`` (learning steps with ``learn``) timed by the benchmarks' rule
    (``lsbcore.timing.per_second``)."""
    advance = functools.partial(sampler.step, learn=True) if learn else sampler.step
    return per_second(advance, steps, repeats)


def measure(
    workload: Workload, device, steps: int, repeats: int, backend: str = "auto"
) -> dict[str, dict]:
    """``{label: {"steps_per_second", "evals_per_step", "backend"}}`` for each run of
    ``workload``, or ``{label: {"refused": sentence}}`` where the sampler or the target cannot
    run (or cannot run on ``backend``)."""
    target = workload.build()
    out = {}
    for run in workload.runs:
        try:
            sampler = make_sampler(
                run.sampler, target, workload.n_chains, seed=0, device=device, backend=backend,
                **dict(run.options),
            )  # fmt: skip
        except ValueError as err:  # not registered, refused for this target, or a bad option
            out[run.label] = {"refused": str(err)}
            continue
        run_steps = max(2, round(steps * workload.steps_share * run.steps_share))
        learning = run.learn and isinstance(sampler, BatchedSampler)
        # a batched sampler's learning steps are torch steps unless it has a learning kernel
        # (LSB 1/2 and FLSB 1/2 on an RBM or a factor graph: ``learns_compiled``)
        compiled = getattr(sampler, "learns_compiled", lambda: False)()
        out[run.label] = {
            "steps_per_second": steps_per_second(sampler, run_steps, repeats, run.learn),
            "evals_per_step": sampler.evals_per_step,
            "sites_per_step": workload.n_chains * sampler.sites_per_step,
            "backend": ("compiled" if compiled else "torch") if learning else sampler.backend,
        }
    return out


def run(
    kind: str, device=None, repeats: int = 5, steps: int = 2000, samplers=None, backend="auto"
) -> dict[str, dict]:
    """The figures of one target kind (``TARGETS``), ``{workload title: measure(...)}``;
    ``samplers``: only these sampler names (all when None)."""
    if kind not in WORKLOADS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {kind!r}.")
    device = resolve_device(device)
    out = {}
    for workload in WORKLOADS[kind]:
        if samplers is not None:
            runs = tuple(r for r in workload.runs if r.sampler in samplers)
            if not runs:
                continue
            workload = Workload(
                workload.title, workload.build, workload.n_chains, runs, workload.steps_share
            )
        out[workload.title] = measure(workload, device, steps, repeats, backend)
    return out


def machine(device, backend: str = "auto") -> dict:
    """What the figures were measured on."""
    device = resolve_device(device)
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "backend": backend,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {platform.processor() or 'unknown CPU'}",
        "load average (1 min)": os.getloadavg()[0],
    }


def table(results: dict[str, dict]) -> str:
    """The figures as text: per workload, one row per sampler."""
    lines = []
    for title, rows in results.items():
        lines.append(
            f"{title:58s} {'steps/s':>10s} {'site upd/s':>11s} {'evals/step':>11s} {'steps':>9s}"
        )
        for label, row in rows.items():
            if "refused" in row:
                lines.append(f"  {label:56s} {row['refused']}")
            else:
                lines.append(
                    f"  {label:56s} {row['steps_per_second']:10.0f} "
                    f"{row['steps_per_second'] * row['sites_per_step']:11.3g} "
                    f"{row['evals_per_step']:11,d} {row['backend']:>9s}"
                )
    return "\n".join(lines)


def report(
    kind: str,
    device=None,
    repeats: int = 5,
    steps: int = 2000,
    as_json=False,
    samplers=None,
    backend: str = "auto",
) -> int:
    """Measure and print (a table, or one JSON object with ``info``); the command's body."""
    if resolve_device(device).type == "cpu" and backend != "torch":
        from lsbcore.samplers import warmup

        warmup.compile_kernels()  # once, before any timing, as the app and the tests do
    results = run(kind, device, repeats, steps, samplers, backend)
    info = machine(device, backend)
    if as_json:
        json.dump({"info": info, **results}, sys.stdout, indent=2)
        print()
    else:
        print(
            f"device {info['device']}, backend {info['backend']}, torch {info['torch']}, "
            f"{info['threads']} thread(s), load {info['load average (1 min)']:.2f}"
        )
        print(table(results))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=TARGETS, default="rbm")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: auto, the CPU)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--samplers", default=None, help="comma-separated names (default: all)")
    parser.add_argument("--backend", default="auto", choices=("auto", "torch", "compiled"))
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    if args.repeats < 1 or args.steps < 10 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1 and --steps at least 10.")
    torch.set_num_threads(args.threads)
    samplers = None if args.samplers is None else tuple(args.samplers.split(","))
    return report(args.target, device, args.repeats, args.steps, args.json, samplers, args.backend)


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.targets"))
