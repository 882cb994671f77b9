"""The flow paper's comparison (Jaini, Nielsen and Welling 2021, section 5, Table 1) on our
denoising posteriors: the two flow samplers against the baselines, by effective samples.

Per seed, one flow is trained on the posterior (``lsbcore.methods.flows.train``; its seconds and
ELBO
recorded) and shared by ``flow-exact`` and ``flow-latent``, which start from the flow's own
draws with no burn-in (the paper's protocol). Every baseline starts from the target's uniform
start, runs ``burn_in`` steps, then is measured. All samplers are built by
``lsbcore.samplers.registry.make_sampler`` and run ``chains`` chains.

What a *step* is differs (one ``step()`` of the sampler): one proposed single-site move for
Gibbs, Metropolis, the locally balanced samplers and GWG; one colour class of the lattice
resampled for checkerboard; one proposed whole state for the flow samplers. So per-step
figures flatter the samplers that do more per step, and the figures per target evaluation
(``evals_per_step``, ``docs/method.md`` section 9) and per minute are the fair ones.

Mixing (the paper's "mean ESS across dimensions"): the rank-normalised bulk ESS over all chains
of every site's kept series (arviz-stats, ``lsbcore.diagnostics.mixing.ess_bulk_per_site``). A site
that
never changed in any chain has no ESS (``frozen_sites``). ``measure`` averages over the sites
that moved under the sampler itself (``ess_moved``); ``compare`` then puts the samplers of a
seed on common ground (``over_common_sites``): the mean over the sites that moved under any
sampler, a site the sampler never moved counting 0, so that a sampler stuck on most pixels is
not credited with the ESS of the few it moves. The ESS cannot exceed the kept samples
(``kept_samples``, draws times chains): a sampler near that cap mixes faster than the thinning
can show. From it:

- ``ess_per_1e4``: effective samples per 10^4 chain-steps, ``ESS * 10^4 / (steps * chains)``;
- ``ess_per_1000_evals``: ``ESS * 1000 / (evaluations of all chains)``;
- ``ess_per_min``: per minute of the sampler's own measured stepping time;
- ``ess_per_min_total``: per minute of everything the sampler cost before and during the
  measurement: burn-in for a baseline, the flow's training for a flow sampler.

The paper's own measurement (its Table 1): ESS per 10^4 *kept samples*, the 128 chains taken
16 at a time (8 estimates, mean ± standard error), every sampler keeping as many states with the
same thinning. ``measure`` therefore also computes every site's ESS per group of ``group`` chains
(``ess_group_sites``), and ``over_common_sites`` turns them into ``ess_per_1e4_kept`` (the mean
over groups of ``ESS_g * 10^4 / (draws * group)``) and its standard error
``ess_per_1e4_kept_se``. The figure compares mixing only when every sampler keeps ``draws``
states per chain thinned alike (``Protocol.same_thinning``); otherwise it compares thinnings,
and the report says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.diagnostics.mixing import ess_bulk_per_site
from lsbcore.methods.flows.train import FlowTraining, FlowTrainingFailed, TrainingSettings
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies.flows.denoising import DenoisingProblem

#: The flow samplers and the baselines of the comparison (registry names).
FLOWS = ("flow-exact", "flow-latent")
SINGLE_SITE = ("gibbs", "metropolis", "bit-flip-mh", "barker", "sqrt", "min", "max")
#: Baselines whose step costs far more than a single-site step on the CPU (GWG: a gradient of
#: the whole state per flip, on torch; checkerboard: half the lattice per step): run ``short``.
COSTLY = ("gwg", "checkerboard")
BASELINES = SINGLE_SITE + COSTLY
SAMPLERS = FLOWS + BASELINES
#: Kept draws per chain at most (memory of the kept states and the ESS's cost).
MAX_DRAWS = 4000


@dataclass(frozen=True)
class Protocol:
    """How long each sampler runs (module docstring).

    ``steps``, ``burn_in``: the single-site baselines; ``short_steps``, ``short_burn_in``: GWG
    and checkerboard; ``flow_steps``: the flow samplers (no burn-in); ``draws`` states kept per
    chain for the ESS (evenly thinned); ``train_steps`` of the flow (Adam 1e-3, batch
    ``batch``); ``importance`` draws K of flow-exact."""

    chains: int = 128
    steps: int = 100_000
    burn_in: int = 10_000
    short_steps: int = 2_000
    short_burn_in: int = 500
    flow_steps: int = 2_000
    draws: int = 1_000
    train_steps: int = 1_000
    batch: int = 128
    importance: int = 1  # flow-exact's default: extra draws come from the dequantiser
    group: int = 16  # chains per ESS estimate (the paper's 8 groups of 16 of 128 chains)

    def __post_init__(self):
        integer(self.chains, "chains", 2, 4096)
        for key in ("steps", "short_steps", "flow_steps"):
            integer(getattr(self, key), key, 8, 10**7)
        for key in ("burn_in", "short_burn_in", "train_steps"):
            integer(getattr(self, key), key, 0, 10**7)
        integer(self.draws, "draws", 4, MAX_DRAWS)
        integer(self.batch, "batch", 2, 4096)
        integer(self.importance, "importance", 1, 64)
        integer(self.group, "group", 2, self.chains)

    @property
    def same_thinning(self) -> bool:
        """Whether every sampler keeps ``draws`` states per chain with the same thinning (the
        paper's measurement): all three run lengths equal and a multiple of ``draws``."""
        lengths = {self.steps, self.short_steps, self.flow_steps}
        return len(lengths) == 1 and self.steps % self.draws == 0

    def length(self, name: str) -> tuple[int, int]:
        """``(burn-in, measured steps)`` of sampler ``name``."""
        if name in FLOWS:
            return 0, self.flow_steps
        if name in COSTLY:
            return self.short_burn_in, self.short_steps
        return self.burn_in, self.steps

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainedFlow:
    """A flow trained for one seed: the model, its seconds of training and last ELBO (NaN and
    ``failed`` set when training stopped on a non-finite step)."""

    model: object
    seconds: float
    elbo: float
    steps: int
    failed: str | None = None


def train(problem: DenoisingProblem, protocol: Protocol, seed: int, device=None) -> TrainedFlow:
    """The flow of ``seed`` on ``problem``'s posterior, ``protocol.train_steps`` steps."""
    settings = TrainingSettings(seed=seed, batch=protocol.batch)
    training = FlowTraining(problem.target, settings, device)
    failed = None
    try:
        training.run(protocol.train_steps)
    except FlowTrainingFailed as err:  # the last finite weights still sample exactly
        failed = str(err)
    model = training.model.requires_grad_(False)
    return TrainedFlow(model, training.seconds, training.elbo, training.steps, failed)


def _thin(steps: int, draws: int) -> int:
    return max(1, math.ceil(steps / draws))


def measure(
    problem: DenoisingProblem,
    name: str,
    protocol: Protocol,
    seed: int,
    flow: TrainedFlow | None = None,
    device=None,
) -> dict:
    """One sampler's run (burn-in, then ``steps`` measured with every ``thin``-th state kept)
    and its figures (module docstring)."""
    options = {}
    if name in FLOWS:
        if flow is None:
            raise ValueError(f"{name} needs a trained flow (flow=).")
        options["flow"] = flow.model
        if name == "flow-exact":
            options["importance"] = protocol.importance
    sampler = make_sampler(
        name, problem.target, protocol.chains, seed=seed, device=device, **options
    )
    burn_in, steps = protocol.length(name)
    thin = _thin(steps, protocol.draws)
    if burn_in:
        sampler.step(burn_in)
    burn_seconds = sampler.wall_seconds
    evals_before, accepted_before = sampler.n_target_evals, sampler.n_accepted
    n = problem.n_sites
    kept = np.empty((steps // thin, protocol.chains, n), dtype=np.int8)
    log_p = np.empty((steps // thin, protocol.chains))
    proposals_accepted = 0  # the flow samplers: whole-state proposals accepted
    for row in range(steps // thin):
        if name in FLOWS:
            for _ in range(thin):
                sampler.step(1)
                proposals_accepted += int(sampler.last_proposal["accepted"].sum())
        else:
            sampler.step(thin)
        kept[row] = (sampler.x.reshape(protocol.chains, n) > 0).to("cpu", torch.int8).numpy()
        log_p[row] = sampler.log_p.reshape(protocol.chains).to("cpu", torch.float64).numpy()
    measured = (steps // thin) * thin
    seconds = sampler.wall_seconds - burn_seconds
    evals = sampler.n_target_evals - evals_before  # per chain
    accepted = sampler.n_accepted - accepted_before
    per_site = ess_bulk_per_site(kept) if len(kept) >= 4 else np.full(n, math.nan)
    per_group = [_sites(ess_bulk_per_site(kept[:, g : g + protocol.group]))
                 for g in range(0, protocol.chains - protocol.group + 1, protocol.group)
                 if len(kept) >= 4]  # fmt: skip
    moved = np.isfinite(per_site)
    ess = float(per_site[moved].mean()) if moved.any() else 0.0
    before = flow.seconds if flow is not None and name in FLOWS else burn_seconds
    figures = {
        "burn_in": burn_in,
        "steps": measured,
        "thin": thin,
        "draws": len(kept),
        "chains": protocol.chains,
        "evals_per_step": int(sampler.evals_per_step),
        "evals_per_chain": int(evals),
        "seconds": float(seconds),
        "cost_before_seconds": float(before),
        "ess_sites": _sites(per_site),
        "ess_moved": ess,
        "ess_group_sites": per_group,
        "group": protocol.group,
        "frozen_sites": int((~moved).sum()),
        "kept_samples": int(kept.shape[0] * protocol.chains),
        "accept": _acceptance(name, accepted, proposals_accepted, measured * protocol.chains),
        "mean_log_p": float(log_p.mean()),
        "std_log_p": float(log_p.std()),
    }
    return with_rates(figures, ess)


def _sites(ess: np.ndarray) -> list[float | None]:
    """Per-site ESS as JSON values, None for a site that never changed."""
    return [float(v) if math.isfinite(v) else None for v in ess]


def with_rates(figures: dict, ess: float) -> dict:
    """``figures`` with ``ess`` and the rates derived from it (module docstring)."""
    chain_steps = figures["steps"] * figures["chains"]
    evals = figures["evals_per_chain"] * figures["chains"]
    seconds, before = figures["seconds"], figures["cost_before_seconds"]
    figures.update(
        ess=ess,
        ess_per_1e4=ess * 1e4 / chain_steps,
        ess_per_1000_evals=ess * 1000 / evals if evals else None,
        ess_per_min=ess * 60 / seconds if seconds > 0 else None,
        ess_per_min_total=ess * 60 / (seconds + before) if seconds + before > 0 else None,
    )
    return figures


def over_common_sites(samplers: dict) -> list[int]:
    """Put every sampler of one seed on the same sites: its ``ess`` becomes the mean over the
    sites that moved under any of them, a site it never moved counting 0 (it gave no
    effective draw of that pixel), and its rates follow. A sampler that freezes pixels the
    others move is thus not averaged over the easy pixels alone. Returns those sites."""
    sites = [i for i in range(len(next(iter(samplers.values()))["ess_sites"]))
             if any(f["ess_sites"][i] is not None for f in samplers.values())]  # fmt: skip
    for figures in samplers.values():
        values = [figures["ess_sites"][i] or 0.0 for i in sites]
        with_rates(figures, float(np.mean(values)) if values else 0.0)
        kept = figures["draws"] * figures.get("group", 0)  # one group's kept samples
        per_kept = [float(np.mean([g[i] or 0.0 for i in sites])) * 1e4 / kept
                    for g in figures.get("ess_group_sites", []) if sites]  # fmt: skip
        figures["ess_per_1e4_kept_groups"] = per_kept
        figures["ess_per_1e4_kept"] = float(np.mean(per_kept)) if per_kept else None
        spread = float(np.std(per_kept, ddof=1)) if len(per_kept) > 1 else None
        figures["ess_per_1e4_kept_se"] = spread and spread / math.sqrt(len(per_kept))
        figures["common_sites"] = len(sites)
        figures["unmoved_common_sites"] = sum(figures["ess_sites"][i] is None for i in sites)
    return sites


def _acceptance(name: str, sites_changed: int, proposals: int, chain_steps: int):
    """Proposals accepted per step: counted for the flow samplers (a latent move may stay in
    its orthant), sites changed per step for the single-site samplers (one site proposed per
    step), None for Gibbs and checkerboard (they resample; nothing is refused)."""
    if name in FLOWS:
        return proposals / chain_steps
    if name in ("gibbs", "checkerboard"):
        return None
    return sites_changed / chain_steps


def warm_up(problem: DenoisingProblem, samplers, chains: int, device=None) -> None:
    """Pay the one-off costs (compilation of the kernels, first calls) of the baselines here,
    not in a measured sampler's seconds."""
    for name in samplers:
        if name not in FLOWS:
            make_sampler(name, problem.target, chains, seed=0, device=device).step(2)


def compare(
    problem: DenoisingProblem,
    protocol: Protocol,
    seeds,
    samplers=SAMPLERS,
    device=None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Every sampler of ``samplers`` on ``problem`` for each seed; a JSON-ready dict:
    ``{"problem": ..., "runs": [{"seed", "flow": {...}, "samplers": {name: figures}}]}``."""
    unknown = [s for s in samplers if s not in SAMPLERS]
    if unknown or not samplers:
        raise ValueError(f"samplers must be among {SAMPLERS}, got {unknown or 'none'}.")
    say = log or (lambda message: None)
    runs = []
    warm_up(problem, samplers, protocol.chains, device)
    for seed in seeds:
        run = {"seed": int(seed), "samplers": {}}
        flow = None
        if any(s in FLOWS for s in samplers):
            flow = train(problem, protocol, seed, device)
            run["flow"] = {
                "seconds": flow.seconds,
                "elbo": flow.elbo,
                "steps": flow.steps,
                "failed": flow.failed,
            }
            say(
                f"  seed {seed}: flow trained {flow.steps} steps in {flow.seconds:.1f} s, "
                f"ELBO {flow.elbo:.2f}"
            )
        for name in samplers:
            started = time.perf_counter()
            figures = measure(problem, name, protocol, seed, flow, device)
            run["samplers"][name] = figures
            say(
                f"  seed {seed}: {name:12s} ESS {figures['ess']:8.1f}  per 1e4 steps "
                f"{figures['ess_per_1e4']:8.3f}  per min {_fmt(figures['ess_per_min']):>9s}  "
                f"all-in {_fmt(figures['ess_per_min_total']):>9s}  "
                f"({time.perf_counter() - started:.1f} s)"
            )
        sites = over_common_sites(run["samplers"])
        say(f"  seed {seed}: on the {len(sites)} sites that moved under any sampler, ESS "
            + ", ".join(f"{n} {f['ess']:.1f}" for n, f in run["samplers"].items()))  # fmt: skip
        runs.append(run)
    return {"problem": describe(problem), "runs": runs}


def describe(problem: DenoisingProblem) -> dict:
    """The problem's settings and pictures as plain values (the report draws the digits)."""
    return {
        "size": problem.size,
        "index": problem.index,
        "label": problem.label,
        "seed": problem.seed,
        "flip": problem.flip,
        "beta": problem.beta,
        "eta": problem.eta,
        "flipped": problem.flipped,
        "n_sites": problem.n_sites,
        "description": problem.describe(),
        "clean": (problem.clean > 0).to(torch.int8).flatten().tolist(),
        "noisy": (problem.noisy > 0).to(torch.int8).flatten().tolist(),
    }


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def seed_stats(runs: list, name: str, key: str) -> tuple[float, float, int]:
    """Mean, standard deviation (ddof 1; NaN for one seed) and count over seeds of one figure
    of one sampler; (NaN, NaN, 0) when no seed has it."""
    values = [r["samplers"][name][key] for r in runs if name in r["samplers"]]
    values = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not values:
        return math.nan, math.nan, 0
    spread = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
    return float(np.mean(values)), spread, len(values)
