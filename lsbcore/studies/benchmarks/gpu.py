"""The GPU's figures (issue 41): ``python -m lsbcore.studies bench-gpu --out FILE [--device
cuda|cpu] [--workloads NAME ...] [--seconds S] [--tiny]``.

Every figure is appended to ``--out`` as one JSON line, flushed and synced, the moment it is
measured, so a run cut off at its time limit (a lent GPU's ten-minute command) still returns all
it measured; the figures are also printed as they come. Each is the rate of about ``--seconds``
of steps after one warm-up call (the warm-up compiles the Triton kernels, or loads them from the
cache built ahead, ``tools/gpu/cache.py``); the calls grow while they are short, only the calls
of the size they settle at count, and CUDA is synchronised before the clock is read.

Workloads, in the order they run (``--workloads`` picks and orders them):

- ``block-gibbs``: checkerboard Gibbs sweeps, 8 chains of 256 x 256, 1,024 x 1,024 and
  4,096 x 4,096 Ising posteriors: site updates per second;
- ``paper``: the paper comparison (six samplers on paper case 3, 30 x 30) with 4, 64, 1,024 and
  16,384 chains, in mixing and in burn-in (learning): iterations and chain-steps per second;
- ``rbm``: RBM 784 x 500 (random weights), 100 and 10,000 chains, each sampler: steps per second;
- ``rbm-learning``: the learning steps of LSB 1, LSB 2, FLSB 1 and FLSB 2 on the 100 x 25 RBM,
  100 chains (on the CPU, every core: issue 45's goal against the public GWG code);
- ``photo``: a 12-megapixel photo (``assets/camera.png`` scaled to 4,000 x 3,000) segmented at
  full resolution as ``lsbcore.segment`` samples it: seconds to settled;
- ``neural-block``: the learned block proposals (k = 2, 3, 4, the shipped networks) on paper
  case 3 with 30 and 1,024 chains: steps per second.

``--tiny`` runs every workload at a few sites and chains (the tests run it in Triton's CPU
interpreter); ``--device cpu`` gives the same machine's CPU figures (the compiled steps) beside
CUDA's. On CUDA the lattice samplers run the device kernels (``backend="device"``), the others
torch operations.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import torch

from lsbcore import interrupt, out_path
from lsbcore.backends import resolve_device
from lsbcore.cases import paper_case
from lsbcore.comparison import Comparison
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies.benchmarks.samplers import PAPER_SAMPLERS, image_target
from lsbcore.studies.benchmarks.targets import rbm_target
from lsbcore.targets.ising import IsingPosterior

LATTICE_SIDES = {"full": (256, 1024, 4096), "tiny": (4, 8)}
PAPER_CHAINS = {"full": (4, 64, 1024, 16384), "tiny": (2, 3)}
PAPER_SIDE = {"full": 30, "tiny": 4}
PAPER_CASE_CHAINS = 10_000  # paper_case's largest
RBM_SIZE = {"full": (784, 500), "tiny": (12, 4)}
NEURAL_CHAINS = {"full": (30, 1024), "tiny": (2,)}
NEURAL_SIDE = {"full": 30, "tiny": 8}  # a periodic side of at least twice the largest block
RBM_CHAINS = {"full": (100, 10000), "tiny": (2, 3)}
LEARNING_RBM_SIZE = {"full": (100, 25), "tiny": (12, 4)}
LEARNING_RBM_CHAINS = {"full": 100, "tiny": 3}
RBM_SAMPLERS = (
    ("gwg", {}),
    ("block-gibbs", {"block_size": 2}),
    ("hamming-ball", {"block_size": 10, "radius": 1}),
    ("flsb1", {}),
    ("flsb2", {}),
    ("pas", {}),
    ("dmala", {}),
    ("sqrt", {}),
    ("gibbs", {}),
    ("metropolis", {}),
)
PHOTO = Path(__file__).resolve().parents[3] / "assets" / "camera.png"
PHOTO_SHAPE = {"full": (3000, 4000), "tiny": (12, 16)}  # height, width: 12 megapixels


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rate(advance, device: torch.device, seconds: float) -> tuple[float, int, float]:
    """Steps per second of ``advance(n)`` in calls of a steady size: after one warm-up call of
    one step, ``n`` doubles while a call takes under a tenth of ``seconds`` (those calls are not
    counted: a short call's fixed cost would pull the rate down), then calls of that size until
    about ``seconds`` have passed in all. Returns the rate, the steps counted and their
    seconds."""
    advance(1)
    synchronise(device)
    n, steps, timed, start = 1, 0, 0.0, time.perf_counter()
    while True:
        begun = time.perf_counter()
        advance(n)
        synchronise(device)
        now = time.perf_counter()
        if not steps and now - begun < seconds / 10 and now - start < seconds:
            n *= 2  # still growing
            continue
        steps += n
        timed += now - begun
        if now - start >= seconds:
            return steps / timed, steps, timed


@contextlib.contextmanager
def lattice_cap(sites: int):
    """The library's caps on a lattice (``targets.base.MAX_SITES``, about 2,048 x 2,048 sites,
    and ``MAX_VALUES`` for its fields and neighbour tables, sized for the dashboard's CPU server)
    lifted to ``sites`` while the benchmark builds its largest lattices (4,096 x 4,096 and the
    12-megapixel photo)."""
    from lsbcore.targets import ising, pairwise_target

    caps = [(ising, "MAX_SITES", sites), (ising, "MAX_VALUES", sites),
            (pairwise_target, "MAX_VALUES", 5 * sites)]  # fmt: skip
    kept = [getattr(module, name) for module, name, _ in caps]
    for (module, name, value), old in zip(caps, kept, strict=True):
        setattr(module, name, max(old, value))
    try:
        yield
    finally:
        for (module, name, _), old in zip(caps, kept, strict=True):
            setattr(module, name, old)


def paper_problem(side: int, chains: int):
    """Paper case 3 on ``side x side`` with ``chains`` chains; above ``paper_case``'s 10,000
    chains the noisy fields of its first 10,000 are repeated (the step's cost is the same)."""
    case = paper_case(3, n=side, n_chains=min(chains, PAPER_CASE_CHAINS))
    if chains <= PAPER_CASE_CHAINS:
        return case
    rows = torch.arange(chains) % PAPER_CASE_CHAINS
    target = IsingPosterior(case.target.alpha[rows], case.lam, boundary="periodic")
    return dataclasses.replace(case, target=target, x0=case.x0[rows])


def sampler_figure(sampler, device: torch.device, seconds: float) -> dict:
    """A sampler's steps per second (``rate``) and the backend its steps ran on."""
    steps_per_second, steps, spent = rate(sampler.step, device, seconds)
    return {"steps_per_second": steps_per_second, "steps": steps, "seconds": spent,
            "backend": sampler.backend}  # fmt: skip


def backend_on(device: torch.device) -> str:
    """The device kernels on CUDA (torch where a sampler has none), the compiled steps on the
    CPU."""
    return "device" if device.type == "cuda" else "auto"


def block_gibbs(device, backend: str, size: str, seconds: float):
    for side in LATTICE_SIDES[size]:
        chains = 8
        with lattice_cap(side * side):
            target = image_target(side)
            sampler = make_sampler("checkerboard", target, chains, device=device, backend=backend)
        sweeps, steps, spent = rate(sampler.step, device, seconds)
        label = f"block Gibbs, {chains} chains of {side} x {side}"
        yield (
            label,
            {
                "site_updates_per_second": sweeps * chains * side * side,
                "sweeps_per_second": sweeps,
                "sweeps": steps,
                "seconds": spent,
                "backend": sampler.backend,
            },
        )


def paper(device, backend: str, size: str, seconds: float):
    side = PAPER_SIDE[size]
    for chains in PAPER_CHAINS[size]:
        case = paper_problem(side, chains)
        for phase in ("mixing", "burn-in"):
            comparison = Comparison(
                PAPER_SAMPLERS,
                case.target,
                chains,
                device=device,
                x0=case.x0,
                truth=case.truth,
                backend=backend,
            )
            if phase == "mixing":
                comparison.start_mixing()
                advance = comparison.step
            else:
                advance = lambda n, c=comparison: c.step(n, learn=True)  # noqa: E731
            iterations, steps, spent = rate(advance, device, seconds)
            label = f"paper comparison, {chains} chains of {side} x {side}, {phase}"
            yield (
                label,
                {
                    "iterations_per_second": iterations,
                    "chain_steps_per_second": iterations * chains * len(PAPER_SAMPLERS),
                    "iterations": steps,
                    "seconds": spent,
                },
            )


def rbm(device, backend: str, size: str, seconds: float):
    n_visible, n_hidden = RBM_SIZE[size]
    target = rbm_target(n_visible, n_hidden)
    for chains in RBM_CHAINS[size]:
        for name, options in RBM_SAMPLERS:
            sampler = make_sampler(
                name, target, chains, seed=0, device=device, backend=backend, **options
            )
            label = f"RBM {n_visible} x {n_hidden}, {chains} chains, {name}"
            yield label, sampler_figure(sampler, device, seconds)


def rbm_learning(device, backend: str, size: str, seconds: float):
    """The learning steps (burn-in) of LSB 1, LSB 2, FLSB 1 and FLSB 2 on the 100 x 25 RBM with
    100 chains, the public GWG code's setting (issue 45's goal: 10x its gwg's 558 steps/s on
    the CPU); on the CPU the compiled kernels' chain groups take every core."""
    n_visible, n_hidden = LEARNING_RBM_SIZE[size]
    target = rbm_target(n_visible, n_hidden)
    chains = LEARNING_RBM_CHAINS[size]
    backend = "torch" if backend == "device" else backend  # no device kernels for RBMs' learning
    for name in ("lsb1", "lsb2", "flsb1", "flsb2"):
        sampler = make_sampler(name, target, chains, seed=0, device=device, backend=backend)
        steps_per_second, steps, spent = rate(
            lambda n, s=sampler: s.step(n, learn=True), device, seconds
        )
        label = f"RBM {n_visible} x {n_hidden}, {chains} chains, {name} (learning)"
        yield (
            label,
            {
                "steps_per_second": steps_per_second,
                "steps": steps,
                "seconds": spent,
                "backend": sampler.backend,
                "learns_compiled": bool(sampler.learns_compiled()),
            },
        )


def photo(device, backend: str, size: str, seconds: float):
    """The fit and the checkerboard sweeps of ``lsbcore.segment`` (4 chains, from the mixed
    start) until the marginal has settled, at the photo's full resolution; ``segment`` itself
    stops at 1,024 px a side and adds an exact MAP (not timed here)."""
    from PIL import Image

    from lsbcore.segmentation.data_term import fit_data_term
    from lsbcore.segmentation.segment import MAX_SWEEPS, _sample_until_settled, read_photo
    from lsbcore.segmentation.starts import photo_starts

    height, width = PHOTO_SHAPE[size]
    image = Image.open(PHOTO).convert("RGB").resize((width, height), Image.Resampling.BICUBIC)
    start = time.perf_counter()
    photo = read_photo(image, max(height, width))
    data = fit_data_term(photo)
    with lattice_cap(height * width):
        target = IsingPosterior(data.alpha, 1.0)
    chains = 4
    x0 = photo_starts(data.alpha, chains, "mixed", 0)
    fitted = time.perf_counter()
    options = {"backend": backend}
    chain, _, verdict, sweeps = _sample_until_settled(
        target, "checkerboard", chains, 0, x0, None, MAX_SWEEPS, options, device
    )
    synchronise(device)
    done = time.perf_counter()
    label = f"photo {width} x {height} ({width * height / 1e6:.1f} megapixels), {chains} chains"
    yield (
        label,
        {
            "seconds_to_settled": done - start,
            "fit_s": fitted - start,
            "sampling_s": done - fitted,
            "sweeps": sweeps,
            "settled": bool(verdict is not None and verdict.settled),
            "backend": chain.backend,
        },
    )


def neural_block(device, backend: str, size: str, seconds: float):
    """The learned block proposals (torch steps on any device) on paper case 3, with the
    shipped trained networks for blocks of 2, 3 and 4 sites."""
    side = NEURAL_SIDE[size]
    for chains in NEURAL_CHAINS[size]:
        case = paper_case(3, n=side, n_chains=chains)
        for k in (2, 3, 4):
            sampler = make_sampler(
                "neural-block",
                case.target,
                chains,
                seed=0,
                device=device,
                x0=case.x0,
                block_size=k,
                weights="trained",
            )
            label = f"neural-block k = {k}, {chains} chains of {side} x {side}"
            yield label, sampler_figure(sampler, device, seconds)


WORKLOADS = {
    "block-gibbs": block_gibbs,
    "paper": paper,
    "rbm": rbm,
    "rbm-learning": rbm_learning,
    "photo": photo,
    "neural-block": neural_block,
}


def machine(device: torch.device) -> dict:
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "machine": f"{platform.machine()}, {platform.processor() or 'unknown CPU'}",
    }


class FigureLog:
    """Figures appended to a JSON-lines file as they are measured, each line flushed and synced
    (a run killed at its limit keeps every line written before)."""

    def __init__(self, path: Path, context: dict):
        self.path, self.context = path, context

    def write(self, record: dict) -> None:
        with self.path.open("a") as file:
            file.write(json.dumps({**self.context, **record}) + "\n")
            file.flush()
            os.fsync(file.fileno())


def run(names, device, backend: str, size: str, seconds: float, log: FigureLog) -> int:
    """Every figure of the workloads ``names``, logged as measured, then a ``done`` line for the
    workload; a workload that fails logs its error and the next one runs. Returns the number
    of failed workloads."""
    failed = 0
    for name in names:
        try:
            for label, figure in WORKLOADS[name](device, backend, size, seconds):
                log.write({"workload": name, "label": label, **figure})
                shown = ", ".join(
                    f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in figure.items()
                )
                print(f"{label}: {shown}", flush=True)
            log.write({"workload": name, "done": True})
        except (RuntimeError, ValueError, TypeError, MemoryError) as err:
            failed += 1
            lines = str(err).strip().splitlines() or [type(err).__name__]
            log.write({"workload": name, "error": f"{type(err).__name__}: {lines[-1][:300]}"})
            print(f"{name}: failed: {lines[-1][:300]}", flush=True)
    return failed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=out_path.output_file,
        required=True,
        help="writes each figure as a JSON line here (appended)",
    )
    parser.add_argument("--device", default=None, help="cuda or cpu (default: auto)")
    parser.add_argument(
        "--workloads", nargs="+", choices=tuple(WORKLOADS), default=tuple(WORKLOADS)
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds a figure")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--backend",
        choices=("auto", "compiled", "torch", "device"),
        default=None,
        help="default: device on CUDA (torch where a sampler has no kernel), auto on the CPU",
    )
    parser.add_argument("--tiny", action="store_true", help="a few sites and chains each")
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    if not 0 < args.seconds <= 600:
        parser.error("--seconds must be above 0 and at most 600.")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1.")
        torch.set_num_threads(args.threads)
    size = "tiny" if args.tiny else "full"
    backend = args.backend or backend_on(device)
    log = FigureLog(args.out, {"size": size, "backend_asked": backend, **machine(device)})
    return 1 if run(args.workloads, device, backend, size, args.seconds, log) else 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies bench-gpu"))
