"""Annealing benchmark: ``python -m lsbcore.studies.benchmarks.annealing [--json] [--repeats N]``.

On the shipped photos (``assets/``) at a working side of 64 px, the segmentation posterior
(``fit_data_term``, coupling ``--lam``) is annealed from ``beta = 1`` to ``beta = 100``
(geometric, 30 stages of 10 sweeps, 4 chains, CPU) with checkerboard block Gibbs, and for
comparison with single-site samplers (the same sweeps). For each run:

- the exact MAP energy from the minimum cut (and the cut's own time);
- wall seconds (and sweeps) until the best chain is within 0.1% of that energy (the issue's
  target: within 5 s on the 2-core CPU), and until it equals it (relative gap <= 1e-12);
- the whole schedule's wall time, the final relative gap and the agreement with the MAP.

A second table anneals chain 1's posterior of paper case 3 (30 x 30, periodic, lambda 1,
weaker data) with every sampler on the same schedule, and a third quenches it (beta = 20 from
the first step, 30 sweeps): there the unbounded balancing functions (sqrt, max) freeze far from
any optimum, with single flips that would raise log p~ left untaken, while bounded ones
(Barker, min) and Gibbs descend.

Energies are recorded after every step for block Gibbs and every ``sites/8`` steps for the
single-site samplers, so the times are resolved to a record; recording is part of the time.
Each figure is the median of ``--repeats`` seeds, after one warm-up run that compiles kernels.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from lsbcore import interrupt
from lsbcore.annealing.anneal import anneal, energy
from lsbcore.annealing.map_gap import compare_with_map, map_states, time_to_gap
from lsbcore.annealing.schedule import Schedule
from lsbcore.cases import paper_case
from lsbcore.image import load_photo
from lsbcore.samplers import warmup
from lsbcore.samplers.registry import REGISTRY, sweep_steps
from lsbcore.segmentation.data_term import fit_data_term
from lsbcore.studies.benchmarks.photos import ASSET_PHOTOS, ASSETS, photo_names
from lsbcore.targets.ising import IsingPosterior

SAMPLERS = ("checkerboard", "sqrt", "gibbs")
SIDE = 64
STAGES, SWEEPS_PER_STAGE, BETA_0, BETA_MAX = 30, 10, 1.0, 100.0
CHAINS = 4
TOLERANCE = 1e-3  # 0.1%
EXACT = 1e-12
QUENCH_BETA, QUENCH_SWEEPS = 20.0, 30


def posterior(photo: str, lam: float) -> IsingPosterior:
    data = fit_data_term(load_photo(ASSETS / f"{photo}.png", max_side=SIDE))
    return IsingPosterior(data.alpha, lam)


def one_run(target, sampler: str, seed: int, x_map) -> dict:
    per_sweep = sweep_steps(sampler, target)
    schedule = Schedule("geometric", BETA_0, BETA_MAX, STAGES, SWEEPS_PER_STAGE * per_sweep)
    record_every = max(1, per_sweep // 8)
    result = anneal(target, sampler, schedule, CHAINS, seed, record_every=record_every)
    gap = compare_with_map(result, target, x_map)
    near = time_to_gap(result, gap.exact_energy, TOLERANCE)
    exact = time_to_gap(result, gap.exact_energy, EXACT)
    return {
        "seconds_to_0.1%": near[0] if near else None,
        "sweeps_to_0.1%": near[2] if near else None,
        "seconds_to_exact": exact[0] if exact else None,
        "sweeps_to_exact": exact[2] if exact else None,
        "seconds": result.wall_seconds,
        "sweeps": float(result.sweeps[-1]),
        "final_gap": gap.relative_gap,
        "agreement": gap.agreement,
    }


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def photo_figures(photo: str, sampler: str, lam: float, repeats: int) -> dict:
    target = posterior(photo, lam)
    x_map = map_states(target)
    runs = [one_run(target, sampler, seed, x_map) for seed in range(repeats)]
    out = {
        "photo": photo,
        "sampler": sampler,
        "lattice": list(target.shape),
        "lam": lam,
        "exact_energy": float(energy(target, x_map)[0]),
        "reached_0.1%": sum(r["seconds_to_0.1%"] is not None for r in runs),
        "reached_exact": sum(r["seconds_to_exact"] is not None for r in runs),
        "repeats": repeats,
    }
    for key in runs[0]:
        out[key] = _median([r[key] for r in runs])
    return out


def paper_figures(sampler: str, repeats: int) -> dict:
    target = paper_case(3, n=30, n_chains=1).target.chain(0)
    x_map = map_states(target)
    runs = [one_run(target, sampler, seed, x_map) for seed in range(repeats)]
    out = {"case": 3, "sampler": sampler, "lattice": list(target.shape), "repeats": repeats}
    out["reached_exact"] = sum(r["seconds_to_exact"] is not None for r in runs)
    for key in ("final_gap", "agreement", "seconds", "seconds_to_exact", "sweeps_to_exact"):
        out[key] = _median([r[key] for r in runs])
    return out


def quench_figures(sampler: str, repeats: int) -> dict:
    target = paper_case(3, n=30, n_chains=1).target.chain(0)
    x_map = map_states(target)
    per_sweep = sweep_steps(sampler, target)
    gaps, uphill = [], []
    for seed in range(repeats):
        schedule = Schedule.constant(QUENCH_BETA, 1, QUENCH_SWEEPS * per_sweep)
        result = anneal(target, sampler, schedule, CHAINS, seed, record_every=per_sweep)
        gap = compare_with_map(result, target, x_map)
        gaps.append(gap.relative_gap)
        s = target.flip_log_ratios(result.state)  # [B, H, W]
        uphill.append(float((s > 0).sum((1, 2)).double().mean()))
    return {
        "sampler": sampler,
        "final_gap": _median(gaps),
        "uphill_sites": _median(uphill),
        "repeats": repeats,
    }


def cut_seconds(photo: str, lam: float) -> float:
    target = posterior(photo, lam)
    start = time.perf_counter()
    map_states(target)
    return time.perf_counter() - start


def _s(value, digits: int = 3) -> str:
    return "   never" if value is None else f"{value:8.{digits}f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lam", type=float, default=1.0, help="coupling (default 1)")
    parser.add_argument("--photos", default=",".join(ASSET_PHOTOS), help="comma-separated names")
    parser.add_argument("--samplers", default=",".join(SAMPLERS), help="comma-separated names")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    photos = photo_names(parser, args.photos, assets=True)
    samplers = [s for s in args.samplers.split(",") if s]
    bad = [s for s in samplers if s not in REGISTRY or REGISTRY[s].needs_balancing]
    if bad:
        parser.error(f"samplers must be registered and need no loaded function: {bad}")
    torch.set_num_threads(1)
    warmup.compile_kernels()
    for sampler in samplers:  # warm caches and the compiled paths
        one_run(posterior(photos[0], args.lam), sampler, 0, None)
    cuts = {p: cut_seconds(p, args.lam) for p in photos}
    rows = [photo_figures(p, s, args.lam, args.repeats) for s in samplers for p in photos]
    every = [n for n, spec in REGISTRY.items() if not spec.needs_balancing]
    paper = [paper_figures(s, args.repeats) for s in every]
    quench = [quench_figures(s, args.repeats) for s in every]
    out = {
        "machine": platform.processor() or platform.machine(),
        "schedule": f"geometric beta {BETA_0:g} to {BETA_MAX:g}, {STAGES} stages of "
        f"{SWEEPS_PER_STAGE} sweeps, {CHAINS} chains",
        "cut_seconds": cuts,
        "runs": rows,
        "paper_case_3": paper,
        "quench": quench,
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"annealing at {SIDE} px, lambda {args.lam:g}: {out['schedule']}; median of "
          f"{args.repeats} seeds")  # fmt: skip
    print(
        "  photo    lattice  sampler        to 0.1%: s (sweeps)   to exact: s (sweeps)  "
        "whole s   final gap  agreement"
    )
    for r in rows:
        print(
            f"  {r['photo']:<8} {r['lattice'][0]:>2}x{r['lattice'][1]:<3}  {r['sampler']:<13}"
            f"{_s(r['seconds_to_0.1%'])} ({_s(r['sweeps_to_0.1%'], 1)})"
            f"{_s(r['seconds_to_exact'])} ({_s(r['sweeps_to_exact'], 1)})"
            f"{_s(r['seconds'], 2)}   {r['final_gap']:.1e}  {r['agreement']:8.2%}"
            f"  [{r['reached_0.1%']}/{r['repeats']} within 0.1%, "
            f"{r['reached_exact']}/{r['repeats']} exact]"
        )
    print("paper case 3, chain 1 (30x30, periodic, lambda 1), the same schedule, every sampler")
    for r in paper:
        print(
            f"  {r['sampler']:<13} final gap {r['final_gap']:.1e}  agreement "
            f"{r['agreement']:7.2%}  to exact {_s(r['seconds_to_exact'])} s  whole "
            f"{_s(r['seconds'], 2)} s  [{r['reached_exact']}/{r['repeats']} exact]"
        )
    print(f"quench: paper case 3, chain 1, beta = {QUENCH_BETA:g} from a uniform random start, "
          f"{QUENCH_SWEEPS} sweeps")  # fmt: skip
    for r in quench:
        print(
            f"  {r['sampler']:<13} final gap {r['final_gap']:.1e}  sites whose flip would "
            f"raise log p~ (mean over chains): {r['uphill_sites']:.1f}"
        )
    print("exact MAP by the minimum cut: " + ", ".join(f"{p} {s:.4f} s" for p, s in cuts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.annealing"))
