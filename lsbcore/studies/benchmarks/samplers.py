"""Speed benchmark: ``python -m lsbcore.studies.benchmarks.samplers [--device cpu|cuda] [--json]
[--threads N]``.

``--target ising`` (the default) gives the figures below; ``--target rbm`` and ``--target
factor-graph`` give those of the targets beyond pairwise (``lsbcore.studies.benchmarks.targets``).

Two groups of figures, each the best of ``--repeats`` timed runs after a warm-up:

- samplers: steps per second of one sampler (each step advances every chain once): a fixed
  function on the paper workload (30 chains, 30x30) and on 8 chains of 128x128 and 256x256, and
  LSB 1 and LSB 2 learning on the paper workload;
- comparisons: iterations per second of a ``Comparison`` of the paper's six samplers (one
  iteration: every sampler advances one step): the paper comparison (30 chains, 30x30) in
  mixing, in mixing while recording every step, and in burn-in with learning; the image
  comparison (8 chains, 256x256) in mixing and in burn-in.

On the CPU the frozen and learning steps run compiled (``lsbcore.backends.kernels``);
``--torch`` measures the torch steps instead (what CUDA runs without ``--kernels``); on CUDA,
``--kernels`` runs the Triton kernels where a sampler has one (block Gibbs, the frozen steps
of the locally balanced samplers, LSB 1 and 2 included) and torch steps elsewhere (learning,
Gibbs, Metropolis; ``backend="device"``). The device's name goes with the figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

import torch

from lsbcore import interrupt
from lsbcore.backends import resolve_device
from lsbcore.cases import paper_case
from lsbcore.comparison import Comparison
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies.benchmarks import targets as bench_targets
from lsbcore.targets.ising import IsingPosterior
from lsbcore.timing import per_second


def measured(advance, steps: int, repeats: int) -> float | str:
    """``per_second``, or a sentence when the steps fail on this machine (a device kernel its
    Triton cannot compile, a CUDA error): the other figures are still taken and printed."""
    try:
        return per_second(advance, steps, repeats)
    except (RuntimeError, TypeError) as err:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        return f"failed: {lines[-1][:90]}"


PAPER_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2")


def image_target(size: int) -> IsingPosterior:
    generator = torch.Generator().manual_seed(0)
    alpha = torch.randn(size, size, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, lam=1.0, boundary="free")


def sampler_figures(device, name: str, repeats: int, steps: int, backend: str) -> dict:
    case = paper_case(3)
    out = {}
    sampler = make_sampler(name, case.target, 30, device=device, x0=case.x0, backend=backend)
    out[f"{name} 30 chains 30x30"] = measured(sampler.step, steps, repeats)
    for size in (128, 256):
        sampler = make_sampler(name, image_target(size), 8, device=device, backend=backend)
        out[f"{name} 8 chains {size}x{size}"] = measured(sampler.step, steps, repeats)
    block = make_sampler("checkerboard", image_target(256), 8, device=device, backend=backend)
    sweeps = measured(block.step, max(10, steps // 100), repeats)
    out["checkerboard 8 chains 256x256, sweeps"] = sweeps
    out["checkerboard 8 chains 256x256, site updates (millions)"] = (
        sweeps if isinstance(sweeps, str) else sweeps * 8 * 65536 / 1e6
    )
    for learner in ("lsb1", "lsb2"):
        sampler = make_sampler(learner, case.target, 30, device=device, x0=case.x0, backend=backend)
        out[f"{learner} learning, 30 chains 30x30"] = measured(
            lambda n, s=sampler: s.step(n, learn=True), max(200, steps // 4), repeats
        )
    if backend == "device":  # LSB 2's other layout, to set network.SPLIT_ABOVE from a measurement
        from lsbcore.backends.device import network

        sampler = make_sampler("lsb2", case.target, 30, device=device, x0=case.x0, backend=backend)
        kept, network.SPLIT_ABOVE = network.SPLIT_ABOVE, 0
        try:
            out["lsb2 learning, 30 chains 30x30, lattice terms split"] = measured(
                lambda n: sampler.step(n, learn=True), max(200, steps // 4), repeats
            )
        finally:
            network.SPLIT_ABOVE = kept
    return out


def comparison_figures(device, repeats: int, steps: int, backend: str) -> dict:
    case = paper_case(3)
    out = {}

    def paper(thin=0):
        return Comparison(
            PAPER_SAMPLERS, case.target, 30, device=device, x0=case.x0, thin=thin,
            truth=case.truth, backend=backend,
        )  # fmt: skip

    burnin = paper()
    out["paper comparison, burn-in with learning"] = measured(
        lambda n: burnin.step(n, learn=True), max(200, steps // 4), repeats
    )
    mixing = paper()
    mixing.start_mixing()
    out["paper comparison, mixing"] = measured(mixing.step, steps, repeats)
    recorded = paper(thin=1)
    recorded.start_mixing()
    out["paper comparison, mixing, every step recorded"] = measured(recorded.step, steps, repeats)
    target = image_target(256)
    image = Comparison(PAPER_SAMPLERS, target, 8, device=device, backend=backend)
    out["image comparison 256x256, burn-in with learning"] = measured(
        lambda n: image.step(n, learn=True), max(20, steps // 40), repeats
    )
    image.start_mixing()
    out["image comparison 256x256, mixing"] = measured(image.step, steps, repeats)
    return out


def run(
    device, sampler_name: str = "barker", repeats: int = 5, steps: int = 2000, backend="auto"
) -> dict:
    return {
        "samplers (steps/s)": sampler_figures(device, sampler_name, repeats, steps, backend),
        "comparisons (iterations/s)": comparison_figures(device, repeats, steps, backend),
    }


def backend_for(device: torch.device, torch_steps: bool) -> str:
    """What the benchmark times: the torch steps when asked, else the fastest steps there are
    on ``device`` (the device kernels on CUDA, the compiled ones on the CPU)."""
    if torch_steps:
        return "torch"
    return "device" if device.type == "cuda" else "auto"


STEPS = {  # what runs a step, by backend, for the figures' heading
    "auto": "compiled (numba)",
    "torch": "torch",
    "device": "device kernels (Triton) where they exist, else torch",
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: auto, the CPU)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sampler", default="barker")
    parser.add_argument("--torch", action="store_true", help="torch steps, not compiled ones")
    parser.add_argument(
        "--target",
        choices=("ising", *bench_targets.TARGETS),
        default="ising",
        help="ising (the figures above), or a target beyond pairwise "
        "(lsbcore.studies.benchmarks.targets)",
    )
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    if args.repeats < 1 or args.steps < 10:
        parser.error("--repeats must be at least 1 and --steps at least 10.")
    torch.set_num_threads(args.threads)
    if args.target != "ising":
        return bench_targets.report(args.target, device, args.repeats, args.steps, args.json)
    if device.type == "cpu" and not args.torch:
        from lsbcore.samplers import warmup

        warmup.compile_kernels()  # once, before any timing
    backend = backend_for(device, args.torch)
    results = run(device, args.sampler, args.repeats, args.steps, backend)
    info = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "steps": STEPS[backend if device.type == "cpu" or backend == "device" else "torch"],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {platform.processor() or 'unknown CPU'}",
    }
    if args.json:
        json.dump({"info": info, **results}, sys.stdout, indent=2)
        print()
    else:
        print(
            f"device {info['device']}, {info['steps']} steps, torch {info['torch']}, "
            f"{info['threads']} thread(s)"
        )
        for group, figures in results.items():
            print(group)
            for key, value in figures.items():
                shown = value if isinstance(value, str) else f"{value:10.0f}"
                print(f"  {key:52s} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.samplers"))
