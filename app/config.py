"""The dashboard's configuration: one frozen record, its bounds, and its query-parameter form.

Everything a user can set in the sidebar lives in ``Config``. The same record is written to the
URL (``to_query_params``) so that a link reopens the exact configuration, and read back from it
(``from_query_params``) with every value validated: unknown names, NaN, infinities, negative or
huge numbers are clamped or replaced by defaults, and each such repair is reported as a sentence
the page shows as a warning. ``cap_workload`` bounds what one session may ask for.

No Streamlit here: this module is plain data and is tested as such.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from app import link_values, network_targets, rbm_targets, selection_target, view_links
from app.target_kind import TargetKind, kind_of
from app.text import quote
from lsbcore import PAPER_CASES, REGISTRY
from lsbcore.image import target_size
from lsbcore.samplers.registry import APP_SAMPLERS
from lsbcore.segmentation.starts import STARTS

SOURCES = ("paper", "sample", "upload")
# images: the data term from a two-class mixture fitted to the photo, or the paper-style
# threshold at mid-grey (alpha = mu (2I - 1) / sigma^2)
MODELS = ("mixture", "threshold")
# images: which class is the object; auto picks the one that touches the border less
POLARITIES = ("auto", "dark", "bright")
BOUNDARIES = ("free", "periodic")
# the learned samplers' options as the registry declares them (lsb1's entry: the same for all)
_LR = REGISTRY["lsb1"].option("lr")
_HIDDEN = REGISTRY["lsb2"].option("hidden")
OPTIMIZERS = tuple(REGISTRY["lsb1"].option("optimizer").choices)
#: LSB 2's width on the page: the registry's bound, capped where the live views stay smooth
MAX_PAGE_HIDDEN = 64
DEVICES = ("auto", "cpu", "cuda")
# steps per refresh: "auto" fills the refresh interval, a number caps it (slow motion for demos)
SPEEDS = ("auto", "1", "2", "5", "10", "20", "50", "100", "200", "500", "1000")
# order of the sampler multiselect: by family (fixed, learned and imported, uninformed, block,
# flow),
# registry order within one; a family the list does not know goes last
FAMILIES = ("locally balanced", "learned", "uninformed", "block", "flow")


def _family_rank(name: str) -> tuple[int, int]:
    family = REGISTRY[name].family
    rank = FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)
    return rank, APP_SAMPLERS.index(name)


SAMPLER_ORDER: tuple[str, ...] = tuple(sorted(APP_SAMPLERS, key=_family_rank))

# The flow samplers' training (app/flow_training.py): the registry's default and bound
FLOW_STEPS = REGISTRY["flow-exact"].option("train_steps").default
MAX_FLOW_STEPS = int(REGISTRY["flow-exact"].option("train_steps").high)
#: The samplers built on a trained flow (they wait for its training)
FLOW_SAMPLERS = tuple(n for n in APP_SAMPLERS if REGISTRY[n].takes_flow)

DEFAULT_SAMPLE = "synthetic_disc_letter"
# The synthetic sample is two gray levels under clipped Gaussian noise: the threshold model is
# its generative model, while a Gaussian mixture fitted to it at 128 px takes the pile of
# clipped white pixels for a class of its own (BENCHMARKS.md, photo segmentation)
THRESHOLD_SAMPLES = {"synthetic_disc_letter": "threshold"}
# the paper's comparison: its four fixed balancing functions and its two learned ones
PAPER_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2")
# photos: block Gibbs covers a lattice of 10^5 sites in a sweep per step
IMAGE_SAMPLERS = ("checkerboard",)
# photos: whether the marginal has settled is judged across chains (split R-hat), so never one
IMAGE_CHAINS = 4
# the working resolution an image starts at when the machine's speed is unknown (see pick_size)
DEFAULT_IMAGE_SIZE = 128
MAX_SIZE = 512
# A photo's working resolution (pick_size): most photos' marginals settle within about
# SETTLE_SWEEPS sweeps (lsbcore.diagnostics.settled), and the live page samples at about
# PAGE_SHARE of the sampler's own measured speed, its redraws (and a browser on the same
# machine) taking the rest. Both measured with tools.photo_settle (BENCHMARKS.md): 9 of 13
# scikit-image photos settled at 180-220 sweeps (motorcycle 449, rocket 818, chelsea 830, grass
# not in 5,050); the page reached 0.40-0.49 of the sampler's speed (0.2 while a fresh server
# still compiles in the background).
SETTLE_SWEEPS = 200
PAGE_SHARE = 0.4
SETTLE_BUDGET_S = 5.0

# What one session may ask for (see cap_workload): sites x chains x samplers, and the number of
# per-chain trace values kept ((burn-in + steps) / thin x chains x samplers x 3 fields).
MAX_WORKLOAD = 1_500_000
MAX_TRACE_VALUES = 12_000_000


@dataclass(frozen=True)
class Config:
    """Everything the sidebar sets. Defaults: paper case 3, the paper's six samplers, ready
    to run. ``target`` picks the Ising segmentation posterior (then ``source`` says which), an
    RBM (app/rbm_targets.py), whose samplers are the RBM comparison's variant labels, or a
    Markov network (app/network_targets.py; ``epsilon`` shapes its presets)."""

    target: str = "ising"
    source: str = "paper"
    case: int = 3
    sample: str = DEFAULT_SAMPLE
    size: int = 30  # paper: n of the n x n lattice; images: the longer side in pixels
    lam: float = 1.0
    mu: float = 1.0
    sigma: float = 3.0
    boundary: str = "periodic"
    model: str = "mixture"  # images: the data model
    polarity: str = "auto"  # images: which class is the object
    noise: float = 0.0  # images: sd of synthetic Gaussian noise added to y
    seed: int = 0
    start: str = "mixed"  # images: where the chains start (lsbcore.segmentation.starts)
    samplers: tuple[str, ...] = PAPER_SAMPLERS
    chains: int = 4
    burn_in: int = 2000
    steps: int = 30_000  # mixing steps after burn-in (the paper's protocol)
    thin: int = 1
    lr: float = 0.01
    optimizer: str = "adam"
    hidden: int = 10
    device: str = "auto"
    speed: str = "auto"
    until_settled: bool = True  # images: pause once every sampler's marginal has settled
    shared_alpha: bool = False  # paper cases: one noisy alpha for all chains (R-hat meaningful)
    epsilon: float = network_targets.DEFAULT_EPSILON  # MN 1 / MN 2: near-deterministic entries
    flow_steps: int = FLOW_STEPS  # steps of flow training before the flow samplers join
    # variable selection (app/selection_target.py): its synthetic data
    features: int = selection_target.DEFAULT_FEATURES
    informative: int = selection_target.DEFAULT_INFORMATIVE
    data_seed: int = 0

    @property
    def total_steps(self) -> int:
        return self.burn_in + self.steps

    def as_dict(self) -> dict:
        out = asdict(self)
        out["samplers"] = list(self.samplers)
        return out


# Numeric bounds: name -> (kind, low, high). Values outside are clamped (with a warning).
BOUNDS: dict[str, tuple[type, float, float]] = {
    "case": (int, 1, 4),
    "size": (int, 16, MAX_SIZE),
    "lam": (float, 0.0, 10.0),
    "mu": (float, 0.0, 20.0),
    "sigma": (float, 0.01, 20.0),
    "noise": (float, 0.0, 2.0),
    "seed": (int, 0, 2**31 - 1),
    "chains": (int, 1, 64),
    "burn_in": (int, 0, 50_000),
    "steps": (int, 0, 200_000),
    "thin": (int, 1, 1000),
    "lr": (float, _LR.low, _LR.high),
    "hidden": (int, int(_HIDDEN.low), min(int(_HIDDEN.high), MAX_PAGE_HIDDEN)),
    "epsilon": (float, 0.0, 0.5),
    "flow_steps": (int, 0, MAX_FLOW_STEPS),
    "features": (int, selection_target.MIN_FEATURES, selection_target.MAX_FEATURES),
    "informative": (int, 1, selection_target.MAX_FEATURES),  # and at most the features
    "data_seed": (int, 0, 2**31 - 1),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "target": rbm_targets.TARGETS,
    "source": SOURCES,
    "boundary": BOUNDARIES,
    "optimizer": OPTIMIZERS,
    "device": DEVICES,
    "speed": SPEEDS,
    "model": MODELS,
    "polarity": POLARITIES,
    "start": STARTS,
}
# Links made before "object" had an automatic choice said invert=1 for a dark object
LEGACY_INVERT = "invert"
# Yes/no fields
FLAGS = ("until_settled", "shared_alpha")
# Fields that define the posterior: changing one builds a new target.
TARGET_FIELDS = (
    "target",
    "source",
    "case",
    "sample",
    "size",
    "lam",
    "mu",
    "sigma",
    "boundary",
    "model",
    "polarity",
    "noise",
    "seed",
    "shared_alpha",
    "epsilon",
    "features",
    "informative",
    "data_seed",
)
# The fields of the variable-selection target alone (a link carries them for it only)
SELECTION_FIELDS = ("features", "informative", "data_seed")
# The fields an RBM's or a Markov network's run reads (app/state.py, ``build_rbm_run`` and
# ``build_network_run``): the Ising page's image, posterior, start and stop settings stay in the
# configuration for the way back, but these runs do not depend on them.
RBM_RUN_FIELDS = (
    "target", "seed", "samplers", "chains", "burn_in", "steps", "lr", "optimizer", "hidden",
    "device",
)  # fmt: skip
NETWORK_RUN_FIELDS = (*RBM_RUN_FIELDS, "thin")  # a network run records traces
# Fields that define the samplers: changing one rebuilds the comparison.
SAMPLER_FIELDS = (
    "samplers", "chains", "start", "thin", "lr", "optimizer", "hidden", "device", "flow_steps",
)  # fmt: skip
# The run follows the others (mixing steps, speed, until settled) without a reset; a new burn-in
# length resets
# it only once the run has passed it (see session.py).

LABELS = {
    "target": "target",
    "source": "source",
    "case": "paper case",
    "sample": "sample image",
    "size": "working resolution",
    "lam": "λ",
    "mu": "μ",
    "sigma": "σ",
    "boundary": "boundary",
    "model": "data model",
    "polarity": "object",
    "start": "start",
    "until_settled": "stop when settled",
    "shared_alpha": "one α for all chains",
    "noise": "synthetic noise",
    "seed": "seed",
    "samplers": "samplers",
    "chains": "chains",
    "thin": "record every",
    "lr": "learning rate",
    "optimizer": "optimiser",
    "hidden": "LSB 2 width",
    "device": "device",
    "burn_in": "burn-in",
    "epsilon": "ε",
    "flow_steps": "flow training steps",
    "features": "features",
    "informative": "informative features",
    "data_seed": "data seed",
}


def run_settings(cfg: Config) -> dict:
    """The settings a run of ``cfg`` reads, as JSON values: every field for the Ising
    posterior; ``RBM_RUN_FIELDS`` for an RBM; ``NETWORK_RUN_FIELDS`` for a network, with ε for
    a preset and the synthetic data's for variable selection."""
    kind = kind_of(cfg.target)
    if kind is TargetKind.ISING:
        return cfg.as_dict()
    names = list(RBM_RUN_FIELDS if kind is TargetKind.RBM else NETWORK_RUN_FIELDS)
    names += ["epsilon"] if cfg.target in network_targets.PRESETS else []
    names += list(SELECTION_FIELDS) if cfg.target == selection_target.TARGET else []
    values = cfg.as_dict()
    return {name: values[name] for name in names}


def source_defaults(source: str, case: int = 3, sample: str = DEFAULT_SAMPLE) -> dict:
    """The settings a source starts from: the paper's protocol for a case, ours for images."""
    if source == "paper":
        _, lam, mu, sigma, burn_in = PAPER_CASES.get(case, PAPER_CASES[3])
        return {
            "size": 30,
            "lam": lam,
            "mu": mu,
            "sigma": sigma,
            "boundary": "periodic",
            "noise": 0.0,
            "samplers": PAPER_SAMPLERS,
            "burn_in": burn_in,
            "steps": 30_000,
        }
    # images: the fitted mixture as it is (mu = sigma = 1) under lambda = 1; block Gibbs, whose
    # step is a sweep: a short warm-up, then mixing until the marginal has settled
    model = THRESHOLD_SAMPLES.get(sample, "mixture") if source == "sample" else "mixture"
    return {
        "size": DEFAULT_IMAGE_SIZE,
        "lam": 1.0,
        **model_defaults(model),
        "boundary": "free",
        "noise": 0.0,
        "model": model,
        "polarity": "auto",
        "start": "mixed",
        "samplers": IMAGE_SAMPLERS,
        "chains": IMAGE_CHAINS,
        "burn_in": 50,
        "steps": 5000,
        "until_settled": True,
    }


def model_defaults(model: str) -> dict:
    """mu and sigma for a data model: the mixture's are scale factors (1 = as fitted), the
    threshold's the observation model y ~ N(mu x, sigma^2) on y = 2I - 1."""
    return {"mu": 1.0, "sigma": 1.0} if model == "mixture" else {"mu": 1.0, "sigma": 0.5}


def pick_size(rate: float, shape: tuple[int, int] | None, budget_s: float = SETTLE_BUDGET_S) -> int:
    """The working resolution (longer side) whose expected settling fits ``budget_s``.

    ``rate``: the machine's checkerboard site updates per second (measured), of which the live
    page reaches about ``PAGE_SHARE``; settling takes about ``SETTLE_SWEEPS`` sweeps of
    ``IMAGE_CHAINS`` chains. The lattice's site count is side^2 times the photo's aspect
    (``shape``: its height and width), and the side is capped at MAX_SIZE and at the photo's
    own longer side.
    """
    height, width = shape if shape else (MAX_SIZE, MAX_SIZE)
    own = max(height, width, BOUNDS["size"][1])  # never upsample a small photo
    if not math.isfinite(rate) or rate <= 0:
        return min(DEFAULT_IMAGE_SIZE, own)
    aspect = min(height, width) / max(height, width)
    sites = rate * PAGE_SHARE * budget_s / (SETTLE_SWEEPS * IMAGE_CHAINS)
    side = int(math.sqrt(sites / aspect)) // 16 * 16
    return int(min(max(side, BOUNDS["size"][1]), MAX_SIZE, own))


def settle_seconds(rate: float, size: int, shape: tuple[int, int] | None) -> float:
    """The seconds ``pick_size``'s model expects a photo of ``shape`` to take to settle at the
    working resolution ``size``: below its budget where the photo's own size capped the pick."""
    height, width = shape if shape else (size, size)
    sites = math.prod(target_size(width, height, size))  # the lattice the photo is shrunk to
    return SETTLE_SWEEPS * IMAGE_CHAINS * sites / (rate * PAGE_SHARE)


def target_defaults(target: str) -> dict:
    """The run settings an RBM or network target starts from (its samplers, chains, burn-in and
    mixing lengths); nothing for the Ising posterior, whose source sets them."""
    kind = kind_of(target)
    if kind is TargetKind.ISING:
        return {}
    if target == selection_target.TARGET:  # a lecture's live run (app/selection_target.py)
        return {
            "samplers": selection_target.DEFAULT_SAMPLERS,
            "chains": selection_target.DEFAULT_CHAINS,
            "burn_in": selection_target.DEFAULT_BURN_IN,
            "steps": selection_target.DEFAULT_STEPS,
            "thin": 1,
        }
    if kind is TargetKind.NETWORK:  # the paper's UAI protocol (appendix D)
        return {
            "samplers": network_targets.DEFAULT_SAMPLERS,
            "chains": network_targets.DEFAULT_CHAINS,
            "burn_in": network_targets.DEFAULT_BURN_IN,
            "steps": network_targets.DEFAULT_STEPS,
            "thin": 1,
        }
    return {
        "samplers": rbm_targets.DEFAULT_SAMPLERS,
        "chains": rbm_targets.DEFAULT_CHAINS,
        "burn_in": rbm_targets.DEFAULT_BURN_IN,
        "steps": rbm_targets.DEFAULT_STEPS,
        "thin": 1,
    }


def defaults_for(
    source: str = "paper", case: int = 3, sample: str = DEFAULT_SAMPLE, target: str = "ising"
) -> Config:
    return replace(
        Config(),
        target=target,
        source=source,
        case=case,
        sample=sample,
        **{**source_defaults(source, case, sample), **target_defaults(target)},
    )


# ----------------------------------------------------------------------------- validation
def _number(name: str, raw, warnings: list[str]):
    """``raw`` (str or number) as a finite number within BOUNDS[name], or None if unusable."""
    kind, low, high = BOUNDS[name]
    return link_values.number(raw, LABELS.get(name, name), low, high, kind is int, warnings)


def _choice(name: str, raw, choices, warnings: list[str]):
    value = str(raw).strip().lower()
    if value in choices:
        return value
    label = LABELS.get(name, name)
    warnings.append(f"{label}: {quote(raw)} is not one of {', '.join(choices)}; using the default.")
    return None


def _boolean(name: str, raw, warnings: list[str]):
    value = link_values.truth(raw)
    if value is None:
        warnings.append(f"{LABELS.get(name, name)}: {quote(raw)} is not true/false; ignored.")
    return value


def parse_samplers(raw, warnings: list[str], target: str = "ising") -> tuple[str, ...] | None:
    """A comma-separated (or repeated) list of sampler names (an RBM target: variant labels; a
    network: registry names); unknown names are dropped."""
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    names: list[str] = []
    kind = kind_of(target)
    rbm = kind is TargetKind.RBM
    offered = {
        TargetKind.RBM: rbm_targets.labels(),
        TargetKind.NETWORK: network_targets.SAMPLERS,
        TargetKind.ISING: APP_SAMPLERS,
    }[kind]
    for item in items:
        for part in str(item).split(","):
            name = part.strip().lower()
            if not name:
                continue
            if kind is TargetKind.NETWORK:
                if name not in offered:
                    warnings.append(
                        f"samplers: {quote(name)} is not a sampler the network page offers; "
                        "ignored."
                    )
                elif name not in names:
                    names.append(name)
            elif rbm:
                if name not in offered:
                    warnings.append(
                        f"samplers: {quote(name)} is not one of the RBM comparison's samplers; "
                        "ignored."
                    )
                elif name not in names:
                    names.append(name)
            elif name in REGISTRY and name not in APP_SAMPLERS:
                warnings.append(
                    f"samplers: {quote(name)} runs from the library (lsbcore), not in the "
                    "dashboard; ignored."
                )
            elif name not in APP_SAMPLERS:
                warnings.append(f"samplers: unknown sampler {quote(name)} ignored.")
            elif name not in names:
                names.append(name)
    if not names:
        warnings.append("samplers: none of the names is known; using the default samplers.")
        return None
    return tuple(n for n in (SAMPLER_ORDER if kind is TargetKind.ISING else offered) if n in names)


def validate(values: Mapping, samples: tuple[str, ...] = ()) -> tuple[Config, list[str]]:
    """A ``Config`` from loosely typed ``values`` (query strings or widget values).

    Missing or unusable values take the default of the chosen source (paper case, sample or
    upload); each repair adds a sentence to the returned warnings.
    """
    warnings: list[str] = []
    # pins: app.pin_store; run: the page's run, taken back after a reload (app.reload)
    known = {f.name for f in fields(Config)} | {LEGACY_INVERT, "pins", "run"}
    for key in values:
        if key not in known and not view_links.is_view_key(key):
            warnings.append(f"Unknown link parameter {quote(key)} ignored.")

    def first(key):
        raw = values.get(key)
        if isinstance(raw, (list, tuple)) and key != "samplers":
            raw = raw[-1] if raw else None
        return raw

    target = None
    if "target" in values:
        target = _choice("target", first("target"), rbm_targets.TARGETS, warnings)
    target = target or "ising"
    source = _choice("source", first("source"), SOURCES, warnings) if "source" in values else None
    source = source or "paper"
    case = _number("case", first("case"), warnings) if "case" in values else None
    case = case or 3
    sample = DEFAULT_SAMPLE
    if "sample" in values:
        raw = str(first("sample")).strip()
        if raw in samples:
            sample = raw
        else:
            warnings.append(
                f"sample image: {quote(raw)} is not a shipped sample; using the default."
            )
    base = defaults_for(source, case, sample, target)
    out: dict = {}
    for f in fields(Config):
        name = f.name
        if name in ("target", "source", "case", "sample") or name not in values:
            continue
        raw = first(name)
        if name == "samplers":
            value = parse_samplers(values.get(name), warnings, target)
        elif name in BOUNDS:
            value = _number(name, raw, warnings)
        elif name in CHOICES:
            value = _choice(name, raw, CHOICES[name], warnings)
        else:  # flags
            value = _boolean(name, raw, warnings)
        if value is not None:
            out[name] = value
    if "informative" in out or "features" in out:  # at most the features
        features = out.get("features", base.features)
        informative, note = selection_target.informative_within(
            features, out.get("informative", base.informative)
        )
        if note:
            warnings.append(note)
        out["informative"] = informative
    if LEGACY_INVERT in values and "polarity" not in values:  # links from before polarity
        dark = _boolean("polarity", first(LEGACY_INVERT), warnings)
        if dark is not None:
            out["polarity"] = "dark" if dark else "bright"
    return replace(base, **out), warnings


def from_query_params(
    params: Mapping, samples: tuple[str, ...] = ()
) -> tuple[Config | None, list[str]]:
    """The configuration a link asks for, or ``(None, [])`` when the link carries none."""
    if not params:
        return None, []
    return validate(params, samples)


def to_query_params(cfg: Config) -> dict[str, str]:
    """Every field as a string: a link that reopens exactly this configuration (the target
    only when it is not the Ising posterior, which a link without one opens; epsilon only for
    a preset network, the one target it shapes; the data settings only for variable selection;
    the flow's training steps only with a flow
    sampler)."""
    out: dict[str, str] = {}
    for f in fields(Config):
        value = getattr(cfg, f.name)
        if f.name == "target" and value == "ising":
            continue
        if f.name == "epsilon" and cfg.target not in network_targets.PRESETS:
            continue
        if f.name in SELECTION_FIELDS and cfg.target != selection_target.TARGET:
            continue
        if f.name == "flow_steps" and not set(cfg.samplers) & set(FLOW_SAMPLERS):
            continue
        if f.name == "samplers":
            out[f.name] = ",".join(value)
        elif isinstance(value, bool):
            out[f.name] = "1" if value else "0"
        elif isinstance(value, float):
            out[f.name] = repr(value)
        else:
            out[f.name] = str(value)
    return out


# ----------------------------------------------------------------------------- workload
def max_chains(size: int, n_samplers: int) -> int:
    """The most chains per sampler one session may run at this resolution (the longer side
    bounds the image) with this many samplers."""
    return max(1, min(BOUNDS["chains"][2], MAX_WORKLOAD // (size * size * max(1, n_samplers))))


def max_size(chains: int, n_samplers: int) -> int:
    """The largest resolution (longer side) at which ``chains`` chains per sampler fit."""
    side = math.isqrt(MAX_WORKLOAD // (max(1, chains) * max(1, n_samplers)))
    return int(min(max(side, BOUNDS["size"][1]), MAX_SIZE))


def min_thin(total_steps: int, chains: int, n_samplers: int) -> int:
    """The least thinning that keeps the traces within ``MAX_TRACE_VALUES``."""
    per_record = chains * max(1, n_samplers) * 3
    return max(1, math.ceil(total_steps * per_record / MAX_TRACE_VALUES))


def cap_workload(cfg: Config) -> tuple[Config, list[str]]:
    """Bound the work and memory one session may ask for; say what was reduced and why.

    The sidebar applies the same bounds to its widgets before drawing them (so they show the
    values in use); this catches whatever reaches a run another way."""
    notes: list[str] = []
    kind = kind_of(cfg.target)
    if kind is TargetKind.RBM:  # an RBM's chains carry no traces; rbm_targets bounds its work
        return cfg, notes
    n_samplers = max(1, len(cfg.samplers))
    if kind is TargetKind.NETWORK:  # no lattice to bound; the traces' memory is
        least = min_thin(cfg.total_steps, cfg.chains, n_samplers)
        if cfg.thin >= least:
            return cfg, notes
        notes.append(
            f"Recording every {least} steps instead of every {cfg.thin} to bound the memory of "
            "the traces; the paper ESS then counts lags in recorded draws."
        )
        return replace(cfg, thin=least), notes
    chains = cfg.chains
    if chains > max_chains(cfg.size, n_samplers):
        chains = max_chains(cfg.size, n_samplers)
        notes.append(
            f"Chains reduced from {cfg.chains} to {chains} so that one session stays responsive "
            f"(resolution² × chains × samplers ≤ {MAX_WORKLOAD:,})."
        )
    size = cfg.size
    if size * size * chains * n_samplers > MAX_WORKLOAD:
        size = max_size(chains, n_samplers)
        notes.append(
            f"Working resolution reduced from {cfg.size} to {size} "
            f"(resolution² × chains × samplers ≤ {MAX_WORKLOAD:,})."
        )
    thin = cfg.thin
    if thin < min_thin(cfg.total_steps, chains, n_samplers):
        thin = min_thin(cfg.total_steps, chains, n_samplers)
        notes.append(
            f"Recording every {thin} steps instead of every {cfg.thin} to bound the memory of "
            "the traces; the paper ESS then counts lags in recorded draws."
        )
    return replace(cfg, chains=chains, size=size, thin=thin), notes


def changed(old: Config, new: Config, names) -> list[str]:
    """The labels of the fields among ``names`` that differ between two configurations."""
    return [LABELS.get(n, n) for n in names if getattr(old, n) != getattr(new, n)]


def steps_per_refresh(cfg: Config) -> int | None:
    """The user's cap on steps per refresh, or None for "fill the refresh interval"."""
    return None if cfg.speed == "auto" else int(cfg.speed)
