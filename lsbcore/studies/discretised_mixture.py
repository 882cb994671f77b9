"""The flow paper's discretised Gaussian mixtures (Figure 1), measured against enumeration.

``python -m lsbcore.studies.discretised_mixture [--quick] [--json OUT] [--docs FILE]
[--figure PNG]``: for three seeded mixtures (``random_mixture(0..2)``: 5 components, 6 bits per
coordinate, so 4,096 states, ``lsbcore.targets.discretised_mixture``) it trains the flow
(``FlowTraining``, the paper's settings: Adam at 1e-3, batches of 128, but 3,000 steps where
the paper takes 10,000: the default run fits about five minutes) and
measures, against the enumerated law, the total-variation distance (TV) of the histogram of

- ``flow draws``: as many independent draws of the trained flow as the chains record below
  (the paper's "approximation learned by the flow");
- ``flow-exact``: 128 chains started at the flow's draws, no burn-in (the paper's protocol),
  every ``thin``-th state of ``T`` steps;
- the baselines ``gibbs``, ``metropolis``, ``bit-flip-mh`` and ``barker`` by the same protocol
  from uniform random starts, with the same number of steps, and, where a step costs more than
  flow-exact's one evaluation of ``log p~`` (``barker``: 12; ``dhmc``: about 9, whose chains
  are too slow to run as many steps), with the same evaluations per chain instead;

each beside the noise floor: the mean TV (and its standard deviation, 20 replicates) of as many
independent exact draws. A histogram is "within the floor" when its TV is at most the floor's
mean plus three standard deviations: then it cannot be told from exact draws by this measure
(the paper's "indistinguishable"). Draws of one chain are correlated, so the floor is what an
exact sampler reaches only when its recorded states are nearly independent; ``noise`` (half the
TV between the histograms of the two halves of the chains) says how much its own correlation
adds. The flow's training seconds are printed apart from the chains'.

Deterministic for a seed (one generator per sampler, one thread).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date

import numpy as np
import torch

from lsbcore import interrupt, out_path
from lsbcore.exact.states import all_states, exact_distribution, state_codes
from lsbcore.methods.flows.train import FlowTraining, TrainingSettings
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies.shared.arguments import add_output_files
from lsbcore.studies.shared.doc_section import replace_section
from lsbcore.targets.discretised_mixture import DiscretisedMixture, random_mixture

#: The baselines run the same number of steps as flow-exact; those whose steps cost more
#: evaluations also (or, for dhmc, only) run the same evaluations per chain.
SAME_STEPS = ("gibbs", "metropolis", "bit-flip-mh", "barker")
SAME_EVALUATIONS = ("barker", "dhmc")
#: A histogram within the floor: TV at most the floor's mean plus this many standard deviations.
SPREADS = 3.0
#: The flow is a "rough approximation" while its TV is above the floor and below this.
ROUGH = 0.5
FLOOR_REPLICATES = 20


@dataclass(frozen=True)
class Protocol:
    """Mixtures (their seeds), chains, steps ``T`` recorded every ``thin``, flow training."""

    name: str
    mixtures: tuple[int, ...]
    chains: int
    steps: int
    thin: int
    flow_training: int

    @property
    def draws(self) -> int:
        return self.chains * (self.steps // self.thin)

    def text(self) -> str:
        return (
            f"{self.name} protocol: mixtures random_mixture({', '.join(map(str, self.mixtures))})"
            f" with 6 bits per coordinate (4,096 states); the flow trained {self.flow_training:,}"
            f" steps (batches of 128, Adam at 1e-3); {self.chains} chains, no burn-in, "
            f"{self.steps:,} steps, every {self.thin}th state recorded ({self.draws:,} draws); "
            "flow-exact starts at the flow's draws, the baselines at uniform random states"
        )


#: The flow trains 3,000 steps, not the paper's 10,000: 10,000 took 195 s per mixture on the
#: shared 2-core machine, three times the whole run's budget (its bound on log Z gained 0.5 nat).
DEFAULT = Protocol("default", (0, 1, 2), chains=128, steps=5_000, thin=10, flow_training=3_000)
QUICK = Protocol("quick", (0,), chains=16, steps=60, thin=2, flow_training=20)


@dataclass(frozen=True)
class Row:
    mixture: int
    sampler: str  # "flow draws" for the flow's own draws
    budget: str  # "steps", "evaluations" (equal to flow-exact's) or "draws"
    steps: int
    evaluations: int  # target evaluations per chain
    draws: int
    tv: float
    floor: float  # mean TV of `draws` independent exact draws
    floor_sd: float
    noise: float  # half the TV between the two halves' histograms
    seconds: float

    @property
    def within(self) -> bool:
        return self.tv <= self.floor + SPREADS * self.floor_sd


def tv(p: np.ndarray, counts: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - counts / counts.sum()).sum())


def floor(p: np.ndarray, draws: int, seed: int) -> tuple[float, float]:
    """Mean and standard deviation of the TV to ``p`` of ``draws`` independent draws."""
    rng = np.random.default_rng(seed)
    values = [tv(p, rng.multinomial(draws, p)) for _ in range(FLOOR_REPLICATES)]
    return float(np.mean(values)), float(np.std(values, ddof=1))


def run_chains(sampler, steps: int, thin: int, evaluations: int | None = None) -> np.ndarray:
    """Counts of the states of the first and second half of the chains, ``[2, 4096]``: every
    ``thin``-th state of ``steps`` steps, or until ``evaluations`` per chain are spent."""
    k, half = 2**sampler.n_sites, sampler.n_chains // 2
    counts = np.zeros((2, k))

    def record():
        codes = state_codes(sampler.x).numpy()
        counts[0] += np.bincount(codes[:half], minlength=k)
        counts[1] += np.bincount(codes[half:], minlength=k)

    if evaluations is None:
        for _ in range(steps // thin):
            sampler.step(thin)  # one call per recorded state
            record()
        return counts
    # one step at a time: dhmc's steps cost a varying number of evaluations
    for step in range(1, steps + 1):
        if sampler.n_target_evals >= evaluations:
            break
        sampler.step(1)
        if step % thin == 0:
            record()
    return counts


def _row(mixture, name, budget, sampler, halves, p, seconds, seed) -> Row:
    counts = halves.sum(0)
    draws = int(counts.sum())
    mean, sd = floor(p, draws, seed)
    steps, evals = (sampler.n_steps, sampler.n_target_evals) if sampler else (0, 0)
    noise = 0.5 * tv(halves[0] / halves[0].sum(), halves[1])
    return Row(mixture, name, budget, steps, evals, draws, tv(p, counts), mean, sd, noise, seconds)


def flow_histogram(flow, draws: int, halves_at: int, seed: int) -> np.ndarray:
    """The flow's own draws as two halves' counts (as the chains' are)."""
    with torch.no_grad():
        x, _ = flow.propose(draws, 1, torch.Generator().manual_seed(seed))
    codes = state_codes(x).numpy()
    return np.stack([np.bincount(part, minlength=2**x.shape[1])
                     for part in (codes[:halves_at], codes[halves_at:])])  # fmt: skip


def study_mixture(seed: int, protocol: Protocol, log=print, keep=None) -> list[Row]:
    """The rows of one mixture (module docstring); ``keep`` (a dict) receives the exact law and
    the flow's and flow-exact's counts, for the figure."""
    target = DiscretisedMixture(random_mixture(seed))
    p = exact_distribution(target)
    training = FlowTraining(target, TrainingSettings(seed=seed))
    start = time.perf_counter()
    training.run(protocol.flow_training)
    trained = time.perf_counter() - start
    flow = training.model.requires_grad_(False)
    log(f"mixture {seed}: flow trained {training.steps:,} steps in {trained:.0f} s, bound on log Z"
        f" {np.mean([-h[1] for h in training.history[-100:]]):.3f} (exact "
        f"{float(torch.logsumexp(target.log_prob(all_states(12)), 0)):.3f})")  # fmt: skip
    rows = []

    def add(row):
        log(format_row(row))
        rows.append(row)

    start = time.perf_counter()
    drawn = flow_histogram(flow, protocol.draws, protocol.draws // 2, seed + 100)
    add(_row(seed, "flow draws", "draws", None, drawn, p, time.perf_counter() - start, seed))
    # flow-exact with K = 1 (its default, right on 256 sites) and K = 8: on 12 sites the
    # dequantiser's extra draws sharpen a state's estimate instead of swamping it
    runs = [("flow-exact", "steps", {}), (FLOW_K8, "steps", {"importance": 8}),
            *((n, "steps", {}) for n in SAME_STEPS),
            *((n, "evaluations", {}) for n in SAME_EVALUATIONS)]  # fmt: skip
    for i, (label, budget, extra) in enumerate(runs):
        name = "flow-exact" if label == FLOW_K8 else label
        options = {"flow": flow, **extra} if name == "flow-exact" else {}
        start = time.perf_counter()
        sampler = make_sampler(name, target, protocol.chains, seed=1000 * seed + i, **options)
        if budget == "steps":
            halves = run_chains(sampler, protocol.steps, protocol.thin)
        else:
            halves = run_chains(sampler, 100 * protocol.steps, protocol.thin, protocol.steps)
        add(_row(seed, label, budget, sampler, halves, p, time.perf_counter() - start, seed + i))
        if keep is not None and label == "flow-exact":
            keep.update(p=p, flow=drawn.sum(0), chain=halves.sum(0), target=target)
    return rows


FLOW_K8 = "flow-exact K=8"


def study(protocol: Protocol, log=print, figures: list | None = None) -> list[Row]:
    rows = []
    for seed in protocol.mixtures:
        keep = {} if figures is not None else None
        rows += study_mixture(seed, protocol, log, keep)
        if figures is not None:
            figures.append(keep)
    return rows


HEADER = (
    f"{'mix':>3} {'sampler':<12} {'budget':<11} {'steps':>6} {'evals':>6} {'draws':>7} "
    f"{'TV':>7} {'floor':>15} {'noise':>6} {'within':>6} {'s':>6}"
)


def format_row(r: Row) -> str:
    floor_text = f"{r.floor:.4f} ± {r.floor_sd:.4f}"
    return (
        f"{r.mixture:>3} {r.sampler:<12} {r.budget:<11} {r.steps:>6} {r.evaluations:>6} "
        f"{r.draws:>7} {r.tv:>7.4f} {floor_text:>15} {r.noise:>6.4f} "
        f"{'yes' if r.within else 'no':>6} {r.seconds:>6.1f}"
    )


# ----------------------------------------------------------------- the verdicts and the section
def verdicts(rows: list[Row]) -> list[tuple[str, str, str]]:
    """The paper's two claims on ``rows``: ``(claim, verdict, evidence)`` each."""
    flow = [r for r in rows if r.sampler == "flow draws"]
    chain = [r for r in rows if r.sampler == "flow-exact"]

    def listed(rs):
        return "; ".join(
            f"mixture {r.mixture}: {r.tv:.3f} against a floor of {r.floor:.3f} ± {r.floor_sd:.3f}"
            for r in rs
        )

    out = []
    if flow:
        rough = [not r.within and r.tv < ROUGH for r in flow]
        verdict = "holds" if all(rough) else "does not hold" if not any(rough) else "inconclusive"
        out.append((
            "The flow alone gives a rough approximation of the target (Figure 1, middle)",
            verdict,
            f"the TV of the flow's own draws is above the floor and below {ROUGH} at "
            f"{sum(rough)} of {len(flow)} mixtures ({listed(flow)})",
        ))  # fmt: skip
    eight = [r for r in rows if r.sampler == FLOW_K8]
    if chain:
        # the better of flow-exact's two settings speaks for the method
        best = max((chain, eight) if eight else (chain,), key=lambda rs: sum(r.within for r in rs))
        within = [r.within for r in best]
        verdict = "holds" if all(within) else "does not hold" if not any(within) else "inconclusive"
        which = "flow-exact (K = 8)" if best is eight else "flow-exact (K = 1)"
        rest = chain if best is eight else eight
        other = (
            f"; with K = {1 if best is eight else 8}: {sum(r.within for r in rest)} of "
            f"{len(rest)} ({listed(rest)})"
            if eight
            else ""
        )
        out.append((
            "Flow + MH's samples are indistinguishable from true samples of the target "
            "(Figure 1, right)",
            verdict,
            f"{which}'s TV is within the floor of as many exact draws (mean + {SPREADS:g} "
            f"s.d.) at {sum(within)} of {len(best)} mixtures ({listed(best)}){other}",
        ))  # fmt: skip
    return out


def baselines_within(rows: list[Row]) -> str:
    """Which baselines are within the floor at every mixture, for the section's last bullet."""
    names = sorted({(r.sampler, r.budget) for r in rows
                    if r.sampler not in ("flow draws", "flow-exact", FLOW_K8)})  # fmt: skip
    good = [f"`{n}` (same {b})" for n, b in names
            if all(r.within for r in rows if (r.sampler, r.budget) == (n, b))]  # fmt: skip
    return ", ".join(good) if good else "none"


COMMAND = "python -m lsbcore.studies discretised-mixture --docs docs/reproduction.md"
BEGIN = f"<!-- discretised-mixture:begin (generated by {COMMAND}) -->"
END = "<!-- discretised-mixture:end -->"


def section(rows: list[Row], protocol: Protocol, seconds: float) -> str:
    lines = [
        BEGIN,
        "## Discretised Gaussian mixtures (the flow paper's Figure 1)",
        "",
        f"Generated by `{COMMAND}` on {date.today().isoformat()} ({seconds / 60:.1f} min). "
        f"{protocol.text()}. The target is the mixture's density at the cells' centres on "
        "[-4, 4]^2, each coordinate's 6 bits a Gray code (neighbouring cells one flip apart: "
        "`lsbcore/targets/discretised_mixture.py`). TV: total variation of a histogram to the "
        "enumerated law; floor: the mean ± s.d. TV of as many independent exact draws; "
        f"within: TV at most the floor's mean + {SPREADS:g} s.d.; noise: half the TV between "
        "the two halves of the chains (what the chains' own correlation adds).",
        "",
        "| mixture | sampler | budget | steps | evaluations per chain | draws | TV | floor | "
        "noise | within | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.mixture} | `{r.sampler}` | {r.budget} | {r.steps:,} | {r.evaluations:,} | "
            f"{r.draws:,} | {r.tv:.4f} | {r.floor:.4f} ± {r.floor_sd:.4f} | {r.noise:.4f} | "
            f"{'yes' if r.within else 'no'} | {r.seconds:.1f} |"
        )
    lines.append("")
    for claim, verdict, evidence in verdicts(rows):
        lines.append(
            f"- {claim}. **{verdict.capitalize()} here.** {evidence[0].upper()}{evidence[1:]}."
        )
    lines += [
        f"- Within the floor at every mixture by the same protocol: {baselines_within(rows)} "
        "(not a claim of the paper; its baselines had 10^5 burn-in steps).",
        "",
        END,
        "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------- the figure
def figure_png(panels: list[dict], scale: int = 3) -> bytes:
    """Figure 1's three columns per mixture (target, flow's draws, flow-exact's states) as a
    PNG: each panel the 64 x 64 grid, darker for more mass, scaled to the target's peak."""
    from PIL import Image

    rows = []
    for keep in panels:
        target = keep["target"]
        levels = target.levels_of(all_states(target.n_sites)).long().numpy()
        peak = keep["p"].max()
        row = []
        for weights in (keep["p"], keep["flow"] / keep["flow"].sum(),
                        keep["chain"] / keep["chain"].sum()):  # fmt: skip
            grid = np.zeros((target.levels, target.levels))
            np.add.at(grid, (target.levels - 1 - levels[:, 1], levels[:, 0]), weights)
            shade = 255 - np.clip(grid / peak, 0, 1) * 255
            row.append(np.pad(shade, 2, constant_values=128))
        rows.append(np.hstack(row))
    image = np.vstack(rows).astype(np.uint8).repeat(scale, 0).repeat(scale, 1)
    buffer = io.BytesIO()
    Image.fromarray(image, mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.discretised_mixture",
        description="The flow paper's discretised Gaussian mixtures (Figure 1): the TV to the "
        "enumerated law of the flow's draws, flow-exact's chains and the baselines.",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    add_output_files(parser)
    parser.add_argument(
        "--figure", type=out_path.output_file, metavar="PNG",
        help="write Figure 1's panels (target, flow, flow-exact per mixture) to this PNG file",
    )  # fmt: skip
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    protocol = QUICK if args.quick else DEFAULT
    print(protocol.text(), flush=True)
    print(HEADER, flush=True)
    start = time.perf_counter()
    panels = [] if args.figure else None
    try:
        rows = study(protocol, log=lambda line: print(line, flush=True), figures=panels)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    print(
        f"({seconds:.0f} s; TV: total variation to the enumerated law; floor: mean ± s.d. TV of "
        f"as many exact draws; within: TV <= floor + {SPREADS:g} s.d.; noise: half the TV "
        "between the chains' two halves)"
    )
    for claim, verdict, evidence in verdicts(rows):
        print(f"{claim}: {verdict} here ({evidence}).")
    if args.json:
        out_path.write_json(
            args.json,
            {"protocol": protocol.text(), "rows": [asdict(r) | {"within": r.within} for r in rows]},
        )
    if args.figure:
        out_path.write_bytes(args.figure, figure_png(panels))
        print(f"wrote the figure {args.figure}")
    if args.docs:
        replace_section(args.docs, section(rows, protocol, seconds), BEGIN, END)
        print(f"wrote the discretised-mixture section of {args.docs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.discretised_mixture"))
