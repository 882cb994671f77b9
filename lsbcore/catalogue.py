"""The sampler catalogue, assembled: the registry (``lsbcore.samplers.registry``) holds the core's
samplers; the methods' samplers, which carry a model of their own (``lsbcore.methods``), are
registered here, so that the registry imports no method. ``lsbcore/__init__.py`` imports this
module first, so every import of lsbcore sees the whole catalogue."""

from lsbcore.methods.block_proposals.entry import NEURAL_BLOCK
from lsbcore.methods.flows.entries import FLOW_EXACT, FLOW_LATENT
from lsbcore.samplers.registry import REGISTRY, register

#: The methods' entries, in the order the dashboard and the registry list them.
METHOD_ENTRIES = (NEURAL_BLOCK, FLOW_EXACT, FLOW_LATENT)

for _spec in METHOD_ENTRIES:
    if _spec.name not in REGISTRY:  # a reload of this module registers nothing twice
        register(_spec)
