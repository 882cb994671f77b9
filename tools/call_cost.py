"""What a call of ``Comparison.step`` costs beyond its steps: ``python -m tools.call_cost``.

The app's default run (paper case 3, its samplers, 4 chains, traces at every step), after
burn-in, mixing: ``step(n)`` called for ``--seconds`` per ``n`` in (1024, 128, 16, 1); prints
microseconds a call, steps per second and the share of the 1,024-step calls' rate. Short calls
are what the live page and a sweep's small cells make (issue 45 item 4).
"""

from __future__ import annotations

import argparse
import time

import torch

CALL_STEPS = (1024, 128, 16, 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per call size")
    args = parser.parse_args(argv)

    from app import sources, state
    from app.config import Config
    from lsbcore.samplers import warmup

    torch.set_num_threads(1)  # as the app
    warmup.compile_kernels()
    cfg = Config()
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    comparison = run.comparison
    comparison.step(cfg.burn_in, learn=True)
    comparison.start_mixing()
    comparison.step(256)  # warm-up
    rates = {}
    for n in CALL_STEPS:
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            comparison.step(n)
            calls += 1
        seconds = time.perf_counter() - start
        rates[n] = calls * n / seconds
        print(
            f"calls of {n:5d} steps: {1e6 * seconds / calls:9.0f} us a call, "
            f"{rates[n]:9.0f} steps/s, {rates[n] / rates[CALL_STEPS[0]]:6.1%} of "
            f"{CALL_STEPS[0]}-step calls",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
