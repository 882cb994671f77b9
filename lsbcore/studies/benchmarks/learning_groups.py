"""Where a learning step's chains pay for running in groups on the cores: ``python -m
lsbcore.studies.benchmarks.learning_groups [--chains 2,4,8] [--samplers lsb1,flsb1,lsb2]``.

For each RBM (the shipped digits 8 x 8 and 16 x 16, the 100 x 25 of the benchmarks, a small
20 x 10) and chain count, one sampler's learning steps per second with its chains in one group
(the serial kernel) and in two (the parallel twin, ``threads.forced_groups``), each the best of
``--rounds`` alternations of both, three timed calls a round (a group count measured right
after the other reads the same machine), and the groups ``learning_groups`` picks there.
"""

from __future__ import annotations

import argparse
import time

import torch

from lsbcore.backends import threads
from lsbcore.rbm.models import load_model
from lsbcore.samplers import warmup
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM

MODELS = {
    "digits 8 x 8": lambda: load_model("digits-8x8"),
    "digits 16 x 16": lambda: load_model("digits-16x16"),
    "random 100 x 25": lambda: RBM.random(100, 25, seed=0),
    "random 20 x 10": lambda: RBM.random(20, 10, seed=1, scale=0.8),
}


def steps_per_second(sampler, groups: int, steps: int) -> float:
    """The best of three timed calls of ``steps`` learning steps in ``groups`` chain groups."""
    best = 0.0
    with threads.forced_groups(groups):
        for _ in range(3):
            start = time.perf_counter()
            sampler.step(steps, learn=True)
            best = max(best, steps / (time.perf_counter() - start))
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", default="2,4,8")
    parser.add_argument("--samplers", default="lsb1,flsb1,lsb2")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the app runs: torch's threads would take the cores
    warmup.compile_kernels()
    warmup.compile_parallel_twins()
    print(f"{threads.cores()} cores; parallel layer ready: {threads.parallel_ready()}")
    print("| RBM | chains | sampler | 1 group | 2 groups | ratio | picked |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for label, model in MODELS.items():
        rbm = model()
        for chains in (int(c) for c in args.chains.split(",")):
            for name in args.samplers.split(","):
                sampler = make_sampler(name, rbm, chains, seed=0, device="cpu", backend="auto")
                sampler.step(20, learn=True)
                rates = {1: 0.0, 2: 0.0}
                for _ in range(args.rounds):
                    for groups in rates:
                        rates[groups] = max(
                            rates[groups], steps_per_second(sampler, groups, args.steps)
                        )
                picked = threads.learning_groups(chains, sampler.learning_work())
                print(
                    f"| {label} | {chains} | {name} | {rates[1]:,.0f} | {rates[2]:,.0f} | "
                    f"{rates[2] / rates[1]:.2f}x | {picked} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
