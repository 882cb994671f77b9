"""Figure 5 of the ICML LSB paper measured: the burn-in traces of each balancing function on the
Markov networks, and the target evaluations each needs to converge.

What the authors plot (their public ``UAI/runner.py`` and ``eval.py``): per iteration of the
burn-in, each chain's summary statistic ``sum_i x_i`` (the number of variables at 1), mean and
band over their chains, against the iteration ("Markov chain time"; LSB 2 takes two learning
steps per iteration). We record the product's magnetisation ``sum_i x_i`` over +-1 states (an
affine map of theirs: ``2 * ones - n``), averaged over a seed's chains, against the *target
evaluations per chain* (the axis the claim is about: a learning step costs twice a frozen one).

"Evaluations to converge" (``settles``): the first evaluation count from which the chain mean
stays, to the end of the measured burn-in, within ``level +- 2 sigma / sqrt(chains)``, where
``level`` and ``sigma`` (the spread of one chain about it) come from long sqrt(t) runs
(``stationary``). A seed whose chain mean has not settled by the end is censored (infinite).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.networks.presets import PRESETS
from lsbcore.samplers.registry import REGISTRY
from lsbcore.studies.networks import protocol

#: The learned functions of Table 3 (the claim's "LSB") and the fixed ones they are judged against.
LEARNED = ("lsb1", "lsb2-monotone")
FIXED = ("barker", "sqrt", "min", "max")
#: Statistic recorded every step; evaluations read every CHUNK iterations (the axis' resolution).
CHUNK = 10
#: The band's half-width in standard errors of a chain mean.
BAND_Z = 2.0


def settles(trace, low: float, high: float) -> int | None:
    """The first index from which every later value of ``trace`` lies in ``[low, high]``, or
    ``None`` when its last value lies outside (it has not settled)."""
    outside = np.flatnonzero((np.asarray(trace) < low) | (np.asarray(trace) > high))
    if outside.size == 0:
        return 0
    last = int(outside[-1])
    return None if last == len(trace) - 1 else last + 1


def quartiles(values) -> tuple[float, float, float]:
    """Lower quartile, median, upper quartile of ``values`` by rank (``inf`` for censored
    values is kept, never interpolated into ``nan``)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    at = lambda q: float(v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))])  # noqa: E731
    return at(0.25), float(np.median(v)) if np.isfinite(v).all() else at(0.5), at(0.75)


def verdict(learned: dict, fixed: dict) -> str:
    """``holds`` when some learned function's upper quartile of evaluations to converge over
    seeds lies below the lower quartile of the best fixed function (the one of lowest median);
    ``does not hold`` when the best fixed function's upper quartile lies below every learned
    function's lower quartile; otherwise ``inconclusive`` (the seed spreads overlap, or nothing
    converged)."""
    best = min(fixed, key=lambda n: (quartiles(fixed[n])[1], n))
    low_f, med_f, high_f = quartiles(fixed[best])
    if not math.isfinite(med_f) and all(
        not math.isfinite(quartiles(v)[1]) for v in learned.values()
    ):
        return "inconclusive"
    if any(quartiles(v)[2] < low_f for v in learned.values()):
        return "holds"
    if all(high_f < quartiles(v)[0] for v in learned.values()):
        return "does not hold"
    return "inconclusive"


def stationary(target, chains: int, steps: int, seed: int = 0) -> dict:
    """The stationary level of the magnetisation from long sqrt(t) runs: half the chains from
    all variables at 0, half uniform; the second half of the run kept. ``level`` its mean,
    ``sigma`` one chain's spread about it, ``drift`` the change between its last two quarters,
    ``starts_gap`` the gap between the two halves' means (both small when the runs settled)."""
    from lsbcore.samplers.base import uniform_start
    from lsbcore.samplers.registry import make_sampler

    half = chains // 2
    zeros = torch.full((half, *target.shape), -1.0, dtype=torch.float64)
    x0 = torch.cat([zeros, uniform_start(target.shape, chains - half, seed)])
    sampler = make_sampler("sqrt", target, chains, seed=seed, x0=x0, backend=protocol.BACKEND)
    sampler.track_statistics()
    buffer = torch.empty(steps, chains, 5, dtype=torch.float64)
    sampler.step(steps, trace=buffer)
    kept = buffer[steps // 2 :, :, 1].numpy()
    quarter = len(kept) // 2
    return {
        "chains": chains,
        "steps": steps,
        "level": float(kept.mean()),
        "sigma": float(kept.std(axis=1).mean()),
        "drift": float(kept[quarter:].mean() - kept[:quarter].mean()),
        "starts_gap": float(kept[:, :half].mean() - kept[:, half:].mean()),
    }


def burn_in_trace(target, name: str, x0, seed: int, iterations: int, settings: dict, make):
    """One seed's burn-in of sampler ``name`` from ``x0`` (learning, for the learned ones): the
    chain mean of the magnetisation after each iteration (index 0: the start) and the target
    evaluations per chain at each (read every ``CHUNK`` iterations, the start at 0)."""
    sampler = make(name, target, x0, seed)
    learn = name in REGISTRY and REGISTRY[name].learnable
    sampler.track_statistics()
    start = float(x0.reshape(len(x0), -1).sum(1).mean())
    means, evals, base = [start], [0], sampler.n_target_evals
    done = 0
    while done < iterations:
        m = min(CHUNK, iterations - done)
        buffer = torch.empty(m, len(x0), 5, dtype=torch.float64)
        before = sampler.n_target_evals
        sampler.step(m, learn=learn, trace=buffer)
        after = sampler.n_target_evals
        means += buffer[:, :, 1].mean(1).tolist()
        # evaluations spread evenly over the chunk's iterations
        evals += [before - base + (after - before) * (k + 1) / m for k in range(m)]
        done += m
    return np.asarray(means), np.asarray(evals)


def run(networks, seeds, iterations, chains, long_run, settings, make, starts, log=print) -> dict:
    """Figure 5's measurement on ``networks``: per function and seed, evaluations to converge
    (``inf``: not within ``iterations``), evaluations to close half the start's gap to the
    level, and the chain-mean trace at a few iterations; the stationary level; the verdicts.
    ``make(name, target, x0, seed)`` builds a sampler, ``starts(shape, chains, seed)`` its
    chains' starts (the experiment's)."""
    from lsbcore.networks.presets import preset

    out = {"iterations": iterations, "chains": chains, "seeds": list(seeds), "networks": {}}
    for net in networks:
        target = preset(net)
        log(f"{net}: figure 5, the stationary level (long sqrt(t) runs)")
        level = stationary(target, long_run["chains"], long_run["steps"])
        half_width = BAND_Z * level["sigma"] / math.sqrt(chains)
        table = {}
        for name in protocol.SAMPLERS:
            log(f"{net}: figure 5, {name}")
            converge, half_gap, marks = [], [], []
            for seed in seeds:
                x0 = starts(target.shape, chains, seed)
                means, evals = burn_in_trace(target, name, x0, seed, iterations, settings, make)
                at = settles(means, level["level"] - half_width, level["level"] + half_width)
                converge.append(math.inf if at is None else float(evals[at]))
                middle = means[0] + 0.5 * (level["level"] - means[0])
                low, high = (
                    (middle, math.inf) if level["level"] >= means[0] else (-math.inf, middle)
                )
                at = settles(means, low, high)
                half_gap.append(math.inf if at is None else float(evals[at]))
                marks.append([float(means[min(i, iterations)]) for i in _marks(iterations)])
            table[name] = {"converge": converge, "half_gap": half_gap, "marks": marks}
        learned = {n: table[n]["converge"] for n in LEARNED}
        fixed = {n: table[n]["converge"] for n in FIXED}
        out["networks"][net] = {
            "stationary": level,
            "half_width": half_width,
            "samplers": table,
            "verdict": verdict(learned, fixed),
            "half_gap_verdict": verdict(
                {n: table[n]["half_gap"] for n in LEARNED}, {n: table[n]["half_gap"] for n in FIXED}
            ),
        }
    return out


def _marks(iterations: int) -> list[int]:
    """Iterations at which the report shows the chain mean: the authors' burn-in and the end."""
    burn_in = protocol.PAPER["burn_in"]
    return sorted({0, burn_in // 10, burn_in // 2, min(burn_in, iterations), iterations})


# ----------------------------------------------------------------------------- the report
BEGIN = "<!-- markov-networks-figure5:begin -->"
END = "<!-- markov-networks-figure5:end -->"


def _evals(value: float) -> str:
    return "not settled" if not math.isfinite(value) else f"{value:,.0f}"


def _cell(values) -> str:
    low, med, high = quartiles(values)
    settled = sum(math.isfinite(v) for v in values)
    return f"{_evals(med)} [{_evals(low)}, {_evals(high)}] ({settled}/{len(values)})"


def _overall(verdicts: list[str]) -> str:
    if all(v == "holds" for v in verdicts):
        return "holds"
    if all(v == "does not hold" for v in verdicts):
        return "does not hold"
    return "inconclusive"


def section(fig: dict, command: str) -> str:
    """The subsection (markers included) from ``run``'s results."""
    iterations, chains, seeds = fig["iterations"], fig["chains"], fig["seeds"]
    marks = _marks(iterations)
    lines = [
        BEGIN,
        "### Figure 5: burn-in traces and target evaluations to converge",
        "",
        f"Generated by `{command}`. What the paper plots (section 5.3, Figure 5 (a)-(b); the "
        "authors' `UAI/runner.py` and `eval.py`): each chain's summary statistic, the number of "
        "variables at 1, over the 500 burn-in iterations, against the iteration, LSB 2 taking "
        "two learning steps per iteration; it claims LSB reduces the target evaluations needed "
        "to converge. What we measure: the magnetisation (sum of the +-1 variables, an affine "
        "map of theirs), averaged over a seed's "
        f"{chains} chains from every variable at 0, under the authors' setup above, against "
        f"the target evaluations per chain (read every {CHUNK} iterations), over a burn-in of "
        f"{iterations:,} iterations in which the learned functions learn throughout (the "
        f"paper's {protocol.PAPER['burn_in']} iterations, continued so that settling can be "
        f"seen), seeds {seeds[0]}-{seeds[-1]}.",
        "",
        "**Evaluations to converge**: the first evaluation count from which a seed's chain mean "
        f"stays, to the end of the burn-in, within level ± {BAND_Z:g} sigma / sqrt({chains}), "
        "where level and sigma (one chain's spread about it) come from long sqrt(t) runs (half "
        "the chains from 0, half uniform, the second half kept); 'not settled' when it has not "
        "by the end. **Evaluations to half the gap**: from when the chain mean stays past the "
        "midpoint between its start and the level (a speed that every function reaches). Cells: "
        "median [lower, upper quartile] over seeds (seeds settled / seeds). **Rule**: on a "
        "network the claim holds when a learned function (LSB 1 or LSB 2) has an upper "
        "quartile below the lower quartile of the best fixed function (lowest median), does "
        "not hold when that fixed function's upper quartile is below both learned functions' "
        "lower quartiles, and is inconclusive otherwise (the seed spreads overlap).",
        "",
    ]
    verdicts, half = [], []
    for net, r in fig["networks"].items():
        s = r["stationary"]
        lines += [
            f"**{PRESETS[net].label}**: level {s['level']:.2f}, sigma {s['sigma']:.2f}, band "
            f"± {r['half_width']:.2f} ({s['chains']} chains, {s['steps']:,} sqrt(t) steps; "
            f"between the last two quarters the level moved {s['drift']:+.2f}, and the chains "
            f"from 0 ended {s['starts_gap']:+.2f} from the uniform ones).",
            "",
            "| sampler | evaluations to converge | evaluations to half the gap | chain mean at "
            "iteration " + ", ".join(f"{m:,}" for m in marks) + " (median over seeds) |",
            "|---|---|---|---|",
        ]
        for name in protocol.SAMPLERS:
            t = r["samplers"][name]
            trace = np.median(np.asarray(t["marks"]), axis=0)
            lines.append(
                f"| {protocol.LABELS[name]} | {_cell(t['converge'])} | {_cell(t['half_gap'])} | "
                + ", ".join(f"{v:.1f}" for v in trace)
                + " |"
            )
        lines += [
            "",
            f"On {PRESETS[net].label}, evaluations to converge: {r['verdict']}; evaluations to "
            f"half the gap: {r['half_gap_verdict']}.",
            "",
        ]
        verdicts.append(r["verdict"])
        half.append(r["half_gap_verdict"])
    labels = [PRESETS[n].label for n in fig["networks"]]
    lines += [
        f"- **LSB reduces the target evaluations needed to converge** (ICML section 5.3, "
        f"Figure 5), by the rule above on both networks: {_overall(verdicts)} (per network: "
        + ", ".join(f"{n} {v}" for n, v in zip(labels, verdicts, strict=True))
        + "; by evaluations to half the gap: "
        + ", ".join(f"{n} {v}" for n, v in zip(labels, half, strict=True))
        + "). A learned step costs 200 evaluations per chain, a fixed one 100.",
        END,
    ]
    return "\n".join(lines) + "\n"


def put(doc: str, text: str, outer_end: str) -> str:
    """``doc`` with its Figure 5 subsection replaced by ``text``, or ``text`` put just before
    the Markov-network section's end marker ``outer_end``; ``ValueError`` when it has neither."""
    start, stop = doc.find(BEGIN), doc.find(END)
    if 0 <= start < stop:
        return doc[:start] + text + doc[stop + len(END) :].lstrip("\n")
    at = doc.find(outer_end)
    if at < 0:
        raise ValueError("no Markov-network section to put Figure 5 into")
    return doc[:at] + text + doc[at:]


__all__ = [
    "BEGIN", "END", "FIXED", "LEARNED", "burn_in_trace", "put", "quartiles", "run", "section",
    "settles", "stationary", "verdict",
]  # fmt: skip
