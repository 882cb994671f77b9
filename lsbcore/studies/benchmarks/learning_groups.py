"""Where a learning step's chains pay for running in groups on the cores: ``python -m
lsbcore.studies.benchmarks.learning_groups [--targets rbm,lattice] [--chains 2,4,8]
[--samplers lsb1,flsb1,lsb2]``.

For each target (``rbm``: the shipped digits 8 x 8 and 16 x 16 RBMs, the 100 x 25 of the
benchmarks, a small 20 x 10; ``lattice``: Ising posteriors of 8 x 8 to 256 x 256 sites, LSB 2
only, the one learning step there with groups) and chain count, one sampler's learning steps per
second with its chains in one group (the serial kernel) and in two (the parallel twin,
``threads.forced_groups``), each the best of ``--rounds`` alternations of both, three timed
calls a round (a group count measured right after the other reads the same machine), and the
groups ``learning_groups`` picks there.
"""

from __future__ import annotations

import argparse
import time

import torch

from lsbcore import interrupt
from lsbcore.backends import threads
from lsbcore.rbm.models import load_model
from lsbcore.samplers import warmup
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.rbm import RBM

MODELS = {
    "digits 8 x 8": lambda: load_model("digits-8x8"),
    "digits 16 x 16": lambda: load_model("digits-16x16"),
    "random 100 x 25": lambda: RBM.random(100, 25, seed=0),
    "random 20 x 10": lambda: RBM.random(20, 10, seed=1, scale=0.8),
}
LATTICE_SIDES = (8, 16, 30, 64, 256)


def ising(side: int) -> IsingPosterior:
    """An Ising posterior on a ``side``-square lattice with a random field (lambda 0.5)."""
    field = torch.randn(side, side, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return IsingPosterior(field, 0.5)


def targets(kinds: list[str], samplers: list[str]) -> list[tuple[str, object, list[str]]]:
    """(label, target builder, samplers) of the asked kinds, in order."""
    rows = []
    if "rbm" in kinds:
        rows += [(label, build, samplers) for label, build in MODELS.items()]
    if "lattice" in kinds:
        rows += [(f"Ising {d} x {d}", lambda d=d: ising(d), ["lsb2"]) for d in LATTICE_SIDES]
    return rows


def steps_per_second(sampler, groups: int, steps: int) -> float:
    """The best of three timed calls of ``steps`` learning steps in ``groups`` chain groups."""
    best = 0.0
    with threads.forced_groups(groups):
        for _ in range(3):
            start = time.perf_counter()
            sampler.step(steps, learn=True)
            best = max(best, steps / (time.perf_counter() - start))
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="rbm,lattice")
    parser.add_argument("--chains", default="2,4,8")
    parser.add_argument("--samplers", default="lsb1,flsb1,lsb2", help="on the RBMs")
    parser.add_argument(
        "--steps", type=int, default=2000, help="a call's steps (fewer on large lattices)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the app runs: torch's threads would take the cores
    warmup.compile_kernels()
    print(f"{threads.cores()} cores; parallel layer ready: {threads.parallel_ready()}")
    print("| target | chains | sampler | 1 group | 2 groups | ratio | picked |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for label, build, names in targets(args.targets.split(","), args.samplers.split(",")):
        target = build()
        for chains in (int(c) for c in args.chains.split(",")):
            # a call of at most about 2e6 site updates: seconds, not minutes, on a photo
            steps = max(5, min(args.steps, 2_000_000 // (target.n_sites * chains)))
            for name in names:
                sampler = make_sampler(name, target, chains, seed=0, device="cpu", backend="auto")
                for groups in (1, 2):  # untimed: compiles (or loads) the kernel and its twin
                    with threads.forced_groups(groups):
                        sampler.step(10, learn=True)
                rates = {1: 0.0, 2: 0.0}
                for _ in range(args.rounds):
                    for groups in rates:
                        rate = steps_per_second(sampler, groups, steps)
                        rates[groups] = max(rates[groups], rate)
                picked = threads.learning_groups(chains, sampler.learning_work())
                print(
                    f"| {label} | {chains} | {name} | {rates[1]:,.0f} | {rates[2]:,.0f} | "
                    f"{rates[2] / rates[1]:.2f}x | {picked} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(
        interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.learning_groups")
    )
