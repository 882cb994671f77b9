"""Speed benchmark: ``python -m lsbcore.bench [--device cpu|cuda] [--json] [--threads N]``.

Prints steps per second (each step advances every chain once) for one fixed sampler on the
paper workload (30 chains, 30x30) and for 8 chains on 128x128 and 256x256, plus learning steps
per second for LSB 1 and LSB 2 on the paper workload. Each figure is the best of ``--repeats``
timed runs after a warm-up, which takes scheduling noise out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

from lsbcore.cases import paper_case
from lsbcore.factory import make_sampler
from lsbcore.ising import IsingPosterior
from lsbcore.sampler import resolve_device


def steps_per_second(sampler, steps: int, repeats: int, learn: bool = False) -> float:
    sampler.step(max(1, steps // 10), learn=learn)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sampler.step(steps, learn=learn)
        best = min(best, time.perf_counter() - start)
    return steps / best


def image_target(size: int, device) -> IsingPosterior:
    generator = torch.Generator().manual_seed(0)
    alpha = torch.randn(size, size, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, lam=1.0, boundary="free")


def run(device, sampler_name: str = "barker", repeats: int = 5, steps: int = 2000) -> dict:
    case = paper_case(3)
    results = {}
    sampler = make_sampler(sampler_name, case.target, 30, device=device, x0=case.x0)
    results[f"{sampler_name} 30 chains 30x30"] = steps_per_second(sampler, steps, repeats)
    for size in (128, 256):
        sampler = make_sampler(sampler_name, image_target(size, device), 8, device=device)
        results[f"{sampler_name} 8 chains {size}x{size}"] = steps_per_second(
            sampler, steps, repeats
        )
    for name in ("lsb1", "lsb2"):
        sampler = make_sampler(name, case.target, 30, device=device, x0=case.x0)
        results[f"{name} learning, 30 chains 30x30"] = steps_per_second(
            sampler, max(200, steps // 4), repeats, learn=True
        )
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sampler", default="barker")
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    torch.set_num_threads(args.threads)
    results = run(device, args.sampler, args.repeats, args.steps)
    info = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {platform.processor() or 'unknown CPU'}",
    }
    if args.json:
        json.dump({"info": info, "steps_per_second": results}, sys.stdout, indent=2)
        print()
    else:
        print(f"device {info['device']}, torch {info['torch']}, {info['threads']} thread(s)")
        for key, value in results.items():
            print(f"{key:40s} {value:10.0f} steps/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
