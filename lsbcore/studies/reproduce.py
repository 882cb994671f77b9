"""``docs/reproduction.md`` from runs of the current code.

Run ``python -m lsbcore.studies.reproduce`` (``make reproduction``).

Every number in the document is computed here from experiment runs (``lsbcore.studies.experiment``),
one run per case, variant and seed:

- ``spec``: the published protocol (burn-in 2000, paper ESS of the mixing phase, L = 500);
- ``authors``: the authors' scripts (``--protocol authors``: their burn-in, their ESS window
  from half-way through burn-in, their L per case, LSB 2 stepped twice per burn-in iteration);
- ``authors-objective``: as ``authors``, LSB 1 and LSB 2 learning with the authors' log p~;
- ``authors-single``: as ``authors``, LSB 2 stepped once per burn-in iteration.

Every chain starts from its own random state (the authors' runner). A paper value counts as
reproduced when it is a plausible draw from the distribution our seeds show: the paper's mean
is one seed's mean over 30 chains, so ``z = (paper - ours) / (s sqrt(1 + 1/S))`` with ``s`` the
std of our per-seed means over ``S`` seeds, and ``|z|`` within the 95% prediction bound
(Student's t with ``S - 1`` degrees of freedom) holds. A value within a bound so wide it reaches
zero (``wide_bound``) is reported as "within a wide bound", not as reproduced: such a bound
cannot fail any value from 0 to twice ours.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import platform
import shutil
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

from lsbcore import interrupt, out_path
from lsbcore.balancing.functions import make_balancing
from lsbcore.balancing.json_io import load_balancing
from lsbcore.bounded_json import read_capped
from lsbcore.cases import PAPER_CASES
from lsbcore.studies.experiment.cli import main as experiment
from lsbcore.studies.experiment.report import PAPER_TABLE2
from lsbcore.studies.experiment.runs_file import MAX_BYTES, load_runs
from lsbcore.studies.ledger.document import ledger_of, without_ledger
from lsbcore.studies.paper_versions import ARXIV_TABLE1, ARXIV_TABLE1_SETTINGS, ARXIV_TABLE2
from lsbcore.studies.shared.commit import commit

__all__ = [
    "VARIANTS",
    "collapse_spread",
    "main",
    "reproduce",
    "verdict",
    "wide_bound",
    "z_limit",
    "z_score",
]

SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2")
LABELS = {
    "barker": "t/(1+t)",
    "sqrt": "sqrt(t)",
    "min": "min(1,t)",
    "max": "max(1,t)",
    "lsb1": "LSB 1",
    "lsb2": "LSB 2",
}
#: variant -> (extra experiment arguments, samplers)
VARIANTS = {
    "spec": (["--protocol", "spec"], SAMPLERS),
    "authors": (["--protocol", "authors"], SAMPLERS),
    "authors-objective": (["--protocol", "authors", "--objective", "authors"], ("lsb1", "lsb2")),
    "authors-single": (["--protocol", "authors", "--lsb2-burnin-steps", "1"], ("lsb2",)),
}


def z_limit(seeds: int) -> float:
    """The 95% prediction bound for one more seed's mean given ``seeds`` of them: Student's t
    with ``seeds - 1`` degrees of freedom (the seed std is itself estimated from few seeds)."""
    from scipy.stats import t

    return float(t.ppf(0.975, seeds - 1))


# LSB 2 has collapsed to a constant h when log g(t) - log(1 + t) varies by less than this
# over log t in [-10, 10] (g = c (1 + t) / 2 exactly gives 0; sqrt(t) gives 10)
COLLAPSE_SPREAD = 0.05
DEFAULT_WORK = Path("out/reproduction")  # under the scratch folder out/ (git ignores it)


# ----------------------------------------------------------------------------- measures
def z_score(paper: float, seed_means: list[float]) -> float | None:
    """How many standard deviations of one seed's mean the paper's value lies from ours."""
    if len(seed_means) < 2:
        return None
    s = float(np.std(seed_means, ddof=1))
    if s == 0.0:
        return None
    return (paper - float(np.mean(seed_means))) / (s * math.sqrt(1.0 + 1.0 / len(seed_means)))


def wide_bound(seed_means: list[float], limit: float) -> bool:
    """Whether the 95% prediction bound of one more seed's mean is too wide to fail: its
    half-width ``limit * s * sqrt(1 + 1/S)`` is at least our mean, so the bound reaches zero and
    every value from 0 (no mixing at all) to twice ours would count as a plausible draw."""
    if len(seed_means) < 2:
        return False
    s = float(np.std(seed_means, ddof=1))
    half = limit * s * math.sqrt(1.0 + 1.0 / len(seed_means))
    return half >= float(np.mean(seed_means))


#: The three verdicts on a paper value (the words the document prints).
REPRODUCED, WIDE, MISSED = "reproduced", "within a wide bound", "not reproduced"


def verdict(paper: float, seed_means: list[float], limit: float) -> str:
    """``REPRODUCED`` when ``|z| <= limit`` on a bound that could fail, ``WIDE`` when ``|z| <=
    limit`` only on a bound that reaches zero (``wide_bound``), else ``MISSED`` (a value outside
    the bound, or too few seeds or no spread to judge)."""
    z = z_score(paper, seed_means)
    if z is None or abs(z) > limit:
        return MISSED
    return WIDE if wide_bound(seed_means, limit) else REPRODUCED


def collapse_spread(balancing) -> float:
    """Range of ``log g(t) - log(1 + t)`` over ``log t`` in [-10, 10] for a balancing function
    (or its JSON): 0 when LSB 2's network has collapsed to a constant ``h`` (``g``
    proportional to 1 + t)."""
    import torch

    if isinstance(balancing, str):
        balancing = load_balancing(balancing)
    s = torch.linspace(-10.0, 10.0, 401, dtype=torch.float64)
    with torch.no_grad():
        gap = balancing.log_g(s) - torch.nn.functional.softplus(s)  # log(1 + e^s)
    return float(gap.max() - gap.min())


def burn_in_reach(traces: Path) -> dict:
    """Per sampler, per chain: the steps and target evaluations until ``log p~`` first reaches
    that chain's mean over the mixing phase (inf when it does not within burn-in)."""
    rows: dict = {}
    with open(traces, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        col = {name: header.index(name) for name in ("sampler", "step", "target_evals")}
        col.update(phase=header.index("phase"), chain=header.index("chain"))
        col["log_p"] = header.index("log_p")
        for r in reader:
            key = (r[col["sampler"]], int(r[col["chain"]]))
            rows.setdefault(key, []).append(
                (r[col["phase"]], int(r[col["step"]]), int(r[col["target_evals"]]),
                 float(r[col["log_p"]]))
            )  # fmt: skip
    out: dict = {}
    for (name, _), records in rows.items():
        level = np.mean([lp for phase, _, _, lp in records if phase == "mixing"])
        burn = sorted((s, e, lp) for phase, s, e, lp in records if phase == "burnin")
        start_evals = burn[0][1]
        reached = next(((s, e - start_evals) for s, e, lp in burn if lp >= level), None)
        steps, evals = (math.inf, math.inf) if reached is None else reached
        out.setdefault(name, {"steps": [], "evals": []})
        out[name]["steps"].append(steps)
        out[name]["evals"].append(evals)
    return out


# ----------------------------------------------------------------------------- runs
def run_one(case: int, variant: str, seed: int, work: Path, settings: list[str]) -> dict:
    """One experiment run; returns what the document needs from it (traces are deleted)."""
    extra, samplers = VARIANTS[variant]
    out = work / f"case{case}" / variant / f"seed{seed}"
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)  # the run's --out goes in an existing folder
    argv = ["--case", str(case), "--seed", str(seed), "--samplers", ",".join(samplers)]
    argv += [*extra, *settings, "--csv-thin", "1000", "--quiet", "--out", str(out)]
    code = experiment(argv)
    if code != 0:
        raise RuntimeError(f"the experiment failed ({code}): {' '.join(argv)}")
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    reach = burn_in_reach(out / "traces.csv")
    (out / "traces.csv").unlink()
    run = {"config": results["config"], "wall_seconds": results["timings"]["total_seconds"]}
    for name, entry in results["samplers"].items():
        run[name] = {
            "ess": entry["ess_paper_mean"],
            "ess_chain_std": entry["ess_paper_std"],
            "accept": entry["accept_rate"],
            "burnin_steps": reach[name]["steps"],
            "burnin_evals": reach[name]["evals"],
        }
        learned = out / f"learned_{name}.json"
        if name == "lsb2" and learned.exists():
            run[name]["collapse_spread"] = collapse_spread(learned.read_text(encoding="utf-8"))
    return run


def reproduce(
    cases=(1, 2, 3, 4),
    seeds: int = 5,
    work: Path = DEFAULT_WORK,
    settings: list[str] | None = None,
    variants=tuple(VARIANTS),
    log=print,
) -> dict:
    """Every run: ``{case: {variant: [run per seed]}}``, plus the total wall time."""
    settings = list(settings or [])
    started = time.perf_counter()
    runs: dict = {}
    for case in cases:
        for variant in variants:
            for seed in range(seeds):
                t = time.perf_counter()
                run = run_one(case, variant, seed, work, settings)
                runs.setdefault(case, {}).setdefault(variant, []).append(run)
                log(f"case {case} {variant} seed {seed}: {time.perf_counter() - t:.1f} s")
    return {"runs": runs, "wall_seconds": time.perf_counter() - started, "seeds": seeds}


# ----------------------------------------------------------------------------- document
def _seed_means(runs: list, name: str) -> list[float]:
    return [r[name]["ess"] for r in runs if name in r and r[name]["ess"] is not None]


def _cell(means: list[float], chain_std: list[float] | None = None) -> str:
    """``mean ± chain std [seed std]``: the mean over seeds (and chains), the std over chains
    (mean over seeds, as the paper's ±) and the std of the per-seed means."""
    if not means:
        return "n/a"
    text = f"{np.mean(means):.2f}"
    if chain_std:
        text += f" ± {np.mean(chain_std):.2f}"
    if len(means) > 1:
        text += f" [{np.std(means, ddof=1):.2f}]"
    return text


def _ess_table(
    runs: dict, variant: str, with_z: bool, limit: float = math.inf
) -> tuple[list[str], list]:
    """Markdown rows of one variant's ESS for every case; and (case, sampler, z, verdict) per
    cell (the verdict under ``limit``)."""
    head = "| case | | " + " | ".join(LABELS[n] for n in SAMPLERS) + " |"
    lines = [head, "|---|---|" + "---|" * len(SAMPLERS)]
    zs = []
    for case, by_variant in runs.items():
        name = PAPER_CASES[case][0]
        paper = PAPER_TABLE2[case]
        lines.append(
            f"| {case} {name} | paper | "
            + " | ".join(f"{paper[n][0]:.2f} ± {paper[n][1]:.2f}" for n in SAMPLERS)
            + " |"
        )
        cells = []
        for n in SAMPLERS:
            means = _seed_means(by_variant.get(variant, []), n)
            chain_std = [
                r[n]["ess_chain_std"]
                for r in by_variant.get(variant, [])
                if n in r and r[n]["ess_chain_std"] is not None
            ]
            text = _cell(means, chain_std)
            if with_z and means:
                z = z_score(paper[n][0], means)
                judged = verdict(paper[n][0], means, limit)
                zs.append((case, n, z, judged))
                if z is not None:
                    text += f" z={z:+.1f}" + {REPRODUCED: "", WIDE: " wide", MISSED: " ✗"}[judged]
            cells.append(text)
        lines.append("| | **ours** | " + " | ".join(cells) + " |")
    return lines, zs


def _burn_in_speedups(by_variant: dict) -> list[str]:
    """LSB 2's burn-in speed-up over sqrt(t) per iteration with LSB 2 stepped twice (the
    paper's axis), per step and per target evaluation; empty without the runs."""
    lsb2_spec, lsb2_evals = _reach(by_variant.get("spec", []), "lsb2")
    sqrt_spec, sqrt_evals = _reach(by_variant.get("spec", []), "sqrt")
    lsb2_double, _ = _reach(by_variant.get("authors", []), "lsb2")
    if not (lsb2_spec and sqrt_spec and lsb2_double):
        return []
    pairs = [
        (_median([v / 2 for v in lsb2_double]), _median(sqrt_spec)),
        (_median(lsb2_spec), _median(sqrt_spec)),
        (_median(lsb2_evals), _median(sqrt_evals)),
    ]
    return [
        f"{sqrt / lsb2:.2f}x" if math.isfinite(lsb2) and math.isfinite(sqrt) else "n/a"
        for lsb2, sqrt in pairs
    ]


def _reach(runs: list, name: str) -> tuple[list, list]:
    """Burn-in steps and target evaluations to the mixing level, every chain of every seed."""
    steps = [v for r in runs if name in r for v in r[name]["burnin_steps"]]
    evals = [v for r in runs if name in r for v in r[name]["burnin_evals"]]
    return steps, evals


def _median(values) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64)))


def document(data: dict, command: str) -> str:
    """The Markdown of docs/reproduction.md from ``reproduce``'s runs."""
    runs, seeds = data["runs"], data["seeds"]
    limit = z_limit(seeds)
    cases = list(runs)
    some = next(iter(next(iter(runs.values())).values()))[0]["config"]
    out = [
        "# Reproducing the paper's Ising experiments",
        "",
        f"Generated by `{command}` on {data.get('date') or date.today().isoformat()} from commit "
        f"`{data.get('commit') or commit()}` ({platform.machine()}, {some['device']}, "
        f"{data['wall_seconds'] / 60:.0f} min of runs). "
        "Every number below comes from that command's runs; rerun it to regenerate this page. "
        "The method, the ESS definition and how the authors' scripts differ from the published "
        "protocol are in [method.md](method.md).",
        "",
        f"Settings: cases {', '.join(map(str, cases))} on a {some['size']}x{some['size']} "
        f"periodic lattice, {some['chains']} chains per sampler, each with its own noisy alpha "
        f"and its own random start, {some['steps']:,} mixing iterations, {seeds} seeds "
        f"(0-{seeds - 1}; each seed draws new alphas, starts and sampler streams). Learning: "
        f"Adam, lr {some['learning']['lr']}, LSB 2 with {some['learning']['hidden']} hidden "
        "units. Cells give the paper ESS as `mean ± std over chains [std over seeds]`: the mean "
        "over seeds and chains, the standard deviation over chains (mean over seeds; the "
        "paper's ± is this, over its 30 chains) and, in brackets, the standard deviation of the "
        "per-seed means (the spread a rerun of the paper's table would show).",
        "",
        "A paper value counts as reproduced when it is a plausible draw from our seeds: the "
        "paper's mean is one seed's mean over 30 chains, so "
        "`z = (paper - ours) / (s sqrt(1 + 1/S))` with `s` the std of our per-seed means over "
        f"`S` = {seeds} seeds; it holds when |z| <= {limit:.2f}, the 95% prediction bound "
        f"(Student's t with {seeds - 1} degrees of freedom, since `s` is itself estimated from "
        f"{seeds} seeds); ✗ marks the others. A bound can be too wide to fail: when its "
        f"half-width `{limit:.2f} s sqrt(1 + 1/S)` is at least our mean, it reaches zero and "
        "would pass any value from 0 (no mixing at all) to twice ours. A paper value inside such "
        "a bound is marked *wide* and counted as **within a wide bound**, not as reproduced.",
        "",
        f"Noise: every chain's alpha is {_noise_text(some.get('noise_model', 'uniform'))}. "
        "The paper's text describes Gaussian pixels instead (`y = mu truth + N(0, sigma^2)`, "
        "`alpha = mu y / sigma^2`: `--noise-model gaussian`), under which mu = sigma = 3 is not "
        "clean (alpha's sign is wrong at a site with probability Phi(-1) = 0.16); Table 2's "
        "numbers come from the authors' code, so its form is the one compared here.",
        "",
    ]

    # ------------------------------------------------------------ authors
    lines, zs_authors = _ess_table(runs, "authors", with_z=True, limit=limit)
    authors_cfg = {c: v["authors"][0]["config"] for c, v in runs.items() if "authors" in v}
    windows = "; ".join(
        f"case {c}: burn-in {cfg['burn_in']:,}, ESS from iteration {cfg['ess_from_step']:,}, "
        f"L = {cfg['max_lag']}"
        for c, cfg in authors_cfg.items()
    )
    out += [
        "## Table 2 under the authors' protocol (`--protocol authors`)",
        "",
        f"Their scripts' numbers: {windows}; LSB 2 takes two steps per burn-in iteration.",
        "",
        *lines,
        "",
    ]
    target_cells = [cell for cell in zs_authors if cell[0] in (2, 4) and cell[1] in SAMPLERS[:5]]
    verdicts = [
        "- **ICML rows of cases 2 and 4, fixed functions and LSB 1**: "
        + _verdict_text(runs, target_cells, limit),
        "- **Every cell** under the authors' protocol: "
        + _verdict_text(runs, zs_authors, limit, missed_detail=False),
    ]

    # ------------------------------------------------------------ spec
    lines, _ = _ess_table(runs, "spec", with_z=False)
    spec_cfg = next(v["spec"][0]["config"] for v in runs.values() if "spec" in v)
    out += [
        "## Under the published protocol (`--protocol spec`)",
        "",
        f"Burn-in {spec_cfg['burn_in']:,} iterations for every case, one step per iteration for "
        f"every sampler, the paper ESS of the {spec_cfg['steps']:,} mixing iterations only, "
        f"L = {spec_cfg['max_lag']}.",
        "",
        *lines,
        "",
    ]

    # ------------------------------------------------------------ claims
    out += ["## Which claims hold", "", *verdicts]
    for variant in ("authors", "spec"):
        worst = []
        for case, by_variant in runs.items():
            means = {n: np.mean(_seed_means(by_variant.get(variant, []), n) or [np.nan])
                     for n in SAMPLERS[:4]}  # fmt: skip
            if all(np.isfinite(list(means.values()))):
                worst.append((case, min(means, key=means.get)))
        if worst:
            ok = [c for c, n in worst if n == "max"]
            text = (
                f"- **max(1,t) mixes worst of the fixed functions** ({variant} protocol): in "
                f"{len(ok)} of {len(worst)} cases"
            )
            others = [f"case {c}: {LABELS[n]}" for c, n in worst if n != "max"]
            out.append(text + (f" (lowest elsewhere: {', '.join(others)})." if others else "."))
    for variant in ("authors", "spec"):
        ratios = []
        for case, by_variant in runs.items():
            runs_v = by_variant.get(variant, [])
            best = max(SAMPLERS[:4], key=lambda n: np.mean(_seed_means(runs_v, n) or [-np.inf]))
            lsb1 = _seed_means(runs_v, "lsb1")
            top = _seed_means(runs_v, best)
            if lsb1 and top:
                ratios.append(f"case {case}: {np.mean(lsb1) / np.mean(top):.2f} of {LABELS[best]}")
        if ratios:
            out.append(
                f"- **LSB 1 against the best fixed function** ({variant} protocol, ratio of "
                f"mean ESS): {'; '.join(ratios)}."
            )

    if 3 in runs and _burn_in_speedups(runs[3]):
        iteration, step, evaluation = _burn_in_speedups(runs[3])
        out.append(
            "- **LSB 2 burns in 'twice as fast' as sqrt(t) in case 3**: per iteration with LSB 2 "
            f"stepped twice, as the paper plotted, {iteration}; per step {step}; per target "
            f"evaluation {evaluation} (see Burn-in speed)."
        )
    # ------------------------------------------------------------ LSB 2
    out += ["", "## LSB 2: spread over seeds and the collapse to a constant h", ""]
    references = ", ".join(
        f"{collapse_spread(make_balancing(n)):.2f} for {LABELS[n]}" for n in SAMPLERS[:4]
    )
    out.append(
        "LSB 2's network can collapse to a constant `h`, which makes `g(t)` proportional to "
        "`(1 + t)/2`. The spread of `log g(t) - log(1 + t)` over `log t` in [-10, 10] measures "
        f"it (0 for a collapsed network; {references}); below {COLLAPSE_SPREAD} counts as "
        "collapsed."
    )
    out += ["", "| case | variant | ESS per seed | collapse spread per seed | collapsed |"]
    out.append("|---|---|---|---|---|")
    for case, by_variant in runs.items():
        for variant in ("authors", "spec", "authors-single", "authors-objective"):
            rs = [r for r in by_variant.get(variant, []) if "lsb2" in r]
            if not rs:
                continue
            each = [r["lsb2"]["ess"] for r in rs]
            ess = ", ".join("n/a" if e is None else f"{e:.2f}" for e in each)
            spreads = [r["lsb2"].get("collapse_spread") for r in rs]
            known = [s for s in spreads if s is not None]
            collapsed = sum(s < COLLAPSE_SPREAD for s in known)
            out.append(
                f"| {case} | {variant} | {ess} | "
                + ", ".join("n/a" if s is None else f"{s:.3f}" for s in spreads)
                + f" | {collapsed} of {len(known)} |"
            )

    # ------------------------------------------------------------ objective, double step
    out += ["", "## The objective's log p~ and LSB 2's double step", ""]
    out.append(
        "Their learning objective computes `log p~(x')` without the `x_i` factor on the lambda "
        "term (`--objective authors`); it matters only where lambda > 0 (cases 3 and 4). Their "
        "runner steps LSB 2 twice per burn-in iteration (`--lsb2-burnin-steps 1` takes one). "
        "Paper ESS under the authors' protocol, mean [seed std]:"
    )
    out += ["", "| case | sampler | as the authors run it | exact objective -> authors' | "
            "two burn-in steps -> one |", "|---|---|---|---|---|"]  # fmt: skip
    for case, by_variant in runs.items():
        for n in ("lsb1", "lsb2"):
            base = _seed_means(by_variant.get("authors", []), n)
            obj = _seed_means(by_variant.get("authors-objective", []), n)
            single = _seed_means(by_variant.get("authors-single", []), n)
            if not base:
                continue
            out.append(
                f"| {case} | {LABELS[n]} | {_cell(base)} | {_cell(obj) if obj else '—'} | "
                f"{_cell(single) if single else '—'} |"
            )

    # ------------------------------------------------------------ burn-in speed
    out += ["", "## Burn-in speed", ""]
    out.append(
        "Steps, and target evaluations per chain, until `log p~(x)` first reaches the chain's "
        "own mean over the mixing phase: the median over chains and seeds of the spec runs, "
        "where every sampler takes one step per iteration (a learning step evaluates the "
        "proposed and a uniformly flipped neighbourhood, so it costs twice a frozen step). In "
        "brackets: the chains that got there within burn-in."
    )
    out += ["", "| case | " + " | ".join(LABELS[n] for n in SAMPLERS) + " |",
            "|---|" + "---|" * len(SAMPLERS)]  # fmt: skip
    for case, by_variant in runs.items():
        cells = []
        for n in SAMPLERS:
            steps, evals = _reach(by_variant.get("spec", []), n)
            if not steps:
                cells.append("n/a")
                continue
            reached = sum(math.isfinite(v) for v in steps)
            if math.isfinite(_median(steps)):
                text = f"{_median(steps):,.0f} steps, {_median(evals):,.0f} evals"
            else:
                text = "not reached"
            cells.append(f"{text} ({reached}/{len(steps)})")
        out.append(f"| {case} | " + " | ".join(cells) + " |")
    out += [
        "",
        "The paper: LSB 2 reaches convergence in fewer target evaluations, in case 3 'twice as "
        "fast' as sqrt(t), on a plot whose x-axis counts iterations while LSB 2 took two steps "
        "per iteration. LSB 2's speed-up over sqrt(t) (sqrt's median over LSB 2's) on each axis:",
        "",
        "| case | per iteration, LSB 2 stepped twice (the paper's axis) | per step | "
        "per target evaluation |",
        "|---|---|---|---|",
    ]
    for case, by_variant in runs.items():
        speedups = _burn_in_speedups(by_variant)
        if speedups:
            out.append(f"| {case} | " + " | ".join(speedups) + " |")
    out += ["", "## What explains the differences", "", *_explanations(runs)]
    out += [*_arxiv_section(), ""]
    return "\n".join(out)


def _explanations(runs: dict) -> list[str]:
    """The findings, each with the numbers of these runs behind it."""
    lines = []
    window = []
    for case, by_variant in runs.items():
        spec = _seed_means(by_variant.get("spec", []), "barker")
        authors = _seed_means(by_variant.get("authors", []), "barker")
        if spec and authors:
            window.append(f"case {case}: {np.mean(spec):.2f} against {np.mean(authors):.2f}")
    if window:
        lines.append(
            "- **The window.** The published protocol (mixing phase only, L = 500) does not give "
            "Table 2: the authors' scripts open the ESS window half-way through burn-in, so the "
            "series includes the approach to the posterior, whose drift counts as "
            "autocorrelation, and case 4 uses L = 100. t/(1+t), mixing only against their "
            f"window: {'; '.join(window)}."
        )
    spreads = {"low": [], "high": []}
    reference = collapse_spread(make_balancing("max"))
    for case, by_variant in runs.items():
        for variant in ("authors", "spec"):
            for r in by_variant.get(variant, []):
                spread = r.get("lsb2", {}).get("collapse_spread")
                if spread is not None and r["lsb2"]["ess"] is not None:
                    side = "low" if spread < reference else "high"
                    spreads[side].append((case, variant, r["lsb2"]["ess"], r["lsb2"]["ess"]))
    four = {k: [e for c, _, e, _ in v if c == 4] for k, v in spreads.items()}
    if four["low"] or four["high"]:
        lines.append(
            "- **LSB 2's collapse.** In case 4, the runs (both protocols) whose LSB 2 ended with "
            f"a spread below max(1,t)'s ({reference:.2f}), that is nearly `g` proportional to "
            f"`1 + t`, had a mean ESS of {_mean_text(four['low'])} ({len(four['low'])} runs); "
            f"the others {_mean_text(four['high'])} ({len(four['high'])} runs). Which way a "
            "seed's network goes decides LSB 2's case-4 value, hence its large seed spread; the "
            "paper's 20.11 is one such draw."
        )
    objective, single = [], []
    for case, by_variant in runs.items():
        base = _seed_means(by_variant.get("authors", []), "lsb2")
        obj = _seed_means(by_variant.get("authors-objective", []), "lsb2")
        one = _seed_means(by_variant.get("authors-single", []), "lsb2")
        if base and obj:
            objective.append(f"case {case}: {np.mean(base):.2f} -> {np.mean(obj):.2f}")
        if base and one:
            single.append(f"case {case}: {np.mean(base):.2f} -> {np.mean(one):.2f}")
    if objective:
        lines.append(
            "- **The objective's log p~.** The term it enters is weighted by `p^_b`, close to 0 "
            "for every chain but the one with the largest `log p~` (each chain has its own "
            "alpha), so the authors' form changes little: LSB 2, exact -> authors' objective, "
            f"{'; '.join(objective)} (LSB 1 in the table above)."
        )
    if single:
        lines.append(
            "- **The double step.** LSB 2 learns from twice as many steps under the authors' "
            "runner; with one step per burn-in iteration its ESS under their window goes "
            f"{'; '.join(single)}."
        )
    return lines


def _miss_text(runs: dict, case: int, name: str, z: float | None) -> str:
    """A missed cell, with its difference against the standard error of a 30-chain mean
    that the chain spread implies (the paper's table is one such mean)."""
    authors = [r for r in runs[case].get("authors", []) if name in r]
    means = _seed_means(authors, name)
    chain_std = [r[name]["ess_chain_std"] for r in authors if r[name]["ess_chain_std"] is not None]
    text = f"case {case} {LABELS[name]} (z = {'n/a' if z is None else f'{z:+.1f}'}"
    if means and chain_std:
        gap = abs(PAPER_TABLE2[case][name][0] - np.mean(means))
        chains = authors[0]["config"]["chains"]
        text += (
            f"; the gap {gap:.2f} is {gap / (np.mean(chain_std) / math.sqrt(chains)):.1f} standard "
            f"errors of a {chains}-chain mean by the chain spread"
        )
    return text + ")"


def _verdict_text(runs: dict, cells: list, limit: float, missed_detail: bool = True) -> str:
    """``cells`` (case, sampler, z, verdict) counted by verdict, the wide and missed ones named."""
    held = [c for c in cells if c[3] == REPRODUCED]
    wide = [c for c in cells if c[3] == WIDE]
    missed = [c for c in cells if c[3] == MISSED]
    text = f"{len(held)} of {len(cells)} cells reproduced"
    if wide:
        text += (
            f", {len(wide)} within a wide bound ("
            + "; ".join(_wide_text(runs, c, n, limit) for c, n, _, _ in wide)
            + ")"
        )
    text += f", {len(missed)} not."
    if missed and missed_detail:
        text += " Not reproduced: " + "; ".join(_miss_text(runs, c, n, z) for c, n, z, _ in missed)
        text += "."
    elif missed:
        text += " Not reproduced: " + ", ".join(f"case {c} {LABELS[n]}" for c, n, _, _ in missed)
        text += "."
    return text


def _wide_text(runs: dict, case: int, name: str, limit: float) -> str:
    """A cell within a wide bound: the paper's value, ours and the bound's ends."""
    means = _seed_means(runs[case].get("authors", []), name)
    m, s = float(np.mean(means)), float(np.std(means, ddof=1))
    half = limit * s * math.sqrt(1.0 + 1.0 / len(means))
    return (
        f"case {case} {LABELS[name]}: paper {PAPER_TABLE2[case][name][0]:.2f}, ours {m:.2f} "
        f"[{s:.2f}], bound {m - half:.1f} to {m + half:.1f}"
    )


def _noise_text(model: str) -> str:
    """The noise model's formula, as the document prints it."""
    if model == "gaussian":
        return (
            "`mu (mu truth + N(0, sigma^2)) / sigma^2` (the paper's text, `--noise-model gaussian`)"
        )
    return "`mu truth + U(-sigma, sigma)` (the authors' code, `--noise-model uniform`, the default)"


def _arxiv_section() -> list[str]:
    """The arXiv version's Tables 1 and 2 beside the ICML Table 2 this page compares with."""
    out = ["", "## The arXiv version's tables", ""]
    out.append(
        "The paper exists in two versions: the ICML 2022 proceedings and an earlier arXiv "
        "preprint. **Every comparison on this page is with the ICML version's Table 2.** The "
        "arXiv version's Table 2 reports the same four cases with other numbers; as printed, "
        "ICML -> arXiv, mean ± std over chains (**bold**: each version's best in the case):"
    )
    out += ["", "| case | " + " | ".join(LABELS[n] for n in SAMPLERS) + " |",
            "|---|" + "---|" * len(SAMPLERS)]  # fmt: skip
    ratios = {}
    for case in PAPER_TABLE2:
        icml, arxiv = PAPER_TABLE2[case], ARXIV_TABLE2[case]
        best_icml = {n for n in SAMPLERS if icml[n][0] == max(v[0] for v in icml.values())}
        best_arxiv = {n for n in SAMPLERS if arxiv[n][0] == max(v[0] for v in arxiv.values())}
        cells = []
        for n in SAMPLERS:
            a = f"{icml[n][0]:.2f} ± {icml[n][1]:.2f}"  # as printed: two decimals throughout
            digits = 1 if arxiv[n][0] >= 10 else 2  # as printed: 32.8 ± 9.2, 2.60 ± 1.46
            b = f"{arxiv[n][0]:.{digits}f} ± {arxiv[n][1]:.{digits}f}"
            cells.append(
                (f"**{a}**" if n in best_icml else a)
                + " -> "
                + (f"**{b}**" if n in best_arxiv else b)
            )
            ratios.setdefault(case, []).append(arxiv[n][0] / icml[n][0])
        out.append(f"| {case} | " + " | ".join(cells) + " |")
    spans = "; ".join(f"case {c}: {min(r):.2f} to {max(r):.2f}" for c, r in ratios.items())
    out += ["", f"arXiv over ICML, per cell: {spans}."]
    same = []
    for row, ((lam, mu, sigma), case) in ARXIV_TABLE1_SETTINGS.items():
        equal = all(ARXIV_TABLE1[row][n] == ARXIV_TABLE2[case][n] for n in ARXIV_TABLE1[row])
        same.append(
            f"'{row}' ((lambda, mu, sigma) = ({lam:g}, {mu:g}, {sigma:g}), case {case}): "
            + ("the same numbers as its Table 2's case" if equal else "other numbers than its "
               "Table 2's case")
        )  # fmt: skip
    out += [
        "",
        "The arXiv version's Table 1 (is there a universally optimal fixed function?) has two "
        "rows, which its text gives as "
        + "; ".join(same)
        + ". Its sqrt(t) column is lost in our text of the paper, so only t/(1+t), min(1,t) "
        "and max(1,t) are compared.",
    ]
    return out


def _mean_text(values: list[float]) -> str:
    return "n/a" if not values else f"{np.mean(values):.2f}"


def _cases(parser, text: str) -> list[int]:
    """``--cases``: distinct paper case numbers (a case listed twice would run twice)."""
    try:
        cases = [int(c) for c in text.split(",")]
    except ValueError:
        parser.error(f"--cases must be comma-separated numbers, got {text[:40]!r}")
    if not cases or any(c not in PAPER_CASES for c in cases):
        parser.error(f"--cases must be among {sorted(PAPER_CASES)}, got {text[:40]!r}")
    twice = sorted({c for c in cases if cases.count(c) > 1})
    if twice:
        parser.error(f"--cases lists case {twice[0]} more than once; give each case once")
    return cases


def _kept_sections(out: Path) -> str:
    """The other commands' generated sections of ``out`` (kept when the Ising part is
    rewritten); ``ValueError`` or ``OSError`` when ``out`` cannot be read as text."""
    if not out.exists():
        return ""
    from lsbcore.studies.rbm.report import keep_section  # the RBM section's markers live there

    return keep_section(read_capped(out, MAX_BYTES))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.reproduce",
        description="Run the paper's cases under both protocols and write docs/reproduction.md.",
    )
    parser.add_argument("--out", type=out_path.output_file, default="docs/reproduction.md")
    parser.add_argument(
        "--work", type=out_path.output_folder,
        help=f"where the runs are kept (default {DEFAULT_WORK}, its folder created)",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, default=5, choices=range(2, 21), metavar="2..20")
    parser.add_argument("--cases", default="1,2,3,4", help="comma-separated case numbers")
    parser.add_argument(
        "--from-runs",
        type=Path,
        help="rewrite the document from the runs a previous call stored (WORK/reproduction.json) "
        f"instead of running again (at most {MAX_BYTES // 2**20} MB)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny runs (8x8, 4 chains, 300 mixing iterations, burn-in 100, one worker) to "
        "check the pipeline; not the paper's settings",
    )
    args = parser.parse_args(argv)
    cases = _cases(parser, args.cases)
    given = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python -m lsbcore.studies.reproduce", *given])
    # every path is checked before the runs, which take hours at the paper's settings (argparse
    # checked --out and a --work given; the default --work's folder is the scratch folder out/)
    if args.from_runs is None and args.work is None:
        with contextlib.suppress(OSError):  # the check below says why, if it must
            DEFAULT_WORK.parent.mkdir(exist_ok=True)
        args.work = DEFAULT_WORK
    try:
        if args.from_runs is None:
            out_path.check_folder(args.work, "--work")
        _kept_sections(args.out)
    except out_path.OutPathError as err:
        parser.error(str(err))
    except (OSError, ValueError) as err:
        parser.error(f"--out {out_path.shown(args.out)} cannot be read: {_reason(err)}")
    if args.from_runs is not None:
        try:
            data = load_runs(args.from_runs, VARIANTS)
        except (OSError, ValueError) as err:
            parser.error(f"--from-runs {out_path.shown(args.from_runs)}: {_reason(err)}")
    else:
        # one worker: a run this small takes a tenth of what starting worker processes costs
        # (case 4's 16 quick runs: 2.8 s in one worker against 28.7 s in two)
        settings = ["--size", "8", "--chains", "4", "--steps", "300", "--burn-in", "100"]
        settings += ["--workers", "1"]
        try:
            data = reproduce(
                cases=cases,
                seeds=args.seeds,
                work=args.work,
                settings=settings if args.quick else [],
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except RuntimeError as err:  # a run failed; it has said why above
            print(
                f"{parser.prog}: error: {err}; the runs before it are under --work.",
                file=sys.stderr,
            )
            return 1
        data.update(command=command, commit=commit(), date=date.today().isoformat())
        runs_path = args.work / "reproduction.json"
        try:
            out_path.write_text(runs_path, json.dumps(data, indent=1))
        except OSError as err:
            return _failed(runs_path, err, "the runs' results.json files are kept under --work")
    try:
        kept = _kept_sections(args.out)
        ledger = ledger_of(kept)  # the ledger of claims stays at the top of the page
        kept = without_ledger(kept)
        text = document(data, data.get("command", command))
        top = ledger + "\n" if ledger else ""
        out_path.write_text(args.out, top + text + ("\n" + kept if kept else ""))
    except (OSError, ValueError) as err:
        after = "it is as it was"
        if args.from_runs is None:
            after += f"; the runs are kept: write it with --from-runs {runs_path}"
        return _failed(args.out, err, after)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _reason(err: Exception) -> str:
    """An error's reason without the path Python puts in an ``OSError``'s message."""
    if isinstance(err, IsADirectoryError):
        return "it is a folder, not a file"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror[0].lower() + err.strerror[1:]
    return str(err)


def _failed(path: Path, err: Exception, after: str) -> int:
    """A write that failed after the runs: one sentence, status 2 (as a refusal)."""
    print(
        f"python -m lsbcore.studies.reproduce: error: could not write "
        f"{out_path.shown(path)} ({_reason(err)}); {after}.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.reproduce"))
