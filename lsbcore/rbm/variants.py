"""The samplers of the RBM experiment by the LSB paper's names (section 5.2, appendix F).

A variant is a registry sampler with options: ``gibbs-k`` is block Gibbs on blocks of ``k``
sites and ``hb-k-r`` the Hamming ball sampler on blocks of ``k`` with radius ``r``, both taking
their blocks from a fresh random order of the sites each sweep, as the public
Gibbs-with-Gradients code's ``block_samplers.py`` does. Every plain registry sampler allowed on
an RBM is a variant under its own name.
"""

from __future__ import annotations

from lsbcore.samplers.registry import REGISTRY

__all__ = ["LABELS", "VARIANTS", "describe", "display_name", "evals_per_step", "variant"]

_SHUFFLED = {"blocks": "shuffled"}
#: label -> (registry sampler name, options)
VARIANTS: dict[str, tuple[str, dict]] = {
    **{name: (name, {}) for name in ("barker", "sqrt", "min", "max", "lsb1", "lsb2")},
    "flsb1": ("flsb1", {}),
    "flsb2": ("flsb2", {}),
    "gwg": ("gwg", {}),
    **{f"gibbs-{k}": ("block-gibbs", {"block_size": k, **_SHUFFLED}) for k in (2, 4, 10)},
    **{
        f"hb-10-{r}": ("hamming-ball", {"block_size": 10, "radius": r, **_SHUFFLED})
        for r in (1, 2, 3)
    },  # fmt: skip
    "pas": ("pas", {}),
    "dmala": ("dmala", {}),
    "gibbs": ("gibbs", {}),
    "metropolis": ("metropolis", {}),
}
#: The variants in the order the views and tables list them.
LABELS = tuple(VARIANTS)

_NAMES = {
    "gibbs": "Gibbs (single site)",
    "metropolis": "Metropolis (single site)",
}


def variant(label: str) -> tuple[str, dict]:
    """``(registry name, options)`` of ``label`` (a copy of the options)."""
    if label not in VARIANTS:
        raise ValueError(f"unknown RBM sampler {label!r}; choose from: {', '.join(LABELS)}.")
    name, options = VARIANTS[label]
    return name, dict(options)


def display_name(label: str) -> str:
    """The label as the paper writes it: ``Gibbs-2``, ``HB-10-1``, ``FLSB 2``, ``GWG``."""
    name, options = variant(label)
    if name == "block-gibbs":
        return f"Gibbs-{options['block_size']}"
    if name == "hamming-ball":
        return f"HB-{options['block_size']}-{options['radius']}"
    return _NAMES.get(label, REGISTRY[name].label)


def describe(label: str) -> str:
    """One sentence: what the variant is."""
    name, options = variant(label)
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

    name, options = variant(label)
    if name == "block-gibbs":
        return 2 ** options["block_size"]
    if name == "hamming-ball":
        return sum(comb(options["block_size"], j) for j in range(options["radius"] + 1))
    if name in ("barker", "sqrt", "min", "max", "lsb1", "lsb2"):
        return n_visible
    return 1
