"""Samplers recorded at every step: ``python -m lsbcore.studies bench-recorded``.

A ``Comparison`` with traces at every step (``thin=1``), as the network page runs one, after a
short burn-in, mixing: each sampler stepped alone in calls of ``--call`` steps for ``--seconds``,
steps per second (a step advances every chain once) and the steps that ran (issue 45 item 4:
before the kernels wrote the trace, a recorded batched sampler ran torch steps).

- the network page's default network (MN 1, 10 x 10, epsilon 1e-3), its 5 chains: the fixed
  balancing functions, Gibbs and Metropolis;
- an RBM 100 x 25 in the public Gibbs-with-Gradients code's "random" setting, laid out 10 x 10,
  16 chains: Gibbs, GWG, FLSB 1, Barker, block Gibbs (k = 2; in mixing it adds each kept state to
  the marginals on its own, one call a step).
"""

from __future__ import annotations

import argparse
import time

import torch

from lsbcore import interrupt
from lsbcore.comparison import Comparison
from lsbcore.networks.presets import preset
from lsbcore.samplers import warmup
from lsbcore.targets.rbm import RBM


def cases() -> list[tuple[str, object, int, list[str]]]:
    """(label, target, chains, samplers) of each row group."""
    r = RBM.random(100, 25, seed=0)
    rbm = RBM(r.W, r.b_visible, r.b_hidden, shape=(10, 10))
    return [
        ("MN 1, 5 chains", preset("mn1", 1e-3), 5,
         ["barker", "sqrt", "min", "max", "gibbs", "metropolis"]),
        ("RBM 100 x 25, 16 chains", rbm, 16, ["gibbs", "gwg", "flsb1", "barker", "block-gibbs"]),
    ]  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lsbcore.studies.benchmarks.recorded")
    parser.add_argument("--seconds", type=float, default=2.0, help="per sampler")
    parser.add_argument("--call", type=int, default=256, help="steps per Comparison.step call")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warmup.compile_kernels()
    for label, target, chains, names in cases():
        comparison = Comparison(names, target, chains, seed=0, thin=1)
        comparison.step(20, learn=True)
        comparison.start_mixing()
        comparison.step(20)
        for name in names:
            steps, start = 0, time.perf_counter()
            while time.perf_counter() - start < args.seconds:
                comparison.step(args.call, names=[name])
                steps += args.call
            rate = steps / (time.perf_counter() - start)
            backend = comparison[name].backend
            print(f"{label:25s} {name:12s} {rate:12,.0f} steps/s  {backend}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.recorded"))
