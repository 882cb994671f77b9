"""Redraw cost of the live views against headless sampling: ``python -m tools.measure``.

The workload of the product brief: five samplers (t/(1+t), sqrt, max, LSB 1, LSB 2) with four
chains each on a 64 x 64 image (the synthetic sample), traces recorded every step. It prints:

1. headless sampling: ``Comparison.step`` in a loop and nothing else, in burn-in (learning)
   and in mixing, in steps per second (a step advances every chain of every sampler once);
2. the server-side cost of redrawing each view: copying the data out of the run, building the
   images / figures, and serialising them as Streamlit does (PNG for ``st.image``, Plotly JSON
   for ``st.plotly_chart``); the browser's own painting is not included;
3. the live rate: the app's worker thread samples while this thread redraws a view every
   ``REFRESH_S`` seconds, as the page's fragment does; the sampling rate as a share of headless.

The numbers are also written to ``out/app_measure.json`` (``--json`` to choose the file).

``--target digits-16x16`` (or ``digits-8x8``) measures the RBM page instead: the dashboard's six
default RBM samplers (Barker, LSB 1, FLSB 1, FLSB 2, GWG, Gibbs-2) with eight chains each on the
shipped digits RBM, its views the digit grid, the MMD chart, the balancing functions and the
acceptance table (issue 24: five redraws a second with six samplers on the 16 x 16 model).
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import torch
from PIL import Image

from app import rbm_targets, sources, state
from app.config import Config, defaults_for
from app.views import (
    balancing,
    chains,
    convergence,
    digits,
    mixing,
    proposal,
    rbm_balancing,
    rbm_mmd,
    rbm_moves,
    segmentation,
    weights,
)

SAMPLERS = ("barker", "sqrt", "max", "lsb1", "lsb2")


def _serialise(payload) -> int:
    """Bytes Streamlit would send: PNG for image arrays, Plotly JSON for figures."""
    size = 0
    for item in payload:
        if item is None:
            continue
        if isinstance(item, pd.DataFrame):  # st.dataframe sends Arrow; JSON is close in size
            size += len(item.to_json())
        elif isinstance(item, np.ndarray):
            buffer = io.BytesIO()
            Image.fromarray(item).save(buffer, format="PNG")
            size += buffer.tell()
        else:
            size += len(pio.to_json(item, validate=False))
    return size


# Each view as the page builds it: a snapshot under the lock, then images or figures.
def build_chains(run) -> list:
    states, marginals, notes = chains.snapshot(run, 4)
    return [p.image for p in chains.chain_panels(states, marginals, 4, notes=notes)]


def build_proposal(run) -> list:
    maps = proposal.current_maps(run, 0)
    proposal.step_rows(maps)
    return [proposal.proposal_figure(maps, "Q")]


def build_balancing(run) -> list:
    fig, histories = balancing.figures_now(run, overlay=True)
    return [fig, balancing.loss_figure(histories)]


def build_weights(run) -> list:
    return list(weights.weights_figures(*weights.snapshot(run)))


def build_convergence(run) -> list:
    points = convergence.LIVE_POINTS if run.running else convergence.MAX_POINTS
    return convergence.convergence_figures(convergence.snapshot(run), "iterations", 0, points)


def build_mixing(run) -> list:
    view = mixing.mixing_view(mixing.snapshot(run))
    return [] if view is None else [view.acf, view.ess]


def build_segmentation(run) -> list:
    marginal, _, _ = segmentation.snapshot(run)  # the marginal, its source, sampled or not
    view = segmentation.segmentation_view(marginal, run.image)
    segmentation.mask_png(view.mask)
    return [view.observed, view.marginal, view.overlay, view.uncertainty]


# name: (build, how often at most the page rebuilds it while running: seconds, or None: always;
# the page caches the maps of the Proposal view, and the figures of the others)
VIEWS = {
    "Chains": (build_chains, None),
    "Proposal": (build_proposal, proposal.LIVE_S),
    "Balancing functions": (build_balancing, 1.0),
    "Softmax weights": (build_weights, 1.0),
    "Convergence": (build_convergence, 2.0),
    "Mixing": (build_mixing, 1.0),
    "Segmentation": (build_segmentation, None),
}


# The RBM page's views (app/view_catalogue.py), built as the page builds them
def build_digits(run) -> list:
    shape = tuple(run.problem.target.shape)
    return [digits.digit_strip(x, shape) for x in digits.snapshot(run).values()]


def build_mmd(run) -> list:
    if "rbm_floor" not in run.cache:
        run.cache["rbm_floor"] = run.comparison.noise_floor
    return [rbm_mmd.mmd_figure(rbm_mmd.curves_now(run), run.cache["rbm_floor"])]


def build_rbm_balancing(run) -> list:
    return list(rbm_balancing.figures_now(run))


def build_moves(run) -> list:
    return [rbm_moves.move_table(run)]


RBM_VIEWS = {  # the page rebuilds its figures at most once a second while running
    "Digits": (build_digits, None),
    "MMD": (build_mmd, 1.0),
    "Balancing functions": (build_rbm_balancing, 1.0),
    "Acceptance and hops": (build_moves, None),
}


def redraw(run, name: str, live: bool = False) -> int:
    """One redraw of view ``name``: build (throttled as on the page when ``live``), serialise."""
    build, max_age = (RBM_VIEWS if rbm_targets.is_rbm(run.config.target) else VIEWS)[name]
    if live and max_age is not None:
        payload = run.throttled(name, lambda: build(run), max_age_s=max_age)
    else:
        payload = build(run)
    return _serialise(payload)


def make_run(size: int, chains_: int, burn_in: int) -> state.Run:
    cfg = replace(
        Config(),
        source="sample",
        sample=sources.SYNTHETIC,
        size=size,
        lam=1.0,
        mu=1.0,
        sigma=0.5,
        boundary="free",
        samplers=SAMPLERS,
        chains=chains_,
        burn_in=burn_in,
        steps=10**6,
    )
    image = sources.load_sample(cfg.sample, size)
    problem = sources.build_problem(cfg, image, sources.sample_dark_mask(cfg.sample, size))
    run, _ = state.build_run(cfg, problem, image)
    return run


def make_rbm_run(target: str, chains_: int, burn_in: int) -> state.Run:
    """A run of the dashboard's default RBM samplers on the shipped RBM ``target``."""
    cfg = replace(defaults_for(target=target), chains=chains_, burn_in=burn_in, steps=10**7)
    rbm = rbm_targets.load_shipped(target)
    run, _ = state.build_rbm_run(cfg, rbm, target)
    return run


def headless(run: state.Run, seconds: float) -> float:
    """Steps per second of the app's own stepping (``state.advance`` in its chunks) in the run's
    current phase, with nothing drawn."""
    phase = run.comparison.phase
    state.advance(run, state.CHUNK_S)  # warm-up: the chunk rate is learned
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds and run.comparison.phase == phase:
        steps += state.advance(run, state.CHUNK_S)
    return steps / (time.perf_counter() - start)


def redraw_times(run: state.Run, repeats: int) -> dict[str, float]:
    """Median seconds to build and serialise each view from scratch (no sampling meanwhile)."""
    out = {}
    for name in RBM_VIEWS if rbm_targets.is_rbm(run.config.target) else VIEWS:
        redraw(run, name)  # warm-up (imports, caches)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            redraw(run, name)
            times.append(time.perf_counter() - start)
        out[name] = sorted(times)[len(times) // 2]
    return out


def live(run: state.Run, view: str, seconds: float) -> dict[str, float]:
    """Sample on the worker thread while redrawing ``view`` every ``REFRESH_S`` s, as the page."""
    steps0 = run.n_steps
    state.start(run)
    draws, draw_time, start = 0, 0.0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        tick = time.perf_counter()
        redraw(run, view, live=True)
        run.last_seen = time.perf_counter()
        spent = run.last_seen - tick
        draws += 1
        draw_time += spent
        time.sleep(max(0.0, state.REFRESH_S - spent))
    elapsed = time.perf_counter() - start
    state.pause(run)
    return {
        "steps_per_second": (run.n_steps - steps0) / elapsed,
        "redraws_per_second": draws / elapsed,
        "mean_redraw_ms": 1000 * draw_time / max(draws, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="longer side of the image (64)")
    parser.add_argument("--chains", type=int, default=None, help="per sampler (4; an RBM: 8)")
    parser.add_argument("--seconds", type=float, default=2.0, help="per round and figure")
    parser.add_argument("--rounds", type=int, default=3, help="headless/live rounds")
    parser.add_argument(
        "--target",
        default="ising",
        choices=("ising", *rbm_targets.SHIPPED),
        help="ising (the image workload) or a shipped RBM (its page's workload)",
    )
    parser.add_argument(
        "--live",
        nargs="*",
        default=None,
        choices=list(dict.fromkeys([*VIEWS, *RBM_VIEWS])),
        help="views to redraw while sampling (default: Chains, Convergence; an RBM: Digits, MMD)",
    )
    parser.add_argument("--repeats", type=int, default=7, help="redraws timed per view")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the app: 1)")
    parser.add_argument(
        "--json", default="out/app_measure.json", help="where to write the numbers as JSON"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rbm = rbm_targets.is_rbm(args.target)
    if args.live is None:
        args.live = ["Digits", "MMD"] if rbm else ["Chains", "Convergence"]
    wrong = [v for v in args.live if v not in (RBM_VIEWS if rbm else VIEWS)]
    if wrong:
        parser.error(f"--live {wrong[0]} is not a view of the {args.target} page.")
    if rbm:
        chains_ = args.chains or rbm_targets.DEFAULT_CHAINS
        workload = (
            f"{len(rbm_targets.DEFAULT_SAMPLERS)} samplers "
            f"({', '.join(rbm_targets.DEFAULT_SAMPLERS)}) x {chains_} chains, RBM {args.target}"
        )
    else:
        args.chains = args.chains or 4
        workload = f"{len(SAMPLERS)} samplers x {args.chains} chains, {args.size}x{args.size}"

    results: dict = {
        "workload": workload,
        "machine": f"{platform.machine()}, torch {torch.__version__}, {args.threads} thread(s)",
        "refresh_s": state.REFRESH_S,
    }
    print(f"LSB Explorer live-view benchmark: {results['workload']} ({results['machine']})")
    for phase, burn_in in (("burn-in (learning)", 10**6), ("mixing", 300)):
        if rbm:
            run = make_rbm_run(args.target, chains_, burn_in)
        else:
            run = make_run(args.size, args.chains, burn_in)
        if burn_in < 10**6:  # get into the mixing phase with some history to draw
            state.advance(run, 120.0, burn_in + 600)
        draw = redraw_times(run, args.repeats)
        # headless and live alternate in short rounds, so that a busy machine biases neither
        rounds: dict[str, list] = {"headless": [], **{v: [] for v in args.live}}
        for _ in range(args.rounds):
            rounds["headless"].append(headless(run, args.seconds))
            for view in args.live:
                rounds[view].append(live(run, view, args.seconds))
        base = float(np.median(rounds["headless"]))
        out = {"headless_steps_per_second": base, "redraw_s": draw, "live": {}}
        print(f"\n{phase}: headless {base:8.1f} steps/s (median of {args.rounds} rounds)")
        print("  build + serialise from scratch (server side, run idle):")
        for name, seconds in draw.items():
            print(f"    {name:22s} {1000 * seconds:7.1f} ms  ({1 / seconds:6.1f} per second)")
        for view in args.live:
            shares = [
                r["steps_per_second"] / h
                for r, h in zip(rounds[view], rounds["headless"], strict=True)
            ]
            summary = {
                "steps_per_second": float(np.median([r["steps_per_second"] for r in rounds[view]])),
                "share_of_headless": float(np.median(shares)),
                "redraws_per_second": float(
                    np.median([r["redraws_per_second"] for r in rounds[view]])
                ),
                "mean_redraw_ms": float(np.median([r["mean_redraw_ms"] for r in rounds[view]])),
            }
            out["live"][view] = summary
            print(
                f"  live, {view} tab open: {summary['steps_per_second']:8.1f} steps/s = "
                f"{summary['share_of_headless']:5.1%} of headless (median per round), "
                f"{summary['redraws_per_second']:.1f} redraws/s, "
                f"{summary['mean_redraw_ms']:.1f} ms per redraw while sampling"
            )
        results[phase] = out
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2), encoding="utf-8")
        print(f"\nwritten to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
