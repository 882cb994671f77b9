"""Learning (burn-in) on the Markov-network page and on grid networks:
``python -m tools.network_learning``.

Two figures, each the best of ``--repeats`` timed runs after a warm-up, one torch thread:

- the network page's burn-in: a ``Comparison`` of its default samplers (the paper's Table 3:
  barker, sqrt, min, max, LSB 1, LSB 2, LSB 2') on MN 1 with 5 chains, stepped in calls of 64
  learning steps (as the page's chunks), and each sampler's own steps per second in it;
- the learning steps of LSB 1, LSB 2, LSB 2', FLSB 1 and FLSB 2 alone on a ``--side`` x
  ``--side`` grid network (``grid_network(side, 0.5)``) with ``--chains`` chains.

Only public calls: the same command times any version of the library (issue 45's before and
after).
"""

from __future__ import annotations

import argparse
import functools
import time

import torch

PAGE_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2", "lsb2-monotone")
LEARNED = ("lsb1", "lsb2", "lsb2-monotone", "flsb1", "flsb2")
PAGE_CALL = 64  # learning steps per call, as the page's chunks


def page_burn_in(seconds: float) -> tuple[float, dict[str, float]]:
    """The network page's burn-in steps per second (every sampler one step), and each
    sampler's learning (or, if fixed, frozen) steps per second alone."""
    from lsbcore.comparison import Comparison
    from lsbcore.networks.presets import preset

    comparison = Comparison(PAGE_SAMPLERS, preset("mn1"), 5, seed=0, thin=1)
    comparison.step(20, learn=True)  # compiles and warms every sampler up
    alone = {}
    for name, sampler in comparison.samplers.items():
        start = time.perf_counter()
        sampler.step(300, learn=sampler.learnable)
        alone[name] = 300 / (time.perf_counter() - start)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        comparison.step(PAGE_CALL, learn=True)
        steps += PAGE_CALL
    return steps / (time.perf_counter() - start), alone


def learning_steps(name: str, side: int, chains: int, steps: int, repeats: int) -> float:
    """Learning steps per second of sampler ``name`` on a grid network (``lsbcore.timing``)."""
    from lsbcore.samplers.registry import make_sampler
    from lsbcore.targets.grid_network import grid_network
    from lsbcore.timing import per_second

    sampler = make_sampler(name, grid_network(side, 0.5, seed=0), chains, seed=0)
    sampler.step(5, learn=True)
    return per_second(functools.partial(sampler.step, learn=True), steps, repeats)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="the page's burn-in timing")
    parser.add_argument("--side", type=int, default=10, help="the grid network's side")
    parser.add_argument("--chains", type=int, default=30)
    parser.add_argument("--steps", type=int, default=600, help="learning steps a timed run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-page", action="store_true", help="the grid figures only")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if not args.skip_page:
        rate, alone = page_burn_in(args.seconds)
        print(f"network page (MN 1, 5 chains, {len(PAGE_SAMPLERS)} samplers): burn-in "
              f"{rate:,.0f} steps/s")  # fmt: skip
        for name, value in alone.items():
            print(f"  {name:<16} {value:>12,.0f} steps/s alone")
    print(f"grid network {args.side} x {args.side}, {args.chains} chains, learning steps:")
    for name in LEARNED:
        rate = learning_steps(name, args.side, args.chains, args.steps, args.repeats)
        print(f"  {name:<16} {rate:>12,.0f} steps/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
