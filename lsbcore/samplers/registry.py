"""Every sampler of LSB Explorer, one entry each; ``make_sampler`` builds one by name.

The factory, ``Comparison``, the figures, the app's sidebar and links and the experiment command
all read ``REGISTRY``: a new sampler is a module with its class and one ``register`` line here.

An entry says what its sampler needs of a target (``needs``: capabilities of
``lsbcore.targets.base``) and how it is built on a pairwise target (``build``: the compiled and
device kernels where it has them) and on any other (``build_any``: batched torch operations).
``refusal(name, target)`` is the sentence that refuses a pair that cannot work together.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lsbcore.balancing.functions import FIXED, MONOTONE_INITS, sampler_balancing
from lsbcore.balancing.monotone import MAX_GROUPS, MAX_UNITS, MONOTONICITY
from lsbcore.balancing.objective import OBJECTIVES
from lsbcore.samplers.balanced.batched import balanced_builder
from lsbcore.samplers.balanced.pairwise import OPTIMIZERS, LocallyBalancedSampler
from lsbcore.samplers.baselines import dhmc
from lsbcore.samplers.baselines.bit_flip_mh import MAX_FLIPS, MIN_FLIPS, BitFlipMetropolis
from lsbcore.samplers.batched import refusal as _missing_sentence
from lsbcore.samplers.block.block_gibbs import BLOCK_CHOICES, MAX_BLOCK, BlockGibbsSampler
from lsbcore.samplers.block.hamming_ball import HammingBallSampler
from lsbcore.samplers.gradient.dmala import MAX_STEP_SIZE, MIN_STEP_SIZE, DiscreteLangevin
from lsbcore.samplers.gradient.gwg import GibbsWithGradients
from lsbcore.samplers.gradient.pas import MAX_PATH_LENGTH, PathAuxiliarySampler
from lsbcore.samplers.interface import steps_per_sweep
from lsbcore.samplers.site.checkerboard import CheckerboardGibbsSampler
from lsbcore.samplers.site.uniform import UniformSiteSampler
from lsbcore.samplers.site.uniform_batched import uniform_builder
from lsbcore.targets.base import Target
from lsbcore.targets.pairwise_target import PairwiseTarget


@dataclass(frozen=True)
class Option:
    """A sampler option: a number in ``[low, high]`` or one of ``choices``."""

    name: str
    default: object
    low: float | None = None
    high: float | None = None
    choices: tuple = ()
    help: str = ""

    def check(self, sampler: str, value):
        if self.choices:
            if value not in self.choices:
                raise ValueError(
                    f"{sampler}: {self.name} must be one of {self.choices}, got {value!r}."
                )
            return value
        whole = isinstance(self.default, int)
        kinds = numbers.Integral if whole else numbers.Real
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, kinds):
            kind = "an integer" if whole else "a number"
            raise ValueError(f"{sampler}: {self.name} must be {kind}, got {value!r}.")
        value = int(value) if whole else float(value)
        if not (self.low <= value <= self.high):
            raise ValueError(
                f"{sampler}: {self.name} must be between {self.low} and {self.high}, got {value}."
            )
        return value


@dataclass(frozen=True)
class SamplerSpec:
    """One registry entry.

    ``build(target, n_chains, seed=, device=, x0=, backend=, resync_every=, **options)``
    returns the sampler for a pairwise target, ``build_any`` (same arguments) for any other
    (``None``: pairwise targets only); ``needs`` names the capabilities its target must provide;
    ``move`` is the kind of move a step makes (one of ``MOVES``): ``"site"`` (one site proposed
    per step), ``"block"`` (several sites: a block of k, a path of flips, tiles) or ``"sweep"``
    (every site may move in one step); ``app``: whether the dashboard offers it.

    How many sites a step moves is the built sampler's ``sites_per_step`` (an integer; a block's
    depends on its options): counts of sweeps, site updates and evaluations read the sampler
    (``interface.steps_per_sweep``), or ``sweep_steps`` before one is built.
    """

    name: str
    label: str
    description: str
    colour: str
    build: Callable
    options: tuple[Option, ...] = ()
    learnable: bool = False
    move: str = "site"
    family: str = "locally balanced"
    needs_balancing: bool = False  # built from a loaded function (``balancing=``)
    needs: frozenset = frozenset()
    build_any: Callable | None = None
    app: bool = True
    # beyond capabilities: the sentence refusing a target it cannot run on (None: it can)
    refuse: Callable | None = None
    # built on a trained flow (``flow=``, a lsbcore.methods.flows FlowModel) where one is given
    takes_flow: bool = False
    # its samples are not exactly from the target at any run length we can vouch for: the page
    # and the reports say so beside its name
    approximate: bool = False
    # its chain carries a continuous auxiliary state beside x (dHMC's theta): the next x depends
    # on it, so no transition matrix over x exists; its law is checked by runs against enumeration
    auxiliary: bool = False

    @property
    def has_matrix(self) -> bool:
        """Whether ``lsbcore.exact.transition_matrix`` can build its one-step law over ``x``."""
        return not (self.takes_flow or self.auxiliary)

    @property
    def batched_only(self) -> bool:
        """Whether pairwise targets get the same batched sampler as any other: no compiled or
        device kernels, nothing to warm up."""
        return self.build is self.build_any

    @property
    def balanced(self) -> bool:
        """Whether it is a locally balanced sampler (it has a balancing function g)."""
        return self.family in ("locally balanced", "learned")

    def option(self, name: str) -> Option:
        return next(o for o in self.options if o.name == name)


REGISTRY: dict[str, SamplerSpec] = {}
#: The kinds of move a step makes (``SamplerSpec.move``).
MOVES = ("site", "block", "sweep")


def refusal(name: str, target) -> str | None:
    """Why the sampler ``name`` cannot run on ``target``, in a sentence; None when it can."""
    spec = REGISTRY[name]
    if not isinstance(target, Target):
        return (
            "target must be an lsbcore target (IsingPosterior, PairwiseMRF, RBM, FactorGraph), "
            f"got {type(target).__name__}."
        )
    if not isinstance(target, PairwiseTarget) and spec.build_any is None:
        return _missing_sentence(name, target, ["pairwise"])
    missing = sorted(set(spec.needs) - set(target.provides))
    if missing:
        return _missing_sentence(name, target, missing)
    return spec.refuse(target) if spec.refuse is not None else None


def sweep_steps(name: str, target, **options) -> int:
    """Steps of the sampler ``name`` that make one sweep of ``target``, before one is built (to
    size a schedule): a single-site move's sweep is ``n_sites`` steps and a sweep is one step,
    as the kinds say (``tests/test_sweep_counts.py`` checks every built sampler against its
    kind); a block's size is its sampler's, built here from ``options`` (one chain per
    parameter set of the target, on the CPU) and read with ``interface.steps_per_sweep``."""
    move = REGISTRY[name].move
    if move == "site":
        return target.n_sites
    if move == "sweep":
        return 1
    chains = max(1, int(getattr(target, "batch", 1)))
    built = make_sampler(name, target, chains, device="cpu", backend="torch", **options)
    return steps_per_sweep(built)


def samplers_for(target) -> tuple[str, ...]:
    """The registry's samplers that run on ``target``, in registry order."""
    return tuple(name for name in REGISTRY if refusal(name, target) is None)


def register(spec: SamplerSpec) -> SamplerSpec:
    if spec.move not in MOVES:
        raise ValueError(f"{spec.name}: move must be one of {MOVES}, got {spec.move!r}.")
    if spec.name in REGISTRY:
        raise ValueError(f"a sampler called {spec.name!r} is registered already.")
    REGISTRY[spec.name] = spec
    return spec


LEARN_OPTIONS = (
    Option("lr", 1e-2, 1e-6, 1.0, help="learning rate of Algorithm 1"),
    Option("optimizer", "adam", choices=OPTIMIZERS, help="Adam (authors' code) or SGD"),
    Option("restart_prob", 1e-8, 0.0, 1.0, help="the paper's pi: restarts per chain per step"),
    Option(
        "objective",
        "exact",
        choices=OBJECTIVES,
        help="log p~(x') in the objective: exact, or as the authors' code computes it",
    ),
)
HIDDEN = Option("hidden", 10, 1, 256, help="LSB 2's hidden width")
MONOTONE_SHAPE = (
    Option("groups", 20, 1, MAX_GROUPS, help="LSB 2': groups K of the min-max network"),
    Option("units", 20, 1, MAX_UNITS, help="LSB 2': linear units J per group"),
    Option(
        "init", "sqrt", choices=MONOTONE_INITS, help="LSB 2': start near sqrt(t) or at max(1, t)"
    ),
    Option(
        "monotonicity",
        "projection",
        choices=MONOTONICITY,
        help="LSB 2': slopes projected onto [0, 1], or the authors' penalty on t h(1/t)",
    ),
    Option("penalty", 1.0, 0.0, 1e6, help="LSB 2': weight of the authors' monotonicity penalty"),
)


def _balanced(kind: str):
    def build(target, n_chains, hidden=10, groups=20, units=20, balancing=None, **common):
        monotone = {k: common.pop(k) for k in ("init", "monotonicity", "penalty") if k in common}
        balancing = sampler_balancing(
            kind, hidden, common["seed"], balancing, groups=groups, units=units, **monotone
        )
        return LocallyBalancedSampler(target, n_chains, balancing, name=kind, **common)

    return build


def _uniform_site(rule: str):
    def build(target, n_chains, **common):
        return UniformSiteSampler(target, n_chains, rule=rule, **common)

    return build


_FIXED_TEXT = {
    "barker": ("t/(1+t)", "#4E79A7", "Locally balanced, g(t) = t/(1+t) (Barker)"),
    "sqrt": (
        "sqrt(t)",
        "#F28E2B",
        "Locally balanced, g(t) = sqrt(t); on a pairwise target (the Ising posterior) exactly "
        "Gibbs-with-Gradients, whose first-order flip ratios are exact there",
    ),
    "min": ("min(1,t)", "#59A14F", "Locally balanced, g(t) = min(1, t)"),
    "max": ("max(1,t)", "#E15759", "Locally balanced, g(t) = max(1, t)"),
}
for _name in FIXED:
    _label, _colour, _text = _FIXED_TEXT[_name]
    register(
        SamplerSpec(
            _name, _label, _text, _colour, _balanced(_name), build_any=balanced_builder(_name)
        )
    )
register(
    SamplerSpec(
        "lsb1", "LSB 1", "LSB 1: learned softmax mixture of the four fixed functions",
        "#B07AA1", _balanced("lsb1"), LEARN_OPTIONS, learnable=True, family="learned",
        build_any=balanced_builder("lsb1"),
    )
)  # fmt: skip
register(
    SamplerSpec(
        "lsb2", "LSB 2",
        "LSB 2: learned function g(t) = (h(t) + t h(1/t)) / 2, h a small network",
        "#76B7B2", _balanced("lsb2"), (*LEARN_OPTIONS, HIDDEN), learnable=True,
        family="learned", build_any=balanced_builder("lsb2"),
    )
)  # fmt: skip
register(
    SamplerSpec(
        "gibbs", "Gibbs", "Random-scan Gibbs (uninformed baseline)", "#9C755F",
        _uniform_site("gibbs"), family="uninformed", build_any=uniform_builder("gibbs"),
    )
)  # fmt: skip
register(
    SamplerSpec(
        "metropolis", "Metropolis", "Uniform-site Metropolis (uninformed baseline)", "#BAB0AC",
        _uniform_site("metropolis"), family="uninformed",
        build_any=uniform_builder("metropolis"),
    )
)  # fmt: skip
register(
    SamplerSpec(
        "learned", "Imported", "A frozen learned balancing function loaded from JSON", "#FF9DA7",
        _balanced("learned"), family="learned", needs_balancing=True,
        build_any=balanced_builder("learned"),
    )
)  # fmt: skip
register(
    SamplerSpec(
        "checkerboard", "Checkerboard Gibbs",
        "Block Gibbs: every site of one colour of a proper colouring (the checkerboard on a "
        "lattice) resampled at once from its conditional; one step is one sweep",
        "#EDC948", CheckerboardGibbsSampler, move="sweep", family="block",
        needs=frozenset({"pairwise"}),
    )
)  # fmt: skip

# Samplers on any target (batched torch operations): the block and gradient samplers the LSB
# paper and the field compare against. Not in the dashboard yet (app=False).
BLOCKS = Option(
    "blocks", "random", choices=BLOCK_CHOICES,
    help="random: k sites drawn afresh each step; sweep: consecutive blocks in order; "
    "shuffled: consecutive blocks of a fresh random order each sweep (the public GWG code's)",
)  # fmt: skip
register(
    SamplerSpec(
        "block-gibbs", "Block Gibbs",
        "Block Gibbs: a block of k sites resampled exactly from its conditional, all 2^k of its "
        "states scored (the paper's Gibbs-2/4/10)",
        "#007869", BlockGibbsSampler,
        (Option("block_size", 2, 1, MAX_BLOCK, help="k, sites per block: a step scores 2^k states"),
         BLOCKS),
        move="block", family="block", build_any=BlockGibbsSampler, app=False,
    )
)  # fmt: skip
register(
    SamplerSpec(
        "hamming-ball", "Hamming ball",
        "Titsias and Yau's Hamming ball sampler: an auxiliary state within radius r of x on a "
        "block of k sites, then x drawn from p within radius r of it (the paper's HB-k-r)",
        "#B4B4FF", HammingBallSampler,
        (Option("block_size", 10, 1, MAX_BLOCK,
                help="k, sites per block (unset: 10, or every site of a smaller target)"),
         Option("radius", 1, 1, MAX_BLOCK, help="r <= k: the ball holds sum_{j<=r} C(k, j) states"),
         BLOCKS),
        move="block", family="block", build_any=HammingBallSampler, app=False,
    )
)  # fmt: skip
GRADIENT = frozenset({"gradient"})
# FLSB (the LSB paper's section 3.3): LSB on gradient-approximated flip log-ratios, one
# evaluation per step, Metropolis-Hastings corrected with the reverse proposal
_FLSB1, _FLSB2 = balanced_builder("lsb1", "gradient"), balanced_builder("lsb2", "gradient")
register(
    SamplerSpec(
        "flsb1", "FLSB 1",
        "Fast LSB 1: the learned mixture on gradient-approximated flip log-ratios, "
        "MH-corrected with the reverse proposal (one evaluation per step)",
        "#A5004B", _FLSB1, LEARN_OPTIONS, learnable=True, family="learned", needs=GRADIENT,
        build_any=_FLSB1, app=False,
    )
)  # fmt: skip
register(
    SamplerSpec(
        "flsb2", "FLSB 2",
        "Fast LSB 2: the learned network function on gradient-approximated flip log-ratios, "
        "MH-corrected with the reverse proposal (one evaluation per step)",
        "#A51E00", _FLSB2, (*LEARN_OPTIONS, HIDDEN), learnable=True, family="learned",
        needs=GRADIENT, build_any=_FLSB2, app=False,
    )
)  # fmt: skip
register(
    SamplerSpec(
        "gwg", "GWG",
        "Gibbs-with-Gradients: one flip drawn from softmax(s~/2), s~ the gradient's first-order "
        "flip log-ratios, Metropolis-Hastings corrected (Grathwohl et al. 2021)",
        "#00B4FF", GibbsWithGradients, family="gradient", needs=GRADIENT,
        build_any=GibbsWithGradients, app=False,
    )
)  # fmt: skip
register(
    SamplerSpec(
        "pas", "PAS",
        "Path auxiliary proposals: a path of 1 to 2R - 1 gradient-informed flips, one "
        "Metropolis-Hastings test for the whole path (Sun et al. 2022)",
        "#F000FF", PathAuxiliarySampler,
        (Option("path_length", 3, 1, MAX_PATH_LENGTH,
                help="R: each path has 1 to 2R - 1 flips, R on average"),),
        move="block", family="gradient", needs=GRADIENT, build_any=PathAuxiliarySampler,
        app=False,
    )
)  # fmt: skip
register(
    SamplerSpec(
        "dmala", "DMALA",
        "Discrete Langevin: every site flips independently with sigmoid(s~/2 - 1/(2 alpha)), "
        "one Metropolis-Hastings test (Zhang et al. 2022)",
        "#87E100", DiscreteLangevin,
        (Option("step_size", 0.2, MIN_STEP_SIZE, MAX_STEP_SIZE,
                help="alpha, the Langevin step size (the paper's, on {0, 1} coordinates)"),),
        move="sweep", family="gradient", needs=GRADIENT, build_any=DiscreteLangevin,
        app=False,
    )
)  # fmt: skip

# LSB 2' (the arXiv version's monotone network): pairwise targets get the pairwise sampler's
# torch steps (no compiled or device kernel knows its function). app=False: the dashboard's
# networks page names it itself
register(
    SamplerSpec(
        "lsb2-monotone", "LSB 2'",
        "LSB 2': learned function g(t) = min{h(t), t h(1/t)}, h a monotone min-max network "
        "(slopes of log h in [0, 1]: g is balanced and increasing by construction; torch steps)",
        "#695A87", _balanced("lsb2-monotone"), (*LEARN_OPTIONS, *MONOTONE_SHAPE),
        learnable=True, family="learned", build_any=balanced_builder("lsb2-monotone"),
        app=False,
    )
)  # fmt: skip

# The flow paper's baselines (Jaini, Nielsen and Welling 2021) on any target: a random walk over
# bit flips and discontinuous HMC on the +-1 embedding. Not in the dashboard yet (app=False)
register(
    SamplerSpec(
        "bit-flip-mh", "Discrete MH",
        "Discrete Metropolis-Hastings: every site flips independently with probability "
        "flips / n, one Metropolis test (the flow paper's random walk baseline)",
        "#003CB4", BitFlipMetropolis,
        (Option("flips", 1.0, MIN_FLIPS, MAX_FLIPS,
                help="n p: the expected number of flipped sites, at most n / 2 (p = 1/n at 1)"),),
        move="block", family="uninformed", build_any=BitFlipMetropolis, app=False,
    )
)  # fmt: skip
register(
    SamplerSpec(
        "dhmc", "dHMC",
        "Discontinuous HMC: x = sign(theta), theta uniformly dequantised on [-1, 1]^n, Laplace "
        "momenta and the coordinate-wise integrator, exactly energy preserving "
        "(Nishimura, Dunson and Lu 2020)",
        "#E14B00", dhmc.DiscontinuousHMC,
        (Option("step_size", 0.5, dhmc.MIN_STEP_SIZE, dhmc.MAX_STEP_SIZE,
                help="dt, jittered by +-20% per chain and step"),
         Option("integrator_steps", 4, 1, dhmc.MAX_STEPS,
                help="L: integrator steps per step, drawn from ceil(L/2) to L")),
        move="sweep", family="hamiltonian", build_any=dhmc.DiscontinuousHMC, app=False,
        auxiliary=True,
    )
)  # fmt: skip

# What the catalogue holds, read when asked: the methods' samplers (``lsbcore.methods``) are
# registered where the catalogue is assembled (``lsbcore/__init__.py``), after this module.
_VIEWS = {
    #: Every sampler's name, in registry order.
    "SAMPLERS": lambda: tuple(REGISTRY),
    #: The samplers the dashboard offers (the rest run from the library and the benchmarks).
    "APP_SAMPLERS": lambda: tuple(name for name, spec in REGISTRY.items() if spec.app),
    "DESCRIPTIONS": lambda: {name: spec.description for name, spec in REGISTRY.items()},
    "LEARNED": lambda: tuple(name for name, spec in REGISTRY.items() if spec.learnable),
}


def __getattr__(name: str):
    if name in _VIEWS:
        return _VIEWS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_sampler(
    name: str,
    target,
    n_chains: int,
    seed: int = 0,
    device=None,
    x0=None,
    backend: str = "auto",
    **options,
):
    """Build the sampler called ``name`` (one of ``SAMPLERS``) for ``target``.

    ``backend``: ``"auto"``, ``"compiled"``, ``"torch"`` or ``"device"`` (``lsbcore.backends``).
    Options are those of the sampler's registry entry (``lr``, ``optimizer``, ``restart_prob``,
    ``hidden`` for the learned ones), ``resync_every`` for all, and ``balancing=`` (from
    ``lsbcore.load_balancing``) for ``"learned"``. ``device=None`` (or ``"auto"``) picks the
    faster path: the CPU until device kernels are measured faster (``base.AUTO_PICKS_CUDA``).
    """
    if name not in REGISTRY:
        raise ValueError(f"unknown sampler {name!r}; choose one of: {', '.join(REGISTRY)}.")
    spec = REGISTRY[name]
    common = dict(seed=seed, device=device, x0=x0, backend=backend)
    if "resync_every" in options:
        common["resync_every"] = options.pop("resync_every")
    if "balancing" in options:
        if not spec.needs_balancing:
            raise ValueError(f"balancing= is only for the 'learned' sampler, not {name!r}.")
        common["balancing"] = options.pop("balancing")
    if "flow" in options:
        if not spec.takes_flow:
            raise ValueError(f"flow= is only for the flow samplers, not {name!r}.")
        common["flow"] = options.pop("flow")
    allowed = {o.name: o for o in spec.options}
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        if not spec.options:
            raise ValueError(f"the {name!r} sampler takes no options, got {unknown}.")
        raise ValueError(f"unknown options for {name!r}: {unknown}.")
    reason = refusal(name, target)
    if reason is not None:
        raise ValueError(reason)
    build = spec.build if isinstance(target, PairwiseTarget) else spec.build_any
    return build(target, n_chains, **common, **options)  # the sampler validates them
