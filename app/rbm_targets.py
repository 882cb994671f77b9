"""The RBM targets the dashboard offers beside the Ising posterior, and their defaults.

The sidebar's target picker: the Ising segmentation posterior (the default), an RBM trained on
the binarised handwritten digits at 8 x 8 or 16 x 16 (shipped with ``lsbcore.rbm``), or one the
user trains on their own data in the session (``app/rbm_training.py``), or a Markov network
(``app/network_targets.py``; ``app/target_kind.py`` says which of the three a target is). Every
name the app takes from ``lsbcore.rbm`` goes through here, imported when first needed, so that
the Ising page never pays for it.

No Streamlit here.
"""

from __future__ import annotations

from app import network_targets

RBM_TARGETS = ("digits-8x8", "digits-16x16", "own")
# every target the picker offers: the Ising posterior, the RBMs, the Markov networks
TARGETS = ("ising", *RBM_TARGETS, *network_targets.TARGETS)
TARGET_LABELS = {
    "ising": "Ising segmentation",
    "digits-8x8": "RBM: digits 8 × 8",
    "digits-16x16": "RBM: digits 16 × 16",
    "own": "RBM: your own",
    **network_targets.TARGET_LABELS,
}
SHIPPED = ("digits-8x8", "digits-16x16")
# A sensible six: the fixed Barker g, the learned LSB 1 and its fast variants, GWG and 2-site
# block Gibbs (the paper's section 5.2 comparison, small enough to redraw five times a second)
DEFAULT_SAMPLERS = ("barker", "lsb1", "flsb1", "flsb2", "gwg", "gibbs-2")
DEFAULT_CHAINS = 8
# burn-in learns the LSB functions; the paper burns in far longer (24,000) at batch 16
DEFAULT_BURN_IN = 1000
DEFAULT_STEPS = 50_000
DIGITS_SHOWN = 8  # chains drawn per sampler in the digit grid


def is_rbm(target: str) -> bool:
    return target in RBM_TARGETS


def labels() -> tuple[str, ...]:
    """The RBM comparison's sampler labels, in its order (``lsbcore.rbm.variants.LABELS``)."""
    from lsbcore.rbm.variants import LABELS

    return tuple(LABELS)


def describe(label: str) -> str:
    from lsbcore.rbm.variants import describe as variant_description

    return variant_description(label)


def registry_name(label: str) -> str:
    """The registry sampler a variant label runs (``gibbs-2`` -> ``block-gibbs``)."""
    from lsbcore.rbm.variants import VARIANTS

    return VARIANTS[label].name


def learnable(label: str) -> bool:
    from lsbcore import REGISTRY

    return REGISTRY[registry_name(label)].learnable


def model_description(target: str) -> str:
    from lsbcore.rbm.models import MODELS

    return MODELS.get(target, "")


def load_shipped(target: str):
    """The shipped RBM of ``target`` (``digits-8x8`` or ``digits-16x16``)."""
    if target not in SHIPPED:
        raise ValueError(f"{target!r} is not a shipped RBM; choose one of {', '.join(SHIPPED)}.")
    from lsbcore.rbm.models import load_model

    return load_model(target)
