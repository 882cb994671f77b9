"""The samplers of the RBM experiment by the LSB paper's names (section 5.2, appendix F).

A variant is a configured registry sampler (``lsbcore.samplers.config.SamplerConfig``) labelled
with the paper's name: ``gibbs-k`` is block Gibbs on blocks of ``k`` sites and ``hb-k-r`` the
Hamming ball sampler on blocks of ``k`` with radius ``r``, both taking their blocks from a fresh
random order of the sites each sweep, as the public Gibbs-with-Gradients code's
``block_samplers.py`` does. Every plain registry sampler allowed on an RBM is a variant under its
own name. What stays here is the paper's vocabulary: the labels, their display names,
descriptions and evaluation counts.
"""

from __future__ import annotations

from lsbcore.samplers.config import SamplerConfig
from lsbcore.samplers.registry import REGISTRY

__all__ = ["COLOURS", "LABELS", "VARIANTS", "config", "describe", "display_name", "evals_per_step"]

_SHUFFLED = {"blocks": "shuffled"}
_PLAIN = ("barker", "sqrt", "min", "max", "lsb1", "lsb2", "flsb1", "flsb2", "gwg")
_CONFIGS = (
    *(SamplerConfig(name, label=name) for name in _PLAIN),
    *(SamplerConfig("block-gibbs", {"block_size": k, **_SHUFFLED}, label=f"gibbs-{k}")
      for k in (2, 4, 10)),
    *(SamplerConfig("hamming-ball", {"block_size": 10, "radius": r, **_SHUFFLED},
                    label=f"hb-10-{r}") for r in (1, 2, 3)),
    *(SamplerConfig(name, label=name) for name in ("pas", "dmala", "gibbs", "metropolis")),
)  # fmt: skip
#: label -> the configured sampler
VARIANTS: dict[str, SamplerConfig] = {c.label: c for c in _CONFIGS}
#: The variants in the order the views and tables list them.
LABELS = tuple(VARIANTS)
#: The colours of the configured variants, which share a registry sampler but are drawn side by
#: side on the MMD chart (the plain variants keep their sampler's colour). Chosen with the
#: registry's so that any two differ by at least CIEDE2000 15 (tests/test_palette.py).
COLOURS = {
    "gibbs-2": "#00E1A5",
    "gibbs-4": "#A5965A",
    "gibbs-10": "#00690F",
    "hb-10-1": "#788778",
    "hb-10-2": "#FFA5FF",
    "hb-10-3": "#F00F87",
}

_NAMES = {
    "gibbs": "Gibbs (single site)",
    "metropolis": "Metropolis (single site)",
}


def config(label: str) -> SamplerConfig:
    """The configured sampler of ``label``."""
    if label not in VARIANTS:
        raise ValueError(f"unknown RBM sampler {label!r}; choose from: {', '.join(LABELS)}.")
    return VARIANTS[label]


def display_name(label: str) -> str:
    """The label as the paper writes it: ``Gibbs-2``, ``HB-10-1``, ``FLSB 2``, ``GWG``."""
    name, options = config(label).name, config(label).options
    if name == "block-gibbs":
        return f"Gibbs-{options['block_size']}"
    if name == "hamming-ball":
        return f"HB-{options['block_size']}-{options['radius']}"
    return _NAMES.get(label, REGISTRY[name].label)


def describe(label: str) -> str:
    """One sentence: what the variant is."""
    name, options = config(label).name, config(label).options
    if name == "block-gibbs":
        k = options["block_size"]
        return (
            f"Block Gibbs on blocks of {k} sites (blocks from a fresh random order each sweep): "
            f"all 2^{k} = {2**k} states of the block scored per step."
        )
    if name == "hamming-ball":
        k, r = options["block_size"], options["radius"]
        return (
            f"Hamming ball sampler on blocks of {k} sites with radius {r} (blocks from a fresh "
            "random order each sweep)."
        )
    return REGISTRY[name].description + "."


def evals_per_step(label: str, n_visible: int) -> int:
    """Target evaluations per chain per step of the variant on an RBM with ``n_visible`` units
    without learning (``docs/method.md`` section 9's counting rule)."""
    from math import comb

    name, options = config(label).name, config(label).options
    if name == "block-gibbs":
        return 2 ** options["block_size"]
    if name == "hamming-ball":
        return sum(comb(options["block_size"], j) for j in range(options["radius"] + 1))
    if name in ("barker", "sqrt", "min", "max", "lsb1", "lsb2"):
        return n_visible
    return 1
