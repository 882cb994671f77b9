"""Learned block proposals against the samplers they would replace:
``python -m lsbcore.studies.block_proposals.benchmark [--quick] [--json PATH] [--docs FILE]``.

1. **Settle**: wall seconds to a settled segmentation (``diagnostics.settled``: every site's
   ``P(x = +1)`` known to within 0.1, the chains in agreement) of 256 px photos, ``neural-block``
   (trained, k = 2 and 4) against checkerboard Gibbs, each with 4 chains from mixed starts
   (``lsbcore.segment``), capped at ``--max-sweeps`` steps.
2. **Acceptance**: the share of proposed tiles accepted, trained and untrained networks, k = 2,
   3, 4, on targets inside the training ranges (``lsbcore.methods.block_proposals.instances``) and
   outside them.
3. **Convergence**: the chains' mean ``log p~`` against wall seconds from random starts, for
   single-site Gibbs, block Gibbs on ``k^2`` random sites, checkerboard Gibbs (pairwise targets),
   the Barker balanced sampler, and ``neural-block`` with the trained network and with the exact
   tile conditional (block Gibbs on the same tiles), on a paper case, a photo and a grid network.
   The figure is the seconds until the mean is 95% of the way from its start to the equilibrium
   level (the best tail mean of all samplers: they are all exact, so they share that level).
4. **Speed** (``--parts speed``): seconds per step and microseconds per tile update (a tile of
   one chain) of ``neural-block``, the trained network against exact tiles, k = 2, 3, 4, on a
   64 x 64 Ising posterior (the camera photo) and a 32 x 32 grid network, 8 chains.

Every figure comes from this command on the machine it names; nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

from lsbcore import interrupt, out_path
from lsbcore.cases import paper_case
from lsbcore.image import load_photo
from lsbcore.samplers.block.block_gibbs import MAX_BLOCK
from lsbcore.samplers.registry import make_sampler
from lsbcore.segmentation.data_term import fit_data_term
from lsbcore.segmentation.segment import segment
from lsbcore.studies.benchmarks.photos import photo_path
from lsbcore.studies.block_proposals import race
from lsbcore.studies.shared.doc_section import replace_section
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior

#: Photos of the settle figures: two shipped, three public ones from scikit-image's wheel.
PHOTOS = ("horse", "camera", "coins", "chelsea", "astronaut")
CHAINS = 4


def settle_figures(photos, block_sizes, max_sweeps: int) -> list[dict]:
    """Seconds and steps to a settled 256 px segmentation, per photo and sampler."""
    rows = []
    runs = [("checkerboard", {})] + [
        ("neural-block", {"block_size": k, "weights": "trained"}) for k in block_sizes
    ]
    for photo in photos:
        for name, options in runs:
            result = segment(
                photo_path(photo), max_side=256, n_chains=CHAINS, sampler=name,
                sampler_options=options, max_sweeps=max_sweeps, seed=0,
            )  # fmt: skip
            label = name if not options else f"{name} k={options['block_size']}"
            rows.append(
                {
                    "photo": photo,
                    "sampler": label,
                    "lattice": list(result.target.shape),
                    "sampling_s": round(result.timings["sampling"], 2),
                    "steps": result.sweeps,
                    "settled": bool(result.settled),
                    "map_agreement": round(result.map_agreement, 4),
                }
            )
            print(_row(rows[-1]), file=sys.stderr)
    return rows


def acceptance_targets(quick: bool) -> dict:
    """Named targets inside and outside the training ranges
    (``lsbcore.methods.block_proposals.instances``)."""
    horse = fit_data_term(load_photo(photo_path("horse"), max_side=64 if quick else 128)).alpha
    return {
        "paper case 3 (lambda 1, mu 1): in": paper_case(3, n_chains=CHAINS).target,
        "paper case 4 (lambda 1, mu 3): in": paper_case(4, n_chains=CHAINS).target,
        "photo, lambda 1: in": IsingPosterior(horse, 1.0),
        "photo, lambda 4: out": IsingPosterior(horse, 4.0),
        "paper case 4 at lambda 4: out": IsingPosterior(paper_case(4).target.alpha[0], 4.0),
        "grid network, determinism 0.5, eps 1e-3: in": grid_network(24, 0.5, seed=1),
        "grid network, determinism 1, eps 1e-6: out": grid_network(24, 1.0, 1, epsilon=1e-6),
    }


def acceptance_figures(block_sizes, steps: int, quick: bool) -> list[dict]:
    rows = []
    for label, target in acceptance_targets(quick).items():
        batch = target.batch if target.batch > 1 else CHAINS
        for k in block_sizes:
            row = {"target": label, "k": k}
            for weights in ("trained", "untrained"):
                sampler = make_sampler(
                    "neural-block", target, batch, seed=1, block_size=k, weights=weights
                )
                sampler.step(steps)
                row[weights] = round(sampler.block_accept_rate, 4)
            rows.append(row)
            print(_row(row), file=sys.stderr)
    return rows


def convergence_targets(quick: bool) -> dict:
    side = 64 if quick else 128
    horse = fit_data_term(load_photo(photo_path("horse"), max_side=side)).alpha
    return {
        "paper case 4 (30 x 30, periodic)": paper_case(4, n_chains=CHAINS).target,
        f"horse photo ({side} px, lambda 1)": IsingPosterior(horse, 1.0),
        "grid network (16 x 16, determinism 0.9)": grid_network(16, 0.9, seed=2),
    }


def convergence_samplers(k: int) -> list[tuple[str, str, dict, str]]:
    """``(label, registry name, options, role)``; the role names the sampler in the race's
    verdict (``race.ROLES``) whatever its label says."""
    sites = min(k * k, MAX_BLOCK)  # block Gibbs scores 2^sites states: at most 12 sites
    return [
        ("gibbs", "gibbs", {}, "gibbs"),
        (f"block-gibbs {sites} sites", "block-gibbs", {"block_size": sites}, "block-gibbs"),
        ("checkerboard", "checkerboard", {}, "checkerboard"),
        ("barker", "barker", {}, "barker"),
        (f"neural-block k={k} trained", "neural-block", {"block_size": k, "weights": "trained"},
         "network"),
        (f"neural-block k={k} exact tiles", "neural-block", {"block_size": k, "weights": "exact"},
         "exact-tiles"),
    ]  # fmt: skip


SPEED_CHAINS = 8


def speed_targets(quick: bool) -> dict:
    side = 16 if quick else 64
    camera = fit_data_term(load_photo(photo_path("camera"), max_side=side)).alpha
    grid = 8 if quick else 32
    height, width = camera.shape[-2:]
    return {
        f"camera photo ({height} x {width}, lambda 1)": IsingPosterior(camera, 1.0),
        f"grid network ({grid} x {grid}, determinism 0.9)": grid_network(grid, 0.9, seed=2),
    }


def speed_figures(block_sizes, seconds: float, quick: bool) -> list[dict]:
    """Per step and per tile: steps are timed after two warm-up steps until ``seconds`` have
    passed (at least 3 steps, at most 200); a tile update is one tile of one chain."""
    rows = []
    for label, target in speed_targets(quick).items():
        for k in block_sizes:
            for weights in ("trained", "exact"):
                sampler = make_sampler(
                    "neural-block", target, SPEED_CHAINS, seed=5, block_size=k, weights=weights
                )
                sampler.step(2)
                tiles_before, steps = int(sampler._n_proposed.sum()), 0
                start = time.perf_counter()
                while steps < 3 or (time.perf_counter() - start < seconds and steps < 200):
                    sampler.step(1)
                    steps += 1
                elapsed = time.perf_counter() - start
                tiles = int(sampler._n_proposed.sum()) - tiles_before
                row = {
                    "target": label,
                    "k": k,
                    "weights": weights,
                    "steps": steps,
                    "s_per_step": round(elapsed / steps, 5),
                    "us_per_tile": round(1e6 * elapsed / max(1, tiles), 2),
                    "accept": round(sampler.block_accept_rate, 4),
                }
                rows.append(row)
                print(_row(row), file=sys.stderr)
    return rows


def trace_for(name, target, options, seconds: float, seed: int = 3) -> list[tuple]:
    """``(wall seconds, mean log p~ over chains, target evaluations per chain)`` after each
    chunk of about one sweep (fewer steps where a sweep takes longer than 0.2 s), for
    ``seconds`` of sampling from uniform random starts (the same for every sampler)."""
    batch = target.batch if target.batch > 1 else CHAINS
    shape = (batch, *target.shape)
    x0 = (2 * torch.randint(0, 2, shape, generator=torch.Generator().manual_seed(seed)) - 1).to(
        torch.float64
    )
    if torch.isneginf(target.log_prob(x0.reshape(batch, -1))).any():
        x0 = None  # hard zeros: the target finds its own starts
    # one-off costs (compiling a kernel, loading weights, first calls) are paid here, outside
    # the timed run: a sampler timed first in a process would otherwise carry them
    make_sampler(name, target, batch, seed=seed + 1, x0=x0, **options).step(2)
    sampler = make_sampler(name, target, batch, seed=seed, x0=x0, **options)
    per_sweep = max(1, target.n_sites // sampler.sites_per_step)
    if name == "neural-block":
        per_sweep = 2  # one step is one colour of one offset: about half the tiles
    points = [(0.0, float(sampler.log_p.mean()), 0)]
    start = time.perf_counter()
    sampler.step(1)
    one = time.perf_counter() - start
    points.append((one, float(sampler.log_p.mean()), sampler.n_target_evals))
    chunk = max(1, min(per_sweep, int(0.2 / max(one, 1e-9))))  # a point every 0.2 s at most
    while time.perf_counter() - start < seconds:
        sampler.step(chunk)
        now = time.perf_counter() - start
        points.append((now, float(sampler.log_p.mean()), sampler.n_target_evals))
    return points


def convergence_figures(block_size: int, seconds: float, quick: bool) -> list[dict]:
    """Per target and sampler: seconds and evaluations to 95% of the way to the level, the tail
    mean, and the curve thinned to at most about ``race.CURVE_POINTS`` points."""
    rows = []
    for label, target in convergence_targets(quick).items():
        traces, roles = {}, {}
        for shown, name, options, role in convergence_samplers(block_size):
            if name == "checkerboard" and not hasattr(target, "colouring"):
                continue
            traces[shown] = trace_for(name, target, options, seconds)
            roles[shown] = role
        tails = {s: _tail_mean(t) for s, t in traces.items()}
        level = max(tails.values())  # all are exact: the highest tail is nearest equilibrium
        for shown, trace in traces.items():
            first = trace[0][1]
            goal = first + 0.95 * (level - first)
            reached = next(((t, e) for t, v, e in trace if v >= goal), None)
            row = {
                "target": label,
                "k": block_size,
                "sampler": shown,
                "role": roles[shown],
                "seconds_to_95pct": None if reached is None else round(reached[0], 2),
                "evals_to_95pct": None if reached is None else reached[1],
                "tail_mean_log_p": round(tails[shown], 1),
                "level": round(level, 1),
                "steps_in_budget": len(trace) - 1,
            }
            print(_row(row), file=sys.stderr)
            rows.append({**row, "curve": race.thin(trace)})
    return rows


def _tail_mean(trace) -> float:
    values = [v for _, v, _ in trace[len(trace) * 4 // 5 :]]
    return sum(values) / len(values)


def _row(row: dict) -> str:
    return "  ".join(f"{k}={v}" for k, v in row.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.block_proposals.benchmark",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--quick", action="store_true", help="small targets, short runs")
    parser.add_argument(
        "--json", type=out_path.output_file, help="also write the figures to this file"
    )
    parser.add_argument("--photos", default=",".join(PHOTOS))
    parser.add_argument("--max-sweeps", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=20.0, help="convergence budget each")
    parser.add_argument("--parts", default="settle,acceptance,convergence")
    parser.add_argument("--block-size", default="2",
                        help="k of the convergence runs: 2, 3 or 4, or several (3,4)")  # fmt: skip
    parser.add_argument("--docs", type=out_path.output_file, metavar="FILE",
                        help="write the race's section (block-race) of this Markdown file from the "
                        "convergence figures")  # fmt: skip
    parser.add_argument("--from-json", metavar="RACE",
                        help="read the convergence figures from this file (written by --json) "
                        "instead of running them; with --docs only")  # fmt: skip
    args = parser.parse_args(argv)
    if args.from_json:
        return _docs_from(args.from_json, args.docs, parser)
    torch.set_num_threads(1)
    parts = set(args.parts.split(","))
    unknown = parts - {"settle", "acceptance", "convergence", "speed"}
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    if args.docs and "convergence" not in parts:
        parser.error("--docs writes the race's section: it needs --parts convergence")
    quick = args.quick
    figures = {"machine": platform.platform(), "torch": torch.__version__, "quick": quick,
               "command": _command(argv)}  # fmt: skip
    if "acceptance" in parts:
        figures["acceptance"] = acceptance_figures((2, 3, 4), 20 if quick else 200, quick)
    if "convergence" in parts:
        seconds = 3.0 if quick else args.seconds
        sizes = args.block_size.split(",")
        if any(size not in ("2", "3", "4") for size in sizes):
            parser.error(f"--block-size must be 2, 3 or 4, got {args.block_size}")
        figures["seconds"] = seconds
        figures["convergence"] = [
            row for k in sizes for row in convergence_figures(int(k), seconds, quick)
        ]
    if "speed" in parts:
        figures["speed"] = speed_figures((2, 3, 4), 0.3 if quick else 4.0, quick)
    if "settle" in parts:
        photos = args.photos.split(",")[: 1 if quick else None]
        figures["settle"] = settle_figures(photos, (2, 4), 200 if quick else args.max_sweeps)
    text = json.dumps(figures, indent=1)
    if args.json:
        out_path.write_text(args.json, text + "\n")
    print(json.dumps(_without_curves(figures), indent=1))
    if args.docs and "convergence" in figures:
        replace_section(args.docs, race.section(figures), race.BEGIN, race.END)
        print(f"wrote the block-race section of {args.docs}", file=sys.stderr)
    return 0


def _docs_from(path, docs, parser) -> int:
    """The race's section of ``docs`` from a figures file, without running anything."""
    if not docs:
        parser.error("--from-json needs --docs FILE")
    try:
        figures = race.read_race(path)
        replace_section(docs, race.section(figures), race.BEGIN, race.END)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote the block-race section of {docs} from {path}", file=sys.stderr)
    return 0


def _command(argv) -> str:
    from lsbcore.studies.shared.shown_command import shown_argv

    argv = sys.argv[1:] if argv is None else argv
    shown = shown_argv(argv, private=("--json", "--from-json"))
    return " ".join(["python -m lsbcore.studies.block_proposals.benchmark", *shown])


def _without_curves(figures: dict) -> dict:
    rows = figures.get("convergence")
    if rows is None:
        return figures
    return {**figures, "convergence": [{k: v for k, v in r.items() if k != "curve"} for r in rows]}


if __name__ == "__main__":
    raise SystemExit(
        interrupt.run_command(main, "python -m lsbcore.studies.block_proposals.benchmark")
    )
