"""Steps per second of LSB 2' beside LSB 2 on torch steps, learning and frozen: paper case 3
(30 chains, 30x30) and MN 1 (5 chains). BENCHMARKS.md, issue 25.

    python -m tools.bench_balancing [--threads N]
"""

from __future__ import annotations

import argparse
import time

import torch

from lsbcore.cases import paper_case
from lsbcore.networks.presets import preset
from lsbcore.samplers.registry import make_sampler

NAMES = ("lsb2", "lsb2-monotone")


def rate(sampler, steps: int, learn: bool) -> float:
    """Steps per second over ``steps`` steps, after 5 untimed ones."""
    sampler.step(5, learn=learn)
    start = time.perf_counter()
    sampler.step(steps, learn=learn)
    return steps / (time.perf_counter() - start)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, choices=range(1, 65), metavar="N")
    torch.set_num_threads(parser.parse_args(argv).threads)
    case = paper_case(3)
    mn1 = preset("mn1")
    for where, build, learn_steps in (
        ("paper case 3, 30 chains", lambda n: make_sampler(
            n, case.target, 30, x0=case.x0, backend="torch", seed=0), 60),
        ("MN 1, 5 chains", lambda n: make_sampler(n, mn1, 5, seed=0), 200),
    ):  # fmt: skip
        for name in NAMES:
            sampler = build(name)
            learning, frozen = rate(sampler, learn_steps, True), rate(sampler, 400, False)
            print(f"{where:24s} {name:14s} learning {learning:8.1f} steps/s, "
                  f"frozen {frozen:8.1f} steps/s")  # fmt: skip


if __name__ == "__main__":
    main()
