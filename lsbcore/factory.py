"""``make_sampler``: every sampler of LSB Explorer by name, behind one interface."""

from __future__ import annotations

from lsbcore.balancing import FIXED, Balancing, make_balancing
from lsbcore.baselines import UniformSiteSampler
from lsbcore.locally_balanced import LocallyBalancedSampler

LEARNED = ("lsb1", "lsb2")
BASELINES = ("gibbs", "metropolis")
SAMPLERS = FIXED + LEARNED + BASELINES + ("learned",)

DESCRIPTIONS = {
    "barker": "Locally balanced, g(t) = t/(1+t) (Barker)",
    "sqrt": "Locally balanced, g(t) = sqrt(t); identical to Gibbs-with-Gradients on this target",
    "min": "Locally balanced, g(t) = min(1, t)",
    "max": "Locally balanced, g(t) = max(1, t)",
    "lsb1": "LSB 1: learned softmax mixture of the four fixed functions",
    "lsb2": "LSB 2: learned function g(t) = (h(t) + t h(1/t)) / 2, h a small network",
    "gibbs": "Random-scan Gibbs (uninformed baseline)",
    "metropolis": "Uniform-site Metropolis (uninformed baseline)",
    "learned": "A frozen learned balancing function loaded from JSON",
}


def make_sampler(name: str, target, n_chains: int, seed: int = 0, device=None, x0=None, **options):
    """Build the sampler called ``name`` (one of ``SAMPLERS``) for ``target``.

    Options for the locally balanced samplers: ``lr``, ``optimizer`` (``"adam"``/``"sgd"``),
    ``hidden`` (LSB 2 width), ``restart_prob``, ``resync_every``; ``"learned"`` requires
    ``balancing=`` (from ``lsbcore.load_balancing``). ``device=None`` picks CUDA when available.
    """
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choose one of: {', '.join(SAMPLERS)}.")
    resync = {"resync_every": options.pop("resync_every")} if "resync_every" in options else {}
    if name in BASELINES:
        if options:
            raise ValueError(f"the {name!r} sampler takes no options, got {sorted(options)}.")
        return UniformSiteSampler(
            target, n_chains, rule=name, seed=seed, device=device, x0=x0, **resync
        )
    hidden = options.pop("hidden", 10)
    balancing = options.pop("balancing", None)
    if name == "learned":
        if not isinstance(balancing, Balancing):
            raise ValueError(
                "the 'learned' sampler needs balancing=lsbcore.load_balancing(path_or_dict)."
            )
        balancing.frozen()
        label = "learned"
    else:
        if balancing is not None:
            raise ValueError(f"balancing= is only for the 'learned' sampler, not {name!r}.")
        balancing = make_balancing(name, hidden=hidden, seed=seed)
        label = name
    learn_options = {k: options.pop(k) for k in ("lr", "optimizer", "restart_prob") if k in options}
    if options:
        raise ValueError(f"unknown options for {name!r}: {sorted(options)}.")
    return LocallyBalancedSampler(
        target,
        n_chains,
        balancing,
        seed=seed,
        device=device,
        x0=x0,
        name=label,
        **learn_options,
        **resync,
    )
